#include "engine/tokenizer/added_tokens.h"

#include <algorithm>

#include <utf8proc.h>

namespace tandem::tokenizer {
namespace {

// The code point that starts at s[pos] (valid UTF-8 assumed) and its length.
char32_t DecodeAt(std::string_view s, size_t pos, size_t* len) {
  utf8proc_int32_t cp = 0;
  const utf8proc_ssize_t n = utf8proc_iterate(
      reinterpret_cast<const utf8proc_uint8_t*>(s.data() + pos),
      static_cast<utf8proc_ssize_t>(s.size() - pos), &cp);
  *len = n > 0 ? static_cast<size_t>(n) : 1;
  return n > 0 ? static_cast<char32_t>(cp) : 0xFFFD;
}

// The code point that ends just before s[pos] and its length.
char32_t DecodeBefore(std::string_view s, size_t pos, size_t* len) {
  size_t start = pos - 1;
  while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
  return DecodeAt(s, start, len);
}

bool IsSpace(char32_t c) {
  if (c == ' ' || (c >= '\t' && c <= '\r') || c == 0x85) return true;
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat == UTF8PROC_CATEGORY_ZS || cat == UTF8PROC_CATEGORY_ZL || cat == UTF8PROC_CATEGORY_ZP;
}

// Letters, digits and '_' make up words for `single_word`.
bool IsWordChar(char32_t c) {
  if (c == '_') return true;
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||
         (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO);
}

}  // namespace

void AddedTokenMatcher::Add(const AddedToken& token) {
  if (token.content.empty()) return;  // an empty token can never be found in text
  tokens_.push_back(token);
  auto& bucket = by_first_byte_[static_cast<unsigned char>(token.content[0])];
  bucket.push_back(tokens_.size() - 1);
  // Longest first, so the first hit at a position is the longest match.
  std::stable_sort(bucket.begin(), bucket.end(), [this](size_t a, size_t b) {
    return tokens_[a].content.size() > tokens_[b].content.size();
  });
}

bool AddedTokenMatcher::MatchAt(std::string_view text, size_t pos, const AddedToken** found) const {
  for (size_t idx : by_first_byte_[static_cast<unsigned char>(text[pos])]) {
    const AddedToken& t = tokens_[idx];
    if (text.compare(pos, t.content.size(), t.content) != 0) continue;
    if (t.single_word) {
      size_t len;
      if (pos > 0 && IsWordChar(DecodeBefore(text, pos, &len))) continue;
      const size_t end = pos + t.content.size();
      if (end < text.size() && IsWordChar(DecodeAt(text, end, &len))) continue;
    }
    *found = &t;
    return true;
  }
  return false;
}

std::vector<TextSegment> AddedTokenMatcher::Split(std::string_view text) const {
  std::vector<TextSegment> out;
  size_t text_start = 0;  // start of the pending plain-text segment
  size_t pos = 0;
  while (pos < text.size()) {
    const AddedToken* t = nullptr;
    if (!MatchAt(text, pos, &t)) {
      ++pos;
      continue;
    }
    size_t begin = pos, end = pos + t->content.size();
    size_t len;
    if (t->lstrip) {
      while (begin > text_start && IsSpace(DecodeBefore(text, begin, &len))) begin -= len;
    }
    if (t->rstrip) {
      while (end < text.size() && IsSpace(DecodeAt(text, end, &len))) end += len;
    }
    if (begin > text_start) out.push_back({text.substr(text_start, begin - text_start), -1});
    out.push_back({text.substr(begin, end - begin), t->id});
    text_start = pos = end;
  }
  if (text_start < text.size()) out.push_back({text.substr(text_start), -1});
  return out;
}

}  // namespace tandem::tokenizer
