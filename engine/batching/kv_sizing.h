// How large the KV pool may be, as pure functions (the engine's memory reads are in llm_engine.cc):
// which memory_fraction applies (backends have different defaults), its validation, the cap at
// what the scheduler could ever use, and the log line.
//
// memory_fraction means different memories per backend:
//  - cpu:  the share of this machine's MemAvailable the pool may take (the weights are loaded).
//  - cuda: the share of the device's TOTAL memory this process may use in all (weights, workspace
//          and KV): pool = fraction x total - already used (cuda::KvBlocksFromDeviceMemory).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace tandem::engine {

inline constexpr double kCpuDefaultMemoryFraction = 0.70;
// Discrete GPUs: the process owns the device; 10% stays for the CUDA context, NCCL buffers,
// graphs and fragmentation.
inline constexpr double kCudaDefaultMemoryFraction = 0.90;

// 0 = "not given": the backend's default. Otherwise InvalidArgument unless 0 < f <= 1 (NaN too).
absl::StatusOr<double> ResolveMemoryFraction(const std::string& backend, double requested);

// OK when 0 < f <= 1; else InvalidArgument "<what> must be in (0, 1], got F".
absl::Status ValidateMemoryFraction(double f, const std::string& what);

// Where the pool's size came from, for the log line and tests.
struct KvPoolSize {
  int32_t blocks = 0;
  int64_t tokens = 0;        // blocks x block_size
  int64_t bytes = 0;         // tokens x bytes per token (per rank)
  std::string source;        // "kv_tokens" | "host memory" | "device memory"
};

// The pool from a number of tokens that fit (or were asked for): capped at max_num_seqs x
// max_model_len when it came from memory (more could never be used), then whole blocks.
// ResourceExhausted when not even one block fits.
absl::StatusOr<KvPoolSize> KvPoolFromTokens(int64_t tokens_fit, bool explicit_size, int32_t block_size,
                                            int32_t max_num_seqs, int32_t max_model_len, int64_t bytes_per_token,
                                            const std::string& source);

// "KV pool: 65536 tokens (1.50 GiB per rank, 4096 blocks of 16) from device memory"
std::string DescribeKvPool(const KvPoolSize& pool, int32_t block_size);

}  // namespace tandem::engine
