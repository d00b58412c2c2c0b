// RunPromptBench against a small streaming server on loopback that answers like the chat
// endpoint: a role chunk, then one chunk per token carrying token_ids, then [DONE].
#include "bench/prompt_bench.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "httplib.h"
#include "nlohmann/json.hpp"

namespace tandem::bench {
namespace {

using Json = nlohmann::json;

class FakeChatServer {
 public:
  explicit FakeChatServer(std::chrono::milliseconds first_token_delay = std::chrono::milliseconds(20))
      : first_token_delay_(first_token_delay) {
    server_.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
      if (req.get_header_value("Authorization") != "Bearer bench-key") {
        res.status = 401;
        res.set_content(R"({"error": {"message": "bad key"}})", "application/json");
        return;
      }
      const Json body = Json::parse(req.body);
      {
        std::lock_guard<std::mutex> lock(mu_);
        bodies_.push_back(body);
      }
      const int tokens = body["max_tokens"];
      res.set_chunked_content_provider("text/event-stream", [this, tokens](size_t, httplib::DataSink& sink) {
        auto send = [&](const Json& chunk) {
          const std::string event = "data: " + chunk.dump() + "\n\n";
          sink.write(event.data(), event.size());
        };
        send({{"choices", {{{"index", 0}, {"delta", {{"role", "assistant"}}}}}}});
        for (auto waited = std::chrono::milliseconds(0); waited < first_token_delay_ && !stopping_;
             waited += std::chrono::milliseconds(10)) {
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        for (int i = 0; i < tokens; ++i) {
          if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
          send({{"choices", {{{"index", 0}, {"delta", {{"content", "x"}}}, {"token_ids", {100 + i}}}}}});
        }
        const std::string done = "data: [DONE]\n\n";
        sink.write(done.data(), done.size());
        sink.done();
        return true;
      });
    });
    server_.set_tcp_nodelay(true);  // each token leaves when written, as a streaming server sends it
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~FakeChatServer() {
    stopping_ = true;
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<Json> bodies() {
    std::lock_guard<std::mutex> lock(mu_);
    return bodies_;
  }

 private:
  std::chrono::milliseconds first_token_delay_;
  std::atomic<bool> stopping_{false};
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<Json> bodies_;
};

PromptBenchOptions Options(const std::string& url) {
  PromptBenchOptions o;
  o.target.url = url;
  o.target.api_key = "bench-key";
  o.target.timeout_s = 10;
  o.model = "tiny";
  o.runs = 2;
  o.max_tokens = 6;
  o.kv_tokens = 2048;
  return o;
}

const PromptSet kPrompts = {{"code", "write fizzbuzz"}, {"zh", "为什么"}, {"code", "sort a list"}};

TEST(PromptBench, EveryPromptOfEveryRunIsMeasured) {
  FakeChatServer server;
  std::vector<std::string> progress;
  absl::StatusOr<BenchResults> r =
      RunPromptBench(Options(server.url()), kPrompts, [&](const std::string& line) { progress.push_back(line); });
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->runs.size(), 2u);
  EXPECT_EQ(r->kv_tokens, 2048);
  EXPECT_EQ(r->max_tokens, 6);
  for (const auto& run : r->runs) {
    ASSERT_EQ(run.size(), 3u);
    EXPECT_EQ(run[1].category, "zh");
    for (const PromptSample& s : run) {
      EXPECT_TRUE(s.ok) << s.error;
      EXPECT_EQ(s.tokens, 6);
      EXPECT_GE(s.ttft_ms, 15);  // the server waits 20 ms before the first token
      EXPECT_GT(s.e2e_ms, s.ttft_ms);
      ASSERT_TRUE(DecodeTokensPerSecond(s).has_value());
      EXPECT_LT(*DecodeTokensPerSecond(s), 250);  // 5 tokens at >= 5 ms each
    }
  }
  ASSERT_EQ(progress.size(), 6u);
  EXPECT_NE(progress[0].find("run 1/2: 1/3 done (prompt 1, code): 6 tokens, ttft"), std::string::npos)
      << progress[0];
  EXPECT_NE(progress[5].find("run 2/2: 3/3 done"), std::string::npos) << progress[5];
  // What was asked: greedy, the full max_tokens (ignore_eos), streamed with token ids.
  const std::vector<Json> bodies = server.bodies();
  ASSERT_EQ(bodies.size(), 6u);
  EXPECT_EQ(bodies[1]["messages"][0]["content"], "为什么");
  EXPECT_EQ(bodies[1]["model"], "tiny");
  EXPECT_EQ(bodies[1]["temperature"], 0);
  EXPECT_EQ(bodies[1]["ignore_eos"], true);
  EXPECT_EQ(bodies[1]["return_token_ids"], true);
}

TEST(PromptBench, RefusedRequestsAreRecordedAsFailed) {
  FakeChatServer server;
  PromptBenchOptions o = Options(server.url());
  o.target.api_key = "wrong";
  o.runs = 1;
  absl::StatusOr<BenchResults> r = RunPromptBench(o, kPrompts, [](const std::string&) {});
  ASSERT_TRUE(r.ok()) << r.status();
  for (const PromptSample& s : r->runs[0]) {
    EXPECT_FALSE(s.ok);
    EXPECT_NE(s.error.find("HTTP status 401"), std::string::npos) << s.error;
  }
  EXPECT_EQ(Summarize(*r)[0].failed, 3);
}

TEST(PromptBench, EveryRequestHasADeadline) {
  FakeChatServer server(std::chrono::milliseconds(3000));
  PromptBenchOptions o = Options(server.url());
  o.target.timeout_s = 1;
  o.runs = 1;
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<BenchResults> r = RunPromptBench(o, {{"code", "slow"}}, [](const std::string&) {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->runs[0][0].ok);
  EXPECT_FALSE(r->runs[0][0].error.empty());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(2500));
}

TEST(PromptBench, UnusableUrlIsAnError) {
  PromptBenchOptions o = Options("https://127.0.0.1:1");
  EXPECT_EQ(RunPromptBench(o, kPrompts, [](const std::string&) {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::bench
