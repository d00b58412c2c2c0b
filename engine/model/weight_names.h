// The tensor names of a Hugging Face checkpoint (the "hub key layout").
//
// What: one place that spells weight names, so the forward pass never concatenates strings.
// Text weights live under a prefix: "model." for text-only checkpoints (Qwen3-30B-A3B,
// Qwen3-Next) and "model.language_model." for multimodal ones (Qwen3.5), detected from the
// checkpoint by looking for the embedding. Experts are one tensor per expert:
//   <prefix>layers.L.mlp.experts.E.{gate,up,down}_proj.weight   gate/up: [moe_inter, hidden],
//                                                                down:    [hidden, moe_inter]
// or fused over the experts (transformers 5 exports), detected from the checkpoint:
//   <prefix>layers.L.mlp.experts.gate_up_proj  [E, 2 moe_inter, hidden] (gate rows, then up)
//   <prefix>layers.L.mlp.experts.down_proj     [E, hidden, moe_inter]
// lm_head.weight is never prefixed; with tie_word_embeddings the embedding is the lm_head.
// Other top-level groups: model.visual.* (a multimodal checkpoint's vision tower) is never read;
// mtp.* (the multi-token-prediction head) is listed in WeightNames::mtp, not loaded.
// Why: key layouts differ between checkpoint families; keeping them here makes a new family a
// change of one file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/checkpoint.h"
#include "engine/model/model_config.h"

namespace tandem::engine {

inline constexpr char kTextPrefix[] = "model.";
inline constexpr char kMultimodalTextPrefix[] = "model.language_model.";

// "model." or "model.language_model.", whichever has <prefix>embed_tokens.weight among `names`;
// NotFound naming both candidates when neither does.
absl::StatusOr<std::string> DetectWeightPrefix(const std::vector<std::string>& names);

// <prefix>layers.<layer>.<suffix>, e.g. LayerKey("model.", 0, "self_attn.q_proj.weight").
std::string LayerKey(std::string_view prefix, int64_t layer, std::string_view suffix);
// <prefix>layers.<layer>.mlp.experts.<expert>.<proj>.weight; proj is gate_proj, up_proj, down_proj.
std::string ExpertKey(std::string_view prefix, int64_t layer, int64_t expert, std::string_view proj);
// <prefix>layers.<layer>.mlp.experts.<proj>; proj is gate_up_proj or down_proj (fused experts).
std::string FusedExpertsKey(std::string_view prefix, int64_t layer, std::string_view proj);
std::string EmbedKey(std::string_view prefix);      // <prefix>embed_tokens.weight  [vocab, hidden]
std::string FinalNormKey(std::string_view prefix);  // <prefix>norm.weight          [hidden]
// "lm_head.weight" [vocab, hidden], or EmbedKey(prefix) when the embeddings are tied.
std::string LmHeadKey(std::string_view prefix, bool tie_word_embeddings);

// The same, bound to one checkpoint: what the forward pass holds.
struct WeightNames {
  std::string prefix;
  bool tie_word_embeddings = false;
  bool fused_experts = false;     // experts stored as gate_up_proj / down_proj stacks
  std::vector<std::string> mtp = {};  // the mtp.* tensors, sorted (kept aside: speculative decoding)

  std::string Layer(int64_t layer, std::string_view suffix) const {
    return LayerKey(prefix, layer, suffix);
  }
  std::string Expert(int64_t layer, int64_t expert, std::string_view proj) const {
    return ExpertKey(prefix, layer, expert, proj);
  }
  std::string FusedExperts(int64_t layer, std::string_view proj) const {
    return FusedExpertsKey(prefix, layer, proj);
  }
  std::string Embed() const { return EmbedKey(prefix); }
  std::string FinalNorm() const { return FinalNormKey(prefix); }
  std::string LmHead() const { return LmHeadKey(prefix, tie_word_embeddings); }
};

inline constexpr char kMtpPrefix[] = "mtp.";
inline constexpr char kVisualPrefix[] = "model.visual.";

// Detects the prefix and the expert layout from `ckpt` (fused when the first MoE layer has
// mlp.experts.gate_up_proj), lists the mtp.* tensors, and checks that the lm_head (or tied
// embedding) is present.
absl::StatusOr<WeightNames> ResolveWeightNames(const Checkpoint& ckpt, const ModelConfig& config);

}  // namespace tandem::engine
