#include "engine/tokenizer/jinja/js_string.h"

#include <utf8proc.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace tandem::jinja {
namespace {

// Decodes one code point at s[pos]; sets *len to the bytes used (1 for an invalid byte).
char32_t DecodeAt(std::string_view s, size_t pos, size_t* len) {
  // A lone UTF-16 surrogate (what indexing into an emoji yields, as in JavaScript) is kept as its
  // 3-byte generalized UTF-8 form, which utf8proc refuses.
  if (pos + 2 < s.size() && static_cast<unsigned char>(s[pos]) == 0xED && (static_cast<unsigned char>(s[pos + 1]) & 0xE0) == 0xA0 &&
      (static_cast<unsigned char>(s[pos + 2]) & 0xC0) == 0x80) {
    *len = 3;
    return 0xD000 | ((static_cast<unsigned char>(s[pos + 1]) & 0x3F) << 6) | (static_cast<unsigned char>(s[pos + 2]) & 0x3F);
  }
  utf8proc_int32_t cp = 0;
  const utf8proc_ssize_t n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + pos),
                                              static_cast<utf8proc_ssize_t>(s.size() - pos), &cp);
  if (n <= 0) {
    *len = 1;
    return 0xFFFD;
  }
  *len = static_cast<size_t>(n);
  return static_cast<char32_t>(cp);
}

bool IsAsciiWord(char32_t c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// Length of the JavaScript whitespace character that ends at s[end - 1], 0 if none.
size_t JsSpaceBefore(std::string_view s, size_t end) {
  for (size_t len = 1; len <= 3 && len <= end; ++len) {
    if (JsSpaceAt(s, end - len) == len) return len;
  }
  return 0;
}

}  // namespace

void AppendUtf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::vector<char32_t> DecodeUtf8(std::string_view s) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) {
    size_t len = 0;
    out.push_back(DecodeAt(s, pos, &len));
    pos += len;
  }
  return out;
}

std::string EncodeUtf8(const std::vector<char32_t>& cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t cp : cps) AppendUtf8(out, cp);
  return out;
}

bool IsJsSpace(char32_t c) {
  if (c <= 32) return c == 32 || (c >= 9 && c <= 13);
  return c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000 || c == 0xFEFF;
}

size_t JsSpaceAt(std::string_view s, size_t pos) {
  if (pos >= s.size()) return 0;
  const unsigned char c = static_cast<unsigned char>(s[pos]);
  if (c < 0x80) return IsJsSpace(c) ? 1 : 0;
  size_t len = 0;
  const char32_t cp = DecodeAt(s, pos, &len);
  return (cp != 0xFFFD && IsJsSpace(cp)) ? len : 0;
}

std::string JsTrimStart(std::string_view s) {
  size_t pos = 0;
  while (size_t n = JsSpaceAt(s, pos)) pos += n;
  return std::string(s.substr(pos));
}

std::string JsTrimEnd(std::string_view s) {
  size_t end = s.size();
  while (size_t n = JsSpaceBefore(s, end)) end -= n;
  return std::string(s.substr(0, end));
}

std::string JsTrim(std::string_view s) { return JsTrimEnd(JsTrimStart(s)); }

size_t JsLength(std::string_view s) {
  size_t n = 0;
  for (size_t pos = 0; pos < s.size();) {
    size_t len = 0;
    const char32_t cp = DecodeAt(s, pos, &len);
    n += cp >= 0x10000 ? 2 : 1;
    pos += len;
  }
  return n;
}

namespace {

// The unconditional one-to-many upper-case mappings of Unicode's SpecialCasing.txt that
// JavaScript's toUpperCase applies and utf8proc's one-to-one mapping lacks (the ones text in a
// chat plausibly has: German ß, Latin ligatures, Armenian և, a few accented letters).
const char* SpecialUpper(char32_t c) {
  switch (c) {
    case 0x00DF: return "SS";
    case 0xFB00: return "FF";
    case 0xFB01: return "FI";
    case 0xFB02: return "FL";
    case 0xFB03: return "FFI";
    case 0xFB04: return "FFL";
    case 0xFB05:
    case 0xFB06: return "ST";
    case 0x0149: return "\xCA\xBCN";
    case 0x01F0: return "J\xCC\x8C";
    case 0x0390: return "\xCE\x99\xCC\x88\xCC\x81";
    case 0x03B0: return "\xCE\xA5\xCC\x88\xCC\x81";
    case 0x0587: return "\xD4\xB5\xD5\x92";
    default: return nullptr;
  }
}

bool IsLetter(char32_t c) {
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT;
}

}  // namespace

std::string JsToUpper(std::string_view s) {
  std::string out;
  for (char32_t c : DecodeUtf8(s)) {
    if (const char* special = SpecialUpper(c)) {
      out += special;
    } else {
      AppendUtf8(out, static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(c))));
    }
  }
  return out;
}

// With JavaScript's two special cases: İ becomes i + combining dot, and a capital sigma that ends
// a word (a letter before it, none after) becomes the final form ς.
std::string JsToLower(std::string_view s) {
  const std::vector<char32_t> cps = DecodeUtf8(s);
  std::string out;
  for (size_t i = 0; i < cps.size(); ++i) {
    const char32_t c = cps[i];
    if (c == 0x0130) {
      out += "i\xCC\x87";
    } else if (c == 0x03A3 && i > 0 && IsLetter(cps[i - 1]) && (i + 1 == cps.size() || !IsLetter(cps[i + 1]))) {
      AppendUtf8(out, 0x03C2);
    } else {
      AppendUtf8(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
    }
  }
  return out;
}


std::string JsTitle(std::string_view s) {
  std::string out(s);
  bool prev_word = false;
  for (char& ch : out) {
    const unsigned char c = static_cast<unsigned char>(ch);
    const bool word = c < 0x80 && IsAsciiWord(c);
    if (word && !prev_word && c >= 'a' && c <= 'z') ch = static_cast<char>(c - 'a' + 'A');
    prev_word = word;
  }
  return out;
}

std::string JsCapitalize(std::string_view s) {
  if (s.empty()) return "";
  size_t len = 0;
  DecodeAt(s, 0, &len);
  return JsToUpper(s.substr(0, len)) + std::string(s.substr(len));
}

double JsStringToNumber(std::string_view s) {
  const std::string t = JsTrim(s);
  if (t.empty()) return 0;
  if (t == "Infinity" || t == "+Infinity") return INFINITY;
  if (t == "-Infinity") return -INFINITY;
  if (t.size() > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X' || t[1] == 'o' || t[1] == 'O' || t[1] == 'b' || t[1] == 'B')) {
    const int base = (t[1] == 'x' || t[1] == 'X') ? 16 : (t[1] == 'o' || t[1] == 'O') ? 8 : 2;
    double v = 0;
    for (size_t i = 2; i < t.size(); ++i) {
      const char c = t[i];
      int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : 99;
      if (d >= base) return NAN;
      v = v * base + d;
    }
    return v;
  }
  for (char c : t) {
    if (!((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-')) return NAN;
  }
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size()) return NAN;
  return v;
}

std::optional<double> JsParseInt(std::string_view s) {
  const std::string t = JsTrimStart(s);
  size_t i = 0;
  bool neg = false;
  if (i < t.size() && (t[i] == '+' || t[i] == '-')) neg = t[i++] == '-';
  const size_t digits = i;
  double v = 0;
  while (i < t.size() && t[i] >= '0' && t[i] <= '9') v = v * 10 + (t[i++] - '0');
  if (i == digits) return std::nullopt;
  return neg ? -v : v;
}

std::optional<double> JsParseFloat(std::string_view s) {
  const std::string t = JsTrimStart(s);
  size_t i = 0;
  if (i < t.size() && (t[i] == '+' || t[i] == '-')) ++i;
  if (t.compare(i, 8, "Infinity") == 0) return t[0] == '-' ? -INFINITY : INFINITY;
  size_t digits = 0;
  while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i, ++digits;
  if (i < t.size() && t[i] == '.') {
    ++i;
    while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i, ++digits;
  }
  if (digits == 0) return std::nullopt;
  if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
    size_t j = i + 1;
    if (j < t.size() && (t[j] == '+' || t[j] == '-')) ++j;
    const size_t exp_start = j;
    while (j < t.size() && t[j] >= '0' && t[j] <= '9') ++j;
    if (j > exp_start) i = j;
  }
  return std::strtod(t.substr(0, i).c_str(), nullptr);
}

void AppendJsonString(std::string& out, std::string_view s, bool ensure_ascii) {
  char buf[16];
  out.push_back('"');
  for (size_t pos = 0; pos < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[pos]);
    if (c < 0x80) {
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        default:
          if (c < 0x20 || (ensure_ascii && c == 0x7f)) {
            std::snprintf(buf, sizeof(buf), "\\u%04x", c);
            out += buf;
          } else {
            out.push_back(static_cast<char>(c));
          }
      }
      ++pos;
      continue;
    }
    size_t len = 0;
    const char32_t cp = DecodeAt(s, pos, &len);
    if (!ensure_ascii && !(cp >= 0xD800 && cp <= 0xDFFF)) {  // JSON.stringify escapes lone surrogates
      out.append(s.substr(pos, len));
    } else if (cp >= 0x10000) {
      const char32_t v = cp - 0x10000;
      std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
      out += buf;
    } else {
      std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(cp));
      out += buf;
    }
    pos += len;
  }
  out.push_back('"');
}

}  // namespace tandem::jinja
