// `tandemctl bench` against the CPU cluster (issue 19): two real tandem-agentd on loopback (the
// fixture of loopback_cluster.h) serving qwen3moe-tiny with the Qwen3 tokenizer cut to the
// model's 4096 ids, so the built-in text prompts (Chinese included) go through the head's chat
// endpoint. Two benches of the same configuration: the table, results.json and the plot, and
// --compare of the second against the first says "not distinguishable" where the figures cannot
// differ (the tokens every answer decodes).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/common/tiny_chat_tokenizer.h"
#include "tests/integration/loopback_cluster.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;
using testing::CtlResult;

using BenchIntegration = testing::LoopbackCluster;

TEST_F(BenchIntegration, TableJsonPlotAndCompareOfTwoRunsOfOneConfiguration) {
  testing::WriteTinyChatTokenizer(dir_ / "model1");
  testing::WriteTinyChatTokenizer(dir_ / "model2");
  StartAgent(0);
  StartAgent(1);
  const fs::path cluster = WriteCluster("token");
  CtlResult up = Ctl({"up", "-f", cluster.string()});
  ASSERT_EQ(up.exit_code, 0) << up.out;

  const std::vector<std::string> bench = {"bench", "-f", cluster.string(), "--runs", "2", "--max-tokens", "8",
                                          "--timeout-s", "60"};
  std::vector<std::string> first = bench;
  first.insert(first.end(), {"--out", (dir_ / "a").string()});
  CtlResult a = Ctl(first, 180);
  std::printf("--- tandemctl bench (exit %d) ---\n%s", a.exit_code, a.out.c_str());
  ASSERT_EQ(a.exit_code, 0) << a.out;
  EXPECT_NE(a.out.find("run 2/2: 18/18 done"), std::string::npos) << "progress lines";
  EXPECT_NE(a.out.find("KV pool: 2048 tokens"), std::string::npos);
  EXPECT_NE(a.out.find("headline: "), std::string::npos);
  for (const char* category : {"overall", "code", "english", "chinese"}) {
    EXPECT_NE(a.out.find(std::string("\n") + category + " "), std::string::npos) << category;
  }
  // results.json: every prompt of both runs answered with the 8 tokens asked for.
  const nlohmann::json results =
      nlohmann::json::parse(testing::ReadTextFile((dir_ / "a" / "results.json").string()), nullptr, false);
  ASSERT_TRUE(results.is_object());
  EXPECT_EQ(results["kv_tokens"], 2048);
  EXPECT_EQ(results["model"], "tiny");
  ASSERT_EQ(results["runs"].size(), 2u);
  for (const nlohmann::json& run : results["runs"]) {
    ASSERT_EQ(run["prompts"].size(), 18u);
    for (const nlohmann::json& p : run["prompts"]) {
      EXPECT_TRUE(p["ok"].get<bool>()) << p.dump();
      EXPECT_EQ(p["tokens"], 8) << p.dump();
      EXPECT_GT(p["decode_tok_s"].get<double>(), 0) << p.dump();
    }
  }
  EXPECT_EQ(results["summary"][0]["category"], "overall");
  EXPECT_EQ(results["summary"][0]["figures"]["decode_tok_s"]["run_medians"].size(), 2u);
  EXPECT_NE(testing::ReadTextFile((dir_ / "a" / "table.txt").string()).find("headline: "), std::string::npos);
  const std::string svg = testing::ReadTextFile((dir_ / "a" / "decode_tok_s.svg").string());
  EXPECT_NE(svg.find(">run 2<"), std::string::npos);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);

  // The same configuration again, compared with the first.
  std::vector<std::string> second = bench;
  second.insert(second.end(),
                {"--out", (dir_ / "b").string(), "--compare", (dir_ / "a" / "results.json").string(), "--json"});
  CtlResult b = Ctl(second, 180);
  std::printf("--- tandemctl bench --compare (exit %d) ---\n%s", b.exit_code, b.out.c_str());
  ASSERT_EQ(b.exit_code, 0) << b.out;
  const std::string compare = testing::ReadTextFile((dir_ / "b" / "compare.txt").string());
  for (const char* category : {"overall", "code", "english", "chinese"}) {
    EXPECT_NE(compare.find(std::string(category) + " tokens: A 8 [8-8] B 8 [8-8] +0.0%: not distinguishable"),
              std::string::npos)
        << compare;
  }
  // --json: the results object with the verdicts of every figure.
  ASSERT_TRUE(b.json.is_object()) << b.out;
  EXPECT_EQ(b.json["runs"].size(), 2u);
  ASSERT_EQ(b.json["compare"].size(), 4u * 4u);  // overall and three categories, four figures each
  EXPECT_EQ(b.json["compare"][3]["figure"], "tokens");
  EXPECT_EQ(b.json["compare"][3]["verdict"], "not distinguishable");
}

}  // namespace
}  // namespace tandem
