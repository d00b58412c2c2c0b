#include "engine/grammar/compiled_grammar.h"

#include <algorithm>
#include <array>
#include <map>
#include <tuple>

#include "absl/status/status.h"

namespace tandem::grammar {

namespace {

constexpr int64_t kNever = int64_t{1} << 50;  // a rule that cannot complete

int64_t AddLen(int64_t a, int64_t b) { return std::min(a + b, kNever); }

}  // namespace

CompiledGrammar::CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenVocabulary> vocab)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)) {
  const auto& el = grammar_.elements;
  rule_min_.assign(grammar_.rules.size(), kNever);
  min_rest_.assign(el.size(), kNever);
  // Shortest lengths by fixed point: each pass recomputes every alternative from the end.
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < grammar_.rules.size(); ++r) {
      for (int32_t start : grammar_.rules[r].alternatives) {
        int32_t end = start;
        while (el[end].kind != Element::Kind::kEnd) ++end;
        min_rest_[end] = 0;
        for (int32_t p = end - 1; p >= start; --p) {
          const Element& e = el[p];
          const int64_t once = e.kind == Element::Kind::kBytes ? 1 : rule_min_[e.arg];
          min_rest_[p] = e.repeat == Repetition::kOne ? AddLen(once, min_rest_[p + 1]) : min_rest_[p + 1];
        }
        if (min_rest_[start] < rule_min_[r]) {
          rule_min_[r] = min_rest_[start];
          changed = true;
        }
      }
    }
  }
  masks_.resize(el.size());
  ComputeFollowSets();
  // String positions by their entry: the same piece and element, the same limits (as far as
  // the vocabulary's tokens can tell them apart) and the same follow set.
  strings_ = FindStringPositions(grammar_, follow_);
  shared_.assign(el.size(), -1);
  std::map<std::tuple<int32_t, int32_t, int32_t, int32_t, std::array<uint64_t, 4>>, int32_t> entries;
  for (size_t pos = 0; pos < el.size(); ++pos) {
    if (strings_[pos].piece < 0) continue;
    // The vocabulary's buckets are built on the first such position, while compiling rather
    // than at a decode step.
    StringPosition& s = strings_[pos];
    s = vocab_->string_content().Canonical(s);
    const auto key = std::make_tuple(s.piece, s.element, s.lo, s.hi, follow_[owner_[pos]].bits);
    shared_[pos] = entries.emplace(key, static_cast<int32_t>(entries.size())).first->second;
  }
  shared_masks_.resize(entries.size());
}

void CompiledGrammar::ComputeFollowSets() {
  const auto& el = grammar_.elements;
  const size_t nr = grammar_.rules.size();
  owner_.assign(el.size(), -1);
  for (size_t r = 0; r < nr; ++r) {
    for (int32_t p : grammar_.rules[r].alternatives) {
      for (; el[p].kind != Element::Kind::kEnd; ++p) owner_[p] = static_cast<RuleId>(r);
      owner_[p] = static_cast<RuleId>(r);
    }
  }
  // FIRST sets and nullability of rules, then of each position's rest of its alternative.
  std::vector<ByteSet> first(nr);
  std::vector<bool> nullable(nr, false);
  auto merge = [](ByteSet& into, const ByteSet& from) {
    bool changed = false;
    for (int w = 0; w < 4; ++w) {
      const uint64_t before = into.bits[w];
      into.bits[w] |= from.bits[w];
      changed = changed || into.bits[w] != before;
    }
    return changed;
  };
  // The FIRST set and nullability of the rest of an alternative from position p.
  auto rest = [&](int32_t p, ByteSet* out) {
    for (; el[p].kind != Element::Kind::kEnd; ++p) {
      const Element& e = el[p];
      const bool elem_nullable = e.repeat != Repetition::kOne || (e.kind == Element::Kind::kRule && nullable[e.arg]);
      merge(*out, e.kind == Element::Kind::kBytes ? grammar_.byte_sets[e.arg] : first[e.arg]);
      if (!elem_nullable) return false;
    }
    return true;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < nr; ++r) {
      for (int32_t p : grammar_.rules[r].alternatives) {
        ByteSet f;
        const bool n = rest(p, &f);
        changed = merge(first[r], f) || changed;
        if (n && !nullable[r]) nullable[r] = changed = true;
      }
    }
  }
  follow_.assign(nr, ByteSet{});
  for (bool changed = true; changed;) {
    changed = false;
    // From the end: helper rules come after the rules that call them, so a chain of them
    // (a bounded repetition) settles in one pass instead of one pass per link.
    for (size_t p = el.size(); p-- > 0;) {
      const Element& e = el[p];
      if (e.kind != Element::Kind::kRule) continue;
      ByteSet f;
      if (rest(static_cast<int32_t>(p) + 1, &f)) merge(f, follow_[owner_[p]]);
      if (e.repeat == Repetition::kStar) merge(f, first[e.arg]);  // it may match again
      changed = merge(follow_[e.arg], f) || changed;
    }
  }
}

absl::StatusOr<std::shared_ptr<const CompiledGrammar>> CompiledGrammar::Compile(
    Grammar grammar, std::shared_ptr<const TokenVocabulary> vocab) {
  if (vocab == nullptr) return absl::InvalidArgumentError("grammar: no vocabulary");
  if (grammar.root < 0 || grammar.root >= static_cast<RuleId>(grammar.rules.size())) {
    return absl::InvalidArgumentError("grammar: no root rule");
  }
  auto g = std::shared_ptr<CompiledGrammar>(new CompiledGrammar(std::move(grammar), std::move(vocab)));
  if (g->rule_min_[g->grammar_.root] >= kNever) {
    return absl::InvalidArgumentError("grammar: the root rule " + g->grammar_.rules[g->grammar_.root].name +
                                      " matches no finite text");
  }
  // Entries outside string content take a walk of the vocabulary (a few to a hundred
  // microseconds each), and a request reaches new ones at many steps: they are made now, with
  // the grammar, once per schema, rather than at decode steps.
  size_t made = 0;
  for (int32_t pos = 0; pos < static_cast<int32_t>(g->grammar_.elements.size()) && made < kCompiledMasks; ++pos) {
    if (g->grammar_.elements[pos].kind != Element::Kind::kBytes || g->IsStringContent(pos)) continue;
    g->MaskAt(pos);
    ++made;
  }
  return std::shared_ptr<const CompiledGrammar>(std::move(g));
}

void CompiledGrammar::Expand(int32_t node, std::vector<StackNode>* pool, MatchState* out,
                             std::vector<StackNode>* seen) const {
  const StackNode n = (*pool)[node];
  for (const StackNode& s : *seen) {
    if (s.pos == n.pos && s.parent == n.parent) return;
  }
  seen->push_back(n);
  const Element& e = grammar_.elements[n.pos];
  auto push = [pool](int32_t pos, int32_t parent) {
    pool->push_back(StackNode{pos, parent});
    return static_cast<int32_t>(pool->size() - 1);
  };
  switch (e.kind) {
    case Element::Kind::kBytes:
      out->tops.push_back(node);
      break;
    case Element::Kind::kRule: {
      int32_t ret;
      if (e.repeat == Repetition::kStar) {
        ret = node;  // after each match, back here: again or on
      } else if (grammar_.elements[n.pos + 1].kind == Element::Kind::kEnd) {
        ret = n.parent;  // tail call
      } else {
        ret = push(n.pos + 1, n.parent);
      }
      for (int32_t alt : grammar_.rules[e.arg].alternatives) Expand(push(alt, ret), pool, out, seen);
      break;
    }
    case Element::Kind::kEnd:
      if (n.parent == kRootParent) {
        out->can_end = true;
      } else if (n.parent == kBoundaryParent) {
        out->crossed = true;
      } else {
        Expand(n.parent, pool, out, seen);
      }
      return;
  }
  if (e.repeat != Repetition::kOne) Expand(push(n.pos + 1, n.parent), pool, out, seen);
}

MatchState CompiledGrammar::Start(std::vector<StackNode>* pool) const {
  MatchState s;
  std::vector<StackNode> seen;
  for (int32_t alt : grammar_.rules[grammar_.root].alternatives) {
    pool->push_back(StackNode{alt, kRootParent});
    Expand(static_cast<int32_t>(pool->size() - 1), pool, &s, &seen);
  }
  return s;
}

void PositionMask::AddAcceptedTo(std::vector<uint64_t>* mask) const {
  // One of the two is empty.
  for (size_t w = 0; w < accepted.size(); ++w) (*mask)[w] |= accepted[w];
  for (int32_t id : accepted_ids) (*mask)[id >> 6] |= uint64_t{1} << (id & 63);
}

void PositionMask::MakeSparse(size_t most) {
  if (sparse()) return;
  size_t count = 0;
  for (uint64_t w : accepted) count += static_cast<size_t>(__builtin_popcountll(w));
  if (count > most) return;
  accepted_ids.clear();
  for (size_t w = 0; w < accepted.size(); ++w) {
    for (uint64_t bits = accepted[w]; bits != 0; bits &= bits - 1) {
      accepted_ids.push_back(static_cast<int32_t>(w * 64 + static_cast<size_t>(__builtin_ctzll(bits))));
    }
  }
  accepted = {};
}

MatchState CompiledGrammar::Resume(int32_t node, std::vector<StackNode>* pool) const {
  MatchState s;
  std::vector<StackNode> seen;
  if (node == kRootParent) {
    s.can_end = true;
  } else {
    Expand(node, pool, &s, &seen);
  }
  return s;
}

void CompiledGrammar::Advance(const MatchState& from, uint8_t byte, std::vector<StackNode>* pool,
                              MatchState* to) const {
  thread_local std::vector<StackNode> seen;
  seen.clear();
  to->tops.clear();
  to->can_end = to->crossed = to->matched = false;
  for (int32_t id : from.tops) {
    const StackNode n = (*pool)[id];
    const Element& e = grammar_.elements[n.pos];
    if (!grammar_.byte_sets[e.arg].Has(byte)) continue;
    to->matched = true;
    if (e.repeat == Repetition::kStar) {
      Expand(id, pool, to, &seen);
    } else {
      pool->push_back(StackNode{n.pos + 1, n.parent});
      Expand(static_cast<int32_t>(pool->size() - 1), pool, to, &seen);
    }
  }
}

int64_t CompiledGrammar::MinBytesToEnd(const MatchState& s, const std::vector<StackNode>& pool,
                                       int* first_byte) const {
  *first_byte = -1;
  if (s.can_end) return 0;
  int64_t best = kNever;
  for (int32_t id : s.tops) {
    int64_t total = 0;
    for (int32_t n = id; n >= 0; n = pool[n].parent) total = AddLen(total, min_rest_[pool[n].pos]);
    const Element& e = grammar_.elements[pool[id].pos];
    // A top that may be skipped is never the one that starts a shortest completion: the
    // closure also holds what follows it, at the same total.
    if (e.repeat != Repetition::kOne || total >= best) continue;
    best = total;
    const ByteSet& set = grammar_.byte_sets[e.arg];
    for (int b = 0; b < 256; ++b) {
      if (set.Has(static_cast<uint8_t>(b))) {
        *first_byte = b;
        break;
      }
    }
  }
  return best;
}

void CompiledGrammar::WalkTokens(const MatchState& start, std::vector<StackNode>* pool,
                                 const std::vector<int32_t>* ranks, const ByteSet* follow,
                                 absl::FunctionRef<void(int32_t, TokenResult)> visit) const {
  const TokenVocabulary& v = *vocab_;
  const size_t count = ranks != nullptr ? ranks->size() : v.sorted().size();
  // states[d]: the state after the first d bytes of the current token; pool_size[d]: the pool
  // before states[d + 1]; crossed[d]: some path left through the boundary after byte j and
  // byte j + 1 can follow it, for a j < d (so it depends on the first d bytes only).
  thread_local std::vector<MatchState> states;
  thread_local std::vector<char> crossed;
  thread_local std::vector<size_t> pool_size;
  if (states.empty()) states.resize(1);
  states[0] = start;
  crossed.assign(2, 0);
  pool_size.assign(1, pool->size());
  auto left_before = [&](size_t d, std::string_view b) {  // crossed[d + 1] of token b
    return crossed[d] || (d >= 1 && states[d].crossed && (follow == nullptr || follow->Has(static_cast<uint8_t>(b[d]))));
  };
  size_t valid = 0;  // states[0..valid] hold for the previous token's prefix
  std::string_view prev;
  for (size_t i = 0; i < count; ++i) {
    const int32_t rank = ranks != nullptr ? (*ranks)[i] : static_cast<int32_t>(i);
    const std::string_view b = v.sorted_bytes(rank);
    size_t common = 0;
    if (ranks == nullptr) {
      common = static_cast<size_t>(v.lcp()[rank]);
    } else {
      while (common < prev.size() && common < b.size() && prev[common] == b[common]) ++common;
    }
    prev = b;
    size_t d = std::min(common, valid);
    pool->resize(pool_size[d]);
    // Extend while some path is still inside; the token's last byte is decided by `matched`.
    while (d < b.size() && !states[d].tops.empty()) {
      if (states.size() < d + 2) states.resize(d + 2);
      if (crossed.size() < d + 3) crossed.resize(d + 3), pool_size.resize(d + 2);
      crossed[d + 1] = left_before(d, b);
      Advance(states[d], static_cast<uint8_t>(b[d]), pool, &states[d + 1]);
      pool_size[d + 1] = pool->size();
      ++d;
      if (!states[d].matched) break;
    }
    valid = d;
    TokenResult r;
    size_t decided;  // the token's first `decided` bytes settle r (for the skip below)
    if (d == b.size() && states[d].matched) {
      r = TokenResult::kAccepted;
      decided = b.size() + 1;  // nothing to skip: longer tokens go on
    } else if (!states[d].matched) {
      // Byte d - 1 failed: only a boundary left before it can still take the token.
      r = crossed[d] ? TokenResult::kUncertain : TokenResult::kRejected;
      decided = d;
    } else {
      // Every path left through the boundary after byte d - 1 (d < size): the next byte decides.
      r = left_before(d, b) ? TokenResult::kUncertain : TokenResult::kRejected;
      decided = d + 1;
    }
    if (r != TokenResult::kRejected) visit(rank, r);
    if (decided <= b.size()) {
      // The following tokens that share the deciding bytes (up to `end`) get the same answer
      // unseen; a rejected block is skipped whole (in a list of ranks, the ones inside the block).
      const size_t end = static_cast<size_t>(v.block_end(rank, decided));
      if (ranks != nullptr) {
        if (r == TokenResult::kRejected) {
          while (i + 1 < count && static_cast<size_t>((*ranks)[i + 1]) < end) ++i;
        }
      } else if (r == TokenResult::kRejected) {
        i = end - 1;
      } else {
        while (i + 1 < end) visit(static_cast<int32_t>(++i), r);
      }
    }
  }
  pool->resize(pool_size[0]);
}

PositionMask CompiledGrammar::ComputeMask(int32_t pos) const {
  if (!IsStringContent(pos)) return WalkMask(pos);
  PositionMask m;
  vocab_->string_content().Mask(strings_[pos], follow_[owner_[pos]], &m);
  return m;
}

PositionMask CompiledGrammar::WalkMask(int32_t pos) const {
  PositionMask m;
  m.accepted.assign(static_cast<size_t>(vocab_->mask_words()), 0);
  std::vector<StackNode> pool{StackNode{pos, kBoundaryParent}};
  MatchState start;
  start.tops = {0};
  WalkTokens(start, &pool, nullptr, &follow_[owner_[pos]], [&](int32_t rank, TokenResult r) {
    if (r == TokenResult::kAccepted) {
      const int32_t id = vocab_->sorted()[rank];
      m.accepted[id >> 6] |= uint64_t{1} << (id & 63);
    } else if (r == TokenResult::kUncertain) {
      m.uncertain.push_back(rank);
    }
  });
  return m;
}

const PositionMask& CompiledGrammar::MaskAt(int32_t pos) const {
  std::unique_ptr<PositionMask>& entry = shared_[pos] >= 0 ? shared_masks_[shared_[pos]] : masks_[pos];
  {
    std::lock_guard<std::mutex> l(mu_);
    if (entry != nullptr) return *entry;
  }
  // Computed outside the lock (a walk can take milliseconds); a second thread may compute the
  // same entry, and the first one stored wins.
  auto m = std::make_unique<PositionMask>(ComputeMask(pos));
  m->MakeSparse(kSparseIds);
  std::lock_guard<std::mutex> l(mu_);
  if (entry == nullptr) {
    if (stored_ >= kMaxStoredMasks) {
      thread_local PositionMask unstored;
      unstored = std::move(*m);
      return unstored;
    }
    entry = std::move(m);
    ++stored_;
  }
  return *entry;
}

}  // namespace tandem::grammar
