// OpenAIServer against the scripted FakeEngine: routes, error statuses (400/401/404/429/503 with
// Retry-After), streaming vs non-streaming text, chat template and stop ids, client disconnect
// -> Cancel, and /metrics through promtool.
#include "openai/openai_server.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <gtest/gtest.h>

#include "engine/tokenizer/chat_template.h"
#include "tests/engine/tokenizer/chat_refs.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "tests/openai/fake_llm_engine.h"
#include "tests/openai/server_fixture.h"
#include "tests/common/promtool.h"
#include "tests/common/test_util.h"
#include "tests/http/raw_client.h"

namespace tandem::openai {
namespace {

using testing::FakeEngine;
using testing::HttpServerTest;
using testing::Json;
using testing::SsePayloads;
using testing::TestdataDir;

TEST_F(HttpServerTest, ModelsHealthAndUnknownRoute) {
  ASSERT_NO_FATAL_FAILURE(Start());
  auto r = client_->Get("/v1/models");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(Json::parse(r->body)["data"][0]["id"], "tiny");
  r = client_->Get("/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  r = client_->Get("/v1/nope");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(ErrorOf(r)["type"], "invalid_request_error");
  std::cout << "unknown route: " << r->body << "\n";
}

TEST_F(HttpServerTest, ApiKey) {
  OpenAIServerOptions o;
  o.api_key = "sekret";
  ASSERT_NO_FATAL_FAILURE(Start(o));
  auto r = client_->Get("/v1/models");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(ErrorOf(r)["code"], "invalid_api_key");
  r = client_->Get("/v1/models", {{"Authorization", "Bearer wrong"}});
  EXPECT_EQ(r->status, 401);
  r = Post("/v1/completions", R"({"prompt":[1,2]})", {{"Authorization", "Bearer sekret2"}});
  EXPECT_EQ(r->status, 401);
  EXPECT_TRUE(engine_->submitted().empty());
  r = client_->Get("/v1/models", {{"Authorization", "Bearer sekret"}});
  EXPECT_EQ(r->status, 200);
  r = Post("/v1/completions", R"({"prompt":[1,2],"max_tokens":2})", {{"Authorization", "Bearer sekret"}});
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(client_->Get("/health")->status, 200);  // probes need no key
}

TEST_F(HttpServerTest, BadRequestsNameTheParameter) {
  ASSERT_NO_FATAL_FAILURE(Start());
  struct Case {
    const char* path;
    const char* body;
    int status;
    const char* param;
  };
  const Case cases[] = {
      {"/v1/completions", "{oops", 400, ""},
      {"/v1/completions", R"({"prompt":[1],"n":65})", 400, "n"},
      {"/v1/completions", R"({"prompt":[1],"echo":1})", 400, "echo"},
      {"/v1/completions", R"({"prompt":[[1],[2,5000]]})", 400, "prompt[1]"},
      {"/v1/completions", R"({"prompt":[1, 5000]})", 400, "prompt"},
      {"/v1/completions", R"({"prompt":[1],"max_tokens":300})", 400, "max_tokens"},
      {"/v1/completions", R"({"prompt":[1],"model":"gpt-4"})", 404, "model"},
      {"/v1/chat/completions", R"({"messages":[{"role":"user","content":"hi"}],"model":"gpt-4"})", 404, "model"},
      {"/v1/chat/completions", R"({"messages":"hi"})", 400, "messages"},
  };
  for (const Case& c : cases) {
    auto r = Post(c.path, c.body);
    ASSERT_TRUE(r) << c.body;
    EXPECT_EQ(r->status, c.status) << c.body << " -> " << r->body;
    Json e = ErrorOf(r);
    EXPECT_EQ(e["param"].is_null() ? std::string() : e["param"].get<std::string>(), c.param) << r->body;
  }
  EXPECT_TRUE(engine_->submitted().empty());
}

TEST_F(HttpServerTest, OverloadIs429AndUnhealthyIs503WithRetryAfterFast) {
  OpenAIServerOptions o;
  bool cluster_ready = true;
  o.ready = [&] { return cluster_ready; };
  ASSERT_NO_FATAL_FAILURE(Start(o));
  engine_->set_queue_full(true);
  auto t0 = std::chrono::steady_clock::now();
  auto r = Post("/v1/completions", R"({"prompt":[1,2]})");
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429);
  EXPECT_EQ(r->get_header_value("Retry-After"), "1");
  EXPECT_EQ(ErrorOf(r)["type"], "rate_limit_error");
  EXPECT_LT(ms, 500.0);
  std::cout << "429 in " << ms << " ms\n";

  engine_->set_queue_full(false);
  engine_->set_healthy(false);
  r = Post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"hi"}]})");
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->get_header_value("Retry-After"), "1");
  r = client_->Get("/health");
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->get_header_value("Retry-After"), "1");

  engine_->set_healthy(true);
  EXPECT_EQ(client_->Get("/health")->status, 200);
  cluster_ready = false;  // the orchestrator's gate
  EXPECT_EQ(client_->Get("/health")->status, 503);
  EXPECT_EQ(Post("/v1/completions", R"({"prompt":[1,2]})")->status, 503);
}

TEST_F(HttpServerTest, StreamingAndNonStreamingGiveTheSameText) {
  ASSERT_NO_FATAL_FAILURE(Start());
  auto r = Post("/v1/completions", R"({"prompt":[1,2,3],"max_tokens":6,"return_token_ids":true})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  Json j = Json::parse(r->body);
  const std::string want = engine_->ScriptText(6);
  EXPECT_EQ(j["choices"][0]["text"], want);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["choices"][0]["token_ids"], Json({11, 12, 13, 14, 15, 16}));
  EXPECT_EQ(j["usage"]["prompt_tokens"], 3);
  EXPECT_EQ(j["usage"]["completion_tokens"], 6);
  EXPECT_EQ(engine_->submitted().back().params.max_tokens, 6);

  r = Post("/v1/completions",
           R"({"prompt":[1,2,3],"max_tokens":6,"stream":true,"stream_options":{"include_usage":true}})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  std::vector<std::string> events = SsePayloads(r->body);
  ASSERT_GE(events.size(), 3u) << r->body;
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text;
  for (size_t i = 0; i + 3 < events.size(); ++i) text += Json::parse(events[i])["choices"][0]["text"];
  EXPECT_EQ(text, want);
  Json finish = Json::parse(events[events.size() - 3]);
  EXPECT_EQ(finish["choices"][0]["finish_reason"], "length");
  Json usage = Json::parse(events[events.size() - 2]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 6);
  std::cout << "streamed " << events.size() << " events, text '" << text << "'\n";
}

TEST_F(HttpServerTest, ChatUsesTheTemplateAndImEnd) {
  OpenAIServerOptions o;
  o.vocab_size = 151669;  // ChatML's special ids are above the tiny vocabulary
  ASSERT_NO_FATAL_FAILURE(Start(o));
  const std::string body =
      R"({"model":"tiny","messages":[{"role":"user","content":"Hi"}],"max_tokens":4,
          "chat_template_kwargs":{"enable_thinking":false}})";
  auto r = Post("/v1/chat/completions", body);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  Json j = Json::parse(r->body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["content"], engine_->ScriptText(4));

  // The prompt is the template's text encoded, and <|im_end|> stops generation.
  tokenizer::ChatTemplateOptions topts;
  topts.enable_thinking = false;
  const std::vector<int32_t> want_ids =
      tokenizer_->Encode(tokenizer::ApplyChatTemplate({{"user", "Hi", std::nullopt, {}}}, topts));
  const engine::GenerationRequest sub = engine_->submitted().back();
  EXPECT_EQ(sub.prompt_ids, want_ids);
  const int32_t im_end = *tokenizer_->TokenId("<|im_end|>");
  EXPECT_NE(std::find(sub.params.stop_token_ids.begin(), sub.params.stop_token_ids.end(), im_end),
            sub.params.stop_token_ids.end());
  std::cout << "chat prompt: " << want_ids.size() << " ids, <|im_end|> = " << im_end << "\n";

  // Streaming: role first, content deltas, finish, [DONE]; same content.
  Json sj = Json::parse(body);
  sj["stream"] = true;
  r = Post("/v1/chat/completions", sj.dump());
  ASSERT_EQ(r->status, 200);
  std::vector<std::string> ev = SsePayloads(r->body);
  ASSERT_GE(ev.size(), 4u);
  EXPECT_EQ(Json::parse(ev[0])["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(ev.back(), "[DONE]");
  Json fin = Json::parse(ev[ev.size() - 2]);
  EXPECT_EQ(fin["choices"][0]["finish_reason"], "length");
  std::string content;
  for (size_t i = 1; i + 2 < ev.size(); ++i) content += Json::parse(ev[i])["choices"][0]["delta"]["content"];
  EXPECT_EQ(content, engine_->ScriptText(4));
}

// With the model's own template (the fixture's real Qwen3 one) the engine gets the reference
// rendering of each conversation, thinking on and off, tools present and absent.
TEST_F(HttpServerTest, ChatRendersTheModelsOwnTemplate) {
  OpenAIServerOptions o;
  o.vocab_size = 151669;
  o.max_model_len = 2048;
  auto prompt = tokenizer::ChatPrompt::Load(TestdataDir() + "/qwen3-tokenizer");
  ASSERT_TRUE(prompt.ok()) << prompt.status();
  o.chat_prompt = *prompt;
  ASSERT_NO_FATAL_FAILURE(Start(o));
  int compared = 0;
  const auto refs = tokenizer::testing::LoadChatRefs();
  for (const auto& c : refs["cases"]) {
    const std::string name = c["name"].get<std::string>();
    for (bool thinking : {true, false}) {
      Json body = {{"model", "tiny"}, {"max_tokens", 1}, {"messages", Json::parse(c["messages"].dump())},
                   {"chat_template_kwargs", {{"enable_thinking", thinking}}}};
      const std::string want = c[thinking ? "text" : "text_nothink"].get<std::string>();
      // The body is written with the reference's key order: the server keeps it, so the tool
      // definitions reach the template as the client wrote them.
      std::string text = body.dump();
      if (!c["tools"].empty()) text.insert(text.size() - 1, ",\"tools\":" + c["tools"].dump());
      auto r = Post("/v1/chat/completions", text);
      ASSERT_TRUE(r);
      ASSERT_EQ(r->status, 200) << name << ": " << r->body;
      EXPECT_EQ(tokenizer_->Decode(engine_->submitted().back().prompt_ids), want) << name;
      ++compared;
    }
  }
  EXPECT_EQ(compared, 14);
}

// A conversation the template refuses (raise_exception) is the client's error, with the
// template's message.
TEST_F(HttpServerTest, ChatTheTemplateRefusesIs400) {
  ::tandem::testing::TempDir dir;
  std::ofstream(dir / "chat_template.jinja")
      << "{% if messages[0].role != 'user' %}{{ raise_exception('first turn must be the user') }}{% endif %}x";
  auto prompt = tokenizer::ChatPrompt::Load(dir.path());
  ASSERT_TRUE(prompt.ok()) << prompt.status();
  OpenAIServerOptions o;
  o.chat_prompt = *prompt;
  ASSERT_NO_FATAL_FAILURE(Start(o));
  auto r = Post("/v1/chat/completions", R"({"messages":[{"role":"system","content":"s"}],"max_tokens":1})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_NE(ErrorOf(r)["message"].get<std::string>().find("first turn must be the user"), std::string::npos) << r->body;
  EXPECT_EQ(ErrorOf(r)["param"], "messages");
}

// Opens a raw connection, sends a streaming request, reads the first bytes and closes.
void StartStreamThenHangUp(int port) {
  http::testing::RawClient raw(port);
  ASSERT_TRUE(raw.connected());
  ASSERT_TRUE(raw.Send(http::testing::PostRequest("/v1/completions", R"({"prompt":[1,2],"max_tokens":200,"stream":true})")));
  ASSERT_TRUE(raw.ReadMore(std::chrono::seconds(60)));  // headers (and maybe the first chunk) arrived
}

TEST_F(HttpServerTest, DisconnectCancelsTheSequence) {
  ASSERT_NO_FATAL_FAILURE(Start({}, std::chrono::milliseconds(20)));
  StartStreamThenHangUp(server_->port());
  // The next writes fail; the server must Cancel within a few engine steps.
  for (int i = 0; i < 200 && engine_->cancelled().empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(engine_->cancelled().size(), 1u);
  EXPECT_EQ(engine_->cancelled()[0], engine_->submitted()[0].request_id);
  EXPECT_EQ(engine_->Stats().kv_blocks_used, 0);
  for (int i = 0; i < 100 && server_->active_requests() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(server_->active_requests(), 0);
  std::cout << "cancelled " << engine_->cancelled()[0] << "\n";
}

// The same hang-up without streaming: nothing is written until the end, so only the HTTP loop
// can notice; the sequence is cancelled within a few steps and counted as an abort.
TEST_F(HttpServerTest, NonStreamingDisconnectCancelsTheSequence) {
  ASSERT_NO_FATAL_FAILURE(Start({}, std::chrono::milliseconds(20)));
  http::testing::RawClient raw(server_->port());
  ASSERT_TRUE(raw.Send(http::testing::PostRequest("/v1/completions", R"({"prompt":[1,2],"max_tokens":200})")));
  for (int i = 0; i < 200 && engine_->submitted().empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(engine_->submitted().size(), 1u);
  const auto t0 = std::chrono::steady_clock::now();
  raw.Close();
  for (int i = 0; i < 200 && engine_->cancelled().empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(engine_->cancelled().size(), 1u);
  EXPECT_EQ(engine_->cancelled()[0], engine_->submitted()[0].request_id);
  EXPECT_LT(ms, 500);
  for (int i = 0; i < 100 && server_->active_requests() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(server_->active_requests(), 0);
  auto m = client_->Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("tandem_request_success_total{finished_reason=\"abort\",model_name=\"tiny\"} 1"),
            std::string::npos);
  std::cout << "non-streaming hang-up cancelled after " << ms << " ms\n";
}

// The front door's refusals carry OpenAI-shaped errors: a body over the limit (413, unread), and
// a text prompt over the context length (400 context_length_exceeded, without tokenizing all of it).
TEST_F(HttpServerTest, FrontDoorRefusalsAreOpenAIErrors) {
  OpenAIServerOptions o;
  o.max_body_bytes = 64 << 10;
  ASSERT_NO_FATAL_FAILURE(Start(o));
  auto r = Post("/v1/completions", R"({"prompt":")" + std::string(100 << 10, 'a') + R"("})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_EQ(ErrorOf(r)["code"], "request_too_large");
  std::cout << "413: " << r->body << "\n";
  std::string words;
  while (words.size() < (60 << 10)) words += "tensor parallel experts ";
  r = Post("/v1/completions", R"({"prompt":")" + words + R"("})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(ErrorOf(r)["code"], "context_length_exceeded");
  r = Post("/v1/chat/completions", R"({"messages":[{"role":"user","content":")" + words + R"("}]})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(ErrorOf(r)["code"], "context_length_exceeded");
  EXPECT_TRUE(engine_->submitted().empty());
  std::cout << "context: " << r->body << "\n";
}

TEST_F(HttpServerTest, MetricsPassPromtool) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ASSERT_EQ(Post("/v1/completions", R"({"prompt":[1,2,3],"max_tokens":5})")->status, 200);
  ASSERT_EQ(Post("/v1/completions", R"({"prompt":[1,2],"max_tokens":3,"stream":true})")->status, 200);
  ASSERT_EQ(Post("/v1/completions", R"({"prompt":[1],"n":65})")->status, 400);
  auto r = client_->Get("/metrics");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  const std::string& text = r->body;
  for (const char* name :
       {"tandem_time_to_first_token_seconds_count", "tandem_inter_token_latency_seconds_bucket",
        "tandem_e2e_request_latency_seconds_sum", "tandem_prompt_tokens_total", "tandem_generation_tokens_total",
        "tandem_num_requests_running", "tandem_num_requests_waiting", "tandem_kv_cache_usage_perc",
        "tandem_num_preemptions_total", "tandem_step_seconds_bucket", "tandem_allreduce_seconds_bucket",
        "tandem_http_connections{", "tandem_http_connections_evicted_total", "tandem_http_timeouts_total",
        "tandem_http_clients_gone_total",
        "tandem_iterations_total", "tandem_request_success_total{finished_reason=\"length\"",
        "tandem_request_rejected_total{code=\"400\""}) {
    EXPECT_NE(text.find(name), std::string::npos) << name;
  }
  EXPECT_NE(text.find("tandem_prompt_tokens_total{model_name=\"tiny\"} 5"), std::string::npos) << text;
  EXPECT_NE(text.find("tandem_generation_tokens_total{model_name=\"tiny\"} 8"), std::string::npos) << text;
  EXPECT_NE(text.find("tandem_time_to_first_token_seconds_count{model_name=\"tiny\"} 2"), std::string::npos);

  const std::optional<std::string> findings = ::tandem::testing::PromtoolFindings(text);
  if (!findings) GTEST_SKIP() << "promtool not installed";
  std::cout << "promtool check metrics: '" << *findings << "' (" << text.size() << " bytes scraped)\n";
  EXPECT_EQ(*findings, "") << "promtool lint findings";
}

}  // namespace
}  // namespace tandem::openai
