// Command lines of the form "--flag value" or "--flag=value" (tandem-infer's subcommands): one
// cursor splits the inline form and hands out values, so each parser only maps names to fields.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tandem {

class FlagArgs {
 public:
  explicit FlagArgs(std::vector<std::string> args) : args_(std::move(args)) {}

  // Moves to the next argument; false past the last. name() is it without any "=value".
  bool Next() {
    if (++i_ >= args_.size()) return false;
    name_ = args_[i_];
    inline_ = false;
    if (auto eq = name_.find('='); name_.rfind("--", 0) == 0 && eq != std::string::npos) {
      value_ = name_.substr(eq + 1);
      name_.resize(eq);
      inline_ = true;
    }
    return true;
  }

  const std::string& name() const { return name_; }

  // The current flag's value: its inline "=value", else the next argument (consumed).
  absl::StatusOr<std::string> Value() {
    if (inline_) return value_;
    if (i_ + 1 >= args_.size()) return absl::InvalidArgumentError("flag " + name_ + " needs a value");
    return args_[++i_];
  }

 private:
  std::vector<std::string> args_;
  size_t i_ = static_cast<size_t>(-1);  // Next() moves to 0 first
  std::string name_, value_;
  bool inline_ = false;
};

}  // namespace tandem
