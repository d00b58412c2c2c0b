// The shapes of the tiny test model (tests/data/qwen3moe-tiny/config.json) as a ModelConfig, for
// the tests that need a config but no weights (they change what their case is about).
#pragma once

#include "engine/model/model_config.h"

namespace tandem::engine::testing {

inline ModelConfig TinyMoeConfig() {
  ModelConfig c;
  c.model_type = "qwen3_moe";
  c.vocab_size = 4096;
  c.hidden_size = 128;
  c.intermediate_size = 256;
  c.moe_intermediate_size = 64;
  c.num_hidden_layers = 4;
  c.num_attention_heads = 8;
  c.num_key_value_heads = 4;
  c.head_dim = 32;
  c.num_experts = 16;
  c.num_experts_per_tok = 4;
  return c;
}

}  // namespace tandem::engine::testing
