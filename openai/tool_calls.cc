#include "openai/tool_calls.h"

#include <optional>
#include <random>

#include <nlohmann/json.hpp>

namespace tandem::openai {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

size_t TrailingSpace(std::string_view s) {
  size_t n = 0;
  while (n < s.size() && IsSpace(s[s.size() - 1 - n])) ++n;
  return n;
}

// Model output is not guaranteed to be valid UTF-8 (XML string values are raw text): replace
// bad bytes instead of letting dump() throw.
std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

std::optional<Json> ParseJson(std::string_view text) {
  Json j = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

std::string NewCallId() {
  static constexpr char kAlphabet[] =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<size_t> pick(0, sizeof(kAlphabet) - 2);
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kAlphabet[pick(rng)];
  return id;
}

// Qwen3: {"name": "f", "arguments": {...}}. Arguments may be absent ({}), an object, or an
// object already encoded as a JSON string.
std::optional<ToolCall> ParseJsonBody(std::string_view body) {
  std::optional<Json> j = ParseJson(body);
  if (!j || !j->is_object()) return std::nullopt;
  auto name = j->find("name");
  if (name == j->end() || !name->is_string() || name->get_ref<const std::string&>().empty()) {
    return std::nullopt;
  }
  ToolCall call;
  call.name = name->get<std::string>();
  auto args = j->find("arguments");
  if (args == j->end()) {
    call.arguments = "{}";
  } else if (args->is_object()) {
    call.arguments = Dump(*args);
  } else if (args->is_string()) {
    std::optional<Json> inner = ParseJson(args->get_ref<const std::string&>());
    if (!inner || !inner->is_object()) return std::nullopt;
    call.arguments = Dump(*inner);
  } else {
    return std::nullopt;
  }
  return call;
}

// Qwen3.5 / Qwen3-Coder: <function=f>\n<parameter=p>\nVALUE\n</parameter>\n...</function>.
// The template writes one newline on each side of a value; those are not part of it.
std::optional<ToolCall> ParseXmlBody(std::string_view body, const ToolCallOptions& options) {
  constexpr std::string_view kFunction = "<function=";
  constexpr std::string_view kFunctionEnd = "</function>";
  constexpr std::string_view kParam = "<parameter=";
  constexpr std::string_view kParamEnd = "</parameter>";
  if (!body.starts_with(kFunction) || !body.ends_with(kFunctionEnd)) return std::nullopt;
  body.remove_prefix(kFunction.size());
  body.remove_suffix(kFunctionEnd.size());
  size_t gt = body.find('>');
  if (gt == std::string_view::npos || gt == 0) return std::nullopt;
  ToolCall call;
  call.name = std::string(body.substr(0, gt));
  if (call.name.find_first_of("<\n") != std::string::npos) return std::nullopt;
  std::string_view rest = body.substr(gt + 1);
  Json args = Json::object();
  while (true) {
    rest = Trim(rest);
    if (rest.empty()) break;
    if (!rest.starts_with(kParam)) return std::nullopt;
    rest.remove_prefix(kParam.size());
    size_t pgt = rest.find('>');
    if (pgt == std::string_view::npos || pgt == 0) return std::nullopt;
    std::string pname(rest.substr(0, pgt));
    if (pname.find_first_of("<\n") != std::string::npos) return std::nullopt;
    rest.remove_prefix(pgt + 1);
    size_t end = rest.find(kParamEnd);
    if (end == std::string_view::npos) return std::nullopt;
    std::string_view value = rest.substr(0, end);
    rest.remove_prefix(end + kParamEnd.size());
    if (value.starts_with('\n')) value.remove_prefix(1);
    if (value.ends_with('\n')) value.remove_suffix(1);
    std::optional<Json> parsed;
    if (!options.string_params.contains({call.name, pname})) parsed = ParseJson(value);
    args[pname] = parsed ? std::move(*parsed) : Json(std::string(value));
  }
  call.arguments = Dump(args);
  return call;
}

std::optional<ToolCall> ParseBody(std::string_view body, const ToolCallOptions& options) {
  body = Trim(body);
  if (body.starts_with("<function=")) return ParseXmlBody(body, options);
  return ParseJsonBody(body);
}

void AddCall(ToolCall call, int& next_index, ParsedToolCalls& out) {
  call.index = next_index++;
  call.id = NewCallId();
  out.tool_calls.push_back(std::move(call));
}

}  // namespace

std::string ParsedToolCalls::FinishReason(std::string_view engine_reason) const {
  return tool_calls.empty() ? std::string(engine_reason) : "tool_calls";
}

std::string ToolCallJson(const ToolCall& call, bool streaming) {
  Json j = Json::object();
  if (streaming) j["index"] = call.index;
  j["id"] = call.id;
  j["type"] = "function";
  j["function"] = {{"name", call.name}, {"arguments", call.arguments}};
  return Dump(j);
}

ToolCallOptions ToolCallOptionsFromTools(std::string_view tools_json) {
  ToolCallOptions options;
  std::optional<Json> tools = ParseJson(tools_json);
  if (!tools || !tools->is_array()) return options;
  auto is_string_type = [](const Json& type) {
    if (type.is_string()) return type.get_ref<const std::string&>() == "string";
    if (!type.is_array()) return false;
    for (const Json& t : type) {
      if (t.is_string() && t.get_ref<const std::string&>() == "string") return true;
    }
    return false;
  };
  for (const Json& tool : *tools) {
    const Json* function = tool.is_object() && tool.contains("function") ? &tool["function"] : nullptr;
    if (!function || !function->is_object() || !function->contains("name") ||
        !(*function)["name"].is_string() || !function->contains("parameters")) {
      continue;
    }
    const Json& params = (*function)["parameters"];
    if (!params.is_object() || !params.contains("properties") || !params["properties"].is_object()) {
      continue;
    }
    for (const auto& [pname, schema] : params["properties"].items()) {
      if (schema.is_object() && schema.contains("type") && is_string_type(schema["type"])) {
        options.string_params.emplace((*function)["name"].get<std::string>(), pname);
      }
    }
  }
  return options;
}

ParsedToolCalls ParseToolCalls(std::string_view text, const ToolCallOptions& options) {
  ParsedToolCalls out;
  int next_index = 0;
  bool after_call = false;
  while (true) {
    size_t open = text.find(kOpen);
    std::string_view before = text.substr(0, open == std::string_view::npos ? text.size() : open);
    if (after_call) {
      while (!before.empty() && IsSpace(before.front())) before.remove_prefix(1);
    }
    if (open == std::string_view::npos) {
      out.content += before;
      return out;
    }
    size_t close = text.find(kClose, open + kOpen.size());
    if (close == std::string_view::npos) {  // unclosed at the end: content as generated
      out.content += before;
      out.content += text.substr(open);
      return out;
    }
    std::optional<ToolCall> call =
        ParseBody(text.substr(open + kOpen.size(), close - open - kOpen.size()), options);
    if (call) {
      out.content += before.substr(0, before.size() - TrailingSpace(before));
      AddCall(std::move(*call), next_index, out);
    } else {
      out.content += before;
      out.content += text.substr(open, close + kClose.size() - open);
    }
    after_call = call.has_value();
    text.remove_prefix(close + kClose.size());
  }
}

ParsedToolCalls ToolCallStreamParser::Feed(std::string_view delta) {
  ParsedToolCalls out;
  pending_ += delta;
  Process(out);
  return out;
}

void ToolCallStreamParser::Process(ParsedToolCalls& out) {
  while (true) {
    if (inside_) {
      size_t from = scanned_ >= kClose.size() ? scanned_ - (kClose.size() - 1) : 0;
      size_t close = pending_.find(kClose, from);
      if (close == std::string::npos) {
        scanned_ = pending_.size();
        return;
      }
      std::optional<ToolCall> call = ParseBody(std::string_view(pending_).substr(0, close), options_);
      if (call) {
        AddCall(std::move(*call), next_index_, out);
      } else {
        out.content += held_ws_;
        out.content += kOpen;
        out.content += std::string_view(pending_).substr(0, close + kClose.size());
      }
      after_call_ = call.has_value();
      held_ws_.clear();
      pending_.erase(0, close + kClose.size());
      inside_ = false;
      scanned_ = 0;
      continue;
    }
    if (after_call_) {
      size_t n = 0;
      while (n < pending_.size() && IsSpace(pending_[n])) ++n;
      pending_.erase(0, n);
      if (pending_.empty()) return;
      after_call_ = false;
    }
    size_t open = pending_.find(kOpen);
    if (open != std::string::npos) {
      std::string_view before = std::string_view(pending_).substr(0, open);
      size_t ws = TrailingSpace(before);
      out.content += before.substr(0, before.size() - ws);
      held_ws_ = std::string(before.substr(before.size() - ws));
      pending_.erase(0, open + kOpen.size());
      inside_ = true;
      scanned_ = 0;
      continue;
    }
    // Hold back the longest suffix that could still grow into the opening tag, and the
    // whitespace before it (dropped if a call follows).
    size_t hold = 0;
    for (size_t n = std::min(pending_.size(), kOpen.size() - 1); n > 0; --n) {
      if (kOpen.starts_with(std::string_view(pending_).substr(pending_.size() - n))) {
        hold = n;
        break;
      }
    }
    hold += TrailingSpace(std::string_view(pending_).substr(0, pending_.size() - hold));
    out.content += std::string_view(pending_).substr(0, pending_.size() - hold);
    pending_.erase(0, pending_.size() - hold);
    return;
  }
}

ParsedToolCalls ToolCallStreamParser::Finish() {
  ParsedToolCalls out;
  if (inside_) {
    out.content += held_ws_;
    out.content += kOpen;
  }
  out.content += pending_;
  pending_.clear();
  held_ws_.clear();
  inside_ = false;
  after_call_ = false;
  return out;
}

}  // namespace tandem::openai
