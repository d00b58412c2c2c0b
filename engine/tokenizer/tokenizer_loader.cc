// Reads tokenizer.json and tokenizer_config.json into a Tokenizer. nlohmann::json throws; every
// exception is caught here and becomes an InvalidArgument status that names the key.
#include <algorithm>
#include <fstream>
#include <optional>

#include <nlohmann/json.hpp>

#include "common/json_integer.h"
#include "common/status.h"
#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/eos_token_ids.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/tokenizer_json_reader.h"

namespace tandem::tokenizer {

using json = nlohmann::json;

class TokenizerLoader {
 public:
  static absl::Status LoadTokenizerJson(const TokenizerJsonParts& parts, Tokenizer* t);
  static absl::Status LoadConfigJson(const json& root, Tokenizer* t);

 private:
  static absl::Status LoadNormalizer(const json& n, Normalizer* out);
  static absl::Status LoadPreTokenizer(const json& p, PreTokenizer* out);
  static absl::Status LoadModel(const json& m, const TokenizerJsonParts& parts, BpeModel* out);
  static absl::Status LoadAddedTokens(const json& a, Tokenizer* t);
  static absl::Status CheckDecoder(const json& d);
  static absl::Status CheckPostProcessor(const json& p);
};

namespace {

absl::Status Invalid(const std::string& where, const std::string& what) {
  return absl::InvalidArgumentError("tokenizer.json: " + where + ": " + what);
}

std::string TypeOf(const json& j) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) return "";
  return j["type"].get<std::string>();
}

bool FlagOr(const json& j, const char* key, bool dflt) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : dflt;
}

}  // namespace

absl::Status TokenizerLoader::LoadNormalizer(const json& n, Normalizer* out) {
  if (n.is_null()) return absl::OkStatus();
  const std::string type = TypeOf(n);
  if (type == "Sequence") {
    if (!n.contains("normalizers") || !n["normalizers"].is_array()) {
      return Invalid("normalizer", "Sequence without a \"normalizers\" array");
    }
    for (const auto& step : n["normalizers"]) RETURN_IF_ERROR(LoadNormalizer(step, out));
    return absl::OkStatus();
  }
  if (type == "NFC") out->AddStep(NormalForm::kNFC);
  else if (type == "NFD") out->AddStep(NormalForm::kNFD);
  else if (type == "NFKC") out->AddStep(NormalForm::kNFKC);
  else if (type == "NFKD") out->AddStep(NormalForm::kNFKD);
  else {
    return Invalid("normalizer", "unsupported type \"" + type +
                                     "\" (supported: NFC, NFD, NFKC, NFKD, Sequence)");
  }
  return absl::OkStatus();
}

absl::Status TokenizerLoader::LoadPreTokenizer(const json& p, PreTokenizer* out) {
  if (p.is_null()) return absl::OkStatus();
  const std::string type = TypeOf(p);
  if (type == "Sequence") {
    if (!p.contains("pretokenizers") || !p["pretokenizers"].is_array()) {
      return Invalid("pre_tokenizer", "Sequence without a \"pretokenizers\" array");
    }
    for (const auto& step : p["pretokenizers"]) RETURN_IF_ERROR(LoadPreTokenizer(step, out));
    return absl::OkStatus();
  }
  PreTokenizerStep step;
  if (type == "Split") {
    step.kind = PreTokenizerStep::Kind::kSplit;
    const json* pattern = p.contains("pattern") ? &p["pattern"] : nullptr;
    bool literal = false;
    std::string text;
    if (pattern && pattern->is_object() && pattern->contains("Regex") &&
        (*pattern)["Regex"].is_string()) {
      text = (*pattern)["Regex"].get<std::string>();
    } else if (pattern && pattern->is_object() && pattern->contains("String") &&
               (*pattern)["String"].is_string()) {
      text = (*pattern)["String"].get<std::string>();
      literal = true;
    } else {
      return Invalid("pre_tokenizer.Split", "\"pattern\" must be {\"Regex\": ...} or {\"String\": ...}");
    }
    auto re = Regex::Compile(text, literal);
    if (!re.ok()) return Invalid("pre_tokenizer.Split.pattern", StatusText(re.status()));
    step.regex = std::move(*re);
    const std::string behavior =
        p.contains("behavior") && p["behavior"].is_string() ? p["behavior"].get<std::string>() : "";
    if (behavior == "Removed") step.behavior = SplitBehavior::kRemoved;
    else if (behavior == "Isolated") step.behavior = SplitBehavior::kIsolated;
    else if (behavior == "MergedWithPrevious") step.behavior = SplitBehavior::kMergedWithPrevious;
    else if (behavior == "MergedWithNext") step.behavior = SplitBehavior::kMergedWithNext;
    else if (behavior == "Contiguous") step.behavior = SplitBehavior::kContiguous;
    else return Invalid("pre_tokenizer.Split", "unsupported behavior \"" + behavior + "\"");
    step.invert = FlagOr(p, "invert", false);
  } else if (type == "ByteLevel") {
    step.kind = PreTokenizerStep::Kind::kByteLevel;
    step.add_prefix_space = FlagOr(p, "add_prefix_space", true);
    if (FlagOr(p, "use_regex", true)) {
      auto re = Regex::Compile(kGpt2SplitPattern, false);
      if (!re.ok()) return re.status();
      step.byte_level_regex = std::move(*re);
    }
  } else {
    return Invalid("pre_tokenizer", "unsupported type \"" + type +
                                        "\" (supported: Split, ByteLevel, Sequence)");
  }
  out->AddStep(std::move(step));
  return absl::OkStatus();
}

absl::Status TokenizerLoader::LoadModel(const json& m, const TokenizerJsonParts& parts,
                                        BpeModel* out) {
  if (!m.is_object()) return Invalid("model", "missing or not an object");
  const std::string type = TypeOf(m);
  if (!type.empty() && type != "BPE") {
    return Invalid("model", "unsupported type \"" + type + "\" (supported: BPE)");
  }
  if (FlagOr(m, "byte_fallback", false)) {
    return Invalid("model", "byte_fallback is not supported (byte-level BPE needs none)");
  }
  if (m.contains("dropout") && m["dropout"].is_number() && m["dropout"].get<double>() != 0.0) {
    return Invalid("model", "dropout is not supported (encoding must be deterministic)");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (m.contains(key) && m[key].is_string() && !m[key].get<std::string>().empty()) {
      return Invalid("model", std::string(key) + " is not supported");
    }
  }
  out->set_ignore_merges(FlagOr(m, "ignore_merges", false));

  if (!parts.has_vocab) return Invalid("model.vocab", "missing or not an object of token -> id");
  out->Reserve(parts.vocab.size(), parts.merges.size());
  for (const auto& [shown, id] : parts.vocab) {
    const auto bytes = ByteLevelToBytes(shown);
    if (!bytes) {
      return Invalid("model.vocab[\"" + shown + "\"]",
                     "not written in the byte-level alphabet (only byte-level BPE is supported)");
    }
    auto st = out->AddToken(*bytes, static_cast<int32_t>(id));
    if (!st.ok()) return Invalid("model.vocab[\"" + shown + "\"]", StatusText(st));
  }
  RETURN_IF_ERROR(out->Finish());

  if (!parts.has_merges) return Invalid("model.merges", "missing or not an array");
  for (size_t i = 0; i < parts.merges.size(); ++i) {
    const auto& [left, right] = parts.merges[i];
    const std::string where = "model.merges[" + std::to_string(i) + "]";
    const auto lb = ByteLevelToBytes(left), rb = ByteLevelToBytes(right);
    if (!lb || !rb) return Invalid(where, "token not in the byte-level alphabet");
    auto st = out->AddMerge(*lb, *rb);
    if (!st.ok()) {
      return Invalid(where, "[\"" + left + "\", \"" + right +
                                "\"]: the pair or its merge is not in model.vocab");
    }
  }
  return absl::OkStatus();
}

absl::Status TokenizerLoader::LoadAddedTokens(const json& a, Tokenizer* t) {
  if (a.is_null()) return absl::OkStatus();
  if (!a.is_array()) return Invalid("added_tokens", "not an array");
  size_t index = 0;
  for (const auto& e : a) {
    const std::string where = "added_tokens[" + std::to_string(index++) + "]";
    if (!e.is_object() || !e.contains("id") || !e["id"].is_number_integer() ||
        !e.contains("content") || !e["content"].is_string()) {
      return Invalid(where, "needs an integer \"id\" and a string \"content\"");
    }
    // An id past int32_t would wrap into another token's id (nlohmann's get<int32_t>() converts).
    const std::optional<int64_t> id = JsonInteger(e["id"], 0, kJsonInt32Max);
    if (!id) return Invalid(where, "id must be an integer in [0, 2147483647]");
    AddedToken tok;
    tok.id = static_cast<int32_t>(*id);
    tok.content = e["content"].get<std::string>();
    if (tok.content.empty()) return Invalid(where, "empty content");
    if (!IsValidUtf8(tok.content)) return Invalid(where, "content is not valid UTF-8");
    tok.special = FlagOr(e, "special", false);
    tok.normalized = FlagOr(e, "normalized", !tok.special);
    tok.lstrip = FlagOr(e, "lstrip", false);
    tok.rstrip = FlagOr(e, "rstrip", false);
    tok.single_word = FlagOr(e, "single_word", false);
    if (t->added_by_id_.contains(tok.id)) return Invalid(where, "id " + std::to_string(tok.id) + " is used twice");
    if (tok.normalized) {
      // Matched in normalized text, so match the normalized spelling.
      tok.content = t->normalizer_.Apply(tok.content);
      t->normalized_added_.Add(tok);
    } else {
      t->raw_added_.Add(tok);
    }
    t->added_by_content_[tok.content] = tok.id;
    t->added_by_id_[tok.id] = t->added_tokens_.size();
    t->added_tokens_.push_back(std::move(tok));
  }
  return absl::OkStatus();
}

absl::Status TokenizerLoader::CheckDecoder(const json& d) {
  const std::string type = TypeOf(d);
  if (type == "ByteLevel") return absl::OkStatus();
  if (type == "Sequence" && d.contains("decoders") && d["decoders"].is_array()) {
    for (const auto& step : d["decoders"]) RETURN_IF_ERROR(CheckDecoder(step));
    return absl::OkStatus();
  }
  return Invalid("decoder", "unsupported type \"" + (d.is_null() ? std::string("null") : type) +
                                "\" (supported: ByteLevel)");
}

absl::Status TokenizerLoader::CheckPostProcessor(const json& p) {
  // The post-processor only adds special tokens when add_special_tokens is true, which our
  // Encode never does; ByteLevel's offset trimming does not change ids.
  const std::string type = TypeOf(p);
  if (p.is_null() || type == "ByteLevel" || type == "TemplateProcessing") return absl::OkStatus();
  if (type == "Sequence" && p.contains("processors") && p["processors"].is_array()) {
    for (const auto& step : p["processors"]) RETURN_IF_ERROR(CheckPostProcessor(step));
    return absl::OkStatus();
  }
  return Invalid("post_processor", "unsupported type \"" + type +
                                       "\" (supported: ByteLevel, TemplateProcessing)");
}

absl::Status TokenizerLoader::LoadTokenizerJson(const TokenizerJsonParts& parts, Tokenizer* t) {
  const json& root = parts.rest;
  if (!root.is_object()) return Invalid("top level", "not a JSON object");
  const json null_json;
  auto get = [&](const char* key) -> const json& {
    auto it = root.find(key);
    return it == root.end() ? null_json : *it;
  };
  RETURN_IF_ERROR(LoadNormalizer(get("normalizer"), &t->normalizer_));
  RETURN_IF_ERROR(LoadPreTokenizer(get("pre_tokenizer"), &t->pre_tokenizer_));
  if (!t->pre_tokenizer_.has_byte_level()) {
    return Invalid("pre_tokenizer", "has no ByteLevel step (only byte-level BPE is supported)");
  }
  RETURN_IF_ERROR(CheckDecoder(get("decoder")));
  RETURN_IF_ERROR(CheckPostProcessor(get("post_processor")));
  RETURN_IF_ERROR(LoadModel(get("model"), parts, &t->bpe_));
  RETURN_IF_ERROR(LoadAddedTokens(get("added_tokens"), t));
  int64_t max_id = t->bpe_.max_id();
  for (const auto& a : t->added_tokens_) max_id = std::max<int64_t>(max_id, a.id);
  t->vocab_size_ = max_id + 1;
  return absl::OkStatus();
}

namespace {

// A token name in tokenizer_config.json: a string, or {"content": ...} in older files.
std::string TokenName(const json& root, const char* key) {
  auto it = root.find(key);
  if (it == root.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  return "";
}

}  // namespace

absl::Status TokenizerLoader::LoadConfigJson(const json& root, Tokenizer* t) {
  if (!root.is_object()) return absl::InvalidArgumentError("tokenizer_config.json: not a JSON object");
  t->eos_token_ = TokenName(root, "eos_token");
  t->pad_token_ = TokenName(root, "pad_token");
  t->bos_token_ = TokenName(root, "bos_token");
  auto it = root.find("chat_template");
  if (it != root.end() && it->is_string()) t->chat_template_ = it->get<std::string>();
  for (const auto* name : {&t->eos_token_, &t->pad_token_, &t->bos_token_}) {
    if (!name->empty() && !t->TokenId(*name)) {
      return absl::InvalidArgumentError("tokenizer_config.json: token \"" + *name +
                                        "\" is not in tokenizer.json");
    }
  }
  if (auto eos = t->eos_token_id()) t->eos_token_ids_.push_back(*eos);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::LoadFromJson(
    std::string_view tokenizer_json, std::string_view tokenizer_config_json) {
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  try {
    ASSIGN_OR_RETURN(const TokenizerJsonParts parts, ReadTokenizerJson(tokenizer_json));
    RETURN_IF_ERROR(TokenizerLoader::LoadTokenizerJson(parts, t.get()));
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(std::string("tokenizer.json: ") + e.what());
  }
  if (!tokenizer_config_json.empty()) {
    try {
      const json root = json::parse(tokenizer_config_json);
      RETURN_IF_ERROR(TokenizerLoader::LoadConfigJson(root, t.get()));
    } catch (const json::exception& e) {
      return absl::InvalidArgumentError(std::string("tokenizer_config.json: ") + e.what());
    }
  }
  return t;
}

namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path, bool* missing) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) {
    *missing = true;
    return absl::NotFoundError("cannot open " + path);
  }
  // One read of the known size: the real tokenizer.json is 11 MB.
  const std::streamoff size = in.tellg();
  std::string data(static_cast<size_t>(size > 0 ? size : 0), '\0');
  in.seekg(0);
  if (!in.read(data.data(), static_cast<std::streamsize>(data.size()))) {
    return absl::DataLossError("error reading " + path);
  }
  return data;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::LoadFromDir(const std::string& dir) {
  bool missing = false;
  ASSIGN_OR_RETURN(std::string tok_json, ReadFile(dir + "/tokenizer.json", &missing));
  missing = false;
  auto config = ReadFile(dir + "/tokenizer_config.json", &missing);
  if (!config.ok() && !missing) return config.status();
  auto t = LoadFromJson(tok_json, config.ok() ? *config : std::string());
  if (!t.ok()) return absl::Status(t.status().code(), dir + ": " + StatusText(t.status()));
  ASSIGN_OR_RETURN(const std::vector<int32_t> generation_eos, ReadGenerationEosTokenIds(dir));
  std::vector<int32_t>& eos = (*t)->eos_token_ids_;
  for (int32_t id : generation_eos) {
    if (std::find(eos.begin(), eos.end(), id) == eos.end()) eos.push_back(id);
  }
  return t;
}

}  // namespace tandem::tokenizer
