#include "engine/tokenizer/byte_level.h"

#include <array>

namespace tandem::tokenizer {
namespace {

bool ShownAsItself(int b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct Tables {
  std::array<char32_t, 256> byte_to_cp{};
  std::array<int16_t, 324> cp_to_byte{};  // every code point used is below 256 + 68
  Tables() {
    cp_to_byte.fill(-1);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      byte_to_cp[b] = ShownAsItself(b) ? static_cast<char32_t>(b) : next++;
      cp_to_byte[byte_to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};

const Tables& GetTables() {
  static const Tables tables;
  return tables;
}

}  // namespace

char32_t ByteToCodePoint(uint8_t byte) { return GetTables().byte_to_cp[byte]; }

std::optional<uint8_t> CodePointToByte(char32_t cp) {
  const auto& t = GetTables();
  if (cp >= t.cp_to_byte.size() || t.cp_to_byte[cp] < 0) return std::nullopt;
  return static_cast<uint8_t>(t.cp_to_byte[cp]);
}

std::optional<std::string> ByteLevelToBytes(std::string_view shown) {
  std::string out;
  out.reserve(shown.size());
  for (size_t i = 0; i < shown.size();) {
    // Every character of the alphabet is U+0021..U+0143: one or two UTF-8 bytes.
    const auto b0 = static_cast<unsigned char>(shown[i]);
    char32_t cp;
    if (b0 < 0x80) {
      cp = b0;
      i += 1;
    } else if ((b0 & 0xE0) == 0xC0 && i + 1 < shown.size() &&
               (static_cast<unsigned char>(shown[i + 1]) & 0xC0) == 0x80) {
      cp = (static_cast<char32_t>(b0 & 0x1F) << 6) |
           (static_cast<unsigned char>(shown[i + 1]) & 0x3F);
      i += 2;
    } else {
      return std::nullopt;
    }
    const auto byte = CodePointToByte(cp);
    if (!byte) return std::nullopt;
    out.push_back(static_cast<char>(*byte));
  }
  return out;
}

std::string BytesToByteLevel(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) {
    const char32_t cp = ByteToCodePoint(b);
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else {
      out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }
  return out;
}

}  // namespace tandem::tokenizer
