#include "engine/model/weight_names.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace tandem::engine {

absl::StatusOr<std::string> DetectWeightPrefix(const std::vector<std::string>& names) {
  // The multimodal prefix first: "model.language_model.embed_tokens.weight" does not start with
  // "model.embed_tokens", so the order only matters for checkpoints that hold both.
  for (const char* prefix : {kMultimodalTextPrefix, kTextPrefix}) {
    const std::string key = EmbedKey(prefix);
    if (std::find(names.begin(), names.end(), key) != names.end()) return std::string(prefix);
  }
  return absl::NotFoundError(absl::StrCat("no embedding in the checkpoint: neither ",
                                          EmbedKey(kTextPrefix), " nor ",
                                          EmbedKey(kMultimodalTextPrefix), " is present"));
}

std::string LayerKey(std::string_view prefix, int64_t layer, std::string_view suffix) {
  return absl::StrCat(AsAbsl(prefix), "layers.", layer, ".", AsAbsl(suffix));
}

std::string ExpertKey(std::string_view prefix, int64_t layer, int64_t expert, std::string_view proj) {
  return absl::StrCat(AsAbsl(prefix), "layers.", layer, ".mlp.experts.", expert, ".",
                      AsAbsl(proj), ".weight");
}

std::string FusedExpertsKey(std::string_view prefix, int64_t layer, std::string_view proj) {
  return absl::StrCat(AsAbsl(prefix), "layers.", layer, ".mlp.experts.", AsAbsl(proj));
}

std::string EmbedKey(std::string_view prefix) {
  return absl::StrCat(AsAbsl(prefix), "embed_tokens.weight");
}

std::string FinalNormKey(std::string_view prefix) { return absl::StrCat(AsAbsl(prefix), "norm.weight"); }

std::string LmHeadKey(std::string_view prefix, bool tie_word_embeddings) {
  return tie_word_embeddings ? EmbedKey(prefix) : std::string("lm_head.weight");
}

absl::StatusOr<WeightNames> ResolveWeightNames(const Checkpoint& ckpt, const ModelConfig& config) {
  WeightNames w;
  ASSIGN_OR_RETURN(w.prefix, DetectWeightPrefix(ckpt.Names()));
  w.tie_word_embeddings = config.tie_word_embeddings;
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) {
    if (!config.IsMoeLayer(l)) continue;
    w.fused_experts = ckpt.Has(w.FusedExperts(l, "gate_up_proj"));
    break;
  }
  for (const std::string& name : ckpt.Names()) {
    if (name.rfind(kMtpPrefix, 0) == 0) w.mtp.push_back(name);
  }
  if (!ckpt.Has(w.LmHead())) {
    return absl::NotFoundError(absl::StrCat(
        "tensor '", w.LmHead(), "' not found in the checkpoint (tie_word_embeddings is ",
        config.tie_word_embeddings ? "true" : "false", ")"));
  }
  return w;
}

}  // namespace tandem::engine
