// The decode benchmark's kernel table: each decode product of a model alone at batch 1 (TP 1
// shapes), timed over more copies of its inputs than L2 holds, so that every launch reads device
// memory: the bf16 products the engine runs, and the same shapes with the weights in each
// quantized format being benchmarked (kernels/quant_matmul.h, kernels/quant_moe.h). Needs a GPU.
#pragma once

#include <string>
#include <vector>

#include "engine/model/model_config.h"
#include "kernels/quant_weight.h"

namespace tandem::bench {

struct KernelTiming {
  std::string name;
  double bytes = 0;  // what one launch must read (the weights in their format, or KV / state)
  double us = 0;     // median microseconds per launch
};

// The bf16 rows (mixers' projections, router, lm_head, routed experts with the shared one, the
// delta-rule step, paged attention at 1k and 4k), then for every format of `quantized` other than
// bf16 the products it quantizes (attention, DeltaNet in_proj qkv|z and out_proj, experts).
std::vector<KernelTiming> DecodeKernelTimings(const engine::ModelConfig& config,
                                              const std::vector<kernels::WeightFormat>& quantized);

}  // namespace tandem::bench
