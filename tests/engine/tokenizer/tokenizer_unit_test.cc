// Tokenizer pieces on tiny hand-made tokenizer.json files: merge ranks, both merge spellings,
// added-token flags, pre-tokenizer options, UTF-8 helpers, and rejection of malformed files.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <utf8proc.h>

#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/utf8.h"

namespace tandem::tokenizer {
namespace {

using nlohmann::json;

// A byte-level tokenizer: ids 0..255 are the bytes, then one id per merge result.
json TinyTokenizer(const std::vector<std::pair<std::string, std::string>>& merges,
                   bool string_merges = false) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[BytesToByteLevel(std::string(1, static_cast<char>(b)))] = b;
  json merge_list = json::array();
  int next = 256;
  for (const auto& [a, b] : merges) {
    const std::string la = BytesToByteLevel(a), lb = BytesToByteLevel(b);
    if (!vocab.contains(la + lb)) vocab[la + lb] = next++;
    if (string_merges) merge_list.push_back(la + " " + lb);
    else merge_list.push_back(json::array({la, lb}));
  }
  return json{
      {"version", "1.0"},
      {"added_tokens", json::array()},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         json::array({{{"type", "Split"},
                       {"pattern", {{"Regex", "\\s+|[^\\s]+"}}},
                       {"behavior", "Isolated"},
                       {"invert", false}},
                      {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merge_list}}}};
}

std::unique_ptr<Tokenizer> Load(const json& j) {
  auto t = Tokenizer::LoadFromJson(j.dump(), "");
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

std::string LoadError(const json& j) {
  auto t = Tokenizer::LoadFromJson(j.dump(), "");
  EXPECT_FALSE(t.ok());
  return t.ok() ? "" : std::string(t.status().message());
}

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

TEST(ByteLevelTest, AlphabetRoundTripsAllBytes) {
  EXPECT_EQ(BytesToByteLevel(" \n"), "ĠĊ");
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  EXPECT_EQ(ByteLevelToBytes(BytesToByteLevel(all)), all);
  EXPECT_FALSE(ByteLevelToBytes("中").has_value());
}

TEST(BpeTest, MergesApplyByRankNotByPosition) {
  auto ab_first = Load(TinyTokenizer({{"a", "b"}, {"b", "c"}}));
  auto bc_first = Load(TinyTokenizer({{"b", "c"}, {"a", "b"}}));
  ASSERT_TRUE(ab_first && bc_first);
  EXPECT_EQ(ab_first->Encode("abc"), (std::vector<int32_t>{256, 'c'}));
  EXPECT_EQ(bc_first->Encode("abc"), (std::vector<int32_t>{'a', 256}));
  // Equal ranks: leftmost first ("aaa" -> "aa" + "a").
  auto aa = Load(TinyTokenizer({{"a", "a"}}));
  EXPECT_EQ(aa->Encode("aaa"), (std::vector<int32_t>{256, 'a'}));
  EXPECT_EQ(aa->Encode("aaaa"), (std::vector<int32_t>{256, 256}));
}

TEST(BpeTest, StringAndPairMergeSpellingsAgree) {
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {" ", "w"}};
  auto pairs = Load(TinyTokenizer(merges, false));
  auto strings = Load(TinyTokenizer(merges, true));
  ASSERT_TRUE(pairs && strings);
  const auto ids = pairs->Encode("hello wow");
  EXPECT_EQ(ids, strings->Encode("hello wow"));
  // The pre-tokenizer isolates the space, so the " w" merge (260) never applies across it.
  EXPECT_EQ(ids, (std::vector<int32_t>{259, ' ', 'w', 'o', 'w'}));
  EXPECT_EQ(pairs->Decode(ids), "hello wow");
}

TEST(AddedTokensTest, FlagsControlMatching) {
  json j = TinyTokenizer({});
  j["added_tokens"] = json::array({
      {{"id", 300}, {"content", "<s>"}, {"special", true}, {"normalized", false}},
      {{"id", 301}, {"content", "<sep>"}, {"special", true}, {"lstrip", true}, {"rstrip", true},
       {"normalized", false}},
      {{"id", 302}, {"content", "cat"}, {"special", false}, {"single_word", true}, {"normalized", false}},
      {{"id", 303}, {"content", "<s>x"}, {"special", false}, {"normalized", false}},
      {{"id", 304}, {"content", "\xC3\xA9t\xC3\xA9"}, {"special", false}, {"normalized", true}},
  });
  auto t = Load(j);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->Encode("<s>"), (std::vector<int32_t>{300}));
  EXPECT_EQ(t->Encode("<s>x"), (std::vector<int32_t>{303}));  // longest match wins
  EXPECT_EQ(t->Encode("a  <sep>  b"), (std::vector<int32_t>{'a', 301, 'b'}));  // spaces swallowed
  EXPECT_EQ(t->Encode("cat"), (std::vector<int32_t>{302}));
  EXPECT_EQ(t->Encode("a cat."), (std::vector<int32_t>{'a', ' ', 302, '.'}));
  EXPECT_EQ(t->Encode("cats"), (std::vector<int32_t>{'c', 'a', 't', 's'}));  // inside a word
  // Normalized token: decomposed "été" in the text is composed first, then matched.
  EXPECT_EQ(t->Encode("e\xCC\x81te\xCC\x81"), (std::vector<int32_t>{304}));
  EXPECT_EQ(t->Decode({300, 'a', 301}), "<s>a<sep>");
  EXPECT_EQ(t->Decode({300, 'a', 301}, /*skip_special_tokens=*/true), "a");
  EXPECT_EQ(t->vocab_size(), 305);
}

TEST(PreTokenizerTest, ByteLevelRegexAndPrefixSpace) {
  json j = TinyTokenizer({{" ", "h"}, {" h", "i"}});
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}};
  auto t = Load(j);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->Encode("hi hi"), (std::vector<int32_t>{257, 257}));
}

TEST(PreTokenizerTest, SplitBehaviors) {
  const std::vector<std::pair<std::string, std::vector<int32_t>>> cases = {
      {"Removed", {'a', 'b'}},
      {"Isolated", {'a', '-', 'b'}},
      {"MergedWithPrevious", {256, 'b'}},  // "a-" then "b"
      {"MergedWithNext", {'a', 257}},      // "a" then "-b"
  };
  for (const auto& [behavior, want] : cases) {
    json j = TinyTokenizer({{"a", "-"}, {"-", "b"}});
    j["pre_tokenizer"]["pretokenizers"][0] = {
        {"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", behavior}, {"invert", false}};
    auto t = Load(j);
    ASSERT_TRUE(t);
    EXPECT_EQ(t->Encode("a-b"), want) << behavior;
  }
}

TEST(LoadErrorTest, MalformedFilesAreRejectedWithTheKey) {
  {
    json j = TinyTokenizer({});
    j["model"].erase("vocab");
    EXPECT_NE(LoadError(j).find("model.vocab"), std::string::npos);
  }
  {
    json j = TinyTokenizer({});
    j["pre_tokenizer"]["pretokenizers"][0] = {{"type", "Whitespace"}};
    const std::string e = LoadError(j);
    EXPECT_NE(e.find("unsupported type \"Whitespace\""), std::string::npos) << e;
  }
  {
    json j = TinyTokenizer({});
    j["model"]["merges"] = json::array({"a b c"});
    EXPECT_NE(LoadError(j).find("model.merges[0]"), std::string::npos);
    j["model"]["merges"] = json::array({json::array({"a", "zz"})});
    const std::string e = LoadError(j);
    EXPECT_NE(e.find("not in model.vocab"), std::string::npos) << e;
    j["model"]["merges"] = json::array({42});
    EXPECT_NE(LoadError(j).find("model.merges[0]"), std::string::npos);
  }
  {
    json j = TinyTokenizer({});
    j["normalizer"] = {{"type", "Lowercase"}};
    EXPECT_NE(LoadError(j).find("\"Lowercase\""), std::string::npos);
    j = TinyTokenizer({});
    j["model"]["type"] = "WordPiece";
    EXPECT_NE(LoadError(j).find("\"WordPiece\""), std::string::npos);
    j = TinyTokenizer({});
    j["decoder"] = nullptr;
    EXPECT_NE(LoadError(j).find("decoder"), std::string::npos);
    j = TinyTokenizer({});
    j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed";
    EXPECT_NE(LoadError(j).find("regex does not compile"), std::string::npos);
    j = TinyTokenizer({});
    j["model"]["vocab"]["中"] = 999;
    EXPECT_NE(LoadError(j).find("byte-level alphabet"), std::string::npos);
    j = TinyTokenizer({});
    j["added_tokens"] = json::array({{{"id", 3}, {"content", "x"}}, {{"id", 3}, {"content", "y"}}});
    EXPECT_NE(LoadError(j).find("used twice"), std::string::npos);
  }
  auto t = Tokenizer::LoadFromJson("{\"model\": ", "");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(std::string(t.status().message()).find("tokenizer.json"), std::string::npos);
  auto missing = Tokenizer::LoadFromDir("/nonexistent-dir");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  auto bad_config = Tokenizer::LoadFromJson(TinyTokenizer({}).dump(), R"({"eos_token": "<nope>"})");
  ASSERT_FALSE(bad_config.ok());
  EXPECT_NE(std::string(bad_config.status().message()).find("<nope>"), std::string::npos);
}

}  // namespace
}  // namespace tandem::tokenizer
