#include "engine/grammar/grammar_cache.h"

namespace tandem::grammar {

absl::StatusOr<std::shared_ptr<const CompiledGrammar>> GrammarCache::Get(const std::string& key,
                                                                         const Grammar& grammar) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (auto it = by_key_.find(key); it != by_key_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->second;
    }
  }
  // Compiled outside the lock; if two threads compile the same key, the first stored is kept.
  absl::StatusOr<std::shared_ptr<const CompiledGrammar>> compiled = CompiledGrammar::Compile(grammar, vocab_);
  if (!compiled.ok()) return compiled.status();
  std::lock_guard<std::mutex> l(mu_);
  if (auto it = by_key_.find(key); it != by_key_.end()) return it->second->second;
  lru_.emplace_front(key, *compiled);
  by_key_[key] = lru_.begin();
  while (lru_.size() > capacity_) {
    by_key_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return *compiled;
}

size_t GrammarCache::size() const {
  std::lock_guard<std::mutex> l(mu_);
  return lru_.size();
}

}  // namespace tandem::grammar
