#include "engine/load_checks.h"

#include <string>

#include "common/status.h"
#include "engine/model/tp_shard.h"

namespace tandem::engine {

absl::Status CheckModelSupported(const ModelConfig& config, int world, std::string_view backend) {
  const std::string& mt = config.model_type;
  if (mt != "qwen3_moe" && mt != "qwen3") {
    return absl::UnimplementedError("model_type " + mt + " is not supported by the " + std::string(backend) +
                                    " backend yet");
  }
  for (const auto& lt : config.layer_types) {
    if (lt != "full_attention") {
      return absl::UnimplementedError("layer type " + lt + " is not supported by the " + std::string(backend) +
                                      " backend yet");
    }
  }
  RETURN_IF_ERROR(CheckTpShard(config, world));
  bool moe = false;
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) moe |= config.IsMoeLayer(l);
  if (moe && (config.num_experts_per_tok <= 0 || config.num_experts_per_tok > config.num_experts)) {
    return absl::InvalidArgumentError("num_experts_per_tok " + std::to_string(config.num_experts_per_tok) +
                                      " must be in [1, num_experts=" + std::to_string(config.num_experts) + "]");
  }
  return absl::OkStatus();
}

absl::Status CheckComm(const ModelLoadOptions& o) {
  if (o.world > 1 && o.comm == nullptr) {
    return absl::InvalidArgumentError("tensor-parallel size " + std::to_string(o.world) + " needs a comm");
  }
  if (o.comm != nullptr && (o.comm->world_size() != o.world || o.comm->rank() != o.rank)) {
    return absl::InvalidArgumentError("comm is rank " + std::to_string(o.comm->rank()) + " of " +
                                      std::to_string(o.comm->world_size()) + ", options say rank " +
                                      std::to_string(o.rank) + " of " + std::to_string(o.world));
  }
  return absl::OkStatus();
}

}  // namespace tandem::engine
