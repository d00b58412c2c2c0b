#include "engine/tokenizer/chat_prompt.h"

#include <utility>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace tandem::tokenizer {
namespace {

using Json = nlohmann::ordered_json;

// Request JSON (tool definitions, tool-call arguments) keeps its key order, as Python's json
// does, because tojson writes it back into the prompt. nlohmann's ordered object finds keys by
// a linear scan, so one object with very many keys would cost quadratic time: such an object
// is refused (no real schema comes near this).
constexpr int kMaxObjectMembers = 1024;

std::optional<Json> ParseOrdered(const std::string& text) {
  std::vector<int> members;  // per open object
  bool too_many = false;
  Json j = Json::parse(
      text,
      [&](int, Json::parse_event_t event, Json&) {
        if (event == Json::parse_event_t::object_start) members.push_back(0);
        if (event == Json::parse_event_t::object_end && !members.empty()) members.pop_back();
        if (event == Json::parse_event_t::key && !members.empty() && ++members.back() > kMaxObjectMembers) {
          too_many = true;
          return false;  // dropped, so the scans stay short; the whole text is refused below
        }
        return true;
      },
      /*allow_exceptions=*/false);
  if (j.is_discarded() || too_many) return std::nullopt;
  return j;
}

absl::StatusOr<Json> Context(const std::vector<ChatMessage>& messages, const ChatTemplateOptions& options) {
  Json msgs = Json::array();
  for (const ChatMessage& m : messages) {
    Json msg = {{"role", m.role}, {"content", m.content}};
    if (m.reasoning_content) msg["reasoning_content"] = *m.reasoning_content;
    if (!m.tool_calls.empty()) {
      Json calls = Json::array();
      for (const ChatToolCall& c : m.tool_calls) {
        // vLLM does the same: templates expect arguments as an object; a text that is not one
        // (or is empty) is kept as sent and printed verbatim by templates that test `is string`.
        std::optional<Json> args = ParseOrdered(c.arguments);
        Json fn = {{"name", c.name}, {"arguments", args && args->is_object() ? *args : Json(c.arguments)}};
        calls.push_back({{"type", "function"}, {"function", std::move(fn)}});
      }
      msg["tool_calls"] = std::move(calls);
    }
    msgs.push_back(std::move(msg));
  }
  Json ctx = {{"messages", std::move(msgs)},
              {"add_generation_prompt", options.add_generation_prompt},
              {"enable_thinking", options.enable_thinking}};
  if (!options.tools.empty()) {
    Json tools = Json::array();
    for (const std::string& t : options.tools) {
      std::optional<Json> tool = ParseOrdered(t);
      if (!tool) return absl::InvalidArgumentError("a tool definition is not JSON or has an object with too many members");
      tools.push_back(std::move(*tool));
    }
    ctx["tools"] = std::move(tools);
  }
  if (!options.documents.empty()) {
    std::optional<Json> documents = ParseOrdered(options.documents);
    if (!documents) return absl::InvalidArgumentError("documents are not JSON or have an object with too many members");
    ctx["documents"] = std::move(*documents);
  }
  return ctx;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const ChatPrompt>> ChatPrompt::Load(const std::string& model_dir) {
  absl::StatusOr<jinja::ModelChatTemplate> t = jinja::LoadModelChatTemplate(model_dir);
  if (absl::IsNotFound(t.status())) {
    TLOG(INFO) << t.status().message() << ": chat prompts use the built-in Qwen3 ChatML";
    return ChatML();
  }
  if (!t.ok()) return t.status();
  TLOG(INFO) << "chat template: " << t->source;
  return std::shared_ptr<const ChatPrompt>(new ChatPrompt(std::move(*t)));
}

std::shared_ptr<const ChatPrompt> ChatPrompt::ChatML() {
  return std::shared_ptr<const ChatPrompt>(new ChatPrompt(std::nullopt));
}

absl::StatusOr<std::string> ChatPrompt::Render(const std::vector<ChatMessage>& messages,
                                               const ChatTemplateOptions& options) const {
  if (!model_) return ApplyChatTemplate(messages, options);
  absl::StatusOr<Json> ctx = Context(messages, options);
  if (!ctx.ok()) return ctx.status();
  (*ctx)["bos_token"] = model_->bos_token;
  (*ctx)["eos_token"] = model_->eos_token;
  return model_->tmpl.Render(*ctx);
}

}  // namespace tandem::tokenizer
