#include "openai/openai_protocol.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <utility>

#include "nlohmann/json.hpp"

namespace tandem::openai {
namespace {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

// OpenAI allows up to 4 stop sequences; we allow a few more but keep the work per token bounded.
constexpr size_t kMaxStopStrings = 16;
constexpr size_t kMaxStopTokenIds = 64;

std::string TypeName(const Json& v) {
  return std::string(v.type_name());
}

ApiError WrongType(const std::string& param, const char* expected, const Json& got) {
  return InvalidRequest("'" + param + "' must be " + expected + ", got " + TypeName(got), param);
}

// A number field in [lo, hi]; null or absent keeps `*out`.
std::optional<ApiError> ReadNumber(const Json& body, const char* name, double lo, double hi, float* out) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) return WrongType(name, "a number", *it);
  double v = it->get<double>();
  if (!std::isfinite(v) || v < lo || v > hi) {
    return InvalidRequest("'" + std::string(name) + "' must be in [" + Json(lo).dump() + ", " +
                              Json(hi).dump() + "], got " + it->dump(),
                          name);
  }
  *out = static_cast<float>(v);
  return std::nullopt;
}

// An integer field in [lo, hi]; null or absent leaves `*out` unset.
std::optional<ApiError> ReadInt(const Json& body, const char* name, int64_t lo, int64_t hi,
                                std::optional<int64_t>* out) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return std::nullopt;
  // JSON has one number type; 16.0 is accepted as 16, 16.5 is not.
  if (it->is_number_float()) {
    double d = it->get<double>();
    if (!std::isfinite(d) || std::floor(d) != d || d < -9.2e18 || d > 9.2e18) {
      return WrongType(name, "an integer", *it);
    }
    *out = static_cast<int64_t>(d);
  } else if (it->is_number_unsigned()) {
    uint64_t u = it->get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return InvalidRequest("'" + std::string(name) + "' is too large", name);
    }
    *out = static_cast<int64_t>(u);
  } else if (it->is_number_integer()) {
    *out = it->get<int64_t>();
  } else {
    return WrongType(name, "an integer", *it);
  }
  if (**out < lo || **out > hi) {
    return InvalidRequest("'" + std::string(name) + "' must be in [" + std::to_string(lo) + ", " +
                              std::to_string(hi) + "], got " + std::to_string(**out),
                          name);
  }
  return std::nullopt;
}

std::optional<ApiError> ReadBool(const Json& body, const char* name, bool* out) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) return WrongType(name, "a boolean", *it);
  *out = it->get<bool>();
  return std::nullopt;
}

// Token ids as a JSON array of integers; range checks against the vocabulary come later.
std::optional<ApiError> ReadIds(const Json& arr, const std::string& param, std::vector<int32_t>* out) {
  out->clear();
  out->reserve(arr.size());
  for (const Json& v : arr) {
    if (!v.is_number_integer()) return WrongType(param, "an array of token ids (integers)", v);
    int64_t id = v.is_number_unsigned() ? static_cast<int64_t>(std::min<uint64_t>(
                                              v.get<uint64_t>(), std::numeric_limits<int64_t>::max()))
                                        : v.get<int64_t>();
    if (id < 0 || id > std::numeric_limits<int32_t>::max()) {
      return InvalidRequest("token id " + std::to_string(id) + " in '" + param + "' is outside the vocabulary",
                            param, "invalid_token_id");
    }
    out->push_back(static_cast<int32_t>(id));
  }
  return std::nullopt;
}

// logit_bias as OpenAI sends it: {"<token id>": bias in [-100, 100]}. The ids are checked
// against the vocabulary with the prompt (ValidatePrompt).
std::optional<ApiError> ReadLogitBias(const Json& body, std::vector<std::pair<int32_t, float>>* out) {
  auto it = body.find("logit_bias");
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_object()) return WrongType("logit_bias", "an object of token id -> bias", *it);
  for (const auto& [key, value] : it->items()) {
    int64_t id = -1;
    const bool digits = !key.empty() && key.size() <= 10 &&
                        std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (digits) id = std::stoll(key);
    if (!digits || id > std::numeric_limits<int32_t>::max()) {
      return InvalidRequest("'logit_bias' keys must be token ids, got '" + key + "'", "logit_bias", "invalid_token_id");
    }
    if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() < -100.0 ||
        value.get<double>() > 100.0) {
      return InvalidRequest("'logit_bias' values must be numbers in [-100, 100], got " + value.dump() +
                                " for token " + key,
                            "logit_bias");
    }
    out->emplace_back(static_cast<int32_t>(id), value.get<float>());
  }
  std::sort(out->begin(), out->end());  // by id (JSON keys sort as text: "17" before "5")
  for (size_t i = 1; i < out->size(); ++i) {
    if ((*out)[i].first == (*out)[i - 1].first) {  // "5" and "05"
      return InvalidRequest("'logit_bias' names token " + std::to_string((*out)[i].first) + " twice", "logit_bias");
    }
  }
  return std::nullopt;
}

// Everything the two endpoints share: model, stream, sampling, stop, and the refusals of
// features we do not implement (n > 1, echo, logprobs, best_of).
std::optional<ApiError> ParseCommon(const Json& body, bool chat, CommonRequest* out) {
  if (auto it = body.find("model"); it != body.end() && !it->is_null()) {
    if (!it->is_string()) return WrongType("model", "a string", *it);
    out->model = it->get<std::string>();
  }
  if (auto e = ReadBool(body, "stream", &out->stream)) return e;
  if (auto it = body.find("stream_options"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) return WrongType("stream_options", "an object", *it);
    if (auto e = ReadBool(*it, "include_usage", &out->include_usage)) {
      e->param = "stream_options.include_usage";
      return e;
    }
  }
  std::optional<int64_t> v;
  const int64_t kIntMax = std::numeric_limits<int32_t>::max();
  if (auto e = ReadInt(body, "max_tokens", 1, kIntMax, &v)) return e;
  if (chat && !v) {
    if (auto e = ReadInt(body, "max_completion_tokens", 1, kIntMax, &v)) return e;
  }
  if (v) out->max_tokens = static_cast<int32_t>(*v);

  engine::SamplingParams& p = out->params;
  if (auto e = ReadNumber(body, "temperature", 0.0, 2.0, &p.temperature)) return e;
  if (auto e = ReadNumber(body, "top_p", 0.0, 1.0, &p.top_p)) return e;
  if (p.top_p <= 0.0f) return InvalidRequest("'top_p' must be in (0, 1]", "top_p");
  v.reset();
  if (auto e = ReadInt(body, "top_k", -1, kIntMax, &v)) return e;
  if (v) p.top_k = *v < 0 ? 0 : static_cast<int32_t>(*v);  // -1 = off, as vLLM
  v.reset();
  if (auto e = ReadInt(body, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), &v)) {
    return e;
  }
  if (v) p.seed = static_cast<uint64_t>(*v);
  if (auto e = ReadBool(body, "ignore_eos", &p.ignore_eos)) return e;
  if (auto e = ReadBool(body, "return_token_ids", &out->return_token_ids)) return e;

  if (auto it = body.find("stop"); it != body.end() && !it->is_null()) {
    if (it->is_string()) {
      if (!it->get<std::string>().empty()) p.stop.push_back(it->get<std::string>());
    } else if (it->is_array()) {
      if (it->size() > kMaxStopStrings) {
        return InvalidRequest("'stop' may hold at most " + std::to_string(kMaxStopStrings) + " strings", "stop");
      }
      for (const Json& s : *it) {
        if (!s.is_string()) return WrongType("stop", "a string or an array of strings", s);
        if (!s.get<std::string>().empty()) p.stop.push_back(s.get<std::string>());
      }
    } else {
      return WrongType("stop", "a string or an array of strings", *it);
    }
  }
  if (auto it = body.find("stop_token_ids"); it != body.end() && !it->is_null()) {
    if (!it->is_array()) return WrongType("stop_token_ids", "an array of token ids", *it);
    if (it->size() > kMaxStopTokenIds) return InvalidRequest("'stop_token_ids' is too long", "stop_token_ids");
    if (auto e = ReadIds(*it, "stop_token_ids", &p.stop_token_ids)) return e;
  }

  v.reset();
  if (auto e = ReadInt(body, "n", 1, kIntMax, &v)) return e;
  if (v && *v != 1) return InvalidRequest("only n = 1 is supported", "n");
  v.reset();
  if (auto e = ReadInt(body, "best_of", 1, kIntMax, &v)) return e;
  if (v && *v != 1) return InvalidRequest("only best_of = 1 is supported", "best_of");
  bool echo = false;
  if (auto e = ReadBool(body, "echo", &echo)) return e;
  if (echo) return InvalidRequest("'echo' is not supported", "echo");
  if (auto it = body.find("logprobs"); it != body.end() && !it->is_null() &&
                                       !(it->is_boolean() && !it->get<bool>())) {
    return InvalidRequest("'logprobs' is not supported", "logprobs");
  }
  if (auto e = ReadNumber(body, "presence_penalty", -2.0, 2.0, &p.presence_penalty)) return e;
  if (auto e = ReadNumber(body, "frequency_penalty", -2.0, 2.0, &p.frequency_penalty)) return e;
  if (auto e = ReadNumber(body, "min_p", 0.0, 1.0, &p.min_p)) return e;
  // Hugging Face takes any positive penalty; beyond 10 it only flips a sign's worth of logit.
  if (auto e = ReadNumber(body, "repetition_penalty", 0.0, 10.0, &p.repetition_penalty)) return e;
  if (p.repetition_penalty <= 0.0f) return InvalidRequest("'repetition_penalty' must be > 0", "repetition_penalty");
  v.reset();
  if (auto e = ReadInt(body, "min_tokens", 0, kIntMax, &v)) return e;
  if (v) p.min_tokens = static_cast<int32_t>(*v);
  if (auto e = ReadLogitBias(body, &p.logit_bias)) return e;
  return std::nullopt;
}

// Fields a client may send whose only effect is outside generation (bookkeeping, a default we
// already follow) pass when harmless; anything that would change the output without us doing
// it is refused. Which is which is tabled in docs/api.md.
std::optional<ApiError> ParseHarmless(const Json& body, bool chat) {
  // An end-user id for the provider's abuse monitoring: nothing to do with the output.
  if (auto it = body.find("user"); it != body.end() && !it->is_null() && !it->is_string()) {
    return WrongType("user", "a string", *it);
  }
  if (!chat) {
    if (auto it = body.find("suffix"); it != body.end() && !it->is_null() &&
                                       !(it->is_string() && it->get<std::string>().empty())) {
      return InvalidRequest("'suffix' is not supported", "suffix");
    }
    return std::nullopt;
  }
  // Tags for stored completions; we store nothing, so they only need to be well-formed.
  if (auto it = body.find("metadata"); it != body.end() && !it->is_null() && !it->is_object()) {
    return WrongType("metadata", "an object", *it);
  }
  bool store = false;
  if (auto e = ReadBool(body, "store", &store)) return e;
  if (store) return InvalidRequest("'store: true' is not supported: completions are not stored", "store");
  if (auto it = body.find("service_tier"); it != body.end() && !it->is_null()) {
    if (!it->is_string()) return WrongType("service_tier", "a string", *it);
    const std::string tier = it->get<std::string>();
    if (tier != "auto" && tier != "default") {
      return InvalidRequest("'service_tier' must be 'auto' or 'default' (one tier is served), got '" + tier + "'",
                            "service_tier");
    }
  }
  // The model decides whether to call a tool ("auto", the default with tools); forcing or
  // forbidding a call, or limiting calls to one, is not enforced, so it is refused.
  if (auto it = body.find("tool_choice"); it != body.end() && !it->is_null() &&
                                          !(it->is_string() && it->get<std::string>() == "auto")) {
    return InvalidRequest("only tool_choice 'auto' is supported, got " + it->dump(), "tool_choice");
  }
  bool parallel = true;
  if (auto e = ReadBool(body, "parallel_tool_calls", &parallel)) return e;
  if (!parallel) return InvalidRequest("'parallel_tool_calls: false' is not supported", "parallel_tool_calls");
  if (auto it = body.find("response_format"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) return WrongType("response_format", "an object", *it);
    auto type = it->find("type");
    if (type == it->end() || !type->is_string() || type->get<std::string>() != "text") {
      return InvalidRequest("only response_format {\"type\": \"text\"} is supported", "response_format");
    }
  }
  if (auto it = body.find("top_logprobs"); it != body.end() && !it->is_null() &&
                                           !(it->is_number_integer() && it->get<int64_t>() == 0)) {
    return InvalidRequest("'top_logprobs' is not supported", "top_logprobs");
  }
  if (auto it = body.find("modalities"); it != body.end() && !it->is_null() &&
                                         *it != Json::array({"text"})) {
    return InvalidRequest("only modalities [\"text\"] is supported", "modalities");
  }
  return std::nullopt;
}

// Every field either endpoint reads or decides on above; anything else is refused rather than
// dropped, so a client never believes a parameter took effect when it did not. A null field
// counts as absent (some clients send every field, null when unset).
std::optional<ApiError> RefuseUnknownFields(const Json& body, bool chat) {
  static constexpr std::string_view kCommon[] = {
      "model", "stream", "stream_options", "max_tokens", "temperature", "top_p", "top_k", "seed",
      "ignore_eos", "return_token_ids", "stop", "stop_token_ids", "n", "logprobs", "presence_penalty",
      "frequency_penalty", "min_p", "repetition_penalty", "min_tokens", "logit_bias", "user"};
  static constexpr std::string_view kCompletion[] = {"prompt", "best_of", "echo", "suffix"};
  static constexpr std::string_view kChat[] = {
      "messages", "max_completion_tokens", "chat_template_kwargs", "tools", "tool_choice",
      "parallel_tool_calls", "response_format", "top_logprobs", "store", "metadata", "service_tier",
      "modalities"};
  auto known = [&](const std::string& key) {
    auto in = [&](const auto& names) { return std::find(std::begin(names), std::end(names), key) != std::end(names); };
    return in(kCommon) || (chat ? in(kChat) : in(kCompletion));
  };
  for (const auto& [key, value] : body.items()) {
    if (!value.is_null() && !known(key)) {
      return InvalidRequest("Unrecognized request argument supplied: " + key, key);
    }
  }
  if (auto it = body.find("stream_options"); it != body.end() && it->is_object()) {
    for (const auto& [key, value] : it->items()) {
      if (!value.is_null() && key != "include_usage") {
        return InvalidRequest("Unrecognized request argument supplied: stream_options." + key,
                              "stream_options." + key);
      }
    }
  }
  return std::nullopt;
}

// The body as a JSON object into `*j`, and the fields both endpoints share into `*common`.
std::optional<ApiError> ParseBody(std::string_view body, bool chat, Json* j, CommonRequest* common) {
  *j = Json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j->is_discarded()) return InvalidRequest("the request body is not valid JSON", "", "invalid_json");
  if (!j->is_object()) return InvalidRequest("the request body must be a JSON object, got " + TypeName(*j));
  if (auto e = RefuseUnknownFields(*j, chat)) return e;
  if (auto e = ParseHarmless(*j, chat)) return e;
  return ParseCommon(*j, chat, common);
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

void AddTokenIds(OrderedJson& choice, const std::vector<int32_t>* token_ids) {
  if (token_ids != nullptr) choice["token_ids"] = *token_ids;
}

OrderedJson Envelope(const ResponseHeader& h, const char* object) {
  OrderedJson j;
  j["id"] = h.id;
  j["object"] = object;
  j["created"] = h.created;
  j["model"] = h.model;
  return j;
}

OrderedJson UsageJson(const Usage& u) {
  OrderedJson j;
  j["prompt_tokens"] = u.prompt_tokens;
  j["completion_tokens"] = u.completion_tokens;
  j["total_tokens"] = u.prompt_tokens + u.completion_tokens;
  return j;
}

OrderedJson FinishReasonJson(const std::string& reason) {
  return reason.empty() ? OrderedJson(nullptr) : OrderedJson(reason);
}

// The envelope with its one choice, whose payload (`text`, `message` or `delta`) sits between
// `index` and `logprobs` as in OpenAI's own responses.
OrderedJson OneChoice(const ResponseHeader& h, const char* object, const char* payload_key, OrderedJson payload,
                      const std::string& finish_reason, const std::vector<int32_t>* token_ids) {
  OrderedJson j = Envelope(h, object);
  OrderedJson choice;
  choice["index"] = 0;
  choice[payload_key] = std::move(payload);
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = FinishReasonJson(finish_reason);
  AddTokenIds(choice, token_ids);
  j["choices"] = OrderedJson::array({choice});
  return j;
}

// Invalid UTF-8 in generated text must not throw out of the serializer: replace it.
std::string Dump(const OrderedJson& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// min_tokens cannot ask for more than max_tokens allows (as vLLM refuses it).
std::optional<ApiError> CheckMinTokens(const CommonRequest& request) {
  if (request.params.min_tokens <= request.params.max_tokens) return std::nullopt;
  return InvalidRequest("'min_tokens' (" + std::to_string(request.params.min_tokens) + ") is more than max_tokens (" +
                            std::to_string(request.params.max_tokens) + ")",
                        "min_tokens");
}

}  // namespace

ApiError InvalidRequest(std::string message, std::string param, std::string code) {
  ApiError e;
  e.http_status = 400;
  e.message = std::move(message);
  e.param = std::move(param);
  e.code = std::move(code);
  return e;
}

std::string ErrorJson(const ApiError& error) {
  OrderedJson inner;
  inner["message"] = error.message;
  inner["type"] = error.type;
  inner["param"] = error.param.empty() ? OrderedJson(nullptr) : OrderedJson(error.param);
  inner["code"] = error.code.empty() ? OrderedJson(nullptr) : OrderedJson(error.code);
  OrderedJson j;
  j["error"] = std::move(inner);
  return Dump(j);
}

std::optional<ApiError> ParseCompletionRequest(std::string_view body, CompletionRequest* out) {
  *out = CompletionRequest{};
  Json j;
  if (auto e = ParseBody(body, /*chat=*/false, &j, &out->common)) return e;

  auto it = j.find("prompt");
  if (it == j.end() || it->is_null()) return InvalidRequest("'prompt' is required", "prompt");
  const Json* prompt = &*it;
  // A batch of one ([ "text" ] or [[ids]]) is the same as its element; larger batches need n
  // separate choices, which we do not produce.
  if (prompt->is_array() && prompt->size() == 1 && ((*prompt)[0].is_string() || (*prompt)[0].is_array())) {
    prompt = &(*prompt)[0];
  }
  if (prompt->is_string()) {
    out->prompt_text = prompt->get<std::string>();
    if (out->prompt_text->empty()) return InvalidRequest("'prompt' must not be empty", "prompt");
  } else if (prompt->is_array()) {
    if (!prompt->empty() && ((*prompt)[0].is_string() || (*prompt)[0].is_array())) {
      return InvalidRequest("only one prompt per request is supported", "prompt");
    }
    if (auto e = ReadIds(*prompt, "prompt", &out->prompt_ids)) return e;
    if (out->prompt_ids.empty()) return InvalidRequest("'prompt' must not be empty", "prompt");
  } else {
    return WrongType("prompt", "a string or an array of token ids", *prompt);
  }
  return std::nullopt;
}

std::optional<ApiError> ParseChatRequest(std::string_view body, ChatRequest* out) {
  *out = ChatRequest{};
  Json j;
  if (auto e = ParseBody(body, /*chat=*/true, &j, &out->common)) return e;

  auto it = j.find("messages");
  if (it == j.end() || it->is_null()) return InvalidRequest("'messages' is required", "messages");
  if (!it->is_array()) return WrongType("messages", "an array", *it);
  if (it->empty()) return InvalidRequest("'messages' must not be empty", "messages");
  for (size_t i = 0; i < it->size(); ++i) {
    const Json& m = (*it)[i];
    const std::string param = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return WrongType(param, "an object", m);
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) return InvalidRequest(param + " needs a string 'role'", param + ".role");
    tokenizer::ChatMessage msg;
    msg.role = role->get<std::string>();
    if (msg.role == "developer") msg.role = "system";  // newer OpenAI name for the system role
    if (msg.role != "system" && msg.role != "user" && msg.role != "assistant" && msg.role != "tool") {
      return InvalidRequest("unknown role '" + msg.role + "'", param + ".role");
    }
    if (auto e = ReadContent(m, param + ".content", &msg.content)) return e;
    if (auto rc = m.find("reasoning_content"); rc != m.end() && rc->is_string()) {
      msg.reasoning_content = rc->get<std::string>();
    }
    if (auto tc = m.find("tool_calls"); tc != m.end() && !tc->is_null()) {
      if (!tc->is_array()) return WrongType(param + ".tool_calls", "an array", *tc);
      for (const Json& call : *tc) {
        auto fn = call.is_object() ? call.find("function") : call.end();
        if (!call.is_object() || fn == call.end() || !fn->is_object() || !fn->contains("name") ||
            !(*fn)["name"].is_string()) {
          return InvalidRequest("each tool call needs function.name", param + ".tool_calls");
        }
        tokenizer::ChatToolCall c;
        c.name = (*fn)["name"].get<std::string>();
        auto args = fn->find("arguments");
        if (args != fn->end()) c.arguments = args->is_string() ? args->get<std::string>() : args->dump();
        msg.tool_calls.push_back(std::move(c));
      }
    }
    out->messages.push_back(std::move(msg));
  }

  if (auto kw = j.find("chat_template_kwargs"); kw != j.end() && !kw->is_null()) {
    if (!kw->is_object()) return WrongType("chat_template_kwargs", "an object", *kw);
    if (auto e = ReadBool(*kw, "enable_thinking", &out->enable_thinking)) {
      e->param = "chat_template_kwargs.enable_thinking";
      return e;
    }
  }
  if (auto tools = j.find("tools"); tools != j.end() && !tools->is_null()) {
    if (!tools->is_array()) return WrongType("tools", "an array", *tools);
    for (const Json& t : *tools) out->tools.push_back(t.dump());
  }
  return std::nullopt;
}

std::optional<ApiError> ValidatePrompt(const std::vector<int32_t>& prompt_ids, int64_t vocab_size,
                                       int32_t max_model_len, int32_t default_max_tokens,
                                       CommonRequest* request) {
  if (prompt_ids.empty()) return InvalidRequest("the prompt is empty", "prompt");
  for (int32_t id : prompt_ids) {
    if (id < 0 || id >= vocab_size) {
      return InvalidRequest("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                std::to_string(vocab_size) + ")",
                            "prompt", "invalid_token_id");
    }
  }
  for (const auto& [id, bias] : request->params.logit_bias) {
    if (id >= vocab_size) {
      return InvalidRequest("token id " + std::to_string(id) + " in 'logit_bias' is outside the vocabulary [0, " +
                                std::to_string(vocab_size) + ")",
                            "logit_bias", "invalid_token_id");
    }
  }
  const int64_t prompt_len = static_cast<int64_t>(prompt_ids.size());
  const int64_t left = static_cast<int64_t>(max_model_len) - prompt_len;
  if (request->max_tokens) {
    if (prompt_len + *request->max_tokens > max_model_len) {
      return InvalidRequest("this model's maximum context length is " + std::to_string(max_model_len) +
                                " tokens; the request asks for " +
                                std::to_string(prompt_len + *request->max_tokens) + " (" +
                                std::to_string(prompt_len) + " in the prompt, " +
                                std::to_string(*request->max_tokens) + " to generate)",
                            "max_tokens", "context_length_exceeded");
    }
    request->params.max_tokens = *request->max_tokens;
    return CheckMinTokens(*request);
  }
  if (left < 1) {
    return InvalidRequest("this model's maximum context length is " + std::to_string(max_model_len) +
                              " tokens; the prompt alone has " + std::to_string(prompt_len),
                          "prompt", "context_length_exceeded");
  }
  request->params.max_tokens =
      default_max_tokens > 0 ? static_cast<int32_t>(std::min<int64_t>(default_max_tokens, left))
                             : static_cast<int32_t>(left);
  return CheckMinTokens(*request);
}

std::string CompletionResponseJson(const ResponseHeader& header, const std::string& text,
                                   const std::string& finish_reason, const Usage& usage,
                                   const std::vector<int32_t>* token_ids) {
  OrderedJson j = OneChoice(header, "text_completion", "text", text, finish_reason, token_ids);
  j["usage"] = UsageJson(usage);
  return Dump(j);
}

std::string ChatResponseJson(const ResponseHeader& header, const std::string& content,
                             const std::string& finish_reason, const Usage& usage,
                             const std::vector<int32_t>* token_ids) {
  OrderedJson message;
  message["role"] = "assistant";
  message["content"] = content;
  OrderedJson j = OneChoice(header, "chat.completion", "message", std::move(message), finish_reason, token_ids);
  j["usage"] = UsageJson(usage);
  return Dump(j);
}

std::string CompletionChunkJson(const ResponseHeader& header, const std::string& text,
                                const std::string& finish_reason, bool include_usage,
                                const std::vector<int32_t>* token_ids) {
  OrderedJson j = OneChoice(header, "text_completion", "text", text, finish_reason, token_ids);
  if (include_usage) j["usage"] = nullptr;
  return Dump(j);
}

std::string ChatChunkJson(const ResponseHeader& header, const std::string& role, bool has_content,
                          const std::string& content, const std::string& finish_reason,
                          bool include_usage, const std::vector<int32_t>* token_ids) {
  OrderedJson delta = OrderedJson::object();
  if (!role.empty()) delta["role"] = role;
  if (has_content) delta["content"] = content;
  OrderedJson j = OneChoice(header, "chat.completion.chunk", "delta", std::move(delta), finish_reason, token_ids);
  if (include_usage) j["usage"] = nullptr;
  return Dump(j);
}

std::string UsageChunkJson(const ResponseHeader& header, bool chat, const Usage& usage) {
  OrderedJson j = Envelope(header, chat ? "chat.completion.chunk" : "text_completion");
  j["choices"] = OrderedJson::array();
  j["usage"] = UsageJson(usage);
  return Dump(j);
}

std::string SseEvent(const std::string& json) { return "data: " + json + "\n\n"; }
std::string SseDone() { return "data: [DONE]\n\n"; }

std::string ModelsJson(const std::string& model, int64_t created, int32_t max_model_len) {
  OrderedJson m;
  m["id"] = model;
  m["object"] = "model";
  m["created"] = created;
  m["owned_by"] = "tandem";
  m["max_model_len"] = max_model_len;
  OrderedJson j;
  j["object"] = "list";
  j["data"] = OrderedJson::array({m});
  return Dump(j);
}

}  // namespace tandem::openai
