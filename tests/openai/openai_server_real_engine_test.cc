// OpenAIServer over the real LLMEngine and the cpu qwen3moe-tiny model: greedy completions of
// the golden prompts (alone and 16 at once, streaming and not) give the golden continuations;
// a client that hangs up frees its KV blocks; overload is refused fast; chat works with the
// Qwen3 tokenizer copied next to the tiny weights.
#include <filesystem>
#include <fstream>
#include <set>
#include <gtest/gtest.h>
#include <thread>

#include "engine/model.h"
#include "engine/batching/llm_engine.h"
#include "openai/openai_server.h"
#include "engine/step_driver.h"
#include "httplib.h"
#include "tests/http/raw_client.h"
#include "nlohmann/json.hpp"
#include "tests/engine/cpu/golden.h"
#include "tests/common/promtool.h"
#include "tests/common/tiny_chat_tokenizer.h"

namespace tandem::openai {
namespace {

using Json = nlohmann::json;
namespace fs = std::filesystem;

// A model folder with the tiny weights and the Qwen3 tokenizer cut to the tiny model's 4096 ids
// (tests/common/tiny_chat_tokenizer.h).
std::string MakeChatModelDir() {
  const fs::path dir = fs::path(::testing::TempDir()) / ("tiny-chat-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path tiny = engine::testing::TinyModelDir();
  for (const char* f : {"config.json", "model.safetensors"}) {
    fs::remove(dir / f);
    fs::create_symlink(tiny / f, dir / f);
  }
  ::tandem::testing::WriteTinyChatTokenizer(dir);
  return dir.string();
}

class HttpRealEngineTest : public ::testing::Test {
 protected:
  void Start(const std::string& dir, engine::EngineOptions eo, bool with_tokenizer) {
    auto model = engine::Model::Load(dir, {});
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::move(*model);
    driver_ = std::make_unique<engine::StepDriver>(model_.get(), nullptr);
    if (with_tokenizer) {
      auto tok = tokenizer::Tokenizer::LoadFromDir(dir);
      ASSERT_TRUE(tok.ok()) << tok.status();
      tokenizer_ = std::move(*tok);
    }
    auto llm = engine::LLMEngine::Create(driver_.get(), tokenizer_.get(), eo);
    ASSERT_TRUE(llm.ok()) << llm.status();
    llm_ = std::move(*llm);
    metrics_ = std::make_unique<ServeMetrics>("qwen3moe-tiny");
    OpenAIServerOptions so;
    so.port = 0;
    so.served_model_name = "qwen3moe-tiny";
    so.vocab_size = model_->config().vocab_size;
    so.max_model_len = eo.max_model_len;
    so.max_in_flight = 40;
    server_ = std::make_unique<OpenAIServer>(llm_.get(), tokenizer_.get(), metrics_.get(), so);
    ASSERT_TRUE(server_->Start().ok());
  }
  void TearDown() override {
    if (llm_) llm_->Shutdown();
    if (server_) server_->Stop();
    llm_.reset();
    if (driver_) (void)driver_->Stop();
  }
  std::unique_ptr<httplib::Client> Client() {
    auto c = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    c->set_read_timeout(120, 0);
    return c;
  }
  // Greedy token ids for `prompt`, streaming or not.
  std::vector<int32_t> Greedy(httplib::Client& c, const std::vector<int32_t>& prompt, bool stream) {
    Json body = {{"prompt", prompt}, {"max_tokens", 16}, {"temperature", 0}, {"ignore_eos", true},
                 {"return_token_ids", true}, {"stream", stream}};
    auto r = c.Post("/v1/completions", body.dump(), "application/json");
    if (!r || r->status != 200) {
      ADD_FAILURE() << "request failed: " << (r ? r->body : httplib::to_string(r.error()));
      return {};
    }
    std::vector<int32_t> ids;
    if (!stream) return Json::parse(r->body)["choices"][0]["token_ids"].get<std::vector<int32_t>>();
    size_t pos = 0;
    while ((pos = r->body.find("data: ", pos)) != std::string::npos) {
      size_t end = r->body.find("\n\n", pos);
      std::string payload = r->body.substr(pos + 6, end - pos - 6);
      pos = end;
      if (payload == "[DONE]") break;
      Json j = Json::parse(payload);
      if (j["choices"].empty() || !j["choices"][0].contains("token_ids")) continue;
      for (int32_t id : j["choices"][0]["token_ids"]) ids.push_back(id);
    }
    return ids;
  }

  std::unique_ptr<engine::Model> model_;
  std::unique_ptr<engine::StepDriver> driver_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  std::unique_ptr<engine::LLMEngine> llm_;
  std::unique_ptr<ServeMetrics> metrics_;
  std::unique_ptr<OpenAIServer> server_;
};

engine::EngineOptions SmallEngine() {
  engine::EngineOptions eo;
  eo.max_num_seqs = 16;
  eo.max_model_len = 2048;
  eo.kv_tokens = 16 * 2048;
  return eo;
}

TEST_F(HttpRealEngineTest, GoldenGreedyAloneAndSixteenAtOnce) {
  auto golden = engine::testing::LoadGolden(engine::testing::TinyModelDir());
  ASSERT_TRUE(golden.ok()) << golden.status();
  Start(engine::testing::TinyModelDir(), SmallEngine(), /*with_tokenizer=*/false);
  auto c = Client();
  for (size_t p = 0; p < golden->size(); ++p) {
    const auto& g = (*golden)[p];
    std::vector<int32_t> got = Greedy(*c, g.ids, /*stream=*/false);
    EXPECT_EQ(got, g.greedy) << "prompt" << p;
    std::cout << "prompt" << p << " (" << g.ids.size() << " ids): first greedy " << g.greedy[0] << " "
              << g.greedy[1] << " " << g.greedy[2] << " ... got " << (got.size() > 2 ? got[0] : -1) << " "
              << (got.size() > 2 ? got[1] : -1) << " " << (got.size() > 2 ? got[2] : -1) << "\n";
  }
  // 16 concurrent requests (half streaming): batching must not change any greedy result.
  std::vector<std::vector<int32_t>> results(16);
  std::vector<std::thread> threads;
  for (int i = 0; i < 16; ++i) {
    threads.emplace_back([&, i] {
      auto ci = Client();
      results[i] = Greedy(*ci, (*golden)[i % 3].ids, /*stream=*/i % 2 == 1);
    });
  }
  for (auto& t : threads) t.join();
  int matches = 0;
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(results[i], (*golden)[i % 3].greedy) << "concurrent request " << i;
    matches += results[i] == (*golden)[i % 3].greedy;
  }
  std::cout << matches << "/16 concurrent requests match the golden continuations\n";
  EXPECT_EQ(llm_->Stats().kv_blocks_used, 0);

  // A real scrape after real work: the engine's counters moved and promtool accepts it.
  auto m = c->Get("/metrics");
  ASSERT_TRUE(m && m->status == 200);
  EXPECT_NE(m->body.find("tandem_generation_tokens_total{model_name=\"qwen3moe-tiny\"} 304"), std::string::npos)
      << "19 requests x 16 tokens";
  EXPECT_EQ(m->body.find("tandem_iterations_total{model_name=\"qwen3moe-tiny\"} 0\n"), std::string::npos);
  const std::optional<std::string> findings = ::tandem::testing::PromtoolFindings(m->body);
  if (!findings) GTEST_SKIP() << "promtool not installed";
  std::cout << "promtool check metrics on a real scrape (" << m->body.size() << " bytes): '" << *findings << "'\n";
  EXPECT_EQ(*findings, "");
}

// Streams a long request on a raw socket, reads the headers and a few token chunks, and hangs up;
// *used_before is the engine's KV blocks in use just before the hang-up (read while the stream is
// still open: after it the server may already have cancelled the sequence and freed them).
void StreamThenHangUp(int port, const std::string& body, engine::LLMEngine& llm, int64_t* used_before) {
  http::testing::RawClient raw(port);
  ASSERT_TRUE(raw.connected());
  ASSERT_TRUE(raw.Send(http::testing::PostRequest("/v1/completions", body)));
  while (raw.buffered().size() < 600) ASSERT_TRUE(raw.ReadMore(std::chrono::seconds(60)));
  *used_before = llm.Stats().kv_blocks_used;
  raw.Close();
}

TEST_F(HttpRealEngineTest, DisconnectFreesKvBlocks) {
  Start(engine::testing::TinyModelDir(), SmallEngine(), false);
  Json body = {{"prompt", {1, 2, 3, 4, 5}}, {"max_tokens", 2000}, {"ignore_eos", true},
               {"return_token_ids", true}, {"stream", true}};
  int64_t used_before_hangup = 0;
  ASSERT_NO_FATAL_FAILURE(StreamThenHangUp(server_->port(), body.dump(), *llm_, &used_before_hangup));
  auto t0 = std::chrono::steady_clock::now();
  engine::EngineStats s;
  for (int i = 0; i < 500; ++i) {
    s = llm_->Stats();
    if (s.kv_blocks_used == 0 && s.running == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "KV blocks in use just before the hang-up: " << used_before_hangup << ", " << s.kv_blocks_used
            << " after " << ms << " ms (of " << s.kv_blocks_total << ")\n";
  EXPECT_GT(used_before_hangup, 0);
  EXPECT_EQ(s.kv_blocks_used, 0);
  EXPECT_EQ(s.running, 0);
  EXPECT_LT(s.generation_tokens_total, 1990) << "the sequence ran to its end instead of being cancelled";
}

// A non-streaming client that goes away: no write would ever fail, but the HTTP loop sees the
// hang-up and the sequence is cancelled (its KV freed) instead of running to max_tokens.
TEST_F(HttpRealEngineTest, NonStreamingDisconnectFreesKvBlocks) {
  Start(engine::testing::TinyModelDir(), SmallEngine(), false);
  Json body = {{"prompt", {1, 2, 3, 4, 5}}, {"max_tokens", 2000}, {"ignore_eos", true}};
  http::testing::RawClient raw(server_->port());
  ASSERT_TRUE(raw.Send(http::testing::PostRequest("/v1/completions", body.dump())));
  for (int i = 0; i < 500 && llm_->Stats().generation_tokens_total < 5; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const int64_t used_before_hangup = llm_->Stats().kv_blocks_used;
  raw.Close();
  const auto t0 = std::chrono::steady_clock::now();
  engine::EngineStats s;
  for (int i = 0; i < 500; ++i) {
    s = llm_->Stats();
    if (s.kv_blocks_used == 0 && s.running == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "non-streaming: KV blocks in use before the hang-up " << used_before_hangup << ", " << s.kv_blocks_used
            << " after " << ms << " ms; " << s.generation_tokens_total << " tokens generated of 2000\n";
  EXPECT_GT(used_before_hangup, 0);
  EXPECT_EQ(s.kv_blocks_used, 0);
  EXPECT_EQ(s.running, 0);
  EXPECT_LT(ms, 1000);
  EXPECT_LT(s.generation_tokens_total, 1990) << "the sequence ran to its end instead of being cancelled";
  for (int i = 0; i < 100 && server_->active_requests() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(server_->active_requests(), 0);
  auto m = Client()->Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("tandem_request_success_total{finished_reason=\"abort\",model_name="), std::string::npos);
}

TEST_F(HttpRealEngineTest, OverloadIsRefusedFast) {
  engine::EngineOptions eo = SmallEngine();
  eo.max_num_seqs = 1;
  eo.max_waiting = 1;
  Start(engine::testing::TinyModelDir(), eo, false);
  // One long request runs, one waits; the next must get 429 at once.
  std::vector<std::thread> bg;
  for (int i = 0; i < 2; ++i) {
    bg.emplace_back([&] {
      auto c = Client();
      Json body = {{"prompt", {1, 2, 3}}, {"max_tokens", 400}, {"ignore_eos", true}};
      auto r = c->Post("/v1/completions", body.dump(), "application/json");
      EXPECT_TRUE(r && (r->status == 200 || r->status == 503));  // 503: aborted by the Shutdown below
    });
  }
  for (int i = 0; i < 500; ++i) {
    auto s = llm_->Stats();
    if (s.running == 1 && s.waiting == 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  auto c = Client();
  auto t0 = std::chrono::steady_clock::now();
  auto r = c->Post("/v1/completions", R"({"prompt":[1,2],"max_tokens":4})", "application/json");
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429) << r->body;
  EXPECT_EQ(r->get_header_value("Retry-After"), "1");
  EXPECT_LT(ms, 500.0);
  std::cout << "overloaded: HTTP " << r->status << " in " << ms << " ms: " << r->body << "\n";
  llm_->Shutdown();  // aborts the background requests (they get 503)
  for (auto& t : bg) t.join();
}

TEST_F(HttpRealEngineTest, ChatStreamingMatchesNonStreaming) {
  Start(MakeChatModelDir(), SmallEngine(), /*with_tokenizer=*/true);
  auto c = Client();
  Json body = {{"model", "qwen3moe-tiny"},
               {"messages", {{{"role", "user"}, {"content", "Say hello."}}}},
               {"max_tokens", 12},
               {"temperature", 0},
               {"chat_template_kwargs", {{"enable_thinking", false}}}};
  auto r = c->Post("/v1/chat/completions", body.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  Json j = Json::parse(r->body);
  const std::string content = j["choices"][0]["message"]["content"];
  EXPECT_EQ(j["usage"]["completion_tokens"].get<int>() <= 12, true);
  EXPECT_GT(j["usage"]["prompt_tokens"].get<int>(), 5);

  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  r = c->Post("/v1/chat/completions", body.dump(), "application/json");
  ASSERT_EQ(r->status, 200);
  std::string streamed;
  bool saw_usage = false, saw_done = false;
  size_t pos = 0;
  while ((pos = r->body.find("data: ", pos)) != std::string::npos) {
    size_t end = r->body.find("\n\n", pos);
    std::string payload = r->body.substr(pos + 6, end - pos - 6);
    pos = end;
    if (payload == "[DONE]") {
      saw_done = true;
      break;
    }
    Json e = Json::parse(payload);
    if (e["choices"].empty()) {
      saw_usage = true;
      EXPECT_EQ(e["usage"], j["usage"]);
      continue;
    }
    if (e["choices"][0]["delta"].contains("content")) streamed += e["choices"][0]["delta"]["content"];
  }
  EXPECT_TRUE(saw_usage);
  EXPECT_TRUE(saw_done);
  EXPECT_EQ(streamed, content);
  std::cout << "chat content (" << content.size() << " bytes): " << Json(content).dump() << "\n";
}

}  // namespace
}  // namespace tandem::openai
