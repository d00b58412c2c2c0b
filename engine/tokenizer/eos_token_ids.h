// The token ids that end a generated turn, gathered from a model folder as the serving stacks
// users compare us with do: vLLM stops on the tokenizer's eos_token (tokenizer_config.json) and on
// every eos_token_id of the generation config, which transformers' GenerationConfig takes from
// generation_config.json, or from config.json (its text_config for multimodal wrappers) when the
// folder has no generation_config.json. Tokenizer::LoadFromDir combines the two
// (Tokenizer::eos_token_ids); this file reads the generation config part.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem::tokenizer {

// The eos_token_id of DIR/generation_config.json (an int, a list of ints or null), else that of
// DIR/config.json (top level, else text_config); empty when neither file has one. A file that is
// not JSON, or an id that is not an int in [0, 2^31): InvalidArgument naming the file and key.
absl::StatusOr<std::vector<int32_t>> ReadGenerationEosTokenIds(const std::string& model_dir);

}  // namespace tandem::tokenizer
