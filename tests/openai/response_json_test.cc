// response_json: the shapes of completion and chat responses and chunks with several choices,
// logprobs in each endpoint's shape, tool calls whole and as stream deltas, usage, models.
#include "openai/response_json.h"

#include <gtest/gtest.h>

#include <iostream>
#include <limits>

#include "nlohmann/json.hpp"

namespace tandem::openai {
namespace {

using Json = nlohmann::json;

TEST(ResponseJson, CompletionWithChoicesAndTokenIds) {
  ResponseHeader h{"cmpl-1", 1700000000, "tiny"};
  std::vector<int32_t> ids = {5, 6};
  std::vector<CompletionChoice> choices(2);
  choices[0].text = "ab";
  choices[0].finish_reason = "length";
  choices[0].token_ids = &ids;
  choices[1].index = 1;
  choices[1].text = std::string("a\xff", 2);  // invalid UTF-8 from a model must not break the JSON
  choices[1].finish_reason = "stop";
  Json c = Json::parse(CompletionResponseJson(h, choices, Usage{3, 2}));
  EXPECT_EQ(c["object"], "text_completion");
  ASSERT_EQ(c["choices"].size(), 2u);
  EXPECT_EQ(c["choices"][0]["text"], "ab");
  EXPECT_EQ(c["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(c["choices"][0]["token_ids"], Json(ids));
  EXPECT_TRUE(c["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(c["choices"][1]["index"], 1);
  EXPECT_EQ(c["choices"][1]["text"], "a\xEF\xBF\xBD");
  EXPECT_FALSE(c["choices"][1].contains("token_ids"));
  EXPECT_EQ(c["usage"]["total_tokens"], 5);
}

TEST(ResponseJson, CompletionLogprobsAreParallelArraysWithOffsets) {
  ResponseHeader h{"cmpl-1", 1, "tiny"};
  // An echoed prompt's first token has no logprob; offsets count characters ("é" is one).
  std::vector<LogprobEntry> entries = {
      {"Hi", std::nullopt, {}},
      {" é", -0.5f, {{" é", -0.5f}, {" e", -1.5f}}},
      {"!", -std::numeric_limits<float>::infinity(), {{"?", -0.1f}}},
  };
  CompletionChoice choice;
  choice.text = "Hi é!";
  choice.logprobs = &entries;
  choice.finish_reason = "stop";
  Json j = Json::parse(CompletionResponseJson(h, {choice}, Usage{}));
  const Json& lp = j["choices"][0]["logprobs"];
  std::cout << lp.dump() << "\n";
  EXPECT_EQ(lp["tokens"], Json({"Hi", " é", "!"}));
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());
  EXPECT_DOUBLE_EQ(lp["token_logprobs"][1].get<double>(), -0.5);
  EXPECT_DOUBLE_EQ(lp["token_logprobs"][2].get<double>(), -9999.0);  // JSON has no -inf
  EXPECT_TRUE(lp["top_logprobs"][0].is_null());
  EXPECT_DOUBLE_EQ(lp["top_logprobs"][1][" e"].get<double>(), -1.5);
  EXPECT_EQ(lp["top_logprobs"][1].size(), 2u);
  // The chosen token is in its dict even when not among the alternatives (as vLLM writes it).
  EXPECT_DOUBLE_EQ(lp["top_logprobs"][2]["!"].get<double>(), -9999.0);
  EXPECT_EQ(lp["top_logprobs"][2].size(), 2u);
  EXPECT_EQ(lp["text_offset"], Json({0, 2, 4}));
  EXPECT_EQ(TextOffsetAfter(entries, 10), 15);

  // A streamed piece starts its offsets where the previous one ended.
  std::vector<LogprobEntry> piece = {{"ab", -1.0f, {}}};
  choice.logprobs = &piece;
  choice.text_offset = 7;
  Json chunk = Json::parse(CompletionChunkJson(h, choice, false));
  EXPECT_EQ(chunk["choices"][0]["logprobs"]["text_offset"], Json({7}));
}

TEST(ResponseJson, ChatMessageWithToolCallsAndLogprobs) {
  ResponseHeader h{"chatcmpl-1", 1, "tiny"};
  std::vector<LogprobEntry> entries = {{"\xe2\x80", -0.25f, {{"\xe2\x80", -0.25f}, {"a", -2.0f}}}};
  ChatChoice tool;
  tool.tool_calls = {ToolCall{0, "call_abc", "get_weather", R"({"city":"Paris"})"}};
  tool.finish_reason = "tool_calls";
  ChatChoice text;
  text.index = 1;
  text.content = "hey";
  text.finish_reason = "stop";
  text.logprobs = &entries;
  Json chat = Json::parse(ChatResponseJson(h, {tool, text}, Usage{3, 1}));
  std::cout << chat.dump() << "\n";
  EXPECT_EQ(chat["object"], "chat.completion");
  const Json& m0 = chat["choices"][0]["message"];
  EXPECT_EQ(m0["role"], "assistant");
  EXPECT_TRUE(m0["content"].is_null());  // only calls: null content, as OpenAI
  ASSERT_EQ(m0["tool_calls"].size(), 1u);
  EXPECT_EQ(m0["tool_calls"][0]["id"], "call_abc");
  EXPECT_EQ(m0["tool_calls"][0]["type"], "function");
  EXPECT_EQ(m0["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(m0["tool_calls"][0]["function"]["arguments"], R"({"city":"Paris"})");
  EXPECT_FALSE(m0["tool_calls"][0].contains("index"));
  EXPECT_EQ(chat["choices"][0]["finish_reason"], "tool_calls");
  const Json& m1 = chat["choices"][1]["message"];
  EXPECT_EQ(m1["content"], "hey");
  EXPECT_FALSE(m1.contains("tool_calls"));
  // Chat logprobs: content entries with bytes (a partial UTF-8 character keeps its bytes).
  const Json& lp = chat["choices"][1]["logprobs"];
  EXPECT_TRUE(lp["refusal"].is_null());
  EXPECT_EQ(lp["content"][0]["bytes"], Json({0xe2, 0x80}));
  EXPECT_DOUBLE_EQ(lp["content"][0]["logprob"].get<double>(), -0.25);
  ASSERT_EQ(lp["content"][0]["top_logprobs"].size(), 2u);
  EXPECT_EQ(lp["content"][0]["top_logprobs"][1]["token"], "a");
  EXPECT_EQ(lp["content"][0]["top_logprobs"][1]["bytes"], Json({97}));
}

TEST(ResponseJson, ChatChunksAndToolCallDeltas) {
  ResponseHeader h{"chatcmpl-1", 1700000000, "tiny"};
  ChatChoice first;
  first.index = 2;
  first.role = "assistant";
  first.content = "";
  const std::string event = SseEvent(ChatChunkJson(h, first, true));
  std::cout << event;
  ASSERT_EQ(event.rfind("data: ", 0), 0u);
  ASSERT_EQ(event.substr(event.size() - 2), "\n\n");
  Json j = Json::parse(event.substr(6));
  EXPECT_EQ(j["object"], "chat.completion.chunk");
  EXPECT_EQ(j["choices"][0]["index"], 2);
  EXPECT_EQ(j["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(j["choices"][0]["delta"]["content"], "");
  EXPECT_TRUE(j["choices"][0]["finish_reason"].is_null());
  EXPECT_TRUE(j.contains("usage") && j["usage"].is_null());

  ChatChoice last;
  last.finish_reason = "stop";
  Json end = Json::parse(ChatChunkJson(h, last, false));
  EXPECT_TRUE(end["choices"][0]["delta"].is_object());
  EXPECT_TRUE(end["choices"][0]["delta"].empty());
  EXPECT_EQ(end["choices"][0]["finish_reason"], "stop");
  EXPECT_FALSE(end.contains("usage"));

  // A call streams as vLLM does: index, id, type and name with empty arguments, then arguments.
  std::vector<std::string> deltas = ToolCallDeltas(ToolCall{1, "call_x", "f", R"({"a":1})"});
  ASSERT_EQ(deltas.size(), 2u);
  ChatChoice piece;
  piece.tool_call_deltas = deltas[0];
  Json head = Json::parse(ChatChunkJson(h, piece, false))["choices"][0]["delta"]["tool_calls"][0];
  EXPECT_EQ(head["index"], 1);
  EXPECT_EQ(head["id"], "call_x");
  EXPECT_EQ(head["type"], "function");
  EXPECT_EQ(head["function"]["name"], "f");
  EXPECT_EQ(head["function"]["arguments"], "");
  piece.tool_call_deltas = deltas[1];
  Json args = Json::parse(ChatChunkJson(h, piece, false))["choices"][0]["delta"]["tool_calls"][0];
  EXPECT_EQ(args["index"], 1);
  EXPECT_FALSE(args.contains("id"));
  EXPECT_EQ(args["function"]["arguments"], R"({"a":1})");

  Json usage = Json::parse(UsageChunkJson(h, true, Usage{4, 2}));
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 2);
  EXPECT_EQ(SseDone(), "data: [DONE]\n\n");
}

TEST(ResponseJson, Models) {
  Json models = Json::parse(ModelsJson("tiny", 1, 4096));
  EXPECT_EQ(models["object"], "list");
  EXPECT_EQ(models["data"][0]["id"], "tiny");
  EXPECT_EQ(models["data"][0]["object"], "model");
  Json model = Json::parse(ModelJson("tiny", 1, 4096));
  EXPECT_EQ(model, models["data"][0]);
  EXPECT_EQ(model["max_model_len"], 4096);
}

}  // namespace
}  // namespace tandem::openai
