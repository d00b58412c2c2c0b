#include "openai/openai_protocol.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <utility>

#include "openai/request_fields.h"

namespace tandem::openai {
namespace {

using Json = RequestJson;

// OpenAI allows up to 4 stop sequences; we allow a few more but keep the work per token bounded.
constexpr size_t kMaxStopStrings = 16;
constexpr size_t kMaxStopTokenIds = 64;
// As vLLM's default max_logprobs; OpenAI allows 20 in chat and 5 in completions.
constexpr int64_t kMaxTopLogprobs = 20;

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

// Chat asks for logprobs with a boolean and for alternatives with top_logprobs (which needs
// logprobs: true, as OpenAI says).
std::optional<ApiError> ReadChatLogprobs(const Json& body, CommonRequest* out) {
  bool logprobs = false;
  if (auto e = ReadBool(body, "logprobs", &logprobs)) return e;
  std::optional<int64_t> top;
  if (auto e = ReadInt(body, "top_logprobs", 0, kMaxTopLogprobs, &top)) return e;
  if (top && *top > 0 && !logprobs) return InvalidRequest("'top_logprobs' needs 'logprobs': true", "top_logprobs");
  if (logprobs) out->logprobs = static_cast<int32_t>(top.value_or(0));
  return std::nullopt;
}

// Completions ask with the number of alternatives (0: only the chosen token's logprob); false
// is read as "none", as some clients send it.
std::optional<ApiError> ReadCompletionLogprobs(const Json& body, CommonRequest* out) {
  if (auto it = body.find("logprobs"); it != body.end() && it->is_boolean() && !it->get<bool>()) return std::nullopt;
  std::optional<int64_t> top;
  if (auto e = ReadInt(body, "logprobs", 0, kMaxTopLogprobs, &top)) return e;
  if (top) out->logprobs = static_cast<int32_t>(*top);
  return std::nullopt;
}

// Everything the two endpoints share: model, stream, sampling, stop, n and logprobs.
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
  if (auto e = ReadInt(body, "n", 1, kMaxChoices, &v)) return e;
  if (v) out->n = static_cast<int32_t>(*v);
  if (auto e = chat ? ReadChatLogprobs(body, out) : ReadCompletionLogprobs(body, out)) return e;
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
  if (auto it = body.find("response_format"); it != body.end() && !it->is_null()) {
    if (auto e = ParseResponseFormat(*it, &out->response_format)) return e;
  }
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
      "modalities", "documents"};
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

// One prompt: text or token ids; `param` names it within the batch ("prompt[2]").
std::optional<ApiError> ReadOnePrompt(const Json& prompt, const std::string& param, CompletionRequest::Prompt* out) {
  if (prompt.is_string()) {
    out->text = prompt.get<std::string>();
    if (out->text->empty()) return InvalidRequest("'" + param + "' must not be empty", param);
    return std::nullopt;
  }
  if (!prompt.is_array()) return WrongType(param, "a string or an array of token ids", prompt);
  if (auto e = ReadIds(prompt, param, &out->ids)) return e;
  if (out->ids.empty()) return InvalidRequest("'" + param + "' must not be empty", param);
  return std::nullopt;
}

// `prompt`: a string, an array of token ids, or a batch (an array) of either.
std::optional<ApiError> ReadPrompts(const Json& body, CompletionRequest* out) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) return InvalidRequest("'prompt' is required", "prompt");
  const bool batch = it->is_array() && !it->empty() && ((*it)[0].is_string() || (*it)[0].is_array());
  if (!batch) {
    out->prompts.emplace_back();
    return ReadOnePrompt(*it, "prompt", &out->prompts.back());
  }
  if (it->size() * static_cast<size_t>(out->common.n) > static_cast<size_t>(kMaxChoices)) {
    return InvalidRequest("a request may ask for at most " + std::to_string(kMaxChoices) +
                              " choices (prompts x n), got " + std::to_string(it->size()) + " x " +
                              std::to_string(out->common.n),
                          "prompt");
  }
  for (size_t i = 0; i < it->size(); ++i) {
    const Json& p = (*it)[i];
    const std::string param = "prompt[" + std::to_string(i) + "]";
    // Every element of a batch is a prompt: a number here is a mixed batch, not a token.
    if (!p.is_string() && !p.is_array()) return WrongType(param, "a string or an array of token ids", p);
    out->prompts.emplace_back();
    if (auto e = ReadOnePrompt(p, param, &out->prompts.back())) return e;
  }
  return std::nullopt;
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
  Json inner;
  inner["message"] = error.message;
  inner["type"] = error.type;
  inner["param"] = error.param.empty() ? Json(nullptr) : Json(error.param);
  inner["code"] = error.code.empty() ? Json(nullptr) : Json(error.code);
  Json j;
  j["error"] = std::move(inner);
  // A message may quote request text that is not valid UTF-8: replace it rather than throw.
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::optional<ApiError> ParseBody(std::string_view body, bool chat, RequestJson* j, CommonRequest* common) {
  *j = Json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j->is_discarded()) return InvalidRequest("the request body is not valid JSON", "", "invalid_json");
  if (!j->is_object()) {
    return InvalidRequest("the request body must be a JSON object, got " + std::string(j->type_name()));
  }
  if (auto e = RefuseUnknownFields(*j, chat)) return e;
  if (auto e = ParseHarmless(*j, chat)) return e;
  return ParseCommon(*j, chat, common);
}

std::optional<ApiError> ParseCompletionRequest(std::string_view body, CompletionRequest* out) {
  *out = CompletionRequest{};
  Json j;
  if (auto e = ParseBody(body, /*chat=*/false, &j, &out->common)) return e;

  bool echo = false;
  if (auto e = ReadBool(j, "echo", &echo)) return e;
  out->echo = echo;
  std::optional<int64_t> best_of;
  if (auto e = ReadInt(j, "best_of", 1, kMaxChoices, &best_of)) return e;
  // best_of candidates of which the n best are returned: only the case where every candidate
  // is returned (best_of = n) is the same as not asking.
  if (best_of && *best_of != out->common.n) {
    return InvalidRequest("'best_of' must equal n (" + std::to_string(out->common.n) + "): choosing among candidates is not supported",
                          "best_of");
  }
  return ReadPrompts(j, out);
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

}  // namespace tandem::openai
