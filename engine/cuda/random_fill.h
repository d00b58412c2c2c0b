// Random bf16 / float fills on the device (synthetic weights and KV for benchmarks): uniform in
// [-scale, scale] from a counter-based hash, so no generator state and no host round trip.
#pragma once

#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/stream.h"

namespace tandem::engine::cuda {

void fill_random_bf16(kernels::bf16_bits* out, int64_t n, float scale, uint64_t seed, cudaStream_t stream);
void fill_constant_bf16(kernels::bf16_bits* out, int64_t n, float value, cudaStream_t stream);

}  // namespace tandem::engine::cuda
