#include "engine/tokenizer/utf8.h"

#include <cstdlib>

#include <utf8proc.h>

#include "absl/status/status.h"

namespace tandem::tokenizer {
namespace {

// Allowed range of the second byte for a given lead byte (Unicode Table 3-7); the remaining
// continuation bytes are always 0x80..0xBF.
bool LeadInfo(unsigned char b, size_t* len, unsigned char* lo, unsigned char* hi) {
  *lo = 0x80;
  *hi = 0xBF;
  if (b >= 0xC2 && b <= 0xDF) { *len = 2; return true; }
  if (b == 0xE0) { *len = 3; *lo = 0xA0; return true; }
  if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) { *len = 3; return true; }
  if (b == 0xED) { *len = 3; *hi = 0x9F; return true; }  // no surrogates
  if (b == 0xF0) { *len = 4; *lo = 0x90; return true; }
  if (b >= 0xF1 && b <= 0xF3) { *len = 4; return true; }
  if (b == 0xF4) { *len = 4; *hi = 0x8F; return true; }  // <= U+10FFFF
  return false;
}

}  // namespace

size_t Utf8SequenceLength(std::string_view s, size_t pos, size_t* maximal_prefix) {
  const unsigned char b0 = static_cast<unsigned char>(s[pos]);
  if (b0 < 0x80) {
    if (maximal_prefix) *maximal_prefix = 1;
    return 1;
  }
  size_t len;
  unsigned char lo, hi;
  if (!LeadInfo(b0, &len, &lo, &hi)) {
    if (maximal_prefix) *maximal_prefix = 1;
    return 0;
  }
  size_t i = 1;
  for (; i < len; ++i) {
    if (pos + i >= s.size()) break;
    const unsigned char b = static_cast<unsigned char>(s[pos + i]);
    const unsigned char l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
    if (b < l || b > h) break;
  }
  if (maximal_prefix) *maximal_prefix = i;
  return i == len ? len : 0;
}

bool IsValidUtf8(std::string_view s) {
  for (size_t pos = 0; pos < s.size();) {
    const size_t n = Utf8SequenceLength(s, pos);
    if (n == 0) return false;
    pos += n;
  }
  return true;
}

std::string ReplaceInvalidUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) {
    size_t prefix = 0;
    const size_t n = Utf8SequenceLength(s, pos, &prefix);
    if (n > 0) {
      out.append(s.data() + pos, n);
      pos += n;
    } else {
      out.append("\xEF\xBF\xBD");
      pos += prefix;
    }
  }
  return out;
}

size_t IncompleteUtf8Tail(std::string_view s) {
  // A multi-byte sequence is at most 4 bytes, so its lead byte is among the last 3 bytes.
  const size_t start = s.size() > 3 ? s.size() - 3 : 0;
  for (size_t pos = start; pos < s.size(); ++pos) {
    const unsigned char b = static_cast<unsigned char>(s[pos]);
    if (b < 0xC0) continue;  // ASCII or continuation byte: not a lead
    size_t prefix = 0;
    const size_t n = Utf8SequenceLength(s, pos, &prefix);
    // Incomplete: the sequence ran off the end of s while every byte so far was allowed.
    if (n == 0 && pos + prefix == s.size() && prefix >= 1) {
      size_t len;
      unsigned char lo, hi;
      if (LeadInfo(b, &len, &lo, &hi) && prefix < len) return s.size() - pos;
    }
  }
  return 0;
}

absl::StatusOr<std::string> Normalize(std::string_view s, NormalForm form) {
  if (s.empty()) return std::string();
  // ASCII is invariant under every normal form; most text takes this path.
  bool ascii = true;
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) { ascii = false; break; }
  }
  if (ascii) return std::string(s);
  int options = UTF8PROC_STABLE;
  switch (form) {
    case NormalForm::kNFC: options |= UTF8PROC_COMPOSE; break;
    case NormalForm::kNFD: options |= UTF8PROC_DECOMPOSE; break;
    case NormalForm::kNFKC: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case NormalForm::kNFKD: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
  }
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                   static_cast<utf8proc_ssize_t>(s.size()), &out,
                   static_cast<utf8proc_option_t>(options));
  if (n < 0) {
    return absl::InvalidArgumentError(std::string("unicode normalization failed: ") +
                                      utf8proc_errmsg(n));
  }
  std::string result(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
  std::free(out);
  return result;
}

}  // namespace tandem::tokenizer
