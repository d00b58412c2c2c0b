#include "kernels/gemm.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <tuple>

#include <cublas_api.h>
#include <cuda_bf16.h>

#include "kernels/cuda_check.h"

namespace tandem::kernels {

namespace {

// The cuBLAS entry points used, resolved from the shared library (see gemm.h for why not linked).
struct Cublas {
  cublasStatus_t (*create)(cublasHandle_t*) = nullptr;
  cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t) = nullptr;
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                            const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                            cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
  const char* (*status_string)(cublasStatus_t) = nullptr;
};

// nullptr when no cuBLAS could be loaded (said once on stderr).
const Cublas* LoadCublas() {
  static const Cublas* lib = []() -> const Cublas* {
    for (const char* name : {"libcublas.so.13", "libcublas.so.12", "libcublas.so"}) {
      void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (h == nullptr) continue;
      auto* c = new Cublas;
      c->create = reinterpret_cast<decltype(c->create)>(dlsym(h, "cublasCreate_v2"));
      c->set_stream = reinterpret_cast<decltype(c->set_stream)>(dlsym(h, "cublasSetStream_v2"));
      c->gemm_ex = reinterpret_cast<decltype(c->gemm_ex)>(dlsym(h, "cublasGemmEx"));
      c->status_string = reinterpret_cast<decltype(c->status_string)>(dlsym(h, "cublasGetStatusString"));
      if (c->create && c->set_stream && c->gemm_ex && c->status_string) {
        std::fprintf(stderr, "tandem kernels: prefill GEMMs through %s\n", name);
        return c;
      }
      std::fprintf(stderr, "tandem kernels: %s lacks a cuBLAS entry point; skipping it\n", name);
      delete c;
      dlclose(h);
    }
    std::fprintf(stderr,
                 "tandem kernels: no libcublas.so.13/.12 on the library path (%s); prefill uses the decode "
                 "kernels\n",
                 dlerror());
    return nullptr;
  }();
  return lib;
}

#define CUBLAS_CHECK(lib, expr)                                                                          \
  do {                                                                                                   \
    cublasStatus_t _s = (expr);                                                                          \
    if (_s != CUBLAS_STATUS_SUCCESS) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, (lib)->status_string(_s));      \
      std::abort();                                                                                      \
    }                                                                                                    \
  } while (0)

constexpr int kScratchSlots = 5;

struct StreamState {
  cublasHandle_t handle = nullptr;
  void* scratch[kScratchSlots] = {};
  size_t scratch_bytes[kScratchSlots] = {};
};

// Keyed by (device, stream); never freed: a process has a few streams, and freeing at exit races
// the CUDA runtime's own teardown.
std::mutex g_mu;
std::map<std::pair<int, cudaStream_t>, StreamState>* g_states = new std::map<std::pair<int, cudaStream_t>, StreamState>;

StreamState& StateFor(cudaStream_t stream) {
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  return (*g_states)[{dev, stream}];  // std::map: references stay valid as it grows
}

// Grows `slot` of `s` to at least `bytes` (see StreamScratch). On an error the slot is left empty
// (a later call tries again) and the error comes back.
cudaError_t GrowScratch(StreamState& s, cudaStream_t stream, int slot, size_t bytes) {
  if (s.scratch_bytes[slot] >= bytes) return cudaSuccess;
  if (s.scratch[slot] != nullptr) {
    // Queued kernels may still read the old buffer.
    if (const cudaError_t err = cudaStreamSynchronize(stream); err != cudaSuccess) return err;
    const cudaError_t err = cudaFree(s.scratch[slot]);
    s.scratch[slot] = nullptr;
    s.scratch_bytes[slot] = 0;
    if (err != cudaSuccess) return err;
  }
  const size_t grown = bytes + bytes / 4;  // headroom: prefill lengths vary step to step
  if (const cudaError_t err = cudaMalloc(&s.scratch[slot], grown); err != cudaSuccess) {
    s.scratch[slot] = nullptr;
    (void)cudaGetLastError();  // not sticky: keep it out of the next launch's KERNEL_CHECK
    return err;
  }
  s.scratch_bytes[slot] = grown;
  return cudaSuccess;
}

size_t GemmScratchBytes(int64_t T, int64_t in) { return static_cast<size_t>(T * in) * sizeof(bf16_bits); }

// gemm_bf16_split's lo part starts this many values after hi, a multiple of 128 (256 bytes, as
// cudaMalloc aligns hi): cuBLAS takes its fastest kernels on aligned operands.
int64_t SplitLoOffset(int64_t T, int64_t in) { return (T * in + 127) / 128 * 128; }
size_t GemmSplitScratchBytes(int64_t T, int64_t in) {
  return static_cast<size_t>(2 * SplitLoOffset(T, in)) * sizeof(bf16_bits);
}

__global__ void FloatsToBf16Kernel(__nv_bfloat16* dst, const float* src, int64_t n) {
  const int64_t i4 = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * 4;
  if (i4 + 3 < n) {
    const float4 v = *reinterpret_cast<const float4*>(src + i4);
    __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y), hi = __floats2bfloat162_rn(v.z, v.w);
    uint2 packed;
    packed.x = *reinterpret_cast<uint32_t*>(&lo);
    packed.y = *reinterpret_cast<uint32_t*>(&hi);
    *reinterpret_cast<uint2*>(dst + i4) = packed;
  } else {
    for (int64_t i = i4; i < n; ++i) dst[i] = __float2bfloat16(src[i]);
  }
}

// hi = bf16(v), lo = bf16(v - hi); v - hi is exact in float32 (hi holds v's leading bits).
__device__ __forceinline__ void SplitBf16(float v, __nv_bfloat16& hi, __nv_bfloat16& lo) {
  hi = __float2bfloat16_rn(v);
  lo = __float2bfloat16_rn(v - __bfloat162float(hi));
}

__device__ __forceinline__ uint32_t PackPair(__nv_bfloat16 a, __nv_bfloat16 b) {
  return static_cast<uint32_t>(__bfloat16_as_ushort(a)) | (static_cast<uint32_t>(__bfloat16_as_ushort(b)) << 16);
}

// A thread splits 4 consecutive values: one 16-byte load, two 8-byte stores.
__global__ void FloatsToBf16SplitKernel(__nv_bfloat16* hi, __nv_bfloat16* lo, const float* src, int64_t n) {
  const int64_t i4 = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * 4;
  if (i4 + 3 < n) {
    const float4 v = *reinterpret_cast<const float4*>(src + i4);
    __nv_bfloat16 h[4], l[4];
    SplitBf16(v.x, h[0], l[0]);
    SplitBf16(v.y, h[1], l[1]);
    SplitBf16(v.z, h[2], l[2]);
    SplitBf16(v.w, h[3], l[3]);
    *reinterpret_cast<uint2*>(hi + i4) = make_uint2(PackPair(h[0], h[1]), PackPair(h[2], h[3]));
    *reinterpret_cast<uint2*>(lo + i4) = make_uint2(PackPair(l[0], l[1]), PackPair(l[2], l[3]));
  } else {
    for (int64_t i = i4; i < n; ++i) SplitBf16(src[i], hi[i], lo[i]);
  }
}

// The stream's cuBLAS handle, created on first use, bound to `stream`.
cublasHandle_t HandleFor(const Cublas* lib, cudaStream_t stream) {
  cublasHandle_t handle;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    StreamState& s = StateFor(stream);
    if (s.handle == nullptr) CUBLAS_CHECK(lib, lib->create(&s.handle));
    handle = s.handle;
  }
  CUBLAS_CHECK(lib, lib->set_stream(handle, stream));
  return handle;
}

// y = beta y + xb W^T, xb (T, in) bf16. Column-major view: W (out, in) row-major is a col-major
// (in, out) matrix, xb a col-major (in, T) and y a col-major (out, T); so y = W^T xb with
// op(A) = T, op(B) = N ("TN", the layout tensor cores like best).
void GemmTN(const Cublas* lib, cublasHandle_t handle, float* y, const bf16_bits* xb, const bf16_bits* w, int64_t T,
            int64_t in, int64_t out, float beta) {
  const float alpha = 1.0f;
  CUBLAS_CHECK(lib, lib->gemm_ex(handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(out), static_cast<int>(T),
                                 static_cast<int>(in), &alpha, w, CUDA_R_16BF, static_cast<int>(in), xb, CUDA_R_16BF,
                                 static_cast<int>(in), &beta, y, CUDA_R_32F, static_cast<int>(out), CUBLAS_COMPUTE_32F,
                                 CUBLAS_GEMM_DEFAULT));
}

}  // namespace

bool UseGemmPath(int64_t T, int64_t min_tokens, cudaStream_t stream) {
  KERNEL_REQUIRE(min_tokens >= 1);
  if (T < min_tokens) return false;
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &st) != cudaSuccess) {
    (void)cudaGetLastError();  // not sticky, but keep it out of the next KERNEL_CHECK
    return false;
  }
  return st == cudaStreamCaptureStatusNone;
}

cudaError_t ReserveStreamScratch(cudaStream_t stream, int slot, size_t bytes) {
  KERNEL_REQUIRE(slot >= 0 && slot < kScratchSlots);
  std::lock_guard<std::mutex> lock(g_mu);
  return GrowScratch(StateFor(stream), stream, slot, bytes);
}

void* StreamScratch(cudaStream_t stream, int slot, size_t bytes) {
  KERNEL_REQUIRE(slot >= 0 && slot < kScratchSlots);
  std::lock_guard<std::mutex> lock(g_mu);
  StreamState& s = StateFor(stream);
  // Only a caller that skipped the Reserve* calls grows here (kernel tests, benchmarks).
  CUDA_CHECK(GrowScratch(s, stream, slot, bytes));
  return s.scratch[slot];
}

cudaError_t ReserveGemm(cudaStream_t stream, int64_t T, int64_t max_in, int64_t max_split_in) {
  const Cublas* lib = LoadCublas();
  if (lib == nullptr) return cudaSuccess;  // gemm_bf16 will not run
  {
    std::lock_guard<std::mutex> lock(g_mu);
    StreamState& s = StateFor(stream);
    if (s.handle == nullptr) {
      // cublasCreate allocates device memory: out of memory is the one failure expected here.
      const cublasStatus_t st = lib->create(&s.handle);
      if (st != CUBLAS_STATUS_SUCCESS) {
        s.handle = nullptr;
        if (st == CUBLAS_STATUS_ALLOC_FAILED) return cudaErrorMemoryAllocation;
        std::fprintf(stderr, "tandem kernels: cublasCreate: %s\n", lib->status_string(st));
        return cudaErrorUnknown;
      }
    }
  }
  // gemm_bf16 and gemm_bf16_split share slot 0: one stream runs them one after the other.
  return ReserveStreamScratch(stream, 0, std::max(GemmScratchBytes(T, max_in), GemmSplitScratchBytes(T, max_split_in)));
}

void floats_to_bf16_split(bf16_bits* hi, bf16_bits* lo, const float* src, int64_t n, cudaStream_t stream) {
  KERNEL_REQUIRE(reinterpret_cast<uintptr_t>(src) % 16 == 0 && reinterpret_cast<uintptr_t>(hi) % 8 == 0 &&
                 reinterpret_cast<uintptr_t>(lo) % 8 == 0);
  if (n == 0) return;
  const int64_t threads = (n + 3) / 4;
  FloatsToBf16SplitKernel<<<static_cast<unsigned>((threads + 255) / 256), 256, 0, stream>>>(
      reinterpret_cast<__nv_bfloat16*>(hi), reinterpret_cast<__nv_bfloat16*>(lo), src, n);
  KERNEL_CHECK();
}

void floats_to_bf16(bf16_bits* dst, const float* src, int64_t n, cudaStream_t stream) {
  KERNEL_REQUIRE(reinterpret_cast<uintptr_t>(src) % 16 == 0 && reinterpret_cast<uintptr_t>(dst) % 8 == 0);
  if (n == 0) return;
  const int64_t threads = (n + 3) / 4;
  FloatsToBf16Kernel<<<static_cast<unsigned>((threads + 255) / 256), 256, 0, stream>>>(
      reinterpret_cast<__nv_bfloat16*>(dst), src, n);
  KERNEL_CHECK();
}

bool gemm_bf16(float* y, const float* x, const bf16_bits* w, int64_t T, int64_t in, int64_t out,
               cudaStream_t stream) {
  const Cublas* lib = LoadCublas();
  if (lib == nullptr) return false;
  KERNEL_REQUIRE(T <= INT32_MAX && in <= INT32_MAX && out <= INT32_MAX);
  if (T == 0 || out == 0) return true;
  auto* xb = static_cast<bf16_bits*>(StreamScratch(stream, 0, GemmScratchBytes(T, in)));
  floats_to_bf16(xb, x, T * in, stream);
  GemmTN(lib, HandleFor(lib, stream), y, xb, w, T, in, out, 0.0f);
  return true;
}

bool gemm_bf16_split(float* y, const float* x, const bf16_bits* w, int64_t T, int64_t in, int64_t out,
                     cudaStream_t stream, const bf16_bits* w_lo) {
  const Cublas* lib = LoadCublas();
  if (lib == nullptr) return false;
  KERNEL_REQUIRE(T <= INT32_MAX && in <= INT32_MAX && out <= INT32_MAX);
  if (T == 0 || out == 0) return true;
  auto* hi = static_cast<bf16_bits*>(StreamScratch(stream, 0, GemmSplitScratchBytes(T, in)));
  bf16_bits* lo = hi + SplitLoOffset(T, in);
  floats_to_bf16_split(hi, lo, x, T * in, stream);
  const cublasHandle_t handle = HandleFor(lib, stream);
  // hi first, then lo added onto it in the epilogue (beta = 1): y = (hi W^T) + (lo W^T) in float32.
  GemmTN(lib, handle, y, hi, w, T, in, out, 0.0f);
  GemmTN(lib, handle, y, lo, w, T, in, out, 1.0f);
  if (w_lo != nullptr) GemmTN(lib, handle, y, hi, w_lo, T, in, out, 1.0f);
  return true;
}

}  // namespace tandem::kernels
