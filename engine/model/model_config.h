// The model's config.json, both eras of spelling (see docs/model-notes.md and tests/data/README.md).
//
// What: the hyper-parameters the forward pass needs, parsed and validated once. Accepted spellings:
// num_experts | num_local_experts; rope_theta top-level | rope_parameters.rope_theta (same for
// partial_rotary_factor); dtype | torch_dtype; eos_token_id int | list | null, merged with
// generation_config.json. Multimodal wrappers (model_type qwen3_5_moe with a `text_config`
// object) are read from their text part; the wrapper's tie_word_embeddings / eos / bos / vocab
// fill keys the text part lacks. Supported model_types: qwen3_moe, qwen3_next, qwen3_5_moe,
// qwen3_5_moe_text (parsing only: whether a forward pass exists is the forward pass's business).
// Why strict: a wrong head count or expert count gives plausible-looking garbage, so every
// missing or inconsistent key is an error naming the key and the file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem::engine {

struct ModelConfig {
  std::string model_type;           // "qwen3_moe", "qwen3_next", "qwen3_5_moe_text", ...
  std::string architecture;         // architectures[0] when present
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;    // dense MLP layers
  int64_t moe_intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;             // defaults to hidden_size / num_attention_heads
  int64_t num_experts = 0;          // num_experts or num_local_experts
  int64_t num_experts_per_tok = 0;
  int64_t decoder_sparse_step = 1;
  std::vector<int64_t> mlp_only_layers;
  bool norm_topk_prob = true;
  bool tie_word_embeddings = false;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;      // top-level rope_theta or rope_parameters.rope_theta
  double partial_rotary_factor = 1.0;
  int64_t max_position_embeddings = 0;
  std::vector<int64_t> eos_token_ids;   // from config.json (and generation_config.json when present)
  int64_t bos_token_id = -1;
  std::string torch_dtype;              // "bfloat16", ...
  // Hybrid models (qwen3_next / qwen3_5_moe): "linear_attention" / "full_attention" per layer.
  std::vector<std::string> layer_types;

  // Added by the loader (additive; defaults are HF's).
  std::string origin;                         // the file this came from (error messages)
  bool attention_bias = false;
  std::string rope_type = "default";            // rope_parameters.rope_type / rope_scaling.type
  int64_t shared_expert_intermediate_size = 0;  // hybrid models' shared expert; 0 = none
  int64_t full_attention_interval = 4;          // hybrid default when layer_types is absent
  // Gated DeltaNet (linear attention) shapes of the hybrid models; 0 for qwen3_moe.
  int64_t linear_num_key_heads = 0;
  int64_t linear_num_value_heads = 0;
  int64_t linear_key_head_dim = 0;
  int64_t linear_value_head_dim = 0;
  int64_t linear_conv_kernel_dim = 0;

  // Hybrid-model details (docs/model-notes.md, "Qwen3-Next and Qwen3.5-MoE"); false / 0 / empty
  // for qwen3_moe.
  // The model_type of a multimodal wrapper ("qwen3_5_moe" when the text part was read from its
  // text_config; empty for a text-only config.json).
  std::string wrapper_model_type;
  // Gated full attention: q_proj holds 2 * head_dim rows per query head (q, then the output
  // gate), the attention output multiplied by sigmoid(gate) before o_proj. Key attn_output_gate;
  // default true for the hybrid models (HF always gates them), false otherwise.
  bool attention_output_gate = false;
  // Input, post-attention, final and q/k RMSNorms store w near 0 and compute (1 + w) * x_hat
  // (Qwen3NextRMSNorm); the DeltaNet's output norm (linear_attn.norm) is plain w * x_hat. True
  // exactly for the hybrid models (no config key says it).
  bool zero_centered_norms = false;
  // Multi-token-prediction layers stored under mtp.* (mtp_num_hidden_layers, or
  // num_nextn_predict_layers); 0 = none. Only listed by the loader (speculative decoding later).
  int64_t mtp_num_hidden_layers = 0;
  // hidden_act: only "silu" is supported (anything else is refused naming the value).
  std::string hidden_act = "silu";
  // quantization_config (top level, or in text_config): quant_method "fp8" is block-scaled FP8
  // (fmt e4m3; one float32 scale per weight_block_size [out, in] block of a weight); "" when the
  // checkpoint is not quantized. Which linears are quantized is decided by the tensors (an
  // F8_E4M3 weight with a weight_scale_inv beside it), not by this. quant_method "modelopt"
  // is NVIDIA ModelOpt's export: quant_algo "NVFP4" with group_size 16 (engine/model/nvfp4.h;
  // a U8 weight with weight_scale and weight_scale_2 beside it); other algos and group sizes are
  // refused naming them, as are other methods.
  std::string quant_method;
  int64_t weight_block_out = 0;
  int64_t weight_block_in = 0;
  std::string quant_algo;       // "NVFP4" for modelopt, else ""
  int64_t quant_group_size = 0;  // 16 for NVFP4, else 0

  // True for qwen3_next / qwen3_5_moe(_text): layer_types is then filled (one per layer).
  bool IsHybrid() const;
  // layer_types[layer] == "full_attention", or true for every layer of a non-hybrid model.
  bool IsFullAttentionLayer(int64_t layer) const;
  // layer_types[layer] == "linear_attention" (Gated DeltaNet); false for a non-hybrid model.
  bool IsLinearAttentionLayer(int64_t layer) const;
  // Gated DeltaNet widths: key dim n_k * dk, value dim n_v * dv, and the conv1d channels
  // q|k|v = 2 * key dim + value dim.
  int64_t LinearKeyDim() const { return linear_num_key_heads * linear_key_head_dim; }
  int64_t LinearValueDim() const { return linear_num_value_heads * linear_value_head_dim; }
  int64_t LinearConvDim() const { return 2 * LinearKeyDim() + LinearValueDim(); }
  // Dims of each head that RoPE rotates: partial_rotary_factor * head_dim (even).
  int64_t RotaryDim() const;

  // A layer is MoE iff not in mlp_only_layers, num_experts > 0 and (layer+1) % decoder_sparse_step == 0.
  bool IsMoeLayer(int64_t layer) const;
};

// Parses config.json text; `origin` (a path) is used in error messages.
absl::StatusOr<ModelConfig> ParseModelConfig(const std::string& json_text, const std::string& origin);
// Reads <dir>/config.json (and <dir>/generation_config.json for eos ids when present).
absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& model_dir);

}  // namespace tandem::engine
