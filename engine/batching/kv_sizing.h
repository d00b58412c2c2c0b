// How large the KV pool may be, as pure functions (the engine's memory reads are in llm_engine.cc):
// which memory_fraction applies (backends have different defaults), its validation, the cap at
// what the scheduler could ever use, and the log line.
//
// memory_fraction means different memories per backend:
//  - cpu:  the share of this machine's MemAvailable the pool may take (the weights are loaded).
//  - cuda: the share of the device's TOTAL memory this process may use in all (weights, workspace
//          and KV): pool = fraction x total - already used (cuda::KvBlocksFromDeviceMemory,
//          engine/memory_budget.h). On unified memory (GB10: the GPU allocates from the same RAM as
//          the CPU) "total" is the machine's MemTotal and "used" is MemTotal - MemAvailable: the
//          share of ALL of the machine's memory, with the OS, the agent and other processes in
//          the rest (docs/cuda.md).
//
// State slots (models with per-sequence recurrent state: the hybrids' Gated DeltaNet layers keep
// a fixed-size conv + recurrent state per running sequence, KvCacheSpec::state_bytes_per_slot)
// come out of the same budget as the KV pool, by this policy (PoolsFromBudget):
//  - max_num_seqs slots when they take at most half of the budget; otherwise as many slots as
//    half of the budget holds, at least 1, and never so many that one KV block no longer fits.
//    ResourceExhausted, naming both sizes, when not even one slot and one KV block fit.
//  - the KV pool gets the rest, capped at slots x max_model_len (the scheduler never runs more
//    sequences than there are slots, so more KV could never be used).
//  - an explicit kv_tokens (PoolsFromKvTokens): KV as asked and max_num_seqs slots; the caller
//    checks both against memory.
// Models without state get 0 slots and the whole budget as KV, exactly as before.
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
  int32_t state_slots = 0;   // per-sequence state slots beside the KV pool (0: the model keeps none)
  int64_t state_bytes = 0;   // state_slots x bytes per slot (per rank)

  int64_t total_bytes() const { return bytes + state_bytes; }
};

// The pool from a number of tokens that fit (or were asked for): capped at max_num_seqs x
// max_model_len when it came from memory (more could never be used), then whole blocks.
// ResourceExhausted when not even one block fits.
absl::StatusOr<KvPoolSize> KvPoolFromTokens(int64_t tokens_fit, bool explicit_size, int32_t block_size,
                                            int32_t max_num_seqs, int32_t max_model_len, int64_t bytes_per_token,
                                            const std::string& source);

// The state slots of the policy above out of `budget_bytes` (per rank); 0 when the model keeps no
// state (state_bytes_per_slot 0). `bytes_per_block`: one KV block, which must fit beside them.
absl::StatusOr<int32_t> StateSlotsFromBudget(int64_t budget_bytes, int64_t state_bytes_per_slot,
                                             int64_t bytes_per_block, int32_t max_num_seqs,
                                             const std::string& source);

// Both pools from one memory budget (bytes per rank), by the policy above.
absl::StatusOr<KvPoolSize> PoolsFromBudget(int64_t budget_bytes, int32_t block_size, int32_t max_num_seqs,
                                           int32_t max_model_len, int64_t bytes_per_token,
                                           int64_t state_bytes_per_slot, const std::string& source);

// Both pools for an explicit kv_tokens: the KV pool as asked (whole blocks), max_num_seqs slots
// when the model keeps state.
absl::StatusOr<KvPoolSize> PoolsFromKvTokens(int64_t kv_tokens, int32_t block_size, int32_t max_num_seqs,
                                             int64_t bytes_per_token, int64_t state_bytes_per_slot);

// "KV pool: 65536 tokens (1.50 GiB per rank, 4096 blocks of 16) from device memory", with
// " + 64 state slots (0.12 GiB per rank)" before " from" when the model keeps state.
std::string DescribeKvPool(const KvPoolSize& pool, int32_t block_size);

}  // namespace tandem::engine
