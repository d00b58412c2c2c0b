#include "common/crash_report.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace tandem {
namespace {

struct Child {
  int status = 0;
  std::string err;  // what the child wrote to stderr
};

// Runs `body` in a forked child whose stderr goes to a pipe. The child ends itself after 30 s
// (SIGALRM), so a handler that hangs fails the test instead of hanging it.
Child RunInChild(void (*body)()) {
  int fds[2];
  if (pipe(fds) != 0) return {-1, "pipe failed"};
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    close(fds[1]);
    alarm(30);
    body();
    _exit(0);
  }
  close(fds[1]);
  Child c;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) c.err.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  waitpid(pid, &c.status, 0);
  return c;
}

int* volatile g_nowhere = nullptr;  // volatile: the compiler cannot see the store fault

// A real fault (not raise()): the report's PC lies in this function, which it names.
__attribute__((noinline)) void FaultInANamedFunction() {
  *g_nowhere = 1;
  _exit(3);  // not reached: the report ends with the signal's default action
}

TEST(CrashReport, AFaultPrintsTheSignalAndTheStackThenEndsTheProcessByThatSignal) {
  const Child c = RunInChild([] {
    InstallCrashReport("/proc/self/exe");
    FaultInANamedFunction();
  });
  ASSERT_TRUE(WIFSIGNALED(c.status)) << "status " << c.status << "\n" << c.err;
  EXPECT_EQ(WTERMSIG(c.status), SIGSEGV) << c.err;
  EXPECT_NE(c.err.find("SIGSEGV"), std::string::npos) << c.err;
  EXPECT_NE(c.err.find("FaultInANamedFunction"), std::string::npos) << "the PC not symbolized:\n" << c.err;
}

TEST(CrashReport, AnAbortIsReportedToo) {
  const Child c = RunInChild([] {
    InstallCrashReport("/proc/self/exe");
    std::abort();
  });
  ASSERT_TRUE(WIFSIGNALED(c.status)) << c.err;
  EXPECT_EQ(WTERMSIG(c.status), SIGABRT) << c.err;
  EXPECT_NE(c.err.find("SIGABRT"), std::string::npos) << c.err;
}

TEST(CrashReport, AStopIsNotACrash) {
  const Child c = RunInChild([] {
    InstallCrashReport("/proc/self/exe");
    std::raise(SIGTERM);
  });
  ASSERT_TRUE(WIFSIGNALED(c.status)) << c.err;
  EXPECT_EQ(WTERMSIG(c.status), SIGTERM);
  EXPECT_EQ(c.err, "") << "SIGTERM is a stop, not a fault";
}

TEST(CrashReport, AStopHandlerSetBeforeTheCallIsKept) {
  const Child c = RunInChild([] {
    std::signal(SIGTERM, [](int) { _exit(7); });
    InstallCrashReport("/proc/self/exe");
    std::raise(SIGTERM);
  });
  ASSERT_TRUE(WIFEXITED(c.status)) << c.err;
  EXPECT_EQ(WEXITSTATUS(c.status), 7) << c.err;
}

}  // namespace
}  // namespace tandem
