// tandemctl bench without a cluster: its flags, the head's URL, the results folder, and the
// refusals that come before any request (bad files: 2; a head that does not answer: 1).
#include "controller/bench_command.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "bench/bench_compare.h"
#include "tests/common/test_util.h"

namespace tandem::controller {
namespace {

TEST(BenchCommand, FlagsAndDefaults) {
  BenchCommandOptions o;
  auto app = cli::NewApp("bench", "", [] { return std::string(); });
  AddBenchFlags(app.get(), &o);
  ASSERT_TRUE(cli::ParseToStatus(*app, {"-f", "c.yaml"}).ok());
  EXPECT_EQ(o.runs, 3);
  EXPECT_EQ(o.concurrency, 1);
  EXPECT_TRUE(o.prompts_file.empty());
  ASSERT_TRUE(cli::ParseToStatus(*app, {"--runs=5", "--timeout-s", "30", "--out", "d", "--compare", "a.json", "--json"})
                  .ok());
  EXPECT_EQ(o.runs, 5);
  EXPECT_EQ(o.timeout_s, 30);
  EXPECT_EQ(o.out_dir, "d");
  EXPECT_EQ(o.compare_file, "a.json");
  EXPECT_TRUE(o.json);
  EXPECT_FALSE(cli::ParseToStatus(*app, {"--concurrency", "0"}).ok());
  EXPECT_FALSE(cli::ParseToStatus(*app, {"--max-tokens", "1"}).ok());
}

TEST(BenchCommand, HeadApiUrl) {
  EXPECT_EQ(HeadApiUrl("127.0.0.1:41234", "10.0.0.1:7070"), "http://127.0.0.1:41234");
  // A wildcard listener is reached where the head's agent is.
  EXPECT_EQ(HeadApiUrl("0.0.0.0:8000", "spark1.lan:7070"), "http://spark1.lan:8000");
  EXPECT_EQ(HeadApiUrl("[::]:8000", "10.0.0.1:7070"), "http://10.0.0.1:8000");
  EXPECT_EQ(HeadApiUrl("[fd00::1]:8000", "x:1"), "http://[fd00::1]:8000");
  EXPECT_EQ(HeadApiUrl("nonsense", "x:1"), "");
}

TEST(BenchCommand, ResultsFolder) {
  testing::TempDir dir;
  bench::BenchResults r;
  r.url = "http://127.0.0.1:1";
  r.prompt_set = "default";
  bench::PromptSample s;
  s.category = "code";
  s.ok = true;
  s.tokens = 11;
  s.ttft_ms = 10;
  s.e2e_ms = 110;
  r.runs = {{s}, {s}};
  const std::string sub = dir / "a/b";
  ASSERT_TRUE(WriteBenchFolder(sub, r, "").ok());
  absl::StatusOr<bench::BenchResults> back = bench::LoadBenchResults(sub + "/results.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->runs.size(), 2u);
  EXPECT_NE(testing::ReadTextFile(sub + "/table.txt").find("headline: 100 decode tok/s"), std::string::npos)
      << testing::ReadTextFile(sub + "/table.txt");
  EXPECT_NE(testing::ReadTextFile(sub + "/decode_tok_s.svg").find("</svg>"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(sub + "/compare.txt"));
  ASSERT_TRUE(WriteBenchFolder(sub, r, "overall tokens: not distinguishable\n").ok());
  EXPECT_EQ(testing::ReadTextFile(sub + "/compare.txt"), "overall tokens: not distinguishable\n");
}

TEST(BenchCommand, RefusesBadFilesBeforeAskingTheCluster) {
  testing::TempDir dir;
  std::ofstream(dir / "bad.jsonl") << "{\"category\": \"c\", \"prompt\": \"p\"}\n{\"prompt\": 1}\n";
  std::ofstream(dir / "bad.json") << "{\"runs\": []}";
  // The cluster file does not exist either: the prompt and results files are judged first.
  BenchCommandOptions o;
  o.cluster_file = dir / "absent.yaml";
  o.prompts_file = dir / "bad.jsonl";
  EXPECT_EQ(RunBenchCommand(o), 2);
  o.prompts_file.clear();
  o.compare_file = dir / "bad.json";
  EXPECT_EQ(RunBenchCommand(o), 2);
  o.compare_file.clear();
  EXPECT_EQ(RunBenchCommand(o), 2);  // the missing cluster file
}

TEST(BenchCommand, HeadThatDoesNotAnswerIsExitOne) {
  testing::TempDir dir;
  const int port = testing::UnusedLoopbackPort();
  std::ofstream(dir / "c.yaml") << "model: {path: /m}\ntimeouts: {status: 500ms}\nnodes:\n  - {name: n1, agent: "
                                   "'127.0.0.1:"
                                << port << "'}\n";
  BenchCommandOptions o;
  o.cluster_file = dir / "c.yaml";
  o.timeout_s = 2;
  EXPECT_EQ(RunBenchCommand(o), 1);
}

}  // namespace
}  // namespace tandem::controller
