#include "bench/synthetic_configs.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tandem::bench {

using engine::ModelConfig;

namespace {

// Hugging Face Qwen/Qwen3.5-35B-A3B config.json, the text part (`text_config` of the multimodal
// wrapper Qwen3_5MoeForConditionalGeneration; the wrapper's tie_word_embeddings is false). Read as
// a text-only qwen3_5_moe_text config, the way the loader reads the text part, so every derived
// field (layer types, gated attention, zero-centred norms, rotary dims) is the loader's. Its
// published layer_types list is 3 x linear_attention + full_attention, ten times: exactly what
// full_attention_interval 4 gives. Left out: the vision tower and the MTP head
// (mtp_num_hidden_layers 1), which plain decode never runs, and the mrope keys of
// rope_parameters, which text-only serving ignores. The same values are in
// tests/engine/model/model_config_test.cc (PublishedHybridConfigs).
constexpr char kQwen35MoeJson[] = R"({
  "architectures": ["Qwen3_5MoeForCausalLM"], "model_type": "qwen3_5_moe_text",
  "vocab_size": 248320, "hidden_size": 2048, "num_hidden_layers": 40,
  "full_attention_interval": 4, "attn_output_gate": true,
  "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
  "rope_parameters": {"rope_type": "default", "rope_theta": 10000000, "partial_rotary_factor": 0.25},
  "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_key_head_dim": 128,
  "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
  "num_experts": 256, "num_experts_per_tok": 8, "moe_intermediate_size": 512,
  "shared_expert_intermediate_size": 512, "mlp_only_layers": [],
  "hidden_act": "silu", "rms_norm_eps": 1e-06, "max_position_embeddings": 262144,
  "tie_word_embeddings": false, "eos_token_id": 248044, "dtype": "bfloat16"})";

// Hugging Face Qwen/Qwen3-Next-80B-A3B-Instruct config.json (text-only, Qwen3NextForCausalLM; no
// layer_types, so full_attention_interval 4 gives 36 Gated DeltaNet + 12 full attention layers;
// attention gated by the model type). intermediate_size 5120 belongs to no layer (every layer is
// MoE: decoder_sparse_step 1, mlp_only_layers empty). The MTP head is not run. Same values as
// tests/engine/model/model_config_test.cc (PublishedHybridConfigs).
constexpr char kQwen3NextJson[] = R"({
  "architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next",
  "vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 5120, "num_hidden_layers": 48,
  "full_attention_interval": 4, "decoder_sparse_step": 1, "mlp_only_layers": [],
  "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
  "partial_rotary_factor": 0.25, "rope_theta": 10000000, "rope_scaling": null,
  "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_key_head_dim": 128,
  "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
  "num_experts": 512, "num_experts_per_tok": 10, "moe_intermediate_size": 512,
  "shared_expert_intermediate_size": 512, "norm_topk_prob": true,
  "hidden_act": "silu", "rms_norm_eps": 1e-06, "max_position_embeddings": 262144,
  "attention_bias": false, "tie_word_embeddings": false, "bos_token_id": 151643,
  "eos_token_id": 151645, "torch_dtype": "bfloat16"})";

// Qwen/Qwen3-30B-A3B config.json (qwen3_moe), set field by field as the benchmark always had it.
ModelConfig Qwen3MoeConfig() {
  ModelConfig c;
  c.model_type = "qwen3_moe";
  c.vocab_size = 151936;
  c.hidden_size = 2048;
  c.intermediate_size = 6144;
  c.moe_intermediate_size = 768;
  c.num_hidden_layers = 48;
  c.num_attention_heads = 32;
  c.num_key_value_heads = 4;
  c.head_dim = 128;
  c.num_experts = 128;
  c.num_experts_per_tok = 8;
  c.norm_topk_prob = true;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 1e6;
  c.max_position_embeddings = 40960;
  return c;
}

}  // namespace

const std::vector<std::string>& SyntheticModelNames() {
  static const std::vector<std::string> names = {"qwen3-30b-a3b", "qwen3.5-35b-a3b", "qwen3-next-80b-a3b"};
  return names;
}

absl::StatusOr<ModelConfig> SyntheticConfig(const std::string& name) {
  if (name == "qwen3-30b-a3b") return Qwen3MoeConfig();
  if (name == "qwen3.5-35b-a3b") return engine::ParseModelConfig(kQwen35MoeJson, "synthetic qwen3.5-35b-a3b");
  if (name == "qwen3-next-80b-a3b") return engine::ParseModelConfig(kQwen3NextJson, "synthetic qwen3-next-80b-a3b");
  return absl::NotFoundError("unknown synthetic model \"" + name + "\" (known: " +
                             absl::StrJoin(SyntheticModelNames(), ", ") + ")");
}

std::string LayerMix(const ModelConfig& c) {
  int64_t linear = 0, full = 0, moe = 0;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    (c.IsLinearAttentionLayer(l) ? linear : full) += 1;
    moe += c.IsMoeLayer(l) ? 1 : 0;
  }
  std::string out = absl::StrCat(c.num_hidden_layers, " layers: ");
  const char* attention = c.attention_output_gate ? " gated full attention" : " full attention";
  if (linear > 0) {
    absl::StrAppend(&out, linear, " Gated DeltaNet + ", full, attention);
  } else {
    absl::StrAppend(&out, full, attention);
  }
  absl::StrAppend(&out, " (", c.num_attention_heads, " q / ", c.num_key_value_heads, " kv heads of ", c.head_dim, ")");
  if (linear > 0) {
    absl::StrAppend(&out, ", DeltaNet ", c.linear_num_key_heads, " k / ", c.linear_num_value_heads, " v heads of ",
                    c.linear_key_head_dim, " x ", c.linear_value_head_dim, ", conv ", c.linear_conv_kernel_dim);
  }
  if (moe > 0) {
    absl::StrAppend(&out, "; MoE in ", moe, ": ", c.num_experts, " experts (", c.moe_intermediate_size, ") top-",
                    c.num_experts_per_tok);
    if (c.shared_expert_intermediate_size > 0) {
      absl::StrAppend(&out, " + shared expert (", c.shared_expert_intermediate_size, ")");
    }
  }
  if (moe < c.num_hidden_layers) absl::StrAppend(&out, "; dense MLP in ", c.num_hidden_layers - moe);
  absl::StrAppend(&out, "; vocab ", c.vocab_size, c.tie_word_embeddings ? " (tied)" : "");
  return out;
}

}  // namespace tandem::bench
