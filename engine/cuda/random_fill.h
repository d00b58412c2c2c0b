// Random fills on the device (synthetic weights and KV for benchmarks): bf16 uniform in
// [-scale, scale] from a counter-based hash, so no generator state and no host round trip.
#pragma once

#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/stream.h"

namespace tandem::engine::cuda {

void fill_random_bf16(kernels::bf16_bits* out, int64_t n, float scale, uint64_t seed, cudaStream_t stream);
void fill_constant_bf16(kernels::bf16_bits* out, int64_t n, float value, cudaStream_t stream);

// Synthetic quantized weights (kernels/quant_weight.h): e4m3fn codes of values uniform in [lo, hi]
// (rounded to nearest, saturated to +-448, never NaN), random bytes (two e2m1 codes each: every
// byte is a valid pair), and float32 constants (scales).
inline constexpr float kE4m3Max = 448.0f;
void fill_random_e4m3(uint8_t* out, int64_t n, float lo, float hi, uint64_t seed, cudaStream_t stream);
void fill_random_bytes(uint8_t* out, int64_t n, uint64_t seed, cudaStream_t stream);
void fill_constant_f32(float* out, int64_t n, float value, cudaStream_t stream);

}  // namespace tandem::engine::cuda
