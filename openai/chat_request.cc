// ParseChatRequest: the conversation (messages with tool calls and tool results), the tools and
// how they may be used (tool_choice, parallel_tool_calls), and chat_template_kwargs. The fields
// chat shares with completions are read by ParseBody (openai_protocol.cc).
#include <algorithm>
#include <set>

#include "openai/openai_protocol.h"
#include "openai/request_fields.h"

namespace tandem::openai {
namespace {

using Json = RequestJson;

std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

// Refuses keys of `object` outside `known` (a null value counts as absent), naming the path.
template <size_t N>
std::optional<ApiError> RefuseUnknownKeys(const Json& object, const std::string& path,
                                          const std::string_view (&known)[N]) {
  for (const auto& [key, value] : object.items()) {
    if (!value.is_null() && std::find(std::begin(known), std::end(known), key) == std::end(known)) {
      return InvalidRequest("Unrecognized request argument supplied: " + path + "." + key, path + "." + key);
    }
  }
  return std::nullopt;
}

// Message content: a string, null, or an array of {"type": "text", "text": ...} parts.
std::optional<ApiError> ReadContent(const Json& msg, const std::string& param, std::string* out) {
  auto it = msg.find("content");
  if (it == msg.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) {
    *out = it->get<std::string>();
    return std::nullopt;
  }
  if (!it->is_array()) return WrongType(param, "a string or an array of content parts", *it);
  for (const Json& part : *it) {
    if (!part.is_object()) return WrongType(param, "an array of content parts (objects)", part);
    auto type = part.find("type");
    if (type == part.end() || !type->is_string() || type->get<std::string>() != "text") {
      return InvalidRequest("only content parts of type 'text' are supported", param);
    }
    auto text = part.find("text");
    if (text == part.end() || !text->is_string()) {
      return InvalidRequest("a 'text' content part needs a string 'text'", param);
    }
    out->append(text->get<std::string>());
  }
  return std::nullopt;
}

// OpenAI's function names: 1-64 of [a-zA-Z0-9_-]. The same rule keeps a name safe to write into
// a tool-call grammar and the model's call format.
bool ValidFunctionName(const std::string& name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

// An assistant message's earlier calls: {"id", "type": "function", "function": {"name",
// "arguments": JSON text}}. The id may be missing (vLLM takes such calls, and clients written
// for it send them); the rest is as OpenAI requires it.
std::optional<ApiError> ReadToolCalls(const Json& calls, const std::string& param,
                                      std::vector<tokenizer::ChatToolCall>* out) {
  if (!calls.is_array()) return WrongType(param, "an array", calls);
  for (size_t i = 0; i < calls.size(); ++i) {
    const Json& call = calls[i];
    const std::string at = param + "[" + std::to_string(i) + "]";
    if (!call.is_object()) return WrongType(at, "an object", call);
    static constexpr std::string_view kCallKeys[] = {"id", "type", "function", "index"};
    if (auto e = RefuseUnknownKeys(call, at, kCallKeys)) return e;
    tokenizer::ChatToolCall c;
    std::optional<std::string> id, type;
    if (auto e = ReadString(call, "id", at + ".id", &id)) return e;
    c.id = id.value_or("");
    if (auto e = ReadString(call, "type", at + ".type", &type)) return e;
    if (type && *type != "function") {
      return InvalidRequest("'" + at + ".type' must be 'function', got '" + *type + "'", at + ".type");
    }
    auto fn = call.find("function");
    if (fn == call.end() || !fn->is_object()) {
      return InvalidRequest("'" + at + ".function' must be an object with name and arguments", at + ".function");
    }
    static constexpr std::string_view kFunctionKeys[] = {"name", "arguments"};
    if (auto e = RefuseUnknownKeys(*fn, at + ".function", kFunctionKeys)) return e;
    std::optional<std::string> name, arguments;
    if (auto e = ReadString(*fn, "name", at + ".function.name", &name)) return e;
    if (!name || name->empty()) {
      return InvalidRequest("'" + at + ".function.name' is required", at + ".function.name");
    }
    c.name = *name;
    if (auto e = ReadString(*fn, "arguments", at + ".function.arguments", &arguments)) return e;
    if (!arguments) {
      return InvalidRequest("'" + at + ".function.arguments' is required (a JSON object as a string)",
                            at + ".function.arguments");
    }
    c.arguments = *arguments;
    out->push_back(std::move(c));
  }
  return std::nullopt;
}

std::optional<ApiError> ReadMessage(const Json& m, const std::string& param, tokenizer::ChatMessage* msg) {
  if (!m.is_object()) return WrongType(param, "an object", m);
  // `refusal` (OpenAI's responses carry it, null) lets a client send a returned message back.
  static constexpr std::string_view kKeys[] = {"role", "content", "name", "tool_calls", "tool_call_id",
                                               "reasoning_content", "refusal"};
  if (auto e = RefuseUnknownKeys(m, param, kKeys)) return e;
  auto role = m.find("role");
  if (role == m.end() || !role->is_string()) return InvalidRequest(param + " needs a string 'role'", param + ".role");
  msg->role = role->get<std::string>();
  if (msg->role == "developer") msg->role = "system";  // newer OpenAI name for the system role
  if (msg->role != "system" && msg->role != "user" && msg->role != "assistant" && msg->role != "tool") {
    return InvalidRequest("unknown role '" + msg->role + "'", param + ".role");
  }
  if (auto e = ReadContent(m, param + ".content", &msg->content)) return e;
  std::optional<std::string> name, tool_call_id, reasoning, refusal;
  if (auto e = ReadString(m, "name", param + ".name", &name)) return e;
  msg->name = name.value_or("");
  if (auto e = ReadString(m, "refusal", param + ".refusal", &refusal)) return e;
  if (refusal) return InvalidRequest("'" + param + ".refusal' is not supported (send null)", param + ".refusal");
  if (auto e = ReadString(m, "reasoning_content", param + ".reasoning_content", &reasoning)) return e;
  if (reasoning && msg->role != "assistant") {
    return InvalidRequest("only assistant messages carry reasoning_content", param + ".reasoning_content");
  }
  msg->reasoning_content = reasoning;
  if (auto tc = m.find("tool_calls"); tc != m.end() && !tc->is_null()) {
    if (msg->role != "assistant") {
      return InvalidRequest("only assistant messages carry tool_calls", param + ".tool_calls");
    }
    if (auto e = ReadToolCalls(*tc, param + ".tool_calls", &msg->tool_calls)) return e;
  }
  if (auto e = ReadString(m, "tool_call_id", param + ".tool_call_id", &tool_call_id)) return e;
  if (msg->role == "tool") {
    // The id ties the result to the call it answers. OpenAI requires it; vLLM does not, and Qwen's
    // templates do not show it, so a result without one is taken (matched by position).
    msg->tool_call_id = tool_call_id.value_or("");
  } else if (tool_call_id) {
    return InvalidRequest("only tool messages carry tool_call_id", param + ".tool_call_id");
  }
  return std::nullopt;
}

// tools: [{"type": "function", "function": {"name", "description"?, "parameters"?, "strict"?}}].
std::optional<ApiError> ReadTools(const Json& tools, ChatRequest* out) {
  if (!tools.is_array()) return WrongType("tools", "an array", tools);
  std::set<std::string> names;
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json& t = tools[i];
    const std::string at = "tools[" + std::to_string(i) + "]";
    if (!t.is_object()) return WrongType(at, "an object", t);
    static constexpr std::string_view kToolKeys[] = {"type", "function"};
    if (auto e = RefuseUnknownKeys(t, at, kToolKeys)) return e;
    auto type = t.find("type");
    if (type == t.end() || !type->is_string() || type->get<std::string>() != "function") {
      return InvalidRequest("'" + at + ".type' must be 'function'", at + ".type");
    }
    auto fn = t.find("function");
    if (fn == t.end() || !fn->is_object()) return InvalidRequest("'" + at + ".function' must be an object", at + ".function");
    static constexpr std::string_view kFunctionKeys[] = {"name", "description", "parameters", "strict"};
    if (auto e = RefuseUnknownKeys(*fn, at + ".function", kFunctionKeys)) return e;
    ChatTool tool;
    std::optional<std::string> name, description;
    if (auto e = ReadString(*fn, "name", at + ".function.name", &name)) return e;
    if (!name || !ValidFunctionName(*name)) {
      return InvalidRequest("'" + at + ".function.name' must be 1-64 letters, digits, '_' or '-'", at + ".function.name");
    }
    if (!names.insert(*name).second) {
      return InvalidRequest("two tools are named '" + *name + "'", at + ".function.name");
    }
    tool.name = *name;
    if (auto e = ReadString(*fn, "description", at + ".function.description", &description)) return e;
    bool strict = false;
    if (auto e = ReadBool(*fn, "strict", &strict)) {
      e->param = at + ".function.strict";
      return e;
    }
    if (auto p = fn->find("parameters"); p != fn->end() && !p->is_null()) {
      if (!p->is_object()) return WrongType(at + ".function.parameters", "a JSON schema object", *p);
      tool.parameters = Dump(*p);
    }
    out->tools.push_back(Dump(t));
    out->tool_functions.push_back(std::move(tool));
  }
  return std::nullopt;
}

// tool_choice: "auto" | "none" | "required" | {"type": "function", "function": {"name"}}.
std::optional<ApiError> ReadToolChoice(const Json& choice, ChatRequest* out) {
  ToolChoice& tc = out->tool_choice;
  if (choice.is_string()) {
    const std::string mode = choice.get<std::string>();
    if (mode == "auto") {
      tc.mode = ToolChoice::Mode::kAuto;
    } else if (mode == "none") {
      tc.mode = ToolChoice::Mode::kNone;
    } else if (mode == "required") {
      tc.mode = ToolChoice::Mode::kRequired;
    } else {
      return InvalidRequest("'tool_choice' must be 'auto', 'none', 'required' or a named function, got '" + mode + "'",
                            "tool_choice");
    }
  } else if (choice.is_object()) {
    static constexpr std::string_view kKeys[] = {"type", "function"};
    if (auto e = RefuseUnknownKeys(choice, "tool_choice", kKeys)) return e;
    auto type = choice.find("type");
    auto fn = choice.find("function");
    if (type == choice.end() || *type != "function" || fn == choice.end() || !fn->is_object() ||
        !fn->contains("name") || !(*fn)["name"].is_string()) {
      return InvalidRequest("a named 'tool_choice' is {\"type\": \"function\", \"function\": {\"name\": ...}}",
                            "tool_choice");
    }
    tc.mode = ToolChoice::Mode::kFunction;
    tc.function = (*fn)["name"].get<std::string>();
  } else {
    return WrongType("tool_choice", "a string or an object", choice);
  }
  if ((tc.mode == ToolChoice::Mode::kRequired || tc.mode == ToolChoice::Mode::kFunction) &&
      out->tool_functions.empty()) {
    return InvalidRequest("'tool_choice' " + Dump(choice) + " needs 'tools'", "tool_choice");
  }
  if (tc.mode == ToolChoice::Mode::kFunction &&
      std::none_of(out->tool_functions.begin(), out->tool_functions.end(),
                   [&](const ChatTool& t) { return t.name == tc.function; })) {
    return InvalidRequest("'tool_choice' names '" + tc.function + "', which is not among the tools", "tool_choice");
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> ParseChatRequest(std::string_view body, ChatRequest* out) {
  *out = ChatRequest{};
  Json j;
  if (auto e = ParseBody(body, /*chat=*/true, &j, &out->common)) return e;

  auto it = j.find("messages");
  if (it == j.end() || it->is_null()) return InvalidRequest("'messages' is required", "messages");
  if (!it->is_array()) return WrongType("messages", "an array", *it);
  if (it->empty()) return InvalidRequest("'messages' must not be empty", "messages");
  for (size_t i = 0; i < it->size(); ++i) {
    tokenizer::ChatMessage msg;
    if (auto e = ReadMessage((*it)[i], "messages[" + std::to_string(i) + "]", &msg)) return e;
    out->messages.push_back(std::move(msg));
  }

  // chat_template_kwargs: more variables for the model's template, every key passed on as vLLM
  // does (a template that does not read one renders as without it); enable_thinking is also read
  // here (the ChatML fallback knows only it). The variables the request fills itself are refused.
  if (auto kw = j.find("chat_template_kwargs"); kw != j.end() && !kw->is_null()) {
    if (!kw->is_object()) return WrongType("chat_template_kwargs", "an object", *kw);
    for (const std::string_view reserved : {"messages", "tools", "documents", "bos_token", "eos_token",
                                            "add_generation_prompt"}) {
      if (kw->contains(reserved)) {
        return InvalidRequest("'chat_template_kwargs." + std::string(reserved) + "' is set by the request itself",
                              "chat_template_kwargs." + std::string(reserved));
      }
    }
    if (auto e = ReadBool(*kw, "enable_thinking", &out->enable_thinking)) {
      e->param = "chat_template_kwargs.enable_thinking";
      return e;
    }
    out->template_kwargs = kw->dump();
  }
  if (auto tools = j.find("tools"); tools != j.end() && !tools->is_null()) {
    if (auto e = ReadTools(*tools, out)) return e;
  }
  if (auto choice = j.find("tool_choice"); choice != j.end() && !choice->is_null()) {
    if (auto e = ReadToolChoice(*choice, out)) return e;
  }
  if (auto e = ReadBool(j, "parallel_tool_calls", &out->parallel_tool_calls)) return e;
  // documents (as vLLM accepts them): retrieval results for templates that render them, a list of
  // objects passed to the template as given (key order kept); a template that does not read them
  // renders as without.
  if (auto docs = j.find("documents"); docs != j.end() && !docs->is_null()) {
    if (!docs->is_array()) return WrongType("documents", "an array", *docs);
    for (size_t i = 0; i < docs->size(); ++i) {
      if (!(*docs)[i].is_object()) return WrongType("documents[" + std::to_string(i) + "]", "an object", (*docs)[i]);
    }
    out->documents = docs->dump();
  }
  return std::nullopt;
}

}  // namespace tandem::openai
