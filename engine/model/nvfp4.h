// NVFP4 weights (NVIDIA ModelOpt export, quant_method "modelopt" / quant_algo "NVFP4"): a linear
// `X.weight` stored U8 [out, in/2] (two 4-bit e2m1 codes per byte, the element of even index in the
// low nibble), `X.weight_scale` F8_E4M3 [out, in/16] (one scale per 16 consecutive inputs) and
// `X.weight_scale_2` a scalar F32 beside it. A fused experts stack has [E, ...] before each.
// `X.input_scale` (the activation scale of W4A4 kernels) is not read: the weights are dequantized
// and the activations stay float32 (W4A16).
#ifndef TANDEM_ENGINE_MODEL_NVFP4_H_
#define TANDEM_ENGINE_MODEL_NVFP4_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "engine/model/checkpoint.h"
#include "engine/model/layer_weights.h"

namespace tandem::engine {

// The inputs one weight_scale element covers (config group_size; the only one accepted).
inline constexpr int64_t kNvfp4Group = 16;

// e2m1: sign = bit 3, magnitude [0, 0.5, 1, 1.5, 2, 3, 4, 6][code & 7]; the upper bits are ignored.
float E2m1ToFloat(uint8_t code);

// "X.weight" -> "X.weight_scale" (the F8_E4M3 group scales) and "X.weight_scale_2" (the F32 scalar).
std::string WeightScaleName(const std::string& weight);
std::string WeightScale2Name(const std::string& weight);

// True when `weight` has both NVFP4 scales beside it (the tensors decide what is quantized).
bool IsNvfp4Weight(const Checkpoint& ckpt, const std::string& weight);

// The slice `s` (s.shape is the dequantized [out, in], or [E, out, in] with s.index) as float32:
// W[o][i] = e2m1(code[o][i]) * float(weight_scale[o][i/16]) * weight_scale_2. Any row slice; a
// column slice must start and end on 16-boundaries (a group is never split across ranks).
// InvalidArgument naming the tensors: a stored weight or scale of the wrong shape or dtype, a
// column slice off the groups, in not a multiple of 16.
absl::StatusOr<Tensor> ReadNvfp4Slice(const Checkpoint& ckpt, const WeightSlice& s);

}  // namespace tandem::engine

#endif  // TANDEM_ENGINE_MODEL_NVFP4_H_
