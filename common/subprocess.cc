#include "common/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

extern char** environ;

namespace tandem {

Subprocess::~Subprocess() {
  if (pid_ > 0 && !status_) {
    Signal(SIGKILL);
    Wait(std::chrono::milliseconds(5000));
  }
}

Subprocess::Subprocess(Subprocess&& o) noexcept { *this = std::move(o); }
Subprocess& Subprocess::operator=(Subprocess&& o) noexcept {
  if (this != &o) {
    pid_ = o.pid_;
    group_ = o.group_;
    status_ = o.status_;
    o.pid_ = -1;
    o.status_.reset();
  }
  return *this;
}

bool Subprocess::Start(const SubprocessOptions& opts, std::string* error) {
  if (opts.argv.empty()) {
    *error = "empty argv";
    return false;
  }
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv(*e);
    auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : opts.env) env[k] = v;
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = opts.argv;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (!opts.stdout_path.empty()) {
    posix_spawn_file_actions_addopen(&fa, 1, opts.stdout_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  }
  if (!opts.stderr_path.empty()) {
    if (opts.stderr_path == opts.stdout_path) {
      posix_spawn_file_actions_adddup2(&fa, 1, 2);
    } else {
      posix_spawn_file_actions_addopen(&fa, 2, opts.stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    }
  }
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
  sigset_t empty, all;
  sigemptyset(&empty);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setsigdefault(&attr, &all);
  if (opts.new_process_group) {
    flags |= POSIX_SPAWN_SETPGROUP;
    posix_spawnattr_setpgroup(&attr, 0);
  }
  posix_spawnattr_setflags(&attr, flags);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, args[0].c_str(), &fa, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    *error = "spawn " + args[0] + ": " + std::strerror(rc);
    return false;
  }
  pid_ = pid;
  group_ = opts.new_process_group;
  status_.reset();
  return true;
}

bool Subprocess::running() {
  if (pid_ <= 0 || status_) return false;
  int st = 0;
  pid_t r = waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    status_ = st;
    return false;
  }
  return true;
}

void Subprocess::Signal(int sig) {
  if (pid_ <= 0 || status_) return;
  if (group_) {
    ::kill(-pid_, sig);
  } else {
    ::kill(pid_, sig);
  }
}

std::optional<int> Subprocess::Wait(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return std::nullopt;
  if (status_) return status_;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int st = 0;
    pid_t r = waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      status_ = st;
      return status_;
    }
    if (r < 0 && errno == ECHILD) {
      status_ = 0;
      return status_;
    }
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

int Subprocess::Stop(std::chrono::milliseconds grace) {
  if (pid_ <= 0) return 0;
  if (status_) return *status_;
  Signal(SIGTERM);
  if (auto st = Wait(grace)) return *st;
  Signal(SIGKILL);
  auto st = Wait(std::chrono::milliseconds(10000));
  return st.value_or(-1);
}

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "signal " + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

}  // namespace tandem
