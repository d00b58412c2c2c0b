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

// Tool-call arguments as vLLM hands them to templates (chat_utils' _postprocess_messages):
// empty means {}, JSON text becomes its value (an object for any real call, which is what
// Qwen's templates iterate or print with tojson). Where vLLM fails the request on text that is
// not JSON, it is kept as the string here: templates that test `is string` print it verbatim.
Json ToolCallArguments(const std::string& text) {
  if (text.empty()) return Json::object();
  std::optional<Json> args = ParseOrdered(text);
  return args ? *args : Json(text);
}

absl::StatusOr<Json> Context(const std::vector<ChatMessage>& messages, const ChatTemplateOptions& options) {
  Json msgs = Json::array();
  for (const ChatMessage& m : messages) {
    // The keys in the order vLLM's parse_chat_messages writes them, for templates that iterate
    // a message or print it with tojson.
    Json msg = {{"role", m.role}, {"content", m.content}};
    if (!m.tool_calls.empty()) {
      Json calls = Json::array();
      for (const ChatToolCall& c : m.tool_calls) {
        Json call = Json::object();
        if (!c.id.empty()) call["id"] = c.id;
        call["type"] = "function";
        call["function"] = {{"name", c.name}, {"arguments", ToolCallArguments(c.arguments)}};
        calls.push_back(std::move(call));
      }
      msg["tool_calls"] = std::move(calls);
    }
    if (m.reasoning_content) msg["reasoning_content"] = *m.reasoning_content;
    if (!m.tool_call_id.empty()) msg["tool_call_id"] = m.tool_call_id;
    if (!m.name.empty()) msg["name"] = m.name;
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
  if (!options.template_kwargs.empty()) {
    std::optional<Json> kwargs = ParseOrdered(options.template_kwargs);
    if (!kwargs || !kwargs->is_object()) return absl::InvalidArgumentError("chat_template_kwargs must be a JSON object");
    for (auto& [key, value] : kwargs->items()) {
      if (key == "messages" || key == "tools" || key == "documents" || key == "bos_token" || key == "eos_token") {
        return absl::InvalidArgumentError(absl::StrCat("chat_template_kwargs cannot set '", key, "'"));
      }
      ctx[key] = std::move(value);
    }
  }
  return ctx;
}

}  // namespace

ChatPrompt::ChatPrompt(std::optional<jinja::ModelChatTemplate> model) : model_(std::move(model)) {
  if (model_ && model_->text.find("<function=") != std::string::npos) tool_call_syntax_ = ToolCallSyntax::kXml;
}

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
