#include "engine/tokenizer/jinja/value.h"

#include <cmath>

#include <gtest/gtest.h>

namespace tandem::jinja {
namespace {

TEST(JinjaValue, NumbersPrintAsJavaScriptDoes) {
  EXPECT_EQ(JsNumberToString(0), "0");
  EXPECT_EQ(JsNumberToString(-0.0), "0");
  EXPECT_EQ(JsNumberToString(12345678.9), "12345678.9");
  EXPECT_EQ(JsNumberToString(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(JsNumberToString(1e21), "1e+21");
  EXPECT_EQ(JsNumberToString(123456789012345680000.0), "123456789012345680000");
  EXPECT_EQ(JsNumberToString(0.000001), "0.000001");
  EXPECT_EQ(JsNumberToString(1e-7), "1e-7");
  EXPECT_EQ(JsNumberToString(-1.5e300), "-1.5e+300");
  EXPECT_EQ(JsNumberToString(INFINITY), "Infinity");
  EXPECT_EQ(JsNumberToString(NAN), "NaN");
}

TEST(JinjaValue, OutputStrings) {
  EXPECT_EQ(ToOutputString(Value::Float(2)), "2.0");
  EXPECT_EQ(ToOutputString(Value::Float(-0.0)), "-0.0");
  EXPECT_EQ(ToOutputString(Value::Float(2.5)), "2.5");
  EXPECT_EQ(ToOutputString(Value::Int(2)), "2");
  EXPECT_EQ(ToOutputString(Value::Bool(true)), "true");
  EXPECT_EQ(ToOutputString(Value::Array({Value::Int(1), Value::String("a"), Value()})), "[1, \"a\", undefined]");
  EXPECT_EQ(ToRawString(Value::Array({Value::Int(1), Value::String("a")})), "1,a");
  EXPECT_EQ(ToRawString(Value::Float(2)), "2");
  EXPECT_EQ(ToRawString(Value::MakeObject(Object())), "[object Map]");
}

TEST(JinjaValue, Truthiness) {
  EXPECT_FALSE(Value().Truthy());
  EXPECT_FALSE(Value::None().Truthy());
  EXPECT_FALSE(Value::Int(0).Truthy());
  EXPECT_FALSE(Value::Float(NAN).Truthy());
  EXPECT_FALSE(Value::String("").Truthy());
  EXPECT_FALSE(Value::Array({}).Truthy());
  EXPECT_FALSE(Value::MakeObject(Object()).Truthy());
  EXPECT_TRUE(Value::Namespace(std::make_shared<Object>()).Truthy());  // a JavaScript Map
  EXPECT_TRUE(Value::String("0").Truthy());
}

TEST(JinjaValue, LooseAndStrictEquality) {
  EXPECT_TRUE(LooseEquals(Value(), Value::None()));
  EXPECT_TRUE(LooseEquals(Value::String("1"), Value::Int(1)));
  EXPECT_TRUE(LooseEquals(Value::Bool(true), Value::Int(1)));
  EXPECT_TRUE(LooseEquals(Value::Array({Value::String("a")}), Value::String("a")));
  EXPECT_FALSE(LooseEquals(Value::Array({}), Value::Array({})));
  EXPECT_FALSE(LooseEquals(Value::None(), Value::Int(0)));
  const Value xs = Value::Array({Value::Int(1)});
  EXPECT_TRUE(LooseEquals(xs, xs));
  EXPECT_FALSE(StrictEquals(Value::String("1"), Value::Int(1)));
  EXPECT_TRUE(StrictEquals(Value::Int(1), Value::Float(1)));
  // The reference's none holds JavaScript's undefined: equal to undefined even strictly, and
  // "undefined" inside a list made into a string.
  EXPECT_TRUE(StrictEquals(Value::None(), Value()));
  EXPECT_EQ(ToRawString(Value::Array({Value::Int(1), Value::None()})), "1,undefined");
}

TEST(JinjaObject, KeepsInsertionOrder) {
  Object o;
  o.Set("b", Value::Int(1));
  o.Set("a", Value::Int(2));
  o.Set("b", Value::Int(3));
  ASSERT_EQ(o.size(), 2u);
  EXPECT_EQ(o.entries()[0].first, "b");
  EXPECT_EQ(o.entries()[0].second.number(), 3);
  EXPECT_EQ(o.Find("a")->number(), 2);
  EXPECT_EQ(o.Find("z"), nullptr);
}

}  // namespace
}  // namespace tandem::jinja
