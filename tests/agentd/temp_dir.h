// A fresh directory under /tmp for one test, removed at the end.
#pragma once

#include <filesystem>
#include <string>

#include "tests/common/test_util.h"

namespace tandem::testing {

class TempDir {
 public:
  TempDir() : path_(MakeTempDir("tandem-agentd-test")) {}
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& rel) const { return path_ + "/" + rel; }

 private:
  std::string path_;
};

}  // namespace tandem::testing
