#include "engine/load_checks.h"

#include <string>

#include "common/status.h"
#include "engine/model/tp_shard.h"

namespace tandem::engine {

absl::Status CheckModelSupported(const ModelConfig& config, int world, std::string_view backend, bool hybrid,
                                 bool fp8, bool nvfp4) {
  const std::string& mt = config.model_type;
  const bool computed = (fp8 && config.quant_method == "fp8") || (nvfp4 && config.quant_method == "modelopt");
  if (!config.quant_method.empty() && !computed) {
    return absl::UnimplementedError("quant_method " + config.quant_method + " (quantized weights) is not supported by the " +
                                    std::string(backend) + " backend yet");
  }
  const bool hybrid_type = mt == "qwen3_next" || mt == "qwen3_5_moe" || mt == "qwen3_5_moe_text";
  if (mt != "qwen3_moe" && mt != "qwen3" && !(hybrid && hybrid_type)) {
    return absl::UnimplementedError("model_type " + mt + " is not supported by the " + std::string(backend) +
                                    " backend yet");
  }
  for (const auto& lt : config.layer_types) {
    if (lt != "full_attention" && !(hybrid && lt == "linear_attention")) {
      return absl::UnimplementedError("layer type " + lt + " is not supported by the " + std::string(backend) +
                                      " backend yet");
    }
  }
  if (hybrid_type && (config.linear_num_key_heads <= 0 ||
                      config.linear_num_value_heads % config.linear_num_key_heads != 0)) {
    return absl::InvalidArgumentError("linear_num_value_heads " + std::to_string(config.linear_num_value_heads) +
                                      " is not a multiple of linear_num_key_heads " +
                                      std::to_string(config.linear_num_key_heads));
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
