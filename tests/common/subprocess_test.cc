// Subprocess over /bin/sh: exit codes, output into files, environment, a deadline on a child
// that does not finish, SIGTERM then SIGKILL, the whole process group, and a program that is
// not there.
#include "common/subprocess.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <thread>
#include <vector>

#include "tests/common/test_util.h"

namespace tandem {
namespace {
using std::chrono::milliseconds;
using tandem::testing::ReadTextFile;
using tandem::testing::TempDir;

SubprocessOptions Program(std::vector<std::string> argv) {
  SubprocessOptions o;
  o.argv = std::move(argv);
  return o;
}
SubprocessOptions Shell(const std::string& script) { return Program({"/bin/sh", "-c", script}); }

// Waits until `path` holds a whole line (the child wrote it after getting ready).
std::string WaitForLine(const std::string& path) {
  for (int i = 0; i < 1000; ++i) {
    const std::string s = ReadTextFile(path);
    if (!s.empty() && s.back() == '\n') return s;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return "";
}

// True when `pid` no longer runs (gone, or a zombie nobody reaped yet).
bool Gone(pid_t pid) {
  for (int i = 0; i < 500; ++i) {
    if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
    const std::string stat = ReadTextFile("/proc/" + std::to_string(pid) + "/stat");
    const size_t paren = stat.rfind(')');
    if (paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z') return true;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return false;
}

TEST(SubprocessTest, ExitStatusAndItsDescription) {
  for (int code : {0, 3}) {
    Subprocess p;
    std::string error;
    ASSERT_TRUE(p.Start(Shell("exit " + std::to_string(code)), &error)) << error;
    EXPECT_GT(p.pid(), 0);
    const std::optional<int> st = p.Wait(milliseconds(10000));
    ASSERT_TRUE(st.has_value());
    EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == code) << DescribeWaitStatus(*st);
    EXPECT_EQ(DescribeWaitStatus(*st), "exit " + std::to_string(code));
    EXPECT_FALSE(p.running());
    EXPECT_EQ(p.Wait(milliseconds(0)), st) << "the status is kept once reaped";
  }
}

TEST(SubprocessTest, OutputGoesToFilesAndEnvironmentIsAdded) {
  TempDir tmp;
  SubprocessOptions o = Shell("echo out $TANDEM_SUBPROCESS_TEST; echo err >&2");
  o.env = {{"TANDEM_SUBPROCESS_TEST", "value with spaces"}};
  o.stdout_path = tmp / "out";
  o.stderr_path = tmp / "err";
  Subprocess p;
  std::string error;
  ASSERT_TRUE(p.Start(o, &error)) << error;
  ASSERT_TRUE(p.Wait(milliseconds(10000)).has_value());
  EXPECT_EQ(ReadTextFile(tmp / "out"), "out value with spaces\n");
  EXPECT_EQ(ReadTextFile(tmp / "err"), "err\n");

  // One file for both streams, appended to (a restarted child keeps its earlier log).
  o.stderr_path = o.stdout_path;
  for (int round = 0; round < 2; ++round) {
    Subprocess q;
    ASSERT_TRUE(q.Start(o, &error)) << error;
    ASSERT_TRUE(q.Wait(milliseconds(10000)).has_value());
  }
  EXPECT_EQ(ReadTextFile(tmp / "out"), "out value with spaces\n" + std::string("out value with spaces\nerr\n") +
                                           "out value with spaces\nerr\n");
}

TEST(SubprocessTest, DeadlinePassesThenStopTerminates) {
  Subprocess p;
  std::string error;
  ASSERT_TRUE(p.Start(Program({"/bin/sleep", "30"}), &error)) << error;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(p.Wait(milliseconds(50)), std::nullopt);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, milliseconds(50));
  EXPECT_TRUE(p.running());
  const int st = p.Stop(milliseconds(5000));
  EXPECT_EQ(DescribeWaitStatus(st), "signal 15");
  EXPECT_FALSE(p.running());
}

// A child that ignores SIGTERM is killed once the grace has passed, with everything it started
// (it runs in a process group of its own).
TEST(SubprocessTest, StopKillsAChildThatIgnoresTerminateAndItsGroup) {
  TempDir tmp;
  SubprocessOptions o = Shell("trap '' TERM; sleep 30 & echo $!; wait");
  o.stdout_path = tmp / "out";
  Subprocess p;
  std::string error;
  ASSERT_TRUE(p.Start(o, &error)) << error;
  const std::string line = WaitForLine(tmp / "out");
  ASSERT_FALSE(line.empty()) << "the child never said it was ready";
  const pid_t grandchild = static_cast<pid_t>(std::stol(line));
  const auto t0 = std::chrono::steady_clock::now();
  const int st = p.Stop(milliseconds(100));
  EXPECT_EQ(DescribeWaitStatus(st), "signal 9");
  EXPECT_GE(std::chrono::steady_clock::now() - t0, milliseconds(100)) << "SIGKILL came before the grace";
  EXPECT_TRUE(Gone(grandchild)) << "the child's own child survived";
}

TEST(SubprocessTest, DestructorKillsARunningChild) {
  pid_t pid = -1;
  {
    Subprocess p;
    std::string error;
    ASSERT_TRUE(p.Start(Program({"/bin/sleep", "30"}), &error)) << error;
    pid = p.pid();
  }
  EXPECT_NE(::kill(pid, 0), 0) << "the child outlived its Subprocess (or was not reaped)";
}

TEST(SubprocessTest, MovedFromOwnsNothing) {
  Subprocess a;
  std::string error;
  ASSERT_TRUE(a.Start(Shell("exit 5"), &error)) << error;
  const pid_t pid = a.pid();
  Subprocess b = std::move(a);
  EXPECT_EQ(a.pid(), -1);
  EXPECT_EQ(a.Wait(milliseconds(0)), std::nullopt);
  EXPECT_EQ(b.pid(), pid);
  const std::optional<int> st = b.Wait(milliseconds(10000));
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(DescribeWaitStatus(*st), "exit 5");
}

TEST(SubprocessTest, AMissingProgramIsAClearError) {
  Subprocess p;
  std::string error;
  EXPECT_FALSE(p.Start(Program({"/nonexistent/tandem-no-such-program"}), &error));
  EXPECT_EQ(error, "spawn /nonexistent/tandem-no-such-program: No such file or directory");
  EXPECT_EQ(p.pid(), -1);
  EXPECT_FALSE(p.running());
  EXPECT_FALSE(p.Start({}, &error));
  EXPECT_EQ(error, "empty argv");
}

}  // namespace
}  // namespace tandem
