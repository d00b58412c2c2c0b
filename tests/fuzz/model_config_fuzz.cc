// Fuzz target: config.json parsing (untrusted text from a model folder).
#include <cstdint>
#include <string>

#include "engine/model/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto config = tandem::engine::ParseModelConfig(text, "fuzz/config.json");
  if (config.ok()) {
    // Accepted configs satisfy the invariants the forward pass relies on.
    const auto& c = *config;
    if (c.hidden_size <= 0 || c.num_attention_heads <= 0 || c.num_key_value_heads <= 0 ||
        c.num_attention_heads % c.num_key_value_heads != 0 || c.head_dim <= 0 ||
        c.num_experts_per_tok > c.num_experts || c.RotaryDim() <= 0 ||
        (!c.layer_types.empty() &&
         static_cast<int64_t>(c.layer_types.size()) != c.num_hidden_layers)) {
      __builtin_trap();
    }
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) (void)c.IsMoeLayer(l);
  }
  return 0;
}
