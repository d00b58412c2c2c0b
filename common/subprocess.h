// The one way to spawn a child process (tests, multi-process ranks): posix_spawn with
// stdout/stderr sent to files, kill, and wait with a deadline.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tandem {

struct SubprocessOptions {
  std::vector<std::string> argv;             // argv[0] is the program path
  std::map<std::string, std::string> env;    // added to (or overriding) the parent's environment
  std::string stdout_path;                   // "" = inherit
  std::string stderr_path;                   // "" = inherit; may equal stdout_path
  bool new_process_group = true;             // so Kill() takes the whole tree
};

class Subprocess {
 public:
  Subprocess() = default;
  ~Subprocess();  // kills (SIGKILL) and reaps a child that is still running
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;
  Subprocess(Subprocess&& o) noexcept;
  Subprocess& operator=(Subprocess&& o) noexcept;

  // Starts the child; returns false with `error` set when it could not.
  bool Start(const SubprocessOptions& opts, std::string* error);
  pid_t pid() const { return pid_; }
  bool running();
  void Signal(int sig);  // to the process group when new_process_group
  // Waits until exit or deadline; returns the exit status (as from waitpid) or nullopt on timeout.
  std::optional<int> Wait(std::chrono::milliseconds timeout);
  // SIGTERM, then SIGKILL after `grace`; always reaps.
  int Stop(std::chrono::milliseconds grace = std::chrono::milliseconds(3000));

 private:
  pid_t pid_ = -1;
  bool group_ = true;
  std::optional<int> status_;
};

// Human-readable form of a waitpid status ("exit 1", "signal 9").
std::string DescribeWaitStatus(int status);

}  // namespace tandem
