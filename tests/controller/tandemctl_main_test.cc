// tandemctl's command line as an operator meets it (controller/main.cc, the real binary): --help on
// the program and every command, --version anywhere, usage errors exit 2 naming the flag, both flag
// forms, and --json on every command that reports: one JSON object on stdout with the documented
// keys and the text mode's exit code, here against a cluster whose agent is not running.
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/version.h"
#include "tests/common/run_program.h"
#include "tests/common/test_util.h"

namespace tandem::controller {
namespace {

using tandem::testing::ProgramResult;
using Args = std::vector<std::string>;

ProgramResult Tandemctl(const Args& args) {
  Args argv = {TANDEMCTL_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  return tandem::testing::RunProgram(argv);
}

// A cluster of one node whose agent address has nothing listening: every command that reports
// fails fast (connection refused) with exit 1.
class TandemctlCluster : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(yaml_) << "model: {path: /models/m}\nnodes:\n  - {name: spark1, agent: '127.0.0.1:"
                         << tandem::testing::UnusedLoopbackPort() << "'}\n";
  }
  tandem::testing::TempDir dir_;
  const std::string yaml_ = dir_ / "cluster.yaml";
  const std::string state_ = dir_ / "state";
};

TEST(TandemctlMain, HelpOnTheProgramAndEveryCommand) {
  ProgramResult top = Tandemctl({"--help"});
  ASSERT_EQ(top.exit_code, 0) << top.err;
  EXPECT_EQ(top.out.find("Contacts every agent"), std::string::npos) << "the list: one line per command\n" << top.out;
  EXPECT_NE(Tandemctl({"preflight", "--help"}).out.find("Contacts every agent"), std::string::npos) << "its own help: all";
  for (const char* command : {"preflight", "up", "down", "status", "probe", "serve", "certs"}) {
    EXPECT_NE(top.out.find(command), std::string::npos) << command << " missing from\n" << top.out;
    ProgramResult r = Tandemctl({command, "--help"});
    EXPECT_EQ(r.exit_code, 0) << command << ": " << r.err;
    EXPECT_NE(r.out.find("--file"), std::string::npos) << command << ":\n" << r.out;
    EXPECT_EQ(r.err, "");
  }
  EXPECT_NE(Tandemctl({"preflight", "-h"}).out.find("--facts-timeout"), std::string::npos);
  EXPECT_NE(Tandemctl({"certs", "--help"}).out.find("--out"), std::string::npos);
  std::cout << Tandemctl({"up", "--help"}).out;
}

TEST(TandemctlMain, VersionEverywhere) {
  const std::string want = std::string("tandemctl ") + Version() + "\n";
  for (const Args& args : {Args{"--version"}, Args{"status", "--version"}, Args{"version"}}) {
    ProgramResult r = Tandemctl(args);
    EXPECT_EQ(r.exit_code, 0) << args.front() << ": " << r.err;
    EXPECT_EQ(r.out, want);
  }
}

TEST(TandemctlMain, UsageErrorsExitTwoNamingTheFlag) {
  struct Case {
    Args args;
    std::string named;
  };
  const Case cases[] = {{{}, "subcommand"},
                        {{"frobnicate"}, "frobnicate"},
                        {{"preflight", "--bogus"}, "--bogus"},
                        {{"preflight", "--facts-timeout=soon"}, "--facts-timeout"},
                        {{"preflight", "--hash-timeout", "0"}, "--hash-timeout"},
                        {{"down", "--state-dir", "/tmp"}, "--state-dir"},  // down keeps no state
                        {{"serve", "--interval"}, "--interval"},
                        {{"certs", "-f", "c.yaml"}, "--out"},
                        {{"certs", "--out", "/tmp/x", "--days", "0"}, "--days"},
                        {{"bench", "--runs", "0"}, "--runs"},
                        {{"linktest", "--streams", "17"}, "--streams"},
                        {{"linktest", "--duration", "500ms"}, "--duration"},
                        {{"linktest", "--duration", "soon"}, "--duration"}};
  for (const Case& c : cases) {
    ProgramResult r = Tandemctl(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.named << ": " << r.err;
    EXPECT_NE(r.err.find(c.named), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "") << c.named;
  }
}

TEST_F(TandemctlCluster, BothFlagFormsGiveTheSameRun) {
  ProgramResult spaced = Tandemctl({"preflight", "--file", yaml_, "--facts-timeout", "2", "--json", "--skip-weights"});
  ProgramResult inline_ = Tandemctl({"preflight", "--file=" + yaml_, "--facts-timeout=2", "--json", "--skip-weights"});
  ASSERT_EQ(spaced.exit_code, 1) << spaced.err;
  ASSERT_EQ(inline_.exit_code, 1) << inline_.err;
  auto a = nlohmann::json::parse(spaced.out), b = nlohmann::json::parse(inline_.out);
  EXPECT_EQ(a["checks"].size(), b["checks"].size());
  EXPECT_EQ(a["ok"], b["ok"]);
}

// Each command's --json: exactly one object on stdout, "ok" false, its keys, exit 1 as in text mode.
TEST_F(TandemctlCluster, JsonOnEveryCommandThatReports) {
  struct Case {
    Args args;
    std::vector<std::string> keys;
  };
  const Case cases[] = {
      {{"preflight", "-f", yaml_, "--skip-weights", "--facts-timeout=2"}, {"ok", "checks", "nccl_env"}},
      {{"status", "-f", yaml_, "--state-dir", state_}, {"ok", "state", "detail", "nodes"}},
      {{"probe", "-f", yaml_, "--state-dir", state_}, {"ok", "head", "generation", "latency_s", "detail", "error"}},
      {{"down", "-f", yaml_}, {"ok", "seconds", "nodes"}},
      {{"up", "-f", yaml_, "--state-dir", state_, "--skip-weights"},
       {"ok", "already_serving", "generation", "phases", "total_seconds", "failed_phase", "error", "preflight"}},
  };
  for (const Case& c : cases) {
    Args args = c.args;
    args.push_back("--json");
    ProgramResult r = Tandemctl(args);
    EXPECT_EQ(r.exit_code, 1) << c.args.front() << ": " << r.err;
    nlohmann::json j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(j.is_object()) << c.args.front() << " stdout is not one JSON object:\n" << r.out;
    EXPECT_EQ(j.value("ok", true), false) << c.args.front();
    for (const std::string& key : c.keys) EXPECT_TRUE(j.contains(key)) << c.args.front() << " lacks " << key;
    std::cout << c.args.front() << ": " << r.out.substr(0, 300) << "\n";
  }
  ProgramResult down = Tandemctl({"down", "-f", yaml_, "--json"});
  auto j = nlohmann::json::parse(down.out);
  ASSERT_EQ(j["nodes"].size(), 1u);
  EXPECT_EQ(j["nodes"][0]["name"], "spark1");
  EXPECT_EQ(j["nodes"][0]["down"], false);
}

TEST_F(TandemctlCluster, ABadClusterFileIsOneJsonObjectToo) {
  std::ofstream(yaml_) << "model: {path: /m}\nnodes:\n  - {name: a, agnet: '127.0.0.1:1'}\n";
  for (const char* command : {"preflight", "status", "probe", "down", "up"}) {
    ProgramResult r = Tandemctl({command, "-f", yaml_, "--json"});
    EXPECT_EQ(r.exit_code, 2) << command;
    nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_TRUE(j.is_object()) << command << ":\n" << r.out;
    EXPECT_EQ(j["ok"], false);
    EXPECT_NE(j["error"].get<std::string>().find("agnet"), std::string::npos) << j.dump();
    EXPECT_NE(r.err.find("agnet"), std::string::npos) << "and on stderr for a person: " << r.err;
  }
}

}  // namespace
}  // namespace tandem::controller
