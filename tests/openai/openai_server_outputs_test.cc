// OpenAIServer against the scripted FakeEngine, for the outputs of issue 16: tool calls (whole,
// streamed as deltas, tool_choice none / required / named, parallel_tool_calls), tool results
// through the template, n choices, logprobs in both endpoints' shapes, batches of prompts, echo,
// and GET /v1/models/{id}.
#include <gtest/gtest.h>

#include <map>

#include <thread>

#include "engine/grammar/matcher.h"
#include "tests/http/raw_client.h"
#include "tests/openai/server_fixture.h"

namespace tandem::openai {
namespace {

using testing::FakeEngine;
using testing::HttpServerTest;
using testing::Json;
using testing::SsePayloads;

const char kCall1[] = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
const char kCall2[] = "<tool_call>\n{\"name\": \"noop\", \"arguments\": {}}\n</tool_call>";

// Some words, then two calls in Qwen3's format, split across tokens the way a model would.
std::vector<FakeEngine::Token> ToolScript() {
  return {{21, "Let me"},
          {22, " check."},
          {23, "\n<tool_call>\n{\"name\": \"get_weather\", "},
          {24, "\"arguments\": {\"city\": \"Paris\"}}\n</tool_"},
          {25, "call>\n"},
          {26, std::string(kCall2)}};
}

const char kTools[] =
    R"("tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",)"
    R"("properties":{"city":{"type":"string"}},"required":["city"]}}},{"type":"function","function":{"name":"noop"}}])";

std::string ChatBody(const std::string& extra) {
  return R"({"messages":[{"role":"user","content":"Weather in Paris?"}],"max_tokens":20,)" + extra + "}";
}

class OutputsTest : public HttpServerTest {
 protected:
  // Chat prompts hold the Qwen3 tokenizer's special ids, so the vocabulary is its size.
  void StartChat(std::vector<FakeEngine::Token> script = testing::Script()) {
    OpenAIServerOptions o;
    o.vocab_size = 151669;
    ASSERT_NO_FATAL_FAILURE(Start(o, std::chrono::milliseconds(2), std::move(script)));
  }
};

TEST_F(OutputsTest, ModelById) {
  ASSERT_NO_FATAL_FAILURE(Start());
  auto r = client_->Get("/v1/models/tiny");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  Json m = Json::parse(r->body);
  EXPECT_EQ(m["id"], "tiny");
  EXPECT_EQ(m["object"], "model");
  EXPECT_EQ(m["owned_by"], "tandem");
  r = client_->Get("/v1/models/gpt-4o");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  Json e = ErrorOf(r);
  std::cout << "unknown model: " << r->body << "\n";
  EXPECT_EQ(e["code"], "model_not_found");
  EXPECT_EQ(e["param"], "model");
  EXPECT_EQ(e["type"], "invalid_request_error");
}

TEST_F(OutputsTest, ToolCallsInTheMessage) {
  ASSERT_NO_FATAL_FAILURE(StartChat(ToolScript()));
  auto r = Post("/v1/chat/completions", ChatBody(kTools));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  Json j = Json::parse(r->body);
  std::cout << r->body << "\n";
  const Json& choice = j["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_EQ(choice["message"]["content"], "Let me check.");
  const Json& calls = choice["message"]["tool_calls"];
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0]["type"], "function");
  EXPECT_EQ(calls[0]["id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_NE(calls[0]["id"], calls[1]["id"]);
  EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(Json::parse(calls[0]["function"]["arguments"].get<std::string>()), Json({{"city", "Paris"}}));
  EXPECT_EQ(calls[1]["function"]["name"], "noop");
  EXPECT_EQ(calls[1]["function"]["arguments"], "{}");

  // parallel_tool_calls false: the first call only.
  r = Post("/v1/chat/completions", ChatBody(std::string(kTools) + R"(,"parallel_tool_calls":false)"));
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(Json::parse(r->body)["choices"][0]["message"]["tool_calls"].size(), 1u);

  // tool_choice none: the text as generated, no calls; the prompt still shows the tools.
  r = Post("/v1/chat/completions", ChatBody(std::string(kTools) + R"(,"tool_choice":"none")"));
  ASSERT_EQ(r->status, 200) << r->body;
  j = Json::parse(r->body);
  EXPECT_EQ(j["choices"][0]["message"]["content"], engine_->ScriptText(6));
  EXPECT_FALSE(j["choices"][0]["message"].contains("tool_calls"));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_NE(tokenizer_->Decode(engine_->submitted().back().prompt_ids).find("get_weather"), std::string::npos);

  // Without tools nothing is parsed either.
  r = Post("/v1/chat/completions", ChatBody(R"("temperature":0)"));
  EXPECT_EQ(Json::parse(r->body)["choices"][0]["message"]["content"], engine_->ScriptText(6));
}

TEST_F(OutputsTest, ToolCallsStreamAsDeltas) {
  ASSERT_NO_FATAL_FAILURE(StartChat(ToolScript()));
  auto r = Post("/v1/chat/completions", ChatBody(std::string(kTools) + R"(,"stream":true)"));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  std::string content, finish;
  std::map<int, Json> calls;  // by index, accumulated as the SDKs do
  std::vector<std::string> events = SsePayloads(r->body);
  ASSERT_EQ(events.back(), "[DONE]");
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    Json chunk = Json::parse(events[i]);
    const Json& c = chunk["choices"][0];
    if (c["delta"].contains("content")) content += c["delta"]["content"].get<std::string>();
    if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
    if (!c["delta"].contains("tool_calls")) continue;
    for (const Json& d : c["delta"]["tool_calls"]) {
      Json& call = calls[d["index"].get<int>()];
      if (d.contains("id")) {
        EXPECT_FALSE(call.contains("id")) << "the id comes once";
        call["id"] = d["id"];
        call["name"] = d["function"]["name"];
        EXPECT_EQ(d["type"], "function");
        call["arguments"] = "";
      }
      call["arguments"] = call["arguments"].get<std::string>() + d["function"]["arguments"].get<std::string>();
    }
  }
  EXPECT_EQ(content, "Let me check.");
  EXPECT_EQ(finish, "tool_calls");
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0]["name"], "get_weather");
  EXPECT_EQ(Json::parse(calls[0]["arguments"].get<std::string>()), Json({{"city", "Paris"}}));
  EXPECT_EQ(calls[1]["name"], "noop");
  EXPECT_EQ(calls[1]["arguments"], "{}");
}

// required / a named function constrain the output to calls in the template's format: the
// engine gets a grammar that admits the named tool's call and nothing else.
TEST_F(OutputsTest, ForcedToolChoiceSendsAGrammar) {
  ASSERT_NO_FATAL_FAILURE(StartChat(ToolScript()));
  auto r = Post("/v1/chat/completions",
                ChatBody(std::string(kTools) + R"(,"tool_choice":{"type":"function","function":{"name":"noop"}})"));
  ASSERT_EQ(r->status, 200) << r->body;
  auto g = engine_->submitted().back().params.grammar;
  ASSERT_TRUE(g);
  grammar::GrammarMatcher named(g);
  EXPECT_TRUE(named.AcceptBytes(kCall2) && named.CanEnd());
  grammar::GrammarMatcher other(g);
  EXPECT_FALSE(other.AcceptBytes(kCall1));

  r = Post("/v1/chat/completions", ChatBody(std::string(kTools) + R"(,"tool_choice":"required")"));
  ASSERT_EQ(r->status, 200) << r->body;
  g = engine_->submitted().back().params.grammar;
  ASSERT_TRUE(g);
  grammar::GrammarMatcher both(g);
  EXPECT_TRUE(both.AcceptBytes(std::string(kCall1) + "\n" + kCall2) && both.CanEnd());
  grammar::GrammarMatcher text(g);
  EXPECT_FALSE(text.AcceptBytes("Let me"));
  // auto: no constraint.
  ASSERT_EQ(Post("/v1/chat/completions", ChatBody(kTools))->status, 200);
  EXPECT_FALSE(engine_->submitted().back().params.grammar);

  // One grammar per request: a forced call and a JSON response_format cannot both hold.
  r = Post("/v1/chat/completions",
           ChatBody(std::string(kTools) + R"(,"tool_choice":"required","response_format":{"type":"json_object"})"));
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(ErrorOf(r)["param"], "tool_choice");

  // A schema the grammar cannot express is refused naming the tool.
  r = Post("/v1/chat/completions",
           ChatBody(R"("tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object",)"
                    R"("properties":{"a":{"type":"string","format":"email"}}}}}],"tool_choice":"required")"));
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(ErrorOf(r)["param"], "tools[0].function.parameters");
}

// An assistant's calls and the tool's result go back to the model through the template.
TEST_F(OutputsTest, ToolResultsReachTheTemplate) {
  ASSERT_NO_FATAL_FAILURE(StartChat());
  const std::string body = R"({"max_tokens":2,"messages":[{"role":"user","content":"Weather in Paris?"},
      {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",
        "function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]},
      {"role":"tool","tool_call_id":"call_1","content":"18C"}],)" + std::string(kTools) + "}";
  auto r = Post("/v1/chat/completions", body);
  ASSERT_EQ(r->status, 200) << r->body;
  const std::string prompt = tokenizer_->Decode(engine_->submitted().back().prompt_ids);
  std::cout << prompt << "\n";
  EXPECT_NE(prompt.find("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"),
            std::string::npos);
  EXPECT_NE(prompt.find("<tool_response>\n18C\n</tool_response>"), std::string::npos);
}

// n choices with logprobs, whole and streamed: the same text per index, OpenAI's logprob shape.
TEST_F(OutputsTest, ChatChoicesWithLogprobs) {
  ASSERT_NO_FATAL_FAILURE(StartChat());
  const std::string body =
      R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":4,"n":3,"logprobs":true,"top_logprobs":2)";
  auto r = Post("/v1/chat/completions", body + "}");
  ASSERT_EQ(r->status, 200) << r->body;
  Json j = Json::parse(r->body);
  EXPECT_EQ(engine_->submitted().back().n, 3);
  EXPECT_EQ(engine_->submitted().back().params.logprobs, 2);
  ASSERT_EQ(j["choices"].size(), 3u);
  for (int i = 0; i < 3; ++i) {
    const Json& c = j["choices"][i];
    EXPECT_EQ(c["index"], i);
    EXPECT_EQ(c["message"]["content"], engine_->ScriptText(4));
    EXPECT_EQ(c["finish_reason"], "length");
    const Json& lp = c["logprobs"]["content"];
    ASSERT_EQ(lp.size(), 4u);
    // The fake engine's numbers: token k of choice c has -(k + 1) / 8 - c.
    EXPECT_DOUBLE_EQ(lp[1]["logprob"].get<double>(), -2.0 / 8 - i);
    EXPECT_EQ(lp[0]["token"], tokenizer_->Decode({11 + 1000 * i}));
    ASSERT_EQ(lp[0]["top_logprobs"].size(), 2u);
    EXPECT_DOUBLE_EQ(lp[0]["top_logprobs"][1]["logprob"].get<double>(), -1.0 / 8 - i - 2);
  }
  EXPECT_EQ(j["usage"]["completion_tokens"], 12);

  r = Post("/v1/chat/completions", body + R"(,"stream":true,"stream_options":{"include_usage":true}})");
  ASSERT_EQ(r->status, 200);
  std::map<int, std::string> text, finish, role;
  std::map<int, int> logprob_entries;
  Json usage;
  for (const std::string& e : SsePayloads(r->body)) {
    if (e == "[DONE]") continue;
    Json chunk = Json::parse(e);
    if (chunk["choices"].empty()) {
      usage = chunk["usage"];
      continue;
    }
    const Json& c = chunk["choices"][0];
    const int i = c["index"];
    if (c["delta"].contains("role")) role[i] += c["delta"]["role"].get<std::string>();
    if (c["delta"].contains("content")) text[i] += c["delta"]["content"].get<std::string>();
    if (!c["finish_reason"].is_null()) finish[i] = c["finish_reason"];
    if (!c["logprobs"].is_null()) logprob_entries[i] += static_cast<int>(c["logprobs"]["content"].size());
  }
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(role[i], "assistant");
    EXPECT_EQ(text[i], engine_->ScriptText(4));
    EXPECT_EQ(finish[i], "length");
    EXPECT_EQ(logprob_entries[i], 4);
  }
  EXPECT_EQ(usage["completion_tokens"], 12);
}

// A batch of prompts with n each: choices prompt-major, echo with the prompt's logprobs.
TEST_F(OutputsTest, CompletionBatchEchoAndLogprobs) {
  ASSERT_NO_FATAL_FAILURE(Start());
  const std::string body = R"({"prompt":[[1,2,3],[4,5]],"n":2,"max_tokens":3,"echo":true,"logprobs":1)";
  auto r = Post("/v1/completions", body + "}");
  ASSERT_EQ(r->status, 200) << r->body;
  Json j = Json::parse(r->body);
  std::cout << j["choices"][2].dump() << "\n";
  ASSERT_EQ(engine_->submitted().size(), 2u);
  EXPECT_EQ(engine_->submitted()[1].n, 2);
  EXPECT_EQ(engine_->submitted()[1].params.prompt_logprobs, 1);
  ASSERT_EQ(j["choices"].size(), 4u);
  const std::vector<std::vector<int32_t>> prompts = {{1, 2, 3}, {4, 5}};
  for (int i = 0; i < 4; ++i) {
    const Json& c = j["choices"][i];
    const auto& prompt = prompts[i / 2];
    EXPECT_EQ(c["index"], i);
    EXPECT_EQ(c["text"], tokenizer_->Decode(prompt) + engine_->ScriptText(3));
    const Json& lp = c["logprobs"];
    ASSERT_EQ(lp["tokens"].size(), prompt.size() + 3);
    EXPECT_TRUE(lp["token_logprobs"][0].is_null());  // the first prompt token
    EXPECT_DOUBLE_EQ(lp["token_logprobs"][1].get<double>(), -1.0);
    EXPECT_DOUBLE_EQ(lp["token_logprobs"][prompt.size()].get<double>(), -1.0 / 8 - i % 2);
    EXPECT_EQ(lp["top_logprobs"][prompt.size()].size(), 2u);  // the token and its one alternative
    EXPECT_EQ(lp["text_offset"][0], 0);
  }
  EXPECT_EQ(j["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(j["usage"]["completion_tokens"], 12);

  r = Post("/v1/completions", body + R"(,"stream":true})");
  ASSERT_EQ(r->status, 200);
  std::map<int, std::string> text;
  std::map<int, size_t> tokens;
  for (const std::string& e : SsePayloads(r->body)) {
    if (e == "[DONE]") continue;
    const Json c = Json::parse(e)["choices"][0];
    text[c["index"]] += c["text"].get<std::string>();
    if (!c["logprobs"].is_null()) tokens[c["index"]] += c["logprobs"]["tokens"].size();
  }
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(text[i], j["choices"][i]["text"]) << i;
    EXPECT_EQ(tokens[i], j["choices"][i]["logprobs"]["tokens"].size()) << i;
  }
}

// A client that hangs up on a batch cancels every prompt's engine request (and so every choice).
TEST_F(OutputsTest, HangUpCancelsEveryPromptOfABatch) {
  ASSERT_NO_FATAL_FAILURE(Start({}, std::chrono::milliseconds(20)));
  http::testing::RawClient raw(server_->port());
  ASSERT_TRUE(raw.Send(http::testing::PostRequest("/v1/completions", R"({"prompt":[[1,2],[3]],"n":2,"max_tokens":200})")));
  for (int i = 0; i < 200 && engine_->submitted().size() < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(engine_->submitted().size(), 2u);
  EXPECT_NE(engine_->submitted()[0].request_id, engine_->submitted()[1].request_id);
  raw.Close();
  for (int i = 0; i < 200 && engine_->cancelled().size() < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(engine_->cancelled().size(), 2u);
  for (int i = 0; i < 100 && server_->active_requests() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(server_->active_requests(), 0);
  EXPECT_EQ(engine_->Stats().running, 0);
}

}  // namespace
}  // namespace tandem::openai
