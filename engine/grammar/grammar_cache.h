// Compiled grammars of one vocabulary by key (e.g. the schema's text), the most recently used
// kept: a client sends the same schema with every request, and a compiled grammar's mask cache
// (compiled_grammar.h) is what makes its later steps fast, so it is shared by all of them.
// Thread-safe: HTTP threads compile, the engine thread reads masks.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "absl/status/statusor.h"
#include "engine/grammar/compiled_grammar.h"

namespace tandem::grammar {

class GrammarCache {
 public:
  explicit GrammarCache(std::shared_ptr<const TokenVocabulary> vocab, size_t capacity = 64)
      : vocab_(std::move(vocab)), capacity_(capacity) {}

  // The compiled `grammar` stored under `key` (compiled now if absent). Two different grammars
  // must not share a key.
  absl::StatusOr<std::shared_ptr<const CompiledGrammar>> Get(const std::string& key, const Grammar& grammar);

  const std::shared_ptr<const TokenVocabulary>& vocab() const { return vocab_; }
  size_t size() const;

 private:
  using Entry = std::pair<std::string, std::shared_ptr<const CompiledGrammar>>;
  const std::shared_ptr<const TokenVocabulary> vocab_;
  const size_t capacity_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // most recent first
  std::unordered_map<std::string, std::list<Entry>::iterator> by_key_;
};

}  // namespace tandem::grammar
