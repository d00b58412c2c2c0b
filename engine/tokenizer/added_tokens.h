// Added tokens (tokenizer.json "added_tokens"): strings such as "<|im_start|>" that are found
// in the text as a whole before any splitting, and encode to one id each.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::tokenizer {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;      // skipped by Decode(..., skip_special_tokens = true)
  bool normalized = false;   // matched in the normalized text instead of the raw text
  bool lstrip = false;       // the match swallows whitespace on its left
  bool rstrip = false;       // the match swallows whitespace on its right
  bool single_word = false;  // matches only when not inside a word
};

// A piece of text between added tokens (token_id < 0), or one added token.
struct TextSegment {
  std::string_view text;
  int32_t token_id = -1;
};

// Finds added tokens in text: leftmost match first, and among matches at the same position
// the longest one.
class AddedTokenMatcher {
 public:
  void Add(const AddedToken& token);
  bool empty() const { return tokens_.empty(); }
  // Splits `text` (valid UTF-8) into text segments and token segments, in order.
  std::vector<TextSegment> Split(std::string_view text) const;

 private:
  bool MatchAt(std::string_view text, size_t pos, const AddedToken** found) const;
  std::vector<AddedToken> tokens_;
  std::vector<std::vector<size_t>> by_first_byte_ = std::vector<std::vector<size_t>>(256);
};

}  // namespace tandem::tokenizer
