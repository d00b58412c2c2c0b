// The cpu backend: float32 forward pass over the stored weights (the reference every other
// backend is tested against). One rank's shard; see docs/engine.md for the sharding.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/model.h"

namespace tandem::engine::cpu {

// Checks that the cpu backend supports `config` at this tensor-parallel size (model type,
// layer types, divisibility), without reading weights. Errors say what is unsupported.
absl::Status CheckSupported(const ModelConfig& config, int world);

// Loads this rank's shard of <dir> (config already parsed). Called by Model::Load.
absl::StatusOr<std::unique_ptr<Model>> LoadCpuModel(const std::string& dir, const ModelConfig& config,
                                                    const ModelLoadOptions& options);

}  // namespace tandem::engine::cpu
