// The tokenizer of a Hugging Face model folder: byte-level BPE read from tokenizer.json
// (normalizer, pre-tokenizer, merges, added tokens), plus the special-token names from
// tokenizer_config.json. Encoding has `add_special_tokens = false` semantics: no BOS/EOS is
// added; the chat template (chat_template.h) writes the special tokens as text.
//
// Invalid UTF-8 given to Encode is not an error: every ill-formed subsequence is replaced by
// U+FFFD first (one per maximal subpart, as Rust's from_utf8_lossy and the Unicode standard
// do), and the cleaned text is encoded. Decode turns token bytes that are not valid UTF-8 into
// U+FFFD the same way, so Decode always returns valid UTF-8.
//
// A Tokenizer is immutable after loading; Encode and Decode may be called from many threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "engine/tokenizer/added_tokens.h"
#include "engine/tokenizer/bpe_model.h"
#include "engine/tokenizer/pre_tokenizer.h"

namespace tandem::tokenizer {

class Tokenizer {
 public:
  // Reads DIR/tokenizer.json and, when present, DIR/tokenizer_config.json, and the eos ids of
  // DIR/generation_config.json or DIR/config.json (eos_token_ids()).
  static absl::StatusOr<std::unique_ptr<Tokenizer>> LoadFromDir(const std::string& dir);
  // `tokenizer_config_json` may be empty (then no eos/pad/bos names and no chat template).
  static absl::StatusOr<std::unique_ptr<Tokenizer>> LoadFromJson(
      std::string_view tokenizer_json, std::string_view tokenizer_config_json);

  std::vector<int32_t> Encode(std::string_view text) const;
  // Encode for input of any size with a token budget: nullopt as soon as the text is known to
  // need more than `max_tokens` ids, else exactly Encode(text). Words are encoded one at a time
  // and a word too long to fit is refused from its length, so an over-long text costs about
  // max_tokens tokens of BPE work plus one linear pass (UTF-8 check, added tokens,
  // normalization), not its full encoding. For checking a prompt against the context length
  // before paying for it.
  std::optional<std::vector<int32_t>> EncodeAtMost(std::string_view text, size_t max_tokens) const;
  // Ids that are neither vocabulary nor added tokens are skipped.
  std::string Decode(const std::vector<int32_t>& ids, bool skip_special_tokens = false) const;

  // One past the largest id of the vocabulary and the added tokens (151669 for Qwen3; the
  // model's embedding table may be larger).
  int64_t vocab_size() const { return vocab_size_; }
  // The id of an added token ("<|im_end|>") or of a vocabulary entry in its tokenizer.json
  // spelling ("Ġhello").
  std::optional<int32_t> TokenId(std::string_view token) const;
  // The bytes one id decodes to (added tokens: their content); nullptr for an unknown id.
  const std::string* TokenBytes(int32_t id) const;
  // True for added tokens marked "special" (what skip_special_tokens drops).
  bool IsSpecial(int32_t id) const;
  // Ids of all added tokens marked special, ascending.
  std::vector<int32_t> special_token_ids() const;

  // From tokenizer_config.json ("" / nullopt when absent).
  const std::string& eos_token() const { return eos_token_; }
  const std::string& pad_token() const { return pad_token_; }
  const std::string& bos_token() const { return bos_token_; }
  std::optional<int32_t> eos_token_id() const { return TokenId(eos_token_); }
  std::optional<int32_t> pad_token_id() const { return TokenId(pad_token_); }
  std::optional<int32_t> bos_token_id() const { return TokenId(bos_token_); }
  // Every id that ends a generated turn (eos_token_ids.h): eos_token's id first, then the
  // generation config's eos_token_id entries (LoadFromDir only), without repeats. For Qwen3
  // instruct folders: <|im_end|>, <|endoftext|>.
  const std::vector<int32_t>& eos_token_ids() const { return eos_token_ids_; }
  // The Jinja source of tokenizer_config.json, kept for reference; prompts are rendered by
  // ChatPrompt (chat_prompt.h), which loads the template itself (chat_template.jinja first).
  const std::string& chat_template() const { return chat_template_; }

 private:
  friend class TokenizerLoader;
  Tokenizer() = default;
  // Append to `out`; false once out has more than `limit` ids (then it is incomplete).
  bool EncodeText(std::string_view text, size_t limit, std::vector<int32_t>* out) const;
  bool EncodeNormalized(std::string_view text, size_t limit, std::vector<int32_t>* out) const;

  Normalizer normalizer_;
  PreTokenizer pre_tokenizer_;
  BpeModel bpe_;
  std::vector<AddedToken> added_tokens_;
  AddedTokenMatcher raw_added_;         // added tokens with normalized = false
  AddedTokenMatcher normalized_added_;  // added tokens with normalized = true
  absl::flat_hash_map<std::string, int32_t> added_by_content_;
  absl::flat_hash_map<int32_t, size_t> added_by_id_;  // id -> index in added_tokens_
  int64_t vocab_size_ = 0;
  std::string eos_token_, pad_token_, bos_token_, chat_template_;
  std::vector<int32_t> eos_token_ids_;
};

// Turns ids into text one at a time, emitting only complete UTF-8: bytes of a character split
// across tokens are held back until the character is complete. The concatenation of every
// Push and the final Flush equals Tokenizer::Decode of all the ids.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special_tokens = false)
      : tokenizer_(tokenizer), skip_special_tokens_(skip_special_tokens) {}
  // The text completed by `id` (often "", while a character is still incomplete).
  std::string Push(int32_t id);
  // Whatever is still held back, with an incomplete sequence as U+FFFD. Resets the decoder.
  std::string Flush();

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_tokens_;
  std::string pending_;  // bytes of an incomplete UTF-8 sequence (at most 3)
};

}  // namespace tandem::tokenizer
