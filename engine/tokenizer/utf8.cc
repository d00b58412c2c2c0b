#include "engine/tokenizer/utf8.h"

#include <algorithm>
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

bool IsNfcStableCodePoint(char32_t cp) {
  // Each range holds only characters that NFC leaves alone, that have combining class 0 and
  // that never compose with a preceding character (the tokenizer test checks this against
  // utf8proc for every code point listed). Combining marks, Hangul jamo, the kana voicing
  // marks U+3099/U+309A and singletons such as U+2000 or U+F900.. fall outside.
  return cp < 0x300 ||                       // ASCII, Latin-1, Latin Extended-A/B, IPA
         (cp >= 0x400 && cp < 0x483) ||      // Cyrillic letters
         (cp >= 0x3000 && cp < 0x302A) ||    // CJK symbols and punctuation
         (cp >= 0x3041 && cp < 0x3099) ||    // Hiragana
         (cp >= 0x30A1 && cp < 0x3100) ||    // Katakana
         (cp >= 0x4E00 && cp < 0xA000) ||    // CJK unified ideographs
         (cp >= 0xAC00 && cp < 0xD7A4) ||    // precomposed Hangul syllables
         (cp >= 0xFF01 && cp < 0xFF9E) ||    // fullwidth forms, halfwidth katakana
         (cp >= 0x1F300 && cp < 0x1FA00);    // emoji
}

namespace {

// The code point at s[pos] (valid UTF-8) and its length.
char32_t CodePointAt(std::string_view s, size_t pos, size_t* len) {
  const unsigned char b0 = static_cast<unsigned char>(s[pos]);
  if (b0 < 0x80) {
    *len = 1;
    return b0;
  }
  const size_t n = Utf8SequenceLength(s, pos);
  *len = n ? n : 1;
  if (n == 0) return 0xFFFD;
  char32_t cp = b0 & (0x7F >> n);
  for (size_t i = 1; i < n; ++i) cp = (cp << 6) | (static_cast<unsigned char>(s[pos + i]) & 0x3F);
  return cp;
}

absl::StatusOr<std::string> NormalizeWithUtf8proc(std::string_view s, NormalForm form);

}  // namespace

bool IsNfcQuick(std::string_view s) {
  size_t len;
  for (size_t pos = 0; pos < s.size(); pos += len) {
    if (!IsNfcStableCodePoint(CodePointAt(s, pos, &len))) return false;
  }
  return true;
}

absl::StatusOr<std::string> Normalize(std::string_view s, NormalForm form) {
  if (s.empty()) return std::string();
  if (form != NormalForm::kNFC) return NormalizeWithUtf8proc(s, form);
  // NFC works independently on the stretches between stable characters (each is a starter
  // that nothing before it can compose with, and that NFC leaves alone). So only the short runs
  // of other characters, together with the stable character just before them (which they may
  // compose with), go through utf8proc; the rest is copied.
  std::string out;
  out.reserve(s.size());
  size_t copied = 0;      // s[0, copied) is already in out
  size_t last_stable = 0; // start of the last stable character seen
  size_t len;
  for (size_t pos = 0; pos < s.size();) {
    if (IsNfcStableCodePoint(CodePointAt(s, pos, &len))) {
      last_stable = pos;
      pos += len;
      continue;
    }
    const size_t start = std::max(copied, last_stable);
    size_t end = pos + len;
    while (end < s.size() && !IsNfcStableCodePoint(CodePointAt(s, end, &len))) end += len;
    out.append(s.data() + copied, start - copied);
    auto normalized = NormalizeWithUtf8proc(s.substr(start, end - start), form);
    if (!normalized.ok()) return normalized.status();
    out.append(*normalized);
    copied = pos = end;
  }
  out.append(s.data() + copied, s.size() - copied);
  return out;
}

namespace {

absl::StatusOr<std::string> NormalizeWithUtf8proc(std::string_view s, NormalForm form) {
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

}  // namespace

}  // namespace tandem::tokenizer
