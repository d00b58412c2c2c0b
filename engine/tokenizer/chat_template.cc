// A line-by-line transcription of the logic of Qwen3's Jinja chat template (see
// tokenizer_config.json in the Qwen3 model folders); comments quote the Jinja where it helps.
#include "engine/tokenizer/chat_template.h"

#include <string_view>

#include <nlohmann/json.hpp>

namespace tandem::tokenizer {
namespace {

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool EndsWith(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

// Python's str.lstrip('\n'), rstrip('\n') and strip('\n').
std::string_view LStripNewlines(std::string_view s) {
  while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
  return s;
}
std::string_view RStripNewlines(std::string_view s) {
  while (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  return s;
}
std::string_view StripNewlines(std::string_view s) { return RStripNewlines(LStripNewlines(s)); }

// Python json.dumps(x, ensure_ascii=False) with default separators, which is what the
// `tojson` filter of transformers' Jinja environment produces.
void DumpPythonStyle(const nlohmann::ordered_json& j, std::string* out) {
  if (j.is_object()) {
    out->push_back('{');
    bool first = true;
    for (const auto& [key, value] : j.items()) {
      if (!first) out->append(", ");
      first = false;
      out->append(nlohmann::ordered_json(key).dump(-1, ' ', false));
      out->append(": ");
      DumpPythonStyle(value, out);
    }
    out->push_back('}');
  } else if (j.is_array()) {
    out->push_back('[');
    for (size_t i = 0; i < j.size(); ++i) {
      if (i) out->append(", ");
      DumpPythonStyle(j[i], out);
    }
    out->push_back(']');
  } else {
    out->append(j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
  }
}

std::string ToolToJson(const std::string& tool) {
  auto j = nlohmann::ordered_json::parse(tool, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return tool;
  std::string out;
  DumpPythonStyle(j, &out);
  return out;
}

bool IsToolResponse(std::string_view content) {
  return StartsWith(content, "<tool_response>") && EndsWith(content, "</tool_response>");
}

}  // namespace

std::string ApplyChatTemplate(const std::vector<ChatMessage>& messages,
                              const ChatTemplateOptions& options) {
  std::string out;
  const bool first_is_system = !messages.empty() && messages[0].role == "system";
  if (!options.tools.empty()) {
    out += "<|im_start|>system\n";
    if (first_is_system) out += messages[0].content + "\n\n";
    out +=
        "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
    for (const auto& tool : options.tools) out += "\n" + ToolToJson(tool);
    out +=
        "\n</tools>\n\nFor each function call, return a json object with function name and "
        "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
        "<function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n";
  } else if (first_is_system) {
    out += "<|im_start|>system\n" + messages[0].content + "<|im_end|>\n";
  }

  // The last real user query: scanning backwards, the first user message that is not just a
  // wrapped tool response. Assistant turns after it keep their reasoning.
  const int n = static_cast<int>(messages.size());
  int last_query_index = n - 1;
  for (int i = n - 1; i >= 0; --i) {
    if (messages[i].role == "user" && !IsToolResponse(messages[i].content)) {
      last_query_index = i;
      break;
    }
  }

  for (int i = 0; i < n; ++i) {
    const ChatMessage& m = messages[i];
    const bool last = i == n - 1;
    if (m.role == "user" || (m.role == "system" && i != 0)) {
      out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    } else if (m.role == "assistant") {
      std::string_view content = m.content;
      std::string_view reasoning;
      if (m.reasoning_content) {
        reasoning = *m.reasoning_content;
      } else if (content.find("</think>") != std::string_view::npos) {
        // content.split('</think>')[-1].lstrip('\n')
        const std::string_view full = m.content;
        content = LStripNewlines(full.substr(full.rfind("</think>") + 8));
        // content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n')
        std::string_view before = RStripNewlines(full.substr(0, full.find("</think>")));
        const size_t open = before.rfind("<think>");
        if (open != std::string_view::npos) before = before.substr(open + 7);
        reasoning = LStripNewlines(before);
      }
      if (i > last_query_index && (last || !reasoning.empty())) {
        out += "<|im_start|>" + m.role + "\n<think>\n";
        out += StripNewlines(reasoning);
        out += "\n</think>\n\n";
        out += LStripNewlines(content);
      } else {
        out += "<|im_start|>" + m.role + "\n";
        out += content;
      }
      for (size_t k = 0; k < m.tool_calls.size(); ++k) {
        if ((k == 0 && !content.empty()) || k > 0) out += "\n";
        out += "<tool_call>\n{\"name\": \"" + m.tool_calls[k].name + "\", \"arguments\": ";
        out += m.tool_calls[k].arguments + "}\n</tool_call>";
      }
      out += "<|im_end|>\n";
    } else if (m.role == "tool") {
      if (i == 0 || messages[i - 1].role != "tool") out += "<|im_start|>user";
      out += "\n<tool_response>\n" + m.content + "\n</tool_response>";
      if (last || messages[i + 1].role != "tool") out += "<|im_end|>\n";
    }
  }
  if (options.add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    if (!options.enable_thinking) out += "<think>\n\n</think>\n\n";
  }
  return out;
}

}  // namespace tandem::tokenizer
