// Embedding gather: the rows of a bf16 table picked by token id, widened to float32.
#pragma once

#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/stream.h"

namespace tandem::kernels {

// out (T, H) = table[ids[t]]; ids (T) on the device, table (vocab, H) bf16. H % 8 == 0.
void embedding(float* out, const int32_t* ids, const bf16_bits* table, int64_t T, int64_t H,
               cudaStream_t stream);

// out (R, H) = x[rows[r]]; rows (R) on the device. Picks the tokens whose logits are wanted.
void gather_rows(float* out, const float* x, const int32_t* rows, int64_t R, int64_t H,
                 cudaStream_t stream);

namespace ref {
void embedding(float* out, const int32_t* ids, const bf16_bits* table, int64_t T, int64_t H);
}  // namespace ref

}  // namespace tandem::kernels
