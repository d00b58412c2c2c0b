#include "engine/batching/kv_sizing.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <utility>

#include "common/status.h"

namespace tandem::engine {

absl::Status ValidateMemoryFraction(double f, const std::string& what) {
  if (f > 0.0 && f <= 1.0) return absl::OkStatus();  // false for NaN
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", f);
  return absl::InvalidArgumentError(what + " must be in (0, 1], got " + buf);
}

absl::StatusOr<double> ResolveMemoryFraction(const std::string& backend, double requested) {
  if (requested == 0.0) return backend == "cuda" ? kCudaDefaultMemoryFraction : kCpuDefaultMemoryFraction;
  if (absl::Status st = ValidateMemoryFraction(requested, "memory_fraction"); !st.ok()) return st;
  return requested;
}

absl::StatusOr<KvPoolSize> KvPoolFromTokens(int64_t tokens_fit, bool explicit_size, int32_t block_size,
                                            int32_t max_num_seqs, int32_t max_model_len, int64_t bytes_per_token,
                                            const std::string& source) {
  if (block_size < 1) return absl::InvalidArgumentError("KV block size must be >= 1");
  int64_t tokens = std::max<int64_t>(tokens_fit, 0);
  if (!explicit_size) tokens = std::min(tokens, static_cast<int64_t>(max_num_seqs) * max_model_len);
  const int64_t blocks = std::min<int64_t>(tokens / block_size, INT32_MAX);
  if (blocks < 1) {
    return absl::ResourceExhaustedError("KV pool of " + std::to_string(tokens) + " tokens (from " + source +
                                        ") is smaller than one block of " + std::to_string(block_size));
  }
  KvPoolSize p;
  p.blocks = static_cast<int32_t>(blocks);
  p.tokens = blocks * block_size;
  p.bytes = p.tokens * bytes_per_token;
  p.source = source;
  return p;
}

absl::StatusOr<int32_t> StateSlotsFromBudget(int64_t budget_bytes, int64_t state_bytes_per_slot,
                                             int64_t bytes_per_block, int32_t max_num_seqs,
                                             const std::string& source) {
  if (state_bytes_per_slot <= 0) return 0;
  if (budget_bytes < state_bytes_per_slot + bytes_per_block) {
    return absl::ResourceExhaustedError(
        "no room for the state slots and the KV pool: one state slot (" + std::to_string(state_bytes_per_slot) +
        " bytes per rank) and one KV block (" + std::to_string(bytes_per_block) + " bytes) do not fit in the " +
        std::to_string(std::max<int64_t>(budget_bytes, 0)) + " bytes from " + source);
  }
  const int64_t half = budget_bytes / 2;
  int64_t slots = std::min<int64_t>(max_num_seqs, half / state_bytes_per_slot);
  // Slots far smaller than a KV block must still leave one block's room.
  slots = std::min(slots, (budget_bytes - bytes_per_block) / state_bytes_per_slot);
  return static_cast<int32_t>(std::max<int64_t>(slots, 1));
}

namespace {

KvPoolSize WithStateSlots(KvPoolSize pool, int32_t slots, int64_t state_bytes_per_slot) {
  pool.state_slots = slots;
  pool.state_bytes = static_cast<int64_t>(slots) * state_bytes_per_slot;
  return pool;
}

}  // namespace

absl::StatusOr<KvPoolSize> PoolsFromBudget(int64_t budget_bytes, int32_t block_size, int32_t max_num_seqs,
                                           int32_t max_model_len, int64_t bytes_per_token,
                                           int64_t state_bytes_per_slot, const std::string& source) {
  if (bytes_per_token <= 0) return absl::FailedPreconditionError("the model reports 0 KV bytes per token");
  ASSIGN_OR_RETURN(const int32_t slots, StateSlotsFromBudget(budget_bytes, state_bytes_per_slot,
                                                             bytes_per_token * block_size, max_num_seqs, source));
  const int64_t kv_budget = budget_bytes - static_cast<int64_t>(slots) * state_bytes_per_slot;
  // With state, no more sequences than slots ever run: that caps what the KV pool can be used for.
  const int32_t seqs = slots > 0 ? slots : max_num_seqs;
  ASSIGN_OR_RETURN(KvPoolSize pool, KvPoolFromTokens(kv_budget / bytes_per_token, false, block_size, seqs,
                                                     max_model_len, bytes_per_token, source));
  return WithStateSlots(std::move(pool), slots, state_bytes_per_slot);
}

absl::StatusOr<KvPoolSize> PoolsFromKvTokens(int64_t kv_tokens, int32_t block_size, int32_t max_num_seqs,
                                             int64_t bytes_per_token, int64_t state_bytes_per_slot) {
  ASSIGN_OR_RETURN(KvPoolSize pool,
                   KvPoolFromTokens(kv_tokens, true, block_size, max_num_seqs, 0, bytes_per_token, "kv_tokens"));
  return WithStateSlots(std::move(pool), state_bytes_per_slot > 0 ? max_num_seqs : 0, state_bytes_per_slot);
}

std::string DescribeKvPool(const KvPoolSize& pool, int32_t block_size) {
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  char buf[256];
  std::snprintf(buf, sizeof buf, "KV pool: %lld tokens (%.2f GiB per rank, %d blocks of %d)",
                static_cast<long long>(pool.tokens), static_cast<double>(pool.bytes) / kGiB, pool.blocks, block_size);
  std::string out = buf;
  if (pool.state_slots > 0) {
    std::snprintf(buf, sizeof buf, " + %d state slots (%.2f GiB per rank)", pool.state_slots,
                  static_cast<double>(pool.state_bytes) / kGiB);
    out += buf;
  }
  return out + " from " + pool.source;
}

}  // namespace tandem::engine
