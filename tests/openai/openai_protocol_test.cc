// openai_protocol: request parsing and validation (the fields both endpoints share, completions
// prompts and outputs), error shapes. Chat messages and tools: chat_request_test.cc.
#include "openai/openai_protocol.h"

#include <gtest/gtest.h>

#include "nlohmann/json.hpp"

namespace tandem::openai {
namespace {

using Json = nlohmann::json;

// Parses and returns the error (expected to exist).
ApiError CompletionError(const std::string& body) {
  CompletionRequest r;
  auto e = ParseCompletionRequest(body, &r);
  EXPECT_TRUE(e.has_value()) << "accepted: " << body;
  return e.value_or(ApiError{});
}
ApiError ChatError(const std::string& body) {
  ChatRequest r;
  auto e = ParseChatRequest(body, &r);
  EXPECT_TRUE(e.has_value()) << "accepted: " << body;
  return e.value_or(ApiError{});
}

TEST(HttpProtocol, CompletionWithTextPromptAndSampling) {
  CompletionRequest r;
  auto e = ParseCompletionRequest(
      R"({"model":"m","prompt":"hello","max_tokens":5,"temperature":0.5,"top_p":0.9,"top_k":40,
          "seed":-3,"stop":"\n","stream":true,"stream_options":{"include_usage":true},"ignore_eos":true})",
      &r);
  ASSERT_FALSE(e) << e->message;
  EXPECT_EQ(r.common.model, "m");
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].text.value_or(""), "hello");
  EXPECT_EQ(r.common.max_tokens, 5);
  EXPECT_FLOAT_EQ(r.common.params.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.common.params.top_p, 0.9f);
  EXPECT_EQ(r.common.params.top_k, 40);
  ASSERT_TRUE(r.common.params.seed);
  EXPECT_EQ(*r.common.params.seed, static_cast<uint64_t>(int64_t{-3}));
  EXPECT_EQ(r.common.params.stop, std::vector<std::string>{"\n"});
  EXPECT_TRUE(r.common.stream);
  EXPECT_TRUE(r.common.include_usage);
  EXPECT_TRUE(r.common.params.ignore_eos);
}

TEST(HttpProtocol, CompletionPromptForms) {
  CompletionRequest r;
  ASSERT_FALSE(ParseCompletionRequest(R"({"prompt":[1,2,3]})", &r));
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_FALSE(r.prompts[0].text);
  ASSERT_FALSE(ParseCompletionRequest(R"({"prompt":[[4,5]]})", &r));  // a batch of one
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].ids, (std::vector<int32_t>{4, 5}));
  ASSERT_FALSE(ParseCompletionRequest(R"({"prompt":["only"]})", &r));
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].text.value_or(""), "only");

  // Batches: strings or token arrays, in order; each element is a whole prompt.
  ASSERT_FALSE(ParseCompletionRequest(R"({"prompt":["a","b c"],"n":2})", &r));
  ASSERT_EQ(r.prompts.size(), 2u);
  EXPECT_EQ(r.prompts[1].text.value_or(""), "b c");
  EXPECT_EQ(r.common.n, 2);
  ASSERT_FALSE(ParseCompletionRequest(R"({"prompt":[[1],[2,3],"x"]})", &r));
  ASSERT_EQ(r.prompts.size(), 3u);
  EXPECT_EQ(r.prompts[1].ids, (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(r.prompts[2].text.value_or(""), "x");
  EXPECT_EQ(CompletionError(R"({"prompt":["a",""]})").param, "prompt[1]");
  EXPECT_EQ(CompletionError(R"({"prompt":["a",7]})").param, "prompt[1]");
  EXPECT_EQ(CompletionError(R"({"prompt":[[1],[]]})").param, "prompt[1]");
  EXPECT_EQ(CompletionError(R"({"prompt":[[1],[2,"x"]]})").param, "prompt[1]");
  // At most kMaxChoices sequences (prompts x n) per request.
  EXPECT_EQ(CompletionError(R"({"prompt":["a","b","c"],"n":22})").param, "prompt");
  EXPECT_EQ(CompletionError(R"({"prompt":[]})").param, "prompt");
  EXPECT_EQ(CompletionError(R"({"prompt":""})").param, "prompt");
  EXPECT_EQ(CompletionError(R"({"prompt":[1,-2]})").code, "invalid_token_id");
  EXPECT_EQ(CompletionError(R"({"prompt":[1,"x"]})").param, "prompt");
  EXPECT_EQ(CompletionError(R"({"prompt":[1,2.5]})").param, "prompt");
  EXPECT_EQ(CompletionError(R"({"prompt":7})").param, "prompt");
  EXPECT_EQ(CompletionError(R"({"max_tokens":3})").param, "prompt");
}

TEST(HttpProtocol, StopForms) {
  CompletionRequest r;
  ASSERT_FALSE(ParseCompletionRequest(R"({"prompt":"x","stop":null})", &r));
  EXPECT_TRUE(r.common.params.stop.empty());
  ASSERT_FALSE(ParseCompletionRequest(R"({"prompt":"x","stop":"END"})", &r));
  EXPECT_EQ(r.common.params.stop, std::vector<std::string>{"END"});
  ASSERT_FALSE(ParseCompletionRequest(R"({"prompt":"x","stop":["a","","bc"]})", &r));
  EXPECT_EQ(r.common.params.stop, (std::vector<std::string>{"a", "bc"}));  // empty strings dropped
  ASSERT_FALSE(ParseCompletionRequest(R"({"prompt":"x","stop_token_ids":[7,9]})", &r));
  EXPECT_EQ(r.common.params.stop_token_ids, (std::vector<int32_t>{7, 9}));
  EXPECT_EQ(CompletionError(R"({"prompt":"x","stop":[1]})").param, "stop");
  EXPECT_EQ(CompletionError(R"({"prompt":"x","stop":{"a":1}})").param, "stop");
  EXPECT_EQ(CompletionError(R"({"prompt":"x","stop":["1","2","3","4","5","6","7","8","9","10","11","12","13","14","15","16","17"]})").param,
            "stop");
}

TEST(HttpProtocol, RejectsBadParametersNamingThem) {
  struct Case {
    const char* body;
    const char* param;
  };
  const Case cases[] = {
      {R"({"prompt":"x","n":0})", "n"},
      {R"({"prompt":"x","n":65})", "n"},
      {R"({"prompt":"x","n":1.5})", "n"},
      {R"({"prompt":"x","echo":1})", "echo"},
      {R"({"prompt":"x","best_of":3})", "best_of"},
      {R"({"prompt":"x","n":2,"best_of":3})", "best_of"},
      {R"({"prompt":"x","logprobs":21})", "logprobs"},
      {R"({"prompt":"x","logprobs":-1})", "logprobs"},
      {R"({"prompt":"x","logprobs":true})", "logprobs"},
      {R"({"prompt":"x","temperature":-1})", "temperature"},
      {R"({"prompt":"x","temperature":"hot"})", "temperature"},
      {R"({"prompt":"x","top_p":0})", "top_p"},
      {R"({"prompt":"x","top_p":1.5})", "top_p"},
      {R"({"prompt":"x","top_k":-2})", "top_k"},
      {R"({"prompt":"x","max_tokens":0})", "max_tokens"},
      {R"({"prompt":"x","max_tokens":1.5})", "max_tokens"},
      {R"({"prompt":"x","max_tokens":"9"})", "max_tokens"},
      {R"({"prompt":"x","stream":"yes"})", "stream"},
      {R"({"prompt":"x","model":5})", "model"},
      {R"({"prompt":"x","presence_penalty":2.5})", "presence_penalty"},
      {R"({"prompt":"x","stream_options":{"include_usage":1}})", "stream_options.include_usage"},
  };
  for (const Case& c : cases) {
    ApiError e = CompletionError(c.body);
    EXPECT_EQ(e.http_status, 400) << c.body;
    EXPECT_EQ(e.type, "invalid_request_error") << c.body;
    EXPECT_EQ(e.param, c.param) << c.body << " -> " << e.message;
  }
  // Accepted no-ops: n = 1, echo false, logprobs null/false, zero penalties, max_tokens 16.0.
  CompletionRequest r;
  EXPECT_FALSE(ParseCompletionRequest(
      R"({"prompt":"x","n":1,"echo":false,"logprobs":null,"presence_penalty":0,"max_tokens":16.0})", &r));
  EXPECT_EQ(r.common.max_tokens, 16);
  EXPECT_EQ(r.common.logprobs, -1);
  EXPECT_FALSE(ParseCompletionRequest(R"({"prompt":"x","logprobs":false})", &r));
  EXPECT_EQ(r.common.logprobs, -1);
}

TEST(HttpProtocol, CompletionOutputs) {
  CompletionRequest r;
  ASSERT_FALSE(ParseCompletionRequest(R"({"prompt":"x","n":3,"best_of":3,"echo":true,"logprobs":0})", &r));
  EXPECT_EQ(r.common.n, 3);
  EXPECT_TRUE(r.echo);
  EXPECT_EQ(r.common.logprobs, 0);
  ASSERT_FALSE(ParseCompletionRequest(R"({"prompt":"x","logprobs":20})", &r));
  EXPECT_EQ(r.common.logprobs, 20);
  EXPECT_FALSE(r.echo);
  EXPECT_EQ(r.common.n, 1);
}

TEST(HttpProtocol, ChatLogprobs) {
  ChatRequest r;
  const std::string msgs = R"("messages":[{"role":"user","content":"x"}])";
  ASSERT_FALSE(ParseChatRequest("{" + msgs + R"(,"logprobs":true})", &r));
  EXPECT_EQ(r.common.logprobs, 0);
  ASSERT_FALSE(ParseChatRequest("{" + msgs + R"(,"logprobs":true,"top_logprobs":5,"n":4})", &r));
  EXPECT_EQ(r.common.logprobs, 5);
  EXPECT_EQ(r.common.n, 4);
  ASSERT_FALSE(ParseChatRequest("{" + msgs + R"(,"logprobs":false})", &r));
  EXPECT_EQ(r.common.logprobs, -1);
  // top_logprobs needs logprobs (as OpenAI says); chat's logprobs is a boolean.
  EXPECT_EQ(ChatError("{" + msgs + R"(,"top_logprobs":2})").param, "top_logprobs");
  EXPECT_EQ(ChatError("{" + msgs + R"(,"logprobs":true,"top_logprobs":21})").param, "top_logprobs");
  EXPECT_EQ(ChatError("{" + msgs + R"(,"logprobs":3})").param, "logprobs");
}

// Nothing is silently dropped: an unknown field, a known one asking for what we do not do, or
// an implemented one out of its range is a 400 whose param is the field.
TEST(HttpProtocol, RefusesUnknownAndUnimplementedFieldsNamingThem) {
  struct Case {
    const char* extra;  // appended to a valid body
    const char* param;
  };
  const Case common[] = {
      {R"("frobnicate":1)", "frobnicate"},
      {R"("stream_options":{"include_usage":true,"continuous_usage_stats":true})",
       "stream_options.continuous_usage_stats"},
      {R"("min_p":1.5)", "min_p"},
      {R"("repetition_penalty":0)", "repetition_penalty"},
      {R"("repetition_penalty":11)", "repetition_penalty"},
      {R"("min_tokens":-1)", "min_tokens"},
      {R"("logit_bias":[1])", "logit_bias"},
      {R"("logit_bias":{"x":1})", "logit_bias"},
      {R"("logit_bias":{"-1":1})", "logit_bias"},
      {R"("logit_bias":{"99999999999":1})", "logit_bias"},
      {R"("logit_bias":{"5":101})", "logit_bias"},
      {R"("logit_bias":{"5":"1"})", "logit_bias"},
      {R"("logit_bias":{"5":1,"05":2})", "logit_bias"},
      {R"("frequency_penalty":-2.5)", "frequency_penalty"},
      {R"("user":7)", "user"},
  };
  for (const Case& c : common) {
    const std::string completion = std::string(R"({"prompt":"x",)") + c.extra + "}";
    EXPECT_EQ(CompletionError(completion).param, c.param) << completion;
    const std::string chat = std::string(R"({"messages":[{"role":"user","content":"x"}],)") + c.extra + "}";
    EXPECT_EQ(ChatError(chat).param, c.param) << chat;
  }
  const Case chat_only[] = {
      {R"("response_format":{"type":"json_object","schema":{}})", "response_format.schema"},
      {R"("response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{"pattern":"a"}}})",
       "response_format.json_schema.schema"},
      {R"("tool_choice":"required")", "tool_choice"},  // without tools
      {R"("tool_choice":{"type":"function","function":{"name":"f"}})", "tool_choice"},
      {R"("parallel_tool_calls":"no")", "parallel_tool_calls"},
      {R"("top_logprobs":2)", "top_logprobs"},  // without logprobs
      {R"("chat_template_kwargs":{"tools":[]})", "chat_template_kwargs.tools"},  // the request's own
      {R"("store":true)", "store"},
      {R"("service_tier":"flex")", "service_tier"},
      {R"("metadata":"x")", "metadata"},
      {R"("modalities":["text","audio"])", "modalities"},
      {R"("reasoning_effort":"low")", "reasoning_effort"},
      {R"("functions":[{"name":"f"}])", "functions"},
      {R"("prediction":{"type":"content","content":"x"})", "prediction"},
      {R"("suffix":"x")", "suffix"},  // a completions field
      {R"("echo":true)", "echo"},     // a completions field
  };
  for (const Case& c : chat_only) {
    const std::string chat = std::string(R"({"messages":[{"role":"user","content":"x"}],)") + c.extra + "}";
    ApiError e = ChatError(chat);
    EXPECT_EQ(e.http_status, 400) << chat;
    EXPECT_EQ(e.param, c.param) << chat << " -> " << e.message;
  }
  // Chat-only fields are unknown to completions; suffix is refused there when it asks for text.
  EXPECT_EQ(CompletionError(R"({"prompt":"x","response_format":{"type":"text"}})").param, "response_format");
  EXPECT_EQ(CompletionError(R"({"prompt":"x","messages":[]})").param, "messages");
  EXPECT_EQ(CompletionError(R"({"prompt":"x","suffix":"tail"})").param, "suffix");
  EXPECT_EQ(CompletionError(R"({"prompt":"x","frobnicate":1})").message,
            "Unrecognized request argument supplied: frobnicate");
}

// What the official SDK and common clients send that has no effect on the output passes.
TEST(HttpProtocol, AcceptsHarmlessClientFields) {
  ChatRequest r;
  auto e = ParseChatRequest(
      R"({"messages":[{"role":"user","content":"x"}],"user":"u1","metadata":{"k":"v"},"store":false,
          "service_tier":"auto","parallel_tool_calls":true,"tool_choice":"auto","n":1,
          "response_format":{"type":"text"},"logprobs":false,"top_logprobs":0,"modalities":["text"],
          "stream_options":{"include_usage":false},"reasoning_effort":null,"functions":null,
          "min_p":0,"repetition_penalty":1,"min_tokens":0,"logit_bias":{},"frequency_penalty":0})",
      &r);
  EXPECT_FALSE(e) << e->message;
  CompletionRequest c;
  auto ce = ParseCompletionRequest(R"({"prompt":"x","user":"u","suffix":null,"logit_bias":null,"echo":false})", &c);
  EXPECT_FALSE(ce) << ce->message;
}

TEST(HttpProtocol, SamplingExtensionsReachTheEngine) {
  ChatRequest r;
  auto e = ParseChatRequest(
      R"({"messages":[{"role":"user","content":"x"}],"logit_bias":{"5":-100,"17":2.5},"min_p":0.05,
          "presence_penalty":0.5,"frequency_penalty":-1,"repetition_penalty":1.3,"min_tokens":4})",
      &r);
  ASSERT_FALSE(e) << e->message;
  const engine::SamplingParams& p = r.common.params;
  EXPECT_EQ(p.logit_bias, (std::vector<std::pair<int32_t, float>>{{5, -100.0f}, {17, 2.5f}}));
  EXPECT_FLOAT_EQ(p.min_p, 0.05f);
  EXPECT_FLOAT_EQ(p.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(p.frequency_penalty, -1.0f);
  EXPECT_FLOAT_EQ(p.repetition_penalty, 1.3f);
  EXPECT_EQ(p.min_tokens, 4);

  // logit_bias ids are checked against the vocabulary with the prompt; min_tokens against the
  // max_tokens the request resolves to (explicit, or the endpoint's default).
  CompletionRequest c;
  ASSERT_FALSE(ParseCompletionRequest(R"({"prompt":[1],"logit_bias":{"100":1}})", &c));
  const std::vector<int32_t> prompt = {1};
  auto v = ValidatePrompt(prompt, 100, 64, 16, &c.common);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->param, "logit_bias");
  EXPECT_EQ(v->code, "invalid_token_id");
  ASSERT_FALSE(ParseCompletionRequest(R"({"prompt":[1],"logit_bias":{"99":1}})", &c));
  EXPECT_FALSE(ValidatePrompt(prompt, 100, 64, 16, &c.common));
  ASSERT_FALSE(ParseCompletionRequest(R"({"prompt":[1],"min_tokens":17})", &c));
  v = ValidatePrompt(prompt, 100, 64, 16, &c.common);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->param, "min_tokens");
  ASSERT_FALSE(ParseCompletionRequest(R"({"prompt":[1],"min_tokens":5,"max_tokens":4})", &c));
  v = ValidatePrompt(prompt, 100, 64, 16, &c.common);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->param, "min_tokens");
  ASSERT_FALSE(ParseCompletionRequest(R"({"prompt":[1],"min_tokens":16})", &c));
  EXPECT_FALSE(ValidatePrompt(prompt, 100, 64, 16, &c.common));
}

TEST(HttpProtocol, BadJsonAndNonObjectBodies) {
  ApiError e = CompletionError("{not json");
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(e.code, "invalid_json");
  EXPECT_EQ(CompletionError("[1,2]").http_status, 400);
  EXPECT_EQ(CompletionError("").code, "invalid_json");
  EXPECT_EQ(ChatError("\"text\"").http_status, 400);
}

TEST(HttpProtocol, ValidatePromptVocabularyAndLength) {
  CommonRequest c;
  auto e = ValidatePrompt({1, 4096}, 4096, 64, 16, &c);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, "invalid_token_id");
  EXPECT_EQ(e->param, "prompt");

  c = CommonRequest{};
  c.max_tokens = 60;
  e = ValidatePrompt(std::vector<int32_t>(5, 1), 4096, 64, 16, &c);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, "context_length_exceeded");
  EXPECT_EQ(e->param, "max_tokens");
  std::cout << "too long: " << e->message << "\n";

  c = CommonRequest{};
  c.max_tokens = 59;
  EXPECT_FALSE(ValidatePrompt(std::vector<int32_t>(5, 1), 4096, 64, 16, &c));
  EXPECT_EQ(c.params.max_tokens, 59);

  c = CommonRequest{};  // completions default 16, capped by what is left
  EXPECT_FALSE(ValidatePrompt(std::vector<int32_t>(60, 1), 4096, 64, 16, &c));
  EXPECT_EQ(c.params.max_tokens, 4);
  c = CommonRequest{};  // chat default: everything left
  EXPECT_FALSE(ValidatePrompt(std::vector<int32_t>(10, 1), 4096, 64, 0, &c));
  EXPECT_EQ(c.params.max_tokens, 54);
  c = CommonRequest{};
  e = ValidatePrompt(std::vector<int32_t>(64, 1), 4096, 64, 0, &c);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, "context_length_exceeded");
}

TEST(HttpProtocol, ErrorShape) {
  ApiError e = InvalidRequest("bad n", "n");
  Json j = Json::parse(ErrorJson(e));
  std::cout << ErrorJson(e) << "\n";
  ASSERT_TRUE(j.contains("error"));
  EXPECT_EQ(j["error"]["message"], "bad n");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "n");
  EXPECT_TRUE(j["error"]["code"].is_null());
  EXPECT_EQ(j["error"].size(), 4u);
}

}  // namespace
}  // namespace tandem::openai
