#include "engine/model/model_config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_text.h"
#include "common/status.h"
#include "nlohmann/json.hpp"

namespace tandem::engine {
namespace {

using nlohmann::json;

constexpr const char* kSupportedModelTypes[] = {"qwen3_moe", "qwen3_next", "qwen3_5_moe",
                                                "qwen3_5_moe_text"};
// Keys that a multimodal wrapper may hold at top level instead of in text_config.
constexpr const char* kWrapperFallbackKeys[] = {"tie_word_embeddings", "eos_token_id",
                                                "bos_token_id", "dtype", "torch_dtype",
                                                "vocab_size"};
// Sanity bounds: generous for any real model, small enough that nothing downstream overflows.
constexpr int64_t kMaxDim = int64_t{1} << 24;
constexpr int64_t kMaxLayers = 4096;

bool IsHybridType(const std::string& t) {
  return t == "qwen3_next" || t == "qwen3_5_moe" || t == "qwen3_5_moe_text";
}

// Reads keys of one config object; null counts as absent (HF writes "bos_token_id": null).
class ConfigReader {
 public:
  ConfigReader(const json& text, const json* wrapper, std::string origin, std::string key_prefix)
      : text_(text), wrapper_(wrapper), origin_(std::move(origin)), prefix_(std::move(key_prefix)) {}

  const json* Find(const std::string& key) const {
    auto it = text_.find(key);
    if (it != text_.end() && !it->is_null()) return &*it;
    if (wrapper_ != nullptr &&
        std::find(std::begin(kWrapperFallbackKeys), std::end(kWrapperFallbackKeys), key) !=
            std::end(kWrapperFallbackKeys)) {
      auto w = wrapper_->find(key);
      if (w != wrapper_->end() && !w->is_null()) return &*w;
    }
    return nullptr;
  }

  absl::Status Error(const std::string& key, const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat(origin_, ": key '", prefix_, key, "': ", what));
  }
  absl::Status Missing(const std::string& key) const {
    return absl::InvalidArgumentError(
        absl::StrCat(origin_, ": missing required key '", prefix_, key, "'"));
  }

  absl::StatusOr<int64_t> IntValue(const std::string& key, const json& v) const {
    if (!v.is_number_integer()) return Error(key, "expected an integer, found " + v.dump());
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      return Error(key, "value too large");
    }
    return v.get<int64_t>();
  }

  // An integer in [lo, hi]; `fallback` when absent and not required.
  absl::StatusOr<int64_t> Int(const std::string& key, bool required, int64_t fallback, int64_t lo,
                              int64_t hi) const {
    const json* v = Find(key);
    if (v == nullptr) {
      if (required) return Missing(key);
      return fallback;
    }
    ASSIGN_OR_RETURN(int64_t x, IntValue(key, *v));
    if (x < lo || x > hi) {
      return Error(key, absl::StrCat("value ", x, " out of range [", lo, ", ", hi, "]"));
    }
    return x;
  }

  absl::StatusOr<double> Double(const json* v, const std::string& key, double fallback) const {
    if (v == nullptr) return fallback;
    if (!v->is_number()) return Error(key, "expected a number, found " + v->dump());
    double x = v->get<double>();
    if (!std::isfinite(x)) return Error(key, "expected a finite number");
    return x;
  }

  absl::StatusOr<bool> Bool(const std::string& key, bool fallback) const {
    const json* v = Find(key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) return Error(key, "expected true or false, found " + v->dump());
    return v->get<bool>();
  }

  absl::StatusOr<std::string> String(const std::string& key, bool required) const {
    const json* v = Find(key);
    if (v == nullptr) {
      if (required) return Missing(key);
      return std::string();
    }
    if (!v->is_string()) return Error(key, "expected a string, found " + v->dump());
    return v->get<std::string>();
  }

  // An int, a list of ints, or absent (empty).
  absl::StatusOr<std::vector<int64_t>> IntOrList(const std::string& key) const {
    const json* v = Find(key);
    std::vector<int64_t> out;
    if (v == nullptr) return out;
    if (v->is_array()) {
      for (const json& e : *v) {
        ASSIGN_OR_RETURN(int64_t x, IntValue(key, e));
        out.push_back(x);
      }
    } else {
      ASSIGN_OR_RETURN(int64_t x, IntValue(key, *v));
      out.push_back(x);
    }
    return out;
  }

  const std::string& origin() const { return origin_; }

 private:
  const json& text_;
  const json* wrapper_;
  std::string origin_;
  std::string prefix_;
};

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::optional<std::string> text = ReadFileText(path);
  if (!text) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  return std::move(*text);
}

absl::StatusOr<json> ParseJson(const std::string& text, const std::string& origin) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": malformed JSON: ", e.what()));
  }
}

absl::Status ParseFields(const ConfigReader& r, const std::string& prefix, ModelConfig& c) {
  const bool hybrid = IsHybridType(c.model_type);
  ASSIGN_OR_RETURN(c.vocab_size, r.Int("vocab_size", true, 0, 1, kMaxDim));
  ASSIGN_OR_RETURN(c.hidden_size, r.Int("hidden_size", true, 0, 1, kMaxDim));
  ASSIGN_OR_RETURN(c.num_hidden_layers, r.Int("num_hidden_layers", true, 0, 1, kMaxLayers));
  ASSIGN_OR_RETURN(c.num_attention_heads, r.Int("num_attention_heads", true, 0, 1, 65536));
  ASSIGN_OR_RETURN(c.num_key_value_heads,
                   r.Int("num_key_value_heads", false, c.num_attention_heads, 1, 65536));
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    return r.Error("num_key_value_heads",
                   absl::StrCat(c.num_key_value_heads, " does not divide num_attention_heads ",
                                c.num_attention_heads));
  }
  if (r.Find("head_dim") == nullptr && c.hidden_size % c.num_attention_heads != 0) {
    return r.Missing("head_dim");  // no default: hidden_size is not a multiple of the heads
  }
  ASSIGN_OR_RETURN(c.head_dim,
                   r.Int("head_dim", false, c.hidden_size / c.num_attention_heads, 1, 65536));
  ASSIGN_OR_RETURN(c.intermediate_size, r.Int("intermediate_size", false, 0, 0, kMaxDim));

  // Experts: "num_experts" (hub files of 2025) or "num_local_experts" (transformers 5).
  const json* ne = r.Find("num_experts");
  const std::string experts_key = ne != nullptr ? "num_experts" : "num_local_experts";
  if (ne == nullptr && r.Find("num_local_experts") == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(r.origin(), ": missing required key '", prefix,
                                                   "num_experts' (or 'num_local_experts')"));
  }
  ASSIGN_OR_RETURN(c.num_experts, r.Int(experts_key, true, 0, 0, 65536));
  if (ne != nullptr && r.Find("num_local_experts") != nullptr) {
    ASSIGN_OR_RETURN(int64_t other, r.Int("num_local_experts", true, 0, 0, 65536));
    if (other != c.num_experts) {
      return r.Error("num_local_experts", absl::StrCat(other, " disagrees with num_experts ",
                                                       c.num_experts));
    }
  }
  ASSIGN_OR_RETURN(c.num_experts_per_tok,
                   r.Int("num_experts_per_tok", c.num_experts > 0, 0, 1, 65536));
  if (c.num_experts_per_tok > c.num_experts) {
    return r.Error("num_experts_per_tok", absl::StrCat(c.num_experts_per_tok,
                                                       " exceeds the number of experts ",
                                                       c.num_experts));
  }
  ASSIGN_OR_RETURN(c.moe_intermediate_size,
                   r.Int("moe_intermediate_size", c.num_experts > 0, 0, 1, kMaxDim));
  ASSIGN_OR_RETURN(c.shared_expert_intermediate_size,
                   r.Int("shared_expert_intermediate_size", false, 0, 0, kMaxDim));
  ASSIGN_OR_RETURN(c.decoder_sparse_step, r.Int("decoder_sparse_step", false, 1, 1, kMaxLayers));
  if (const json* m = r.Find("mlp_only_layers")) {
    if (!m->is_array()) return r.Error("mlp_only_layers", "expected a list of layer numbers");
    for (const json& e : *m) {
      ASSIGN_OR_RETURN(int64_t l, r.IntValue("mlp_only_layers", e));
      if (l < 0 || l >= c.num_hidden_layers) {
        return r.Error("mlp_only_layers", absl::StrCat("layer ", l, " out of range"));
      }
      c.mlp_only_layers.push_back(l);
    }
  }
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    if (!c.IsMoeLayer(l) && c.intermediate_size <= 0) {
      return r.Missing("intermediate_size");  // a dense MLP layer needs it
    }
  }
  ASSIGN_OR_RETURN(c.norm_topk_prob, r.Bool("norm_topk_prob", true));
  ASSIGN_OR_RETURN(c.tie_word_embeddings, r.Bool("tie_word_embeddings", false));
  ASSIGN_OR_RETURN(c.attention_bias, r.Bool("attention_bias", false));
  ASSIGN_OR_RETURN(c.rms_norm_eps, r.Double(r.Find("rms_norm_eps"), "rms_norm_eps", 1e-6));
  if (c.rms_norm_eps <= 0) return r.Error("rms_norm_eps", "must be positive");

  // RoPE: top-level keys (hub files of 2025) or rope_parameters (transformers 5); old files may
  // say rope_scaling for the type.
  const json* rope = r.Find("rope_parameters");
  if (rope != nullptr && !rope->is_object()) return r.Error("rope_parameters", "expected an object");
  auto rope_key = [&](const std::string& key) -> std::pair<const json*, std::string> {
    if (const json* v = r.Find(key)) return {v, key};
    if (rope != nullptr) {
      auto it = rope->find(key);
      if (it != rope->end() && !it->is_null()) return {&*it, "rope_parameters." + key};
    }
    return {nullptr, key};
  };
  auto [theta, theta_key] = rope_key("rope_theta");
  ASSIGN_OR_RETURN(c.rope_theta, r.Double(theta, theta_key, 10000.0));
  if (c.rope_theta <= 0) return r.Error(theta_key, "must be positive");
  auto [prf, prf_key] = rope_key("partial_rotary_factor");
  ASSIGN_OR_RETURN(c.partial_rotary_factor, r.Double(prf, prf_key, 1.0));
  if (c.partial_rotary_factor <= 0 || c.partial_rotary_factor > 1) {
    return r.Error(prf_key, "must be in (0, 1]");
  }
  if (c.RotaryDim() < 2 || c.RotaryDim() % 2 != 0) {
    return r.Error(prf_key, absl::StrCat("rotary dims ", c.RotaryDim(), " of head_dim ",
                                         c.head_dim, " must be even and positive"));
  }
  auto [rtype, rtype_key] = rope_key("rope_type");
  if (rtype == nullptr) {
    if (const json* rs = r.Find("rope_scaling"); rs != nullptr && rs->is_object()) {
      auto it = rs->find("rope_type");
      if (it == rs->end()) it = rs->find("type");
      if (it != rs->end()) {
        rtype = &*it;
        rtype_key = "rope_scaling.type";
      }
    }
  }
  if (rtype != nullptr) {
    if (!rtype->is_string()) return r.Error(rtype_key, "expected a string");
    c.rope_type = rtype->get<std::string>();
  }
  ASSIGN_OR_RETURN(c.max_position_embeddings,
                   r.Int("max_position_embeddings", false, 0, 0, int64_t{1} << 40));

  ASSIGN_OR_RETURN(c.eos_token_ids, r.IntOrList("eos_token_id"));
  ASSIGN_OR_RETURN(std::vector<int64_t> bos, r.IntOrList("bos_token_id"));
  c.bos_token_id = bos.empty() ? -1 : bos.front();
  ASSIGN_OR_RETURN(c.torch_dtype, r.String(r.Find("dtype") ? "dtype" : "torch_dtype", false));

  // Hybrid models: Gated DeltaNet shapes and the per-layer attention kind.
  ASSIGN_OR_RETURN(c.full_attention_interval,
                   r.Int("full_attention_interval", false, 4, 1, kMaxLayers));
  ASSIGN_OR_RETURN(c.linear_num_key_heads, r.Int("linear_num_key_heads", hybrid, 0, 1, 65536));
  ASSIGN_OR_RETURN(c.linear_num_value_heads, r.Int("linear_num_value_heads", hybrid, 0, 1, 65536));
  ASSIGN_OR_RETURN(c.linear_key_head_dim, r.Int("linear_key_head_dim", hybrid, 0, 1, 65536));
  ASSIGN_OR_RETURN(c.linear_value_head_dim, r.Int("linear_value_head_dim", hybrid, 0, 1, 65536));
  ASSIGN_OR_RETURN(c.linear_conv_kernel_dim, r.Int("linear_conv_kernel_dim", hybrid, 0, 1, 64));
  if (hybrid && c.linear_num_value_heads % c.linear_num_key_heads != 0) {
    return r.Error("linear_num_value_heads", "must be a multiple of linear_num_key_heads");
  }
  ASSIGN_OR_RETURN(c.attention_output_gate, r.Bool("attn_output_gate", hybrid));
  if (c.attention_output_gate && !hybrid) {
    return r.Error("attn_output_gate", "true is supported only for the hybrid models");
  }
  c.zero_centered_norms = hybrid;
  const std::string mtp_key =
      r.Find("mtp_num_hidden_layers") != nullptr ? "mtp_num_hidden_layers" : "num_nextn_predict_layers";
  ASSIGN_OR_RETURN(c.mtp_num_hidden_layers, r.Int(mtp_key, false, 0, 0, kMaxLayers));
  ASSIGN_OR_RETURN(std::string act, r.String("hidden_act", false));
  if (!act.empty()) {
    if (act != "silu") return r.Error("hidden_act", "unsupported value '" + act + "' (supported: silu)");
    c.hidden_act = act;
  }
  if (c.rope_type != "default") {
    return r.Error(rtype_key, "unsupported value '" + c.rope_type + "' (supported: default)");
  }
  if (const json* lt = r.Find("layer_types")) {
    if (!lt->is_array()) return r.Error("layer_types", "expected a list of strings");
    for (const json& e : *lt) {
      if (!e.is_string()) return r.Error("layer_types", "expected a list of strings");
      const std::string& s = e.get_ref<const std::string&>();
      if (s != "linear_attention" && s != "full_attention") {
        return r.Error("layer_types", "unknown layer type '" + s +
                                          "' (known: linear_attention, full_attention)");
      }
      c.layer_types.push_back(s);
    }
    if (static_cast<int64_t>(c.layer_types.size()) != c.num_hidden_layers) {
      return r.Error("layer_types", absl::StrCat(c.layer_types.size(), " entries for ",
                                                 c.num_hidden_layers, " layers"));
    }
  } else if (hybrid) {
    // Transformers' default: every full_attention_interval-th layer is full attention.
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
      c.layer_types.push_back((l + 1) % c.full_attention_interval == 0 ? "full_attention"
                                                                       : "linear_attention");
    }
  }
  return absl::OkStatus();
}

// ModelOpt's quantization_config: only NVFP4 in groups of 16 inputs is computed (FP8 or W4A8
// exports from the same tool are other byte layouts).
absl::Status ParseModelopt(const json& q, const ConfigReader& r, ModelConfig& c) {
  const std::string key = "quantization_config";
  auto algo = q.find("quant_algo");
  if (algo == q.end() || !algo->is_string()) return r.Error(key + ".quant_algo", "expected a string");
  if (algo->get<std::string>() != "NVFP4") {
    return absl::UnimplementedError(absl::StrCat(r.origin(), ": quant_method 'modelopt' with quant_algo '",
                                                 algo->get<std::string>(), "' is not supported (supported: NVFP4)"));
  }
  auto group = q.find("group_size");
  if (group == q.end() || !group->is_number_integer() || group->get<int64_t>() != 16) {
    return r.Error(key + ".group_size", "expected 16 for NVFP4, found " +
                                            (group == q.end() ? std::string("nothing") : group->dump()));
  }
  c.quant_method = "modelopt";
  c.quant_algo = "NVFP4";
  c.quant_group_size = 16;
  return absl::OkStatus();
}

// quantization_config: block-scaled FP8 and ModelOpt NVFP4 are read; anything else is refused
// naming it, since reading its bytes as bf16 would give garbage.
absl::Status ParseQuantization(const json& q, const ConfigReader& r, ModelConfig& c) {
  const std::string key = "quantization_config";
  if (!q.is_object()) return r.Error(key, "expected an object");
  auto method = q.find("quant_method");
  if (method == q.end() || !method->is_string()) return r.Error(key + ".quant_method", "expected a string");
  const std::string m = method->get<std::string>();
  if (m == "modelopt") return ParseModelopt(q, r, c);
  if (m != "fp8") {
    return r.Error(key + ".quant_method", "unknown quantization method '" + m + "' (supported: fp8, modelopt)");
  }
  auto fmt = q.find("fmt");
  if (fmt != q.end() && !fmt->is_null() && (!fmt->is_string() || fmt->get<std::string>() != "e4m3")) {
    return r.Error(key + ".fmt", "unsupported FP8 format " + fmt->dump() + " (supported: e4m3)");
  }
  auto block = q.find("weight_block_size");
  if (block == q.end() || !block->is_array() || block->size() != 2 || !(*block)[0].is_number_integer() ||
      !(*block)[1].is_number_integer() || (*block)[0].get<int64_t>() < 1 || (*block)[1].get<int64_t>() < 1 ||
      (*block)[0].get<int64_t>() > kMaxDim || (*block)[1].get<int64_t>() > kMaxDim) {
    return r.Error(key + ".weight_block_size",
                   "expected [out, in] block sizes (positive integers), found " +
                       (block == q.end() ? std::string("nothing") : block->dump()));
  }
  c.quant_method = m;
  c.weight_block_out = (*block)[0].get<int64_t>();
  c.weight_block_in = (*block)[1].get<int64_t>();
  return absl::OkStatus();
}

}  // namespace

bool ModelConfig::IsMoeLayer(int64_t layer) const {
  if (std::find(mlp_only_layers.begin(), mlp_only_layers.end(), layer) != mlp_only_layers.end()) {
    return false;
  }
  return num_experts > 0 && decoder_sparse_step > 0 && (layer + 1) % decoder_sparse_step == 0;
}

bool ModelConfig::IsHybrid() const { return IsHybridType(model_type); }

bool ModelConfig::IsFullAttentionLayer(int64_t layer) const {
  if (layer_types.empty()) return true;
  if (layer < 0 || layer >= static_cast<int64_t>(layer_types.size())) return false;
  return layer_types[layer] == "full_attention";
}

bool ModelConfig::IsLinearAttentionLayer(int64_t layer) const {
  if (layer < 0 || layer >= static_cast<int64_t>(layer_types.size())) return false;
  return layer_types[layer] == "linear_attention";
}

int64_t ModelConfig::RotaryDim() const {
  return static_cast<int64_t>(static_cast<double>(head_dim) * partial_rotary_factor);
}

absl::StatusOr<ModelConfig> ParseModelConfig(const std::string& json_text, const std::string& origin) {
  ASSIGN_OR_RETURN(json root, ParseJson(json_text, origin));
  if (!root.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": expected a JSON object"));
  }
  ModelConfig c;
  c.origin = origin;
  ConfigReader top(root, nullptr, origin, "");
  ASSIGN_OR_RETURN(c.model_type, top.String("model_type", true));
  if (const json* a = top.Find("architectures"); a != nullptr && a->is_array() && !a->empty() &&
                                                 (*a)[0].is_string()) {
    c.architecture = (*a)[0].get<std::string>();
  }
  // Multimodal wrappers keep the language model's keys in text_config.
  const json* text = &root;
  const json* wrapper = nullptr;
  std::string prefix;
  if (const json* tc = top.Find("text_config")) {
    if (!tc->is_object()) return top.Error("text_config", "expected an object");
    text = tc;
    wrapper = &root;
    prefix = "text_config.";
    c.wrapper_model_type = c.model_type;
    auto mt = tc->find("model_type");
    if (mt != tc->end() && mt->is_string()) c.model_type = mt->get<std::string>();
  }
  if (std::find(std::begin(kSupportedModelTypes), std::end(kSupportedModelTypes), c.model_type) ==
      std::end(kSupportedModelTypes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        origin, ": unsupported architecture: model_type '", c.model_type, "' (supported: ",
        absl::StrJoin(kSupportedModelTypes, ", "), ")"));
  }
  ConfigReader r(*text, wrapper, origin, prefix);
  RETURN_IF_ERROR(ParseFields(r, prefix, c));
  // Published multimodal FP8 checkpoints keep quantization_config at the top level.
  const ConfigReader* quant_reader = &top;
  const json* quant = top.Find("quantization_config");
  if (quant == nullptr && wrapper != nullptr) {
    quant = r.Find("quantization_config");
    quant_reader = &r;
  }
  if (quant != nullptr) RETURN_IF_ERROR(ParseQuantization(*quant, *quant_reader, c));
  return c;
}

absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& model_dir) {
  namespace fs = std::filesystem;
  const std::string path = (fs::path(model_dir) / "config.json").string();
  auto text = ReadFile(path);
  if (!text.ok()) {
    return absl::NotFoundError(absl::StrCat(path, ": not found (is ", model_dir,
                                            " a Hugging Face model folder?)"));
  }
  ASSIGN_OR_RETURN(ModelConfig c, ParseModelConfig(*text, path));
  // generation_config.json may add stop ids (chat models list <|im_end|> there).
  const std::string gen_path = (fs::path(model_dir) / "generation_config.json").string();
  if (fs::exists(gen_path)) {
    ASSIGN_OR_RETURN(std::string gen_text, ReadFile(gen_path));
    ASSIGN_OR_RETURN(json gen, ParseJson(gen_text, gen_path));
    if (!gen.is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(gen_path, ": expected a JSON object"));
    }
    ConfigReader g(gen, nullptr, gen_path, "");
    ASSIGN_OR_RETURN(std::vector<int64_t> eos, g.IntOrList("eos_token_id"));
    for (int64_t id : eos) {
      if (std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), id) == c.eos_token_ids.end()) {
        c.eos_token_ids.push_back(id);
      }
    }
    if (c.bos_token_id < 0) {
      ASSIGN_OR_RETURN(std::vector<int64_t> bos, g.IntOrList("bos_token_id"));
      if (!bos.empty()) c.bos_token_id = bos.front();
    }
  }
  return c;
}

}  // namespace tandem::engine
