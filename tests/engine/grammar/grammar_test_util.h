// Shared by the grammar tests: build a grammar and run text through a matcher over a vocabulary
// of all 256 single bytes (so that any text can be fed byte by byte).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/grammar/compiled_grammar.h"
#include "engine/grammar/grammar.h"
#include "engine/grammar/matcher.h"
#include "engine/grammar/vocabulary.h"

namespace tandem::grammar {

// Ids 0..255 are the single bytes, then `extra` tokens; eos is the last id.
inline std::shared_ptr<const TokenVocabulary> ByteVocabulary(const std::vector<std::string>& extra = {}) {
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
  bytes.insert(bytes.end(), extra.begin(), extra.end());
  bytes.push_back("<eos>");
  const int32_t eos = static_cast<int32_t>(bytes.size() - 1);
  return std::make_shared<const TokenVocabulary>(std::move(bytes), std::vector<int32_t>{}, std::vector<int32_t>{eos});
}

inline std::shared_ptr<const CompiledGrammar> CompileOrDie(const GrammarBuilder& b, RuleId root,
                                                           std::shared_ptr<const TokenVocabulary> vocab) {
  absl::StatusOr<Grammar> g = b.Build(root);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return nullptr;
  absl::StatusOr<std::shared_ptr<const CompiledGrammar>> c = CompiledGrammar::Compile(std::move(*g), std::move(vocab));
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : nullptr;
}

// Whether `text` is a complete sentence of the grammar.
inline bool Matches(const std::shared_ptr<const CompiledGrammar>& g, const std::string& text) {
  GrammarMatcher m(g);
  return m.AcceptBytes(text) && m.CanEnd();
}

// Whether `text` is a prefix of some sentence.
inline bool IsPrefix(const std::shared_ptr<const CompiledGrammar>& g, const std::string& text) {
  GrammarMatcher m(g);
  return m.AcceptBytes(text);
}

}  // namespace tandem::grammar
