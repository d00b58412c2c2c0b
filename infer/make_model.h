// Writes a small Qwen3-MoE checkpoint with random weights in the Hugging Face layout (hub key
// layout, bf16), optionally carrying a real tokenizer's files. It lets the whole cluster run end
// to end where no real checkpoint can be downloaded; the text it produces is nonsense.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/cli.h"

namespace tandem::infer {

struct MakeModelOptions {
  std::string out_dir;
  std::string tokenizer_dir;  // copies tokenizer.json / tokenizer_config.json from here ("" = none)
  int64_t vocab_size = 151936;  // Qwen3's embedding size; covers every id of the Qwen3 tokenizer
  int64_t hidden_size = 128;
  int64_t num_layers = 4;
  int64_t num_heads = 8;
  int64_t num_kv_heads = 4;
  int64_t head_dim = 32;
  int64_t num_experts = 16;
  int64_t experts_per_tok = 4;
  int64_t moe_intermediate_size = 64;
  uint64_t seed = 1;
};

// Creates out_dir (must not hold a config.json already) with config.json,
// generation_config.json, model.safetensors and the tokenizer files.
absl::Status MakeRandomQwen3MoeModel(const MakeModelOptions& options);

}  // namespace tandem::infer

namespace tandem::infer {
// `tandem-infer make-model --out DIR [--tokenizer-from DIR] [--seed N] [--hidden N] [--layers N]
// [--experts N] [--vocab N]`: the flags, and the command (exit code: 0 written, 1 failure).
void AddMakeModelFlags(CLI::App* command, MakeModelOptions* options);
int RunMakeModelCommand(MakeModelOptions options);
}  // namespace tandem::infer
