// `tandemctl up / status / probe / down / serve` against two real tandem-agentd processes on
// loopback (TP=2, cpu backend, Gloo over 127.0.0.1) with the cluster token, model = a temp
// copy of tests/data/qwen3moe-tiny, and for up -> down also the hybrids qwen35moe-tiny and
// qwen3next-tiny and the quantized qwen3moe-fp8-tiny, qwen3moe-nvfp4-tiny and qwen35moe-fp8-tiny
// (fixture: loopback_cluster.h). Prints the phase times of `up`.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <optional>
#include <thread>
#include <vector>

#include "tests/common/metrics_text.h"
#include "tests/engine/cpu/golden.h"
#include "tests/integration/loopback_cluster.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using testing::CtlResult;

using OrchestrationIntegration = testing::LoopbackCluster;

// The whole up -> down path for each model family, brought up the same way: qwen3moe-tiny and the
// hybrids qwen35moe-tiny / qwen3next-tiny (Gated DeltaNet layers: each rank keeps its heads'
// recurrent state per sequence in the engine's state slots), and the quantized checkpoints (block-
// scaled FP8 and NVFP4 weights, each rank dequantizing its shard; the hybrid one in FP8 too).
class OrchestrationUp : public testing::LoopbackCluster, public ::testing::WithParamInterface<std::string> {
 protected:
  std::string ModelFixture() const override { return GetParam(); }
};

TEST_P(OrchestrationUp, UpStatusProbeCompletionDown) {
  StartAgent(0);
  StartAgent(1);
  fs::path cluster = WriteCluster("token");
  CtlResult up = Ctl({"up", "-f", cluster.string()});
  std::printf("--- tandemctl up (exit %d) ---\n%s", up.exit_code, up.out.c_str());
  ASSERT_EQ(up.exit_code, 0);
  EXPECT_NE(up.out.find("serving generation"), std::string::npos);
  // The load is reported in the bytes the checkpoint stores (a quantized one: its FP8 / packed FP4
  // weights and their scales), not as parameters x 2.
  const auto stored = fs::file_size(fs::path(engine::testing::TestdataDir()) / GetParam() / "model.safetensors");
  char load_line[64];
  std::snprintf(load_line, sizeof load_line, "load n1: config 0.0/%.1f MB", static_cast<double>(stored) / 1e6);
  EXPECT_NE(up.out.find(load_line), std::string::npos) << load_line << " in\n" << up.out;

  CtlResult st = Ctl({"status", "-f", cluster.string(), "--json"});
  ASSERT_EQ(st.exit_code, 0) << st.out;
  ASSERT_TRUE(st.json.is_object()) << st.out;
  EXPECT_EQ(st.json["state"], "serving");
  ASSERT_EQ(st.json["nodes"].size(), 2u);
  EXPECT_EQ(st.json["nodes"][1]["rank"], 1);
  EXPECT_EQ(st.json["nodes"][0]["generation"], st.json["nodes"][1]["generation"]);
  EXPECT_TRUE(st.json["nodes"][0]["last_probe"]["ok"].get<bool>());

  CtlResult probe = Ctl({"probe", "-f", cluster.string()});
  std::printf("%s", probe.out.c_str());
  EXPECT_EQ(probe.exit_code, 0);
  EXPECT_NE(probe.out.find("match the reference"), std::string::npos) << probe.out;

  std::string endpoint = st.json["nodes"][0]["api_endpoint"];
  int api_port = std::atoi(endpoint.substr(endpoint.rfind(':') + 1).c_str());
  std::string resp;
  int code = testing::HttpRequest(
      api_port, "POST", "/v1/completions",
      R"({"model":"tiny","prompt":[1,2,3,4],"max_tokens":6,"temperature":0,"return_token_ids":true})", &resp);
  std::printf("POST /v1/completions -> %d\n", code);
  EXPECT_EQ(code, 200) << resp;
  // The API's greedy tokens for the probe's prompt are the ones the probe recorded at `up`.
  nlohmann::json completion = nlohmann::json::parse(testing::ResponseBody(resp), nullptr, false);
  ASSERT_TRUE(completion.is_object()) << resp;
  const std::string ids = completion["choices"][0]["token_ids"].dump();
  std::printf("completion token_ids %s\n", ids.c_str());
  EXPECT_EQ(completion["choices"][0]["token_ids"].size(), 6u) << resp;
  EXPECT_NE(up.out.find("recorded greedy ids " + ids), std::string::npos) << up.out;

  // Every golden prompt at once (one batch of sequences, each with its own recurrent state on a
  // hybrid): each greedy continuation is transformers'.
  auto golden = engine::testing::LoadGolden(engine::testing::TestdataDir() + "/" + GetParam());
  ASSERT_TRUE(golden.ok()) << golden.status();
  std::vector<std::string> answers(golden->size());
  std::vector<int> codes(golden->size());
  std::vector<std::thread> clients;
  for (size_t i = 0; i < golden->size(); ++i) {
    clients.emplace_back([&, i] {
      nlohmann::json req = {{"model", "tiny"},  {"prompt", (*golden)[i].ids}, {"max_tokens", 16},
                            {"temperature", 0}, {"ignore_eos", true},         {"return_token_ids", true}};
      codes[i] = testing::HttpRequest(api_port, "POST", "/v1/completions", req.dump(), &answers[i]);
    });
  }
  for (auto& c : clients) c.join();
  for (size_t i = 0; i < golden->size(); ++i) {
    ASSERT_EQ(codes[i], 200) << answers[i];
    nlohmann::json j = nlohmann::json::parse(testing::ResponseBody(answers[i]), nullptr, false);
    ASSERT_TRUE(j.is_object()) << answers[i];
    const auto got = j["choices"][0]["token_ids"].get<std::vector<int32_t>>();
    std::printf("prompt%zu (concurrent): %s golden\n", i,
                got == (*golden)[i].greedy ? "identical to" : "DIFFERENT from");
    EXPECT_EQ(got, (*golden)[i].greedy);
  }
  // The head's API reports the pool beside the KV: with an explicit kv_tokens a hybrid gets
  // max_num_seqs (4) state slots, qwen3moe-tiny none; every finished request gave its slot back.
  ASSERT_EQ(testing::HttpRequest(api_port, "GET", "/metrics", "", &resp), 200) << resp;
  const std::string metrics = testing::ResponseBody(resp);
  const std::optional<double> slots = testing::SeriesValue(metrics, R"(tandem_state_slots{model_name="tiny"})");
  const std::optional<double> used = testing::SeriesValue(metrics, R"(tandem_state_slots_used{model_name="tiny"})");
  ASSERT_TRUE(slots.has_value() && used.has_value()) << resp;
  std::printf("tandem_state_slots %g, used %g\n", *slots, *used);
  const bool hybrid = GetParam().rfind("qwen3moe-", 0) != 0;
  EXPECT_EQ(*slots, hybrid ? 4 : 0);
  EXPECT_EQ(*used, 0);

  CtlResult down = Ctl({"down", "-f", cluster.string()});
  std::printf("%s", down.out.c_str());
  EXPECT_EQ(down.exit_code, 0);
  st = Ctl({"status", "-f", cluster.string(), "--json"});
  EXPECT_EQ(st.exit_code, 1);
  EXPECT_EQ(st.json["state"], "down") << st.out;
}

INSTANTIATE_TEST_SUITE_P(Models, OrchestrationUp,
                         ::testing::Values("qwen3moe-tiny", "qwen35moe-tiny", "qwen3next-tiny", "qwen3moe-fp8-tiny",
                                           "qwen3moe-nvfp4-tiny", "qwen35moe-fp8-tiny"),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           std::string n = p.param;
                           for (char& c : n) c = (c == '-') ? '_' : c;
                           return n;
                         });

TEST_F(OrchestrationIntegration, FailedPreflightBlocksUp) {
  // One byte of node 2's weights differs: weights parity fails and nothing may be loaded.
  fs::path w = dir_ / "model2" / "model.safetensors";
  std::fstream f(w, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(fs::file_size(w) - 1));
  f.put('\x5a');
  f.close();
  StartAgent(0);
  StartAgent(1);
  fs::path cluster = WriteCluster("token");
  CtlResult up = Ctl({"up", "-f", cluster.string()});
  std::printf("--- tandemctl up (exit %d) ---\n%s", up.exit_code, up.out.c_str());
  EXPECT_EQ(up.exit_code, 1);
  EXPECT_NE(up.out.find("weights-parity"), std::string::npos);
  EXPECT_NE(up.out.find("up FAILED in preflight"), std::string::npos);
  CtlResult st = Ctl({"status", "-f", cluster.string(), "--json"});
  ASSERT_TRUE(st.json.is_object()) << st.out;
  EXPECT_EQ(st.json["state"], "down");
  for (const auto& n : st.json["nodes"]) EXPECT_EQ(n["state"], "idle") << n.dump();
}

TEST_F(OrchestrationIntegration, WrongTokenIsRejectedWithAClearMessage) {
  StartAgent(0);
  StartAgent(1);
  fs::path cluster = WriteCluster("badtoken");
  CtlResult st = Ctl({"status", "-f", cluster.string()});
  std::printf("%s", st.out.c_str());
  EXPECT_EQ(st.exit_code, 1);
  EXPECT_NE(st.out.find("rejected by the agent"), std::string::npos);
  CtlResult up = Ctl({"up", "-f", cluster.string()});
  EXPECT_EQ(up.exit_code, 1);
  EXPECT_NE(up.out.find("rejected by the agent"), std::string::npos) << up.out;
}

TEST_F(OrchestrationIntegration, ServeRestartsTheGroupAfterTheWorkerAgentIsKilled) {
  StartAgent(0);
  StartAgent(1);
  fs::path cluster = WriteCluster("token");
  ASSERT_EQ(Ctl({"up", "-f", cluster.string()}).exit_code, 0);
  CtlResult st = Ctl({"status", "-f", cluster.string(), "--json"});
  uint64_t gen0 = st.json["nodes"][0]["generation"];
  ASSERT_GT(StartServe(cluster), 0);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  KillAgent(1);
  auto t0 = Clock::now();
  StartAgent(1);
  uint64_t gen = gen0;
  std::string state;
  while (Clock::now() - t0 < std::chrono::seconds(60)) {
    st = Ctl({"status", "-f", cluster.string(), "--json"});
    if (st.json.is_object()) {
      state = st.json["state"];
      gen = st.json["nodes"][0]["generation"];
      if (state == "serving" && gen > gen0) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  double s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("serving again at generation %llu (was %llu) %.1f s after the worker agent restarted\n",
              static_cast<unsigned long long>(gen), static_cast<unsigned long long>(gen0), s);
  EXPECT_EQ(state, "serving") << ServeLog();
  EXPECT_GT(gen, gen0);
  StopServe();
  // SIGTERM leaves the cluster as it is.
  EXPECT_EQ(Ctl({"status", "-f", cluster.string()}).exit_code, 0);
}

}  // namespace
}  // namespace tandem

namespace tandem {
namespace {

// Issue 12: a LeaveGroup whose engine shutdown got stuck left the head "idle" with the API port
// still bound, so every later `up` failed "cannot bind" until the head agent was restarted by
// hand. The failpoint makes the head's engine shutdown hang for good; the port must be free at
// once, the agent must say what it did and exit (status 75: systemd restarts it), and the next
// `up` — same API port — must succeed.
TEST_F(OrchestrationIntegration, StuckTeardownReleasesTheApiPortAndALaterUpSucceeds) {
  StartAgent(0, {{"TANDEM_FAILPOINTS", "engine_shutdown_hang"}});
  StartAgent(1);
  const int api_port = testing::UnusedLoopbackPort();
  fs::path cluster = WriteCluster("token");
  {
    std::string y = Read(cluster);
    y.replace(y.find("listen: 127.0.0.1:0"), 19, "listen: 127.0.0.1:" + std::to_string(api_port));
    y.replace(y.find("leave: 5s"), 9, "leave: 20s");  // the agent's own teardown takes ~8 s here
    testing::WriteTextFile(cluster.string(), y);
  }
  CtlResult up = Ctl({"up", "-f", cluster.string()});
  ASSERT_EQ(up.exit_code, 0) << up.out;
  std::string resp;
  ASSERT_EQ(testing::HttpRequest(api_port, "GET", "/health", "", &resp), 200) << resp;

  const auto t0 = Clock::now();
  CtlResult down;
  std::thread downer([&] { down = Ctl({"down", "-f", cluster.string()}); });
  double port_free_after = -1;
  while (Clock::now() - t0 < std::chrono::seconds(5)) {
    if (testing::HttpRequest(api_port, "GET", "/health", "", &resp) == 0) {
      port_free_after = std::chrono::duration<double>(Clock::now() - t0).count();
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  downer.join();
  const double down_s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("--- tandemctl down (exit %d, %.2f s) ---\n%s", down.exit_code, down_s, down.out.c_str());
  std::printf("API port refused connections %.3f s after down started\n", port_free_after);
  ASSERT_GE(port_free_after, 0) << "the API port still answered 5 s into the teardown";
  EXPECT_LT(port_free_after, 1.0);
  EXPECT_NE(down.out.find("API port released"), std::string::npos) << down.out;

  // The head agent exits (75) once it has said so; a supervisor (systemd) would restart it.
  std::optional<int> rc = agents_[0].Wait(std::chrono::seconds(10));
  ASSERT_TRUE(rc.has_value()) << "the head agent did not exit after its stuck teardown";
  EXPECT_TRUE(WIFEXITED(*rc) && WEXITSTATUS(*rc) == 75) << DescribeWaitStatus(*rc);
  const std::string head_log = Read(dir_ / "n1.err");
  EXPECT_NE(head_log.find("exiting with status 75"), std::string::npos) << head_log;

  StartAgent(0);  // what systemd's Restart=on-failure does
  CtlResult again = Ctl({"up", "-f", cluster.string()});
  std::printf("--- tandemctl up after the restart (exit %d) ---\n%s", again.exit_code, again.out.c_str());
  ASSERT_EQ(again.exit_code, 0) << again.out;
  EXPECT_NE(again.out.find("127.0.0.1:" + std::to_string(api_port)), std::string::npos) << again.out;
  EXPECT_EQ(testing::HttpRequest(api_port, "POST", "/v1/completions",
                                 R"({"model":"tiny","prompt":[1,2,3,4],"max_tokens":4,"temperature":0})", &resp),
            200)
      << resp;
  EXPECT_EQ(Ctl({"down", "-f", cluster.string()}).exit_code, 0);
}

}  // namespace
}  // namespace tandem

namespace tandem {
namespace {

// Issue 12's reproduction of the stuck teardown: `up`/`down` in a loop with a tokenizer that does
// not load (the text probe fails, every agent leaves). Every round must fail the same way — at the
// probe, saying why — and never with "cannot bind" (the API port of the failed round still held).
TEST_F(OrchestrationIntegration, UpDownLoopWithABadTokenizerNeverLeavesThePortBound) {
  for (const char* m : {"model1", "model2"}) testing::WriteTextFile((dir_ / m / "tokenizer.json").string(), "{ broken");
  StartAgent(0);
  StartAgent(1);
  const int api_port = testing::UnusedLoopbackPort();
  fs::path cluster = WriteCluster("token");
  {
    std::string y = Read(cluster);
    y.replace(y.find("listen: 127.0.0.1:0"), 19, "listen: 127.0.0.1:" + std::to_string(api_port));
    y.replace(y.find("prompt_ids: [1, 2, 3, 4]"), 24, "prompt: \"The capital of France is\"");
    testing::WriteTextFile(cluster.string(), y);
  }
  for (int round = 0; round < 4; ++round) {
    CtlResult up = Ctl({"up", "-f", cluster.string()});
    std::printf("round %d: up exit %d: %s\n", round, up.exit_code,
                up.out.substr(up.out.find("probe:")).substr(0, 240).c_str());
    EXPECT_EQ(up.exit_code, 1);
    EXPECT_EQ(up.out.find("cannot bind"), std::string::npos) << up.out;
    EXPECT_NE(up.out.find("tokenizer"), std::string::npos) << up.out;
    std::string resp;
    EXPECT_EQ(testing::HttpRequest(api_port, "GET", "/health", "", &resp), 0) << "a failed up left the API up";
    EXPECT_EQ(Ctl({"down", "-f", cluster.string()}).exit_code, 0);
  }
}

}  // namespace
}  // namespace tandem
