// Greedy sampling on the device: the index of the largest logit of each row (ties: lowest index).
#pragma once

#include <cstdint>

#include "kernels/stream.h"

namespace tandem::kernels {

// out (R) = argmax over each row of x (R, V).
void argmax(int32_t* out, const float* x, int64_t R, int64_t V, cudaStream_t stream);

namespace ref {
void argmax(int32_t* out, const float* x, int64_t R, int64_t V);
}  // namespace ref

}  // namespace tandem::kernels
