// The grammar builder and its flat form: literals, classes (UTF-8 included), sequences,
// alternatives, repeats and recursion match exactly the texts they describe; malformed grammars
// are refused with the rule named.
#include "engine/grammar/grammar.h"

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "tests/engine/grammar/grammar_test_util.h"

namespace tandem::grammar {
namespace {

// A root rule built from expressions, and texts with whether each is a whole sentence
// (kWhole), a prefix of one (kPrefix) or neither (kNo).
enum Expect { kWhole, kPrefix, kNo };
struct ExprCase {
  const char* what;
  std::function<Expr(GrammarBuilder&)> body;
  std::vector<std::pair<std::string, Expect>> texts;
};

TEST(GrammarTest, ExpressionsMatchExactlyTheirTexts) {
  const ExprCase cases[] = {
      {"literal, sequence, alternative",
       [](GrammarBuilder& b) { return b.Seq({b.Literal("ab"), b.Alt({b.Literal("c"), b.Literal("de")})}); },
       {{"abc", kWhole}, {"abde", kWhole}, {"ab", kPrefix}, {"abd", kPrefix}, {"abx", kNo}, {"abcx", kNo}}},
      {"x{2,4} y* z+ w?",
       [](GrammarBuilder& b) {
         return b.Seq({b.Repeat(b.Literal("x"), 2, 4), b.Star(b.Literal("y")), b.Plus(b.Literal("z")),
                       b.Optional(b.Literal("w"))});
       },
       {{"xz", kNo}, {"xxz", kWhole}, {"xxxxyyyzzw", kWhole}, {"xxxxx", kNo}, {"xxyy", kPrefix}, {"xxzww", kNo}}},
      {"(ab){1,2} (c|de)* .",
       [](GrammarBuilder& b) {
         return b.Seq({b.Repeat(b.Literal("ab"), 1, 2), b.Star(b.Alt({b.Literal("c"), b.Literal("de")})), b.Literal(".")});
       },
       {{"ab.", kWhole}, {"ababcdec.", kWhole}, {"ababab.", kNo}, {"abd.", kNo}}},
  };
  for (const ExprCase& c : cases) {
    GrammarBuilder b;
    const RuleId root = b.AddRule("root");
    ASSERT_TRUE(b.Define(root, c.body(b)).ok()) << c.what;
    auto g = CompileOrDie(b, root, ByteVocabulary());
    for (const auto& [text, want] : c.texts) {
      const Expect got = Matches(g, text) ? kWhole : IsPrefix(g, text) ? kPrefix : kNo;
      EXPECT_EQ(got, want) << c.what << ": " << text;
    }
  }
}

TEST(GrammarTest, RecursionNestsToAnyDepth) {
  GrammarBuilder b;
  const RuleId root = b.AddRule("parens");
  ASSERT_TRUE(b.Define(root, b.Alt({b.Empty(), b.Seq({b.Literal("("), b.Ref(root), b.Literal(")"), b.Ref(root)})})).ok());
  auto g = CompileOrDie(b, root, ByteVocabulary());
  EXPECT_TRUE(Matches(g, ""));
  EXPECT_TRUE(Matches(g, "(()())((()))"));
  EXPECT_FALSE(Matches(g, "(()"));
  EXPECT_FALSE(IsPrefix(g, "())"));
  std::string deep(500, '(');
  deep += std::string(500, ')');
  EXPECT_TRUE(Matches(g, deep));
}

TEST(GrammarTest, CharsMatchUtf8AndNeverSurrogates) {
  GrammarBuilder b;
  const RuleId root = b.AddRule("root");
  // Anything but 'a'..'z', as UTF-8.
  ASSERT_TRUE(b.Define(root, b.Plus(b.Chars({{'a', 'z'}}, /*negated=*/true))).ok());
  auto g = CompileOrDie(b, root, ByteVocabulary());
  EXPECT_TRUE(Matches(g, "A"));
  EXPECT_FALSE(Matches(g, "q"));
  EXPECT_TRUE(Matches(g, "\xC3\xA9"));                    // é
  EXPECT_TRUE(Matches(g, "\xE2\x82\xAC"));                // €
  EXPECT_TRUE(Matches(g, "\xF0\x9F\x98\x80"));            // U+1F600
  EXPECT_TRUE(Matches(g, "\xF4\x8F\xBF\xBF"));            // U+10FFFF
  EXPECT_FALSE(IsPrefix(g, "\xED\xA0"));                  // a surrogate's lead
  EXPECT_FALSE(IsPrefix(g, "\xC0"));                      // overlong
  EXPECT_FALSE(IsPrefix(g, "\xF4\x90"));                  // above U+10FFFF
  EXPECT_FALSE(Matches(g, "\xE2\x82"));                   // incomplete
  // Every code point in a range and none outside it, across each encoded-length boundary.
  GrammarBuilder r;
  const RuleId one = r.AddRule("one");
  ASSERT_TRUE(r.Define(one, r.Chars({{0x70, 0x7FF}, {0xFFF0, 0x10010}})).ok());
  auto gr = CompileOrDie(r, one, ByteVocabulary());
  auto utf8 = [](char32_t c) {
    std::string s;
    if (c < 0x80) {
      s += static_cast<char>(c);
    } else if (c < 0x800) {
      s += static_cast<char>(0xC0 | (c >> 6)), s += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      s += static_cast<char>(0xE0 | (c >> 12)), s += static_cast<char>(0x80 | ((c >> 6) & 0x3F)),
          s += static_cast<char>(0x80 | (c & 0x3F));
    } else {
      s += static_cast<char>(0xF0 | (c >> 18)), s += static_cast<char>(0x80 | ((c >> 12) & 0x3F)),
          s += static_cast<char>(0x80 | ((c >> 6) & 0x3F)), s += static_cast<char>(0x80 | (c & 0x3F));
    }
    return s;
  };
  for (char32_t c : {0x6F, 0x70, 0x7F, 0x80, 0x7FF, 0x800, 0xFFEF, 0xFFF0, 0xFFFF, 0x10000, 0x10010, 0x10011}) {
    const bool in = (c >= 0x70 && c <= 0x7FF) || (c >= 0xFFF0 && c <= 0x10010);
    EXPECT_EQ(Matches(gr, utf8(c)), in) << std::hex << static_cast<uint32_t>(c);
  }
}

TEST(GrammarTest, RefusesUndefinedRulesLeftRecursionAndBadBounds) {
  {
    GrammarBuilder b;
    const RuleId root = b.AddRule("root");
    const RuleId missing = b.AddRule("missing");
    ASSERT_TRUE(b.Define(root, b.Ref(missing)).ok());
    absl::StatusOr<Grammar> g = b.Build(root);
    ASSERT_FALSE(g.ok());
    EXPECT_NE(g.status().message().find("missing"), std::string::npos) << g.status();
  }
  {
    GrammarBuilder b;
    const RuleId expr = b.AddRule("expr");
    ASSERT_TRUE(b.Define(expr, b.Alt({b.Seq({b.Optional(b.Literal(" ")), b.Ref(expr), b.Literal("+1")}), b.Literal("1")})).ok());
    absl::StatusOr<Grammar> g = b.Build(expr);
    ASSERT_FALSE(g.ok());
    EXPECT_NE(g.status().message().find("left recursion through rule expr"), std::string::npos) << g.status();
  }
  {
    GrammarBuilder b;
    const RuleId root = b.AddRule("root");
    ASSERT_TRUE(b.Define(root, b.Repeat(b.Literal("x"), 3, 2)).ok());
    EXPECT_FALSE(b.Build(root).ok());
    EXPECT_FALSE(b.Define(root, b.Literal("y")).ok());  // defined twice
  }
}

TEST(GrammarTest, ToStringShowsTheFlatRules) {
  GrammarBuilder b;
  const RuleId root = b.AddRule("root");
  const RuleId digit = b.AddRule("digit");
  ASSERT_TRUE(b.Define(digit, b.Bytes({{'0', '9'}})).ok());
  ASSERT_TRUE(b.Define(root, b.Seq({b.Literal("n"), b.Star(b.Ref(digit)), b.Optional(b.Literal("!"))})).ok());
  absl::StatusOr<Grammar> g = b.Build(root);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->ToString(), "root ::= \"n\" digit* \"!\"?\ndigit ::= [0-9]\n");
  EXPECT_EQ(b.AddRule("root"), 2);
  EXPECT_EQ(b.RuleName(2), "root_2");  // names stay unique
}

}  // namespace
}  // namespace tandem::grammar
