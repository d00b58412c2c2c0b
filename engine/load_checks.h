// What every backend checks before it loads a model: a model type and layer types there is a
// forward pass for, a tensor-parallel split of the config (engine/model/tp_shard.h), and a comm
// that matches the rank and world of the options. A backend adds only its own limits after these.
#pragma once

#include <string_view>

#include "absl/status/status.h"
#include "engine/model.h"

namespace tandem::engine {

// Errors say what is unsupported and by which backend ("model_type X is not supported by the cpu
// backend yet"), or which dimension does not split over `world` ranks.
// `hybrid`: the backend has the hybrid models' layers (Gated DeltaNet, gated attention, shared
// expert), so qwen3_next / qwen3_5_moe(_text) and layer types linear_attention / full_attention
// pass; the TP split then includes the linear key heads and the shared expert (CheckTpShard).
// `fp8`: the backend computes block-scaled FP8 weights (config.quant_method "fp8"); a backend
// without it refuses such a model (Unimplemented naming the quant_method) rather than read its
// F8 bytes as something else. `nvfp4`: the same for ModelOpt NVFP4 (quant_method "modelopt").
absl::Status CheckModelSupported(const ModelConfig& config, int world, std::string_view backend,
                                 bool hybrid = false, bool fp8 = false, bool nvfp4 = false);

// A comm is needed beyond one rank, and must be the rank `options.rank` of `options.world`.
absl::Status CheckComm(const ModelLoadOptions& options);

}  // namespace tandem::engine
