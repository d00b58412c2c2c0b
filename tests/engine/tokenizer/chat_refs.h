// The reference renderings of the real Qwen3 chat template (testdata/chat_template_refs.json,
// made with Python's jinja2 by make_chat_refs.py) and their conversations as the server's
// ChatMessage list: read by the ChatML, chat prompt and server tests. ordered_json keeps the
// tool definitions' key order, which tojson writes back into the prompt.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/tokenizer/chat_template.h"
#include "tests/common/test_util.h"

namespace tandem::tokenizer::testing {

inline nlohmann::ordered_json LoadChatRefs() {
  return nlohmann::ordered_json::parse(
      ::tandem::testing::ReadTextFile(std::string(TOKENIZER_TEST_DIR) + "/testdata/chat_template_refs.json"));
}

inline std::vector<ChatMessage> ChatRefMessages(const nlohmann::ordered_json& messages) {
  std::vector<ChatMessage> out;
  for (const auto& m : messages) {
    ChatMessage msg;
    msg.role = m["role"].get<std::string>();
    msg.content = m["content"].get<std::string>();
    if (m.contains("reasoning_content")) msg.reasoning_content = m["reasoning_content"].get<std::string>();
    if (m.contains("tool_calls")) {
      for (const auto& c : m["tool_calls"]) {
        msg.tool_calls.push_back({c["function"]["name"].get<std::string>(), c["function"]["arguments"].get<std::string>()});
      }
    }
    out.push_back(std::move(msg));
  }
  return out;
}

// Tools as the request carries them: the JSON text of each definition.
inline std::vector<std::string> ChatRefTools(const nlohmann::ordered_json& tools) {
  std::vector<std::string> out;
  for (const auto& t : tools) out.push_back(t.dump());
  return out;
}

}  // namespace tandem::tokenizer::testing
