// tandem-infer's command line (infer/infer_main.cc, the real binary): --help on the program and
// every subcommand, --version, usage errors exit 2 naming the flag, both flag forms, and `serve`
// binding its port before the model loads: a taken port fails before the model folder is even
// looked at, and while loading the port answers 503 "loading".
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "common/subprocess.h"
#include "common/version.h"
#include "tests/common/run_program.h"
#include "tests/common/test_util.h"

namespace tandem::infer {
namespace {

using tandem::testing::ProgramResult;
using Args = std::vector<std::string>;

std::string Binary() {
  if (const char* d = std::getenv("TANDEM_BIN_DIR"); d != nullptr) return std::string(d) + "/infer/tandem-infer";
  return TANDEM_INFER_BINARY;
}

ProgramResult Infer(const Args& args) {
  Args argv = {Binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  return tandem::testing::RunProgram(argv);
}

std::string TinyModel() { return tandem::testing::TestdataDir() + "/qwen3moe-tiny"; }

TEST(InferMainFlags, HelpOnTheProgramAndEverySubcommand) {
  ProgramResult top = Infer({"--help"});
  ASSERT_EQ(top.exit_code, 0) << top.err;
  const std::pair<const char*, const char*> commands[] = {{"tokenize", "--text"},  {"generate", "--max-tokens"},
                                                          {"logits", "--out"},     {"serve", "--api-key-file"},
                                                          {"make-model", "--out"}, {"bench-serve", "--concurrency"}};
  for (const auto& [command, flag] : commands) {
    EXPECT_NE(top.out.find(command), std::string::npos) << command;
    ProgramResult r = Infer({command, "--help"});
    EXPECT_EQ(r.exit_code, 0) << command << ": " << r.err;
    EXPECT_NE(r.out.find(flag), std::string::npos) << command << ":\n" << r.out;
  }
  EXPECT_EQ(Infer({"generate", "--help"}).out.find("--world"), std::string::npos) << "the launcher's flags are hidden";
}

TEST(InferMainFlags, VersionAnywhere) {
  for (const Args& args : {Args{"--version"}, Args{"serve", "--version"}}) {
    ProgramResult r = Infer(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, std::string("tandem-infer ") + Version() + "\n");
  }
}

TEST(InferMainFlags, UsageErrorsExitTwoNamingTheFlag) {
  const std::pair<Args, std::string> cases[] = {
      {{}, "subcommand"},
      {{"--model", "x"}, "--model"},  // no subcommand: the flag is not the program's
      {{"frob"}, "frob"},
      {{"tokenize", "--model", "m"}, "--text"},
      {{"generate", "--model", "m", "--tp", "0"}, "--tp"},
      {{"generate", "--model", "m", "--prompt-ids", "1,x"}, "--prompt-ids"},
      {{"generate", "--model", "m", "--ranks", "forks"}, "--ranks"},
      {{"serve", "--model", "m", "--port", "70000"}, "--port"},
      {{"serve", "--model", "m", "--host", "0.0.0.0"}, "--api-key-file"},
      {{"serve", "--model", "m", "--api-key", "sk-secret-0123456789"}, "--api-key-file"},
      {{"make-model", "--out", "/tmp/x", "--layers", "0"}, "--layers"},
      {{"bench-serve", "--concurrency", "1,,2"}, "--concurrency"},
  };
  for (const auto& [args, named] : cases) {
    ProgramResult r = Infer(args);
    EXPECT_EQ(r.exit_code, 2) << named << ": " << r.err;
    EXPECT_NE(r.err.find(named), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("sk-secret"), std::string::npos) << "a key is never echoed: " << r.err;
  }
}

TEST(InferMainFlags, BothFlagFormsGiveTheSameTokens) {
  ProgramResult spaced = Infer({"generate", "--model", TinyModel(), "--prompt-ids", "1,2,3", "--max-tokens", "4", "--json"});
  ProgramResult inline_ = Infer({"generate", "--model=" + TinyModel(), "--prompt-ids=1,2,3", "--max-tokens=4", "--json"});
  ASSERT_EQ(spaced.exit_code, 0) << spaced.err;
  ASSERT_EQ(inline_.exit_code, 0) << inline_.err;
  EXPECT_EQ(nlohmann::json::parse(spaced.out)["ids"], nlohmann::json::parse(inline_.out)["ids"]) << spaced.out;
}

// A loopback listener held for the test: the port a second server must not get.
class HeldPort {
 public:
  HeldPort() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), len) == 0 && ::listen(fd_, 1) == 0) {
      ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
      port_ = ntohs(a.sin_port);
    }
  }
  ~HeldPort() { ::close(fd_); }
  int port() const { return port_; }

 private:
  int fd_ = -1, port_ = 0;
};

TEST(InferServe, ATakenPortFailsBeforeTheModelIsLookedAt) {
  HeldPort held;
  ASSERT_GT(held.port(), 0);
  const std::string address = "127.0.0.1:" + std::to_string(held.port());
  // The folder does not exist: before this change the load failed on it first, minutes into a
  // real model's load it would have failed on the port.
  ProgramResult r = Infer({"serve", "--model", "/does/not/exist", "--port", std::to_string(held.port())});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("cannot listen on " + address), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("/does/not/exist"), std::string::npos) << "the port is checked first: " << r.err;
}

TEST(InferServe, AnswersLoadingUntilTheModelIsReady) {
  tandem::testing::TempDir dir;
  Subprocess serve;
  SubprocessOptions so;
  so.argv = {Binary(), "serve", "--model", TinyModel(), "--port", "0", "--max-model-len", "64", "--kv-tokens", "256"};
  so.env = {{"TANDEM_FAILPOINTS", "serve_slow_load"}, {"TANDEM_LOG_LEVEL", "info"}};
  so.stdout_path = dir / "out";
  so.stderr_path = dir / "err";
  std::string error;
  ASSERT_TRUE(serve.Start(so, &error)) << error;
  const auto m = tandem::testing::WaitForMatch(serve, dir / "out", std::regex(R"(loading model=\S+ port=(\d+))"));
  ASSERT_TRUE(m.has_value()) << tandem::testing::ReadTextFile(dir / "err");
  httplib::Client c("127.0.0.1", std::stoi((*m)[1]));
  auto loading = c.Get("/health");
  ASSERT_TRUE(loading);
  EXPECT_EQ(loading->status, 503);
  EXPECT_EQ(nlohmann::json::parse(loading->body)["status"], "loading") << loading->body;
  int status = 0;
  for (int i = 0; i < 300 && status != 200; ++i) {  // the failpoint holds the load 3 s
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto r = c.Get("/health");
    status = r ? r->status : 0;
  }
  EXPECT_EQ(status, 200) << tandem::testing::ReadTextFile(dir / "err");
  serve.Stop();
  const std::string log = tandem::testing::ReadTextFile(dir / "err");
  EXPECT_NE(log.find("loaded " + TinyModel()), std::string::npos) << "the load's progress is logged:\n" << log;
  std::cout << log.substr(0, 2000);
}

}  // namespace
}  // namespace tandem::infer
