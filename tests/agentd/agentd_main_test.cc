// tandem-agentd's command line (agentd/main.cc, the real binary): --help, --version (the build id
// preflight's agent-build-parity compares), usage errors exit 2 naming the flag, both flag forms,
// and a second agent on a port another agent holds (gRPC or /metrics) fails at once, naming the
// address (gRPC's default SO_REUSEPORT would let both bind and both say ready).
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "agentd/sha256.h"
#include "common/subprocess.h"
#include "common/version.h"
#include "tests/common/run_program.h"
#include "tests/common/test_util.h"

namespace tandem::agentd {
namespace {

using tandem::testing::ProgramResult;
using tandem::testing::TempDir;
using Args = std::vector<std::string>;

ProgramResult Agentd(const Args& args) {
  Args argv = {TANDEM_AGENTD_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  return tandem::testing::RunProgram(argv);
}

TEST(AgentdMain, HelpExplainsEveryFlag) {
  ProgramResult r = Agentd({"--help"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* flag : {"--listen", "--node-name", "--model-root", "--token-file", "--tls-cert", "--tls-key",
                           "--tls-ca", "--insecure", "--sysfs-root", "--procfs-root", "--state-dir",
                           "--metrics-listen", "--hash-once", "--threads", "--version"}) {
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag << " missing from\n" << r.out;
  }
  EXPECT_EQ(r.err, "");
}

TEST(AgentdMain, VersionIsTheBuildIdParityCompares) {
  ProgramResult r = Agentd({"--version"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  absl::StatusOr<std::string> sha = Sha256File(TANDEM_AGENTD_BINARY);
  ASSERT_TRUE(sha.ok()) << sha.status();
  EXPECT_EQ(r.out, std::string("tandem-agentd ") + Version() + " sha256:" + *sha + "\n");
}

TEST(AgentdMain, UsageErrorsExitTwoNamingTheFlag) {
  const std::pair<Args, std::string> cases[] = {{{"--no-such-flag"}, "--no-such-flag"},
                                                {{"--threads=many"}, "--threads"},
                                                {{"--threads", "5000"}, "--threads"},
                                                {{"--listen"}, "--listen"},
                                                {{"--model-root", "/a", "/b"}, "/b"}};
  for (const auto& [args, named] : cases) {
    ProgramResult r = Agentd(args);
    EXPECT_EQ(r.exit_code, 2) << named << ": " << r.err;
    EXPECT_NE(r.err.find(named), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("--help"), std::string::npos) << r.err;
  }
}

TEST(AgentdMain, BothFlagFormsHashTheSameFolder) {
  TempDir dir;
  std::filesystem::create_directories(dir / "m");
  std::ofstream(dir / "m/a.bin") << "weights";
  ProgramResult spaced = Agentd({"--hash-once", dir / "m", "--threads", "1"});
  ProgramResult inline_ = Agentd({"--hash-once=" + dir / "m", "--threads=1"});
  ASSERT_EQ(spaced.exit_code, 0) << spaced.err;
  ASSERT_EQ(inline_.exit_code, 0) << inline_.err;
  const std::string digest = Sha256Hex("weights");
  EXPECT_NE(spaced.out.find(digest), std::string::npos) << spaced.out;
  EXPECT_NE(inline_.out.find(digest), std::string::npos) << inline_.out;
}

TEST(AgentdMain, ASecondAgentOnATakenPortFailsAtOnce) {
  TempDir dir;
  Subprocess first;
  SubprocessOptions so;
  so.argv = {TANDEM_AGENTD_BINARY, "--listen", "127.0.0.1:0", "--node-name", "first", "--metrics-listen",
             "127.0.0.1:0"};
  so.stdout_path = dir / "first.out";
  so.stderr_path = dir / "first.err";
  std::string error;
  ASSERT_TRUE(first.Start(so, &error)) << error;
  const auto m = tandem::testing::WaitForMatch(
      first, dir / "first.out",
      std::regex(R"(tandem-agentd ready node=first grpc=127\.0\.0\.1:(\d+) metrics=127\.0\.0\.1:(\d+))"));
  ASSERT_TRUE(m.has_value()) << tandem::testing::ReadTextFile(dir / "first.err");
  const std::string taken = "127.0.0.1:" + (*m)[1], taken_metrics = "127.0.0.1:" + (*m)[2];

  const auto t0 = std::chrono::steady_clock::now();
  ProgramResult second = Agentd({"--listen=" + taken, "--node-name", "second"});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(second.exit_code, 1) << second.err;
  EXPECT_NE(second.err.find(taken), std::string::npos) << "names the address: " << second.err;
  EXPECT_EQ(second.out.find("ready"), std::string::npos) << "never says ready: " << second.out;
  EXPECT_LT(seconds, 10);
  ProgramResult metrics = Agentd({"--listen", "127.0.0.1:0", "--metrics-listen=" + taken_metrics});
  EXPECT_EQ(metrics.exit_code, 1) << metrics.err;
  EXPECT_NE(metrics.err.find(taken_metrics), std::string::npos) << metrics.err;
  EXPECT_TRUE(first.running()) << "the first agent keeps its ports";
  first.Stop();
}

}  // namespace
}  // namespace tandem::agentd
