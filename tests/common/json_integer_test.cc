#include "common/json_integer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "nlohmann/json.hpp"

namespace tandem {
namespace {

using Json = nlohmann::json;
constexpr int64_t kMax = std::numeric_limits<int64_t>::max(), kMin = std::numeric_limits<int64_t>::min();

TEST(JsonInteger, IntegersWithinTheBounds) {
  EXPECT_EQ(JsonInteger(Json::parse("7"), 0, 10), 7);
  EXPECT_EQ(JsonInteger(Json::parse("-3"), -5, 10), -3);
  EXPECT_EQ(JsonInteger(Json::parse("0"), 0, 0), 0);
  EXPECT_EQ(JsonInteger(Json::parse("9223372036854775807"), kMin, kMax), kMax);
  EXPECT_EQ(JsonInteger(Json::parse("-9223372036854775808"), kMin, kMax), kMin);
}

TEST(JsonInteger, OutOfBoundsIsRefused) {
  EXPECT_FALSE(JsonInteger(Json::parse("11"), 0, 10));
  EXPECT_FALSE(JsonInteger(Json::parse("-1"), 0, 10));
  // Unsigned past int64_t (nlohmann keeps it unsigned) and past a negative upper bound.
  EXPECT_FALSE(JsonInteger(Json::parse("9223372036854775808"), kMin, kMax));
  EXPECT_FALSE(JsonInteger(Json::parse("18446744073709551615"), 0, kMax));
  EXPECT_FALSE(JsonInteger(Json::parse("5"), -10, -1));
}

TEST(JsonInteger, AnythingButAnIntegerIsRefused) {
  // The fuzzer's input: an integer literal too large for 64 bits parses as a float.
  EXPECT_FALSE(JsonInteger(Json::parse("20400000000000000000000000000000000000000008"), 0, kMax));
  EXPECT_FALSE(JsonInteger(Json::parse("2e43"), kMin, kMax));
  EXPECT_FALSE(JsonInteger(Json::parse("1.5"), 0, 10));
  EXPECT_FALSE(JsonInteger(Json::parse("3.0"), 0, 10));  // a float, even an integral one
  EXPECT_FALSE(JsonInteger(Json::parse("\"3\""), 0, 10));
  EXPECT_FALSE(JsonInteger(Json::parse("true"), 0, 10));
  EXPECT_FALSE(JsonInteger(Json::parse("null"), 0, 10));
  EXPECT_FALSE(JsonInteger(Json::parse("[3]"), 0, 10));
}

}  // namespace
}  // namespace tandem
