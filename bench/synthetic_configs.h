// The shapes of the models the decode benchmark builds with random weights (`--synthetic NAME`):
// the published configs of the checkpoints operators run, so the benchmark reads the bytes a real
// step reads without downloading tens of GB. No GPU: the CPU tests check them.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"

namespace tandem::bench {

// The known names, in the order the help and errors list them: "qwen3-30b-a3b",
// "qwen3.5-35b-a3b", "qwen3-next-80b-a3b".
const std::vector<std::string>& SyntheticModelNames();

// The config of a known synthetic model name; NotFound listing the known names.
absl::StatusOr<engine::ModelConfig> SyntheticConfig(const std::string& name);

// The layer mix for the report, e.g. "40 layers: 30 Gated DeltaNet + 10 gated full attention (16 q /
// 2 kv heads of 256), DeltaNet 16 k / 32 v heads of 128 x 128, conv 4; MoE in 40: 256 experts (512)
// top-8 + shared expert (512); vocab 248320".
std::string LayerMix(const engine::ModelConfig& config);

}  // namespace tandem::bench
