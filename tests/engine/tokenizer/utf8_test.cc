// UTF-8 helpers: invalid bytes replaced by maximal subparts, incomplete tails found, and the NFC
// fast path checked against utf8proc (code point by code point, and on composing strings).
#include "engine/tokenizer/utf8.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>
#include <utf8proc.h>

namespace tandem::tokenizer {
namespace {

TEST(Utf8Test, ReplacesMaximalSubpartsAndFindsIncompleteTails) {
  EXPECT_EQ(ReplaceInvalidUtf8("ok é 🚀"), "ok é 🚀");
  EXPECT_EQ(ReplaceInvalidUtf8("a\x80" "b"), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(ReplaceInvalidUtf8("\xF0\x9F\x9A"), "\xEF\xBF\xBD");          // one truncated sequence
  EXPECT_EQ(ReplaceInvalidUtf8("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong: two
  EXPECT_EQ(ReplaceInvalidUtf8(std::string("\0x", 2)), std::string("\0x", 2));
  EXPECT_EQ(IncompleteUtf8Tail("ab\xF0\x9F\x9A"), 3u);
  EXPECT_EQ(IncompleteUtf8Tail("ab\xE4"), 1u);
  EXPECT_EQ(IncompleteUtf8Tail("ab\xE4\xB8\xAD"), 0u);  // complete
  EXPECT_EQ(IncompleteUtf8Tail("ab\xFF"), 0u);          // invalid, not incomplete
  EXPECT_EQ(IncompleteUtf8Tail("\xE0\x80"), 0u);        // E0 80 can never become valid
  EXPECT_EQ(*Normalize("e\xCC\x81", NormalForm::kNFC), "\xC3\xA9");
}

// The NFC fast path skips utf8proc for "stable" code points. Check the list against utf8proc
// for every code point: NFC leaves each alone, none is a combining mark, and none is the second
// half of a canonical composition (so nothing before it can absorb it).
TEST(Utf8Test, NfcStableCodePointsAreReallyStable) {
  size_t stable = 0;
  for (char32_t cp = 0; cp < 0x110000; ++cp) {
    if (cp >= 0xD800 && cp < 0xE000) continue;
    utf8proc_int32_t decomposed[8];
    int last_boundclass = 0;
    const auto n = utf8proc_decompose_char(static_cast<utf8proc_int32_t>(cp), decomposed, 8,
                                           UTF8PROC_DECOMPOSE, &last_boundclass);
    if (n == 2 && !utf8proc_get_property(static_cast<utf8proc_int32_t>(cp))->comp_exclusion) {
      EXPECT_FALSE(IsNfcStableCodePoint(static_cast<char32_t>(decomposed[1])))
          << "U+" << std::hex << decomposed[1] << " composes after U+" << decomposed[0];
    }
    if (!IsNfcStableCodePoint(cp)) continue;
    ++stable;
    EXPECT_EQ(utf8proc_get_property(static_cast<utf8proc_int32_t>(cp))->combining_class, 0)
        << std::hex << static_cast<uint32_t>(cp);
    utf8proc_uint8_t buf[4];
    const auto len = utf8proc_encode_char(static_cast<utf8proc_int32_t>(cp), buf);
    utf8proc_uint8_t* out = nullptr;
    const auto m = utf8proc_map(buf, len, &out, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
    ASSERT_GT(m, 0);
    EXPECT_EQ(std::string(reinterpret_cast<char*>(out), m), std::string(reinterpret_cast<char*>(buf), len))
        << "NFC changes U+" << std::hex << static_cast<uint32_t>(cp);
    std::free(out);
  }
  std::printf("checked %zu NFC-stable code points against utf8proc\n", stable);
}

// The NFC fast path works run by run; on strings full of composing characters it must agree
// with utf8proc applied to the whole string.
TEST(Utf8Test, ChunkedNfcEqualsWholeStringNfc) {
  const char32_t alphabet[] = {'e', 0x301, 0x323, 'A', 0x30A, 0x212B, 0x1100, 0x1161, 0x11A8,
                               0xAC00, 0x3099, 0x304B, 0x344, 0xF73, 0x2000, 0xF6, ' ', 0x4E2D,
                               0x1F600, 0x0627, 0x0653, 0x0915, 0x093C, 0xFB2A};
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string s;
    for (int k = 0; k < 12; ++k) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      utf8proc_uint8_t buf[4];
      const auto n = utf8proc_encode_char(
          static_cast<utf8proc_int32_t>(alphabet[x % (sizeof(alphabet) / sizeof(alphabet[0]))]), buf);
      s.append(reinterpret_cast<char*>(buf), n);
    }
    utf8proc_uint8_t* out = nullptr;
    const auto m = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()), s.size(), &out,
                                static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
    ASSERT_GT(m, 0);
    EXPECT_EQ(*Normalize(s, NormalForm::kNFC), std::string(reinterpret_cast<char*>(out), m)) << s;
    std::free(out);
  }
}

}  // namespace
}  // namespace tandem::tokenizer
