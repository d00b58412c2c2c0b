// Tiny hand-made tokenizer.json documents for the tests of the tokenizer's parts (BPE merges,
// added tokens, pre-tokenizers, the loader's errors): small enough that each expected id can be
// worked out by hand.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/tokenizer.h"

namespace tandem::tokenizer::testing {

using nlohmann::json;

// A byte-level tokenizer: ids 0..255 are the bytes, then one id per merge result.
inline json TinyTokenizer(const std::vector<std::pair<std::string, std::string>>& merges,
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

inline std::unique_ptr<Tokenizer> Load(const json& j) {
  auto t = Tokenizer::LoadFromJson(j.dump(), "");
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

inline std::string LoadError(const json& j) {
  auto t = Tokenizer::LoadFromJson(j.dump(), "");
  EXPECT_FALSE(t.ok());
  return t.ok() ? "" : std::string(t.status().message());
}

}  // namespace tandem::tokenizer::testing
