#include "common/json_integer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

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

TEST(JsonInteger, FieldDefaultsWhereAbsentAndThrowsNamingIt) {
  const Json j = Json::parse(R"({"n": 5, "f": 2e43, "s": "5"})");
  EXPECT_EQ(JsonIntegerField(j, "n", 0, 0, 10), 5);
  EXPECT_EQ(JsonIntegerField(j, "absent", 7, 0, 10), 7);
  EXPECT_EQ(JsonIntegerField(Json::parse("[1]"), "n", 7, 0, 10), 7);  // not an object: nothing to read
  for (const char* name : {"f", "s"}) {
    try {
      JsonIntegerField(j, name, 0, 0, 10);
      ADD_FAILURE() << name << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()), std::string(name) + ": expected an integer in [0, 10]");
    }
  }
  EXPECT_THROW(JsonIntegerField(j, "n", 0, 0, 4), std::invalid_argument);
}

}  // namespace
}  // namespace tandem
