// The vocabulary as constrained decoding sees it: the bytes every token id decodes to, which ids
// may never be generated under a grammar (special tokens, ids without bytes), and which end the
// sequence (eos). Tokens are kept sorted by their bytes so that tokens sharing a prefix are
// neighbours (a trie walked in order): a matcher state computed for a prefix serves every token
// that starts with it. Built once per tokenizer; immutable and shared by every compiled grammar.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::tokenizer {
class Tokenizer;  // engine/tokenizer/tokenizer.h
}  // namespace tandem::tokenizer

namespace tandem::grammar {

class StringContentIndex;  // string_masks.h

class TokenVocabulary {
 public:
  // `token_bytes[id]` for ids [0, size); empty bytes and `special_ids` are never allowed, except
  // `eos_ids`, which are allowed exactly when the grammar can end.
  TokenVocabulary(std::vector<std::string> token_bytes, const std::vector<int32_t>& special_ids,
                  const std::vector<int32_t>& eos_ids);
  ~TokenVocabulary();
  // From a tokenizer: ids [0, vocab_size) (the model's vocabulary, possibly larger than the
  // tokenizer's; ids it does not know are never allowed), its special tokens excluded.
  static std::shared_ptr<const TokenVocabulary> FromTokenizer(const tokenizer::Tokenizer& tok, int64_t vocab_size,
                                                              const std::vector<int32_t>& eos_ids);

  int64_t size() const { return static_cast<int64_t>(bytes_.size()); }
  const std::string& bytes(int32_t id) const { return bytes_[id]; }
  bool is_eos(int32_t id) const { return id >= 0 && id < size() && eos_[id]; }
  const std::vector<int32_t>& eos_ids() const { return eos_ids_; }
  // The ids that can be generated (neither special nor empty), sorted by their bytes.
  const std::vector<int32_t>& sorted() const { return sorted_; }
  // lcp()[i]: the length of the common prefix of sorted()[i - 1] and sorted()[i] (0 for i = 0).
  const std::vector<int32_t>& lcp() const { return lcp_; }
  // The bytes of sorted()[rank], stored in rank order (the walks read them in that order).
  std::string_view sorted_bytes(int32_t rank) const {
    return std::string_view(sorted_text_).substr(sorted_offset_[rank], sorted_offset_[rank + 1] - sorted_offset_[rank]);
  }
  // The rank just past the tokens that share their first `depth` bytes with sorted()[rank]
  // (depth <= its length; 0: the whole vocabulary). A walk that rejects a prefix skips its
  // block at once instead of stepping over every token in it.
  int32_t block_end(int32_t rank, size_t depth) const {
    return depth == 0 ? static_cast<int32_t>(sorted_.size()) : block_end_[sorted_offset_[rank] + depth - 1];
  }
  // rank(id): the index of id in sorted(), -1 for ids that cannot be generated.
  int32_t rank(int32_t id) const { return rank_[id]; }
  // The id whose bytes are exactly this one byte, -1 if none (byte-level BPE has all 256).
  int32_t byte_token(uint8_t b) const { return byte_token_[b]; }
  int64_t mask_words() const { return (size() + 63) / 64; }
  // The tokens bucketed for JSON string content (string_masks.h), built on first use (tens of
  // milliseconds for Qwen3) and shared by every grammar of this vocabulary. Thread-safe.
  const StringContentIndex& string_content() const;

 private:
  std::vector<std::string> bytes_;
  std::vector<bool> eos_;
  std::vector<int32_t> eos_ids_;
  std::vector<int32_t> sorted_;
  std::vector<int32_t> lcp_;
  std::string sorted_text_;             // every generable token's bytes, in rank order
  std::vector<size_t> sorted_offset_;   // rank -> start in sorted_text_ (one extra at the end)
  std::vector<int32_t> block_end_;      // sorted_offset_[rank] + depth - 1 -> block_end(rank, depth)
  std::vector<int32_t> rank_;
  int32_t byte_token_[256];
  mutable std::once_flag string_content_once_;
  mutable std::unique_ptr<const StringContentIndex> string_content_;
};

}  // namespace tandem::grammar
