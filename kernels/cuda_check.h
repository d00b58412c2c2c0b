// CUDA_CHECK / KERNEL_CHECK for the GPU hot path: a failed call there is a broken invariant, so it
// aborts naming file:line (the load path returns a Status instead; see engine/cuda).
#pragma once

#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>

#define CUDA_CHECK(expr)                                                                      \
  do {                                                                                        \
    cudaError_t _tandem_err = (expr);                                                         \
    if (_tandem_err != cudaSuccess) {                                                         \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr,                      \
                   cudaGetErrorString(_tandem_err));                                          \
      std::abort();                                                                           \
    }                                                                                         \
  } while (0)

// After every launch: a bad configuration shows here, not three kernels later.
#define KERNEL_CHECK() CUDA_CHECK(cudaGetLastError())

// Launchers check their own preconditions; a violation is a programming error.
#define KERNEL_REQUIRE(cond)                                                                  \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      std::fprintf(stderr, "%s:%d: kernel precondition failed: %s\n", __FILE__, __LINE__,   \
                   #cond);                                                                    \
      std::abort();                                                                           \
    }                                                                                         \
  } while (0)
