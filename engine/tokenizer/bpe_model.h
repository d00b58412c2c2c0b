// Byte-level BPE: a vocabulary of byte strings and a ranked list of merges. A pre-token word
// starts as its single bytes; the adjacent pair with the lowest merge rank is merged (leftmost
// first among equal ranks) until no pair has a merge.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"

namespace tandem::tokenizer {

class BpeModel {
 public:
  void Reserve(size_t tokens, size_t merges) {
    token_to_id_.reserve(tokens);
    id_to_bytes_.reserve(tokens);
    merges_.reserve(merges);
  }
  // Registers a vocabulary entry (raw bytes, not the byte-level spelling).
  absl::Status AddToken(std::string bytes, int32_t id);
  // Registers the merge `left + right` with rank = number of merges added before it.
  absl::Status AddMerge(std::string_view left, std::string_view right);
  // After every AddToken: looks up the ids of the 256 single bytes.
  absl::Status Finish();
  // Whole-word lookup before merging (tokenizers' `ignore_merges`).
  void set_ignore_merges(bool v) { ignore_merges_ = v; }

  // Appends the ids of one pre-token word (raw bytes).
  void EncodeWord(std::string_view word, std::vector<int32_t>* out) const;

  // The raw bytes of `id`, or nullptr when the vocabulary has no such id.
  const std::string* TokenBytes(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id) < id_to_bytes_.size() && has_id_[id]
               ? &id_to_bytes_[id]
               : nullptr;
  }
  // The id of a byte string, or -1.
  int32_t FindToken(std::string_view bytes) const;
  // Every word is at least ceil(bytes / max_token_bytes()) tokens when every single byte is a
  // token (all_bytes()): the bound that lets a bounded encode refuse a huge word unmerged.
  size_t max_token_bytes() const { return max_token_bytes_; }
  bool all_bytes() const { return all_bytes_; }
  size_t size() const { return token_to_id_.size(); }
  size_t merge_count() const { return merges_.size(); }
  int32_t max_id() const { return static_cast<int32_t>(id_to_bytes_.size()) - 1; }

 private:
  struct Merge {
    int32_t rank;
    int32_t result;
  };
  static uint64_t PairKey(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  void MergeWord(std::string_view word, std::vector<int32_t>* out) const;

  absl::flat_hash_map<std::string, int32_t> token_to_id_;
  std::vector<std::string> id_to_bytes_;
  std::vector<bool> has_id_;
  absl::flat_hash_map<uint64_t, Merge> merges_;
  std::array<int32_t, 256> byte_ids_{};
  bool ignore_merges_ = false;
  size_t max_token_bytes_ = 1;
  bool all_bytes_ = false;

  // Results per word. Text repeats words heavily, so most words skip merging. Bounded: the
  // whole cache is dropped when it reaches kCacheCapacity entries (cheap, and rare).
  static constexpr size_t kCacheCapacity = 1 << 16;
  static constexpr size_t kMaxCachedWordBytes = 128;
  mutable std::mutex cache_mu_;
  mutable absl::flat_hash_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace tandem::tokenizer
