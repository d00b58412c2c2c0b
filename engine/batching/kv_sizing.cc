#include "engine/batching/kv_sizing.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>

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

std::string DescribeKvPool(const KvPoolSize& pool, int32_t block_size) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "KV pool: %lld tokens (%.2f GiB per rank, %d blocks of %d) from %s",
                static_cast<long long>(pool.tokens), static_cast<double>(pool.bytes) / (1024.0 * 1024.0 * 1024.0),
                pool.blocks, block_size, pool.source.c_str());
  return buf;
}

}  // namespace tandem::engine
