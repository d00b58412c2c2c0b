// The byte-level alphabet: every byte has a printable spelling and back.
#include "engine/tokenizer/byte_level.h"

#include <string>

#include <gtest/gtest.h>

namespace tandem::tokenizer {
namespace {

TEST(ByteLevelTest, AlphabetRoundTripsAllBytes) {
  EXPECT_EQ(BytesToByteLevel(" \n"), "ĠĊ");
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  EXPECT_EQ(ByteLevelToBytes(BytesToByteLevel(all)), all);
  EXPECT_FALSE(ByteLevelToBytes("中").has_value());
}

}  // namespace
}  // namespace tandem::tokenizer
