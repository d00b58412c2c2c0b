#include "engine/grammar/string_masks.h"

#include <algorithm>
#include <string_view>

#include "engine/grammar/compiled_grammar.h"
#include "engine/grammar/json_schema.h"

namespace tandem::grammar {

namespace {

using Pieces = std::vector<std::vector<ByteSet>>;

bool Intersects(const ByteSet& a, const ByteSet& b) {
  for (int w = 0; w < 4; ++w) {
    if ((a.bits[w] & b.bits[w]) != 0) return true;
  }
  return false;
}

// The pieces of JsonStringChar as Build flattens them, or none (no fast path) if they are not a
// prefix code: the index below reads a token's characters one way only, which is right only
// when no piece's bytes can also begin another piece.
Pieces BuildPieces() {
  GrammarBuilder b;
  const RuleId c = b.AddRule("char");
  if (!b.Define(c, JsonStringChar(b)).ok()) return {};
  absl::StatusOr<Grammar> g = b.Build(c);
  if (!g.ok() || g->rules.size() != 1) return {};
  Pieces pieces;
  for (int32_t p : g->rules[c].alternatives) {
    std::vector<ByteSet> piece;
    for (; g->elements[p].kind != Element::Kind::kEnd; ++p) {
      const Element& e = g->elements[p];
      if (e.kind != Element::Kind::kBytes || e.repeat != Repetition::kOne) return {};
      piece.push_back(g->byte_sets[e.arg]);
    }
    if (piece.empty()) return {};
    pieces.push_back(std::move(piece));
  }
  for (size_t a = 0; a < pieces.size(); ++a) {
    for (size_t z = 0; z < pieces.size(); ++z) {
      if (a == z || pieces[a].size() > pieces[z].size()) continue;
      bool prefix = true;
      for (size_t j = 0; j < pieces[a].size() && prefix; ++j) prefix = Intersects(pieces[a][j], pieces[z][j]);
      if (prefix) return {};
    }
  }
  return pieces;
}

ByteSet LeadBytes(const Pieces& pieces) {
  ByteSet leads;
  for (const auto& piece : pieces) {
    for (int w = 0; w < 4; ++w) leads.bits[w] |= piece[0].bits[w];
  }
  return leads;
}

// The characters of `t` from byte `x` on: how many whole ones, where they stop, and whether
// the token ends inside one more (cut short by the token's end, a valid beginning).
struct Content {
  int32_t chars = 0;
  size_t stop = 0;
  bool cut = false;
  bool whole_token(std::string_view t) const { return cut || stop == t.size(); }
};

Content ReadContent(const Pieces& pieces, std::string_view t, size_t x) {
  Content c;
  c.stop = x;
  while (c.stop < t.size()) {
    int64_t taken = -1;  // bytes of the piece matched whole; 0: cut short; -1: none matches
    for (const auto& piece : pieces) {
      size_t j = 0;
      while (j < piece.size() && c.stop + j < t.size() && piece[j].Has(static_cast<uint8_t>(t[c.stop + j]))) ++j;
      if (j == piece.size()) {
        taken = static_cast<int64_t>(j);
        break;  // a prefix code: no other piece matches these bytes
      }
      if (c.stop + j == t.size()) taken = 0;
    }
    if (taken < 0) return c;
    if (taken == 0) {
      c.cut = true;
      return c;
    }
    ++c.chars;
    c.stop += static_cast<size_t>(taken);
  }
  return c;
}

// Per rule: its alternatives are the pieces (in order), each followed by `tail` (kEnd: none),
// with or without one empty alternative.
struct Shape {
  bool pieces = false;
  bool empty_alt = false;
  Element tail;
};

Shape ShapeOf(const Grammar& g, const Grammar::Rule& rule, const Pieces& pieces) {
  Shape s;
  size_t k = 0;
  bool first = true;
  for (int32_t start : rule.alternatives) {
    if (g.elements[start].kind == Element::Kind::kEnd) {
      if (s.empty_alt) return Shape{};
      s.empty_alt = true;
      continue;
    }
    if (k >= pieces.size()) return Shape{};
    int32_t p = start;
    for (const ByteSet& set : pieces[k]) {
      const Element& e = g.elements[p++];
      if (e.kind != Element::Kind::kBytes || e.repeat != Repetition::kOne || !(g.byte_sets[e.arg] == set)) {
        return Shape{};
      }
    }
    const Element& t = g.elements[p];
    if (t.kind == Element::Kind::kBytes) return Shape{};
    if (t.kind == Element::Kind::kRule && g.elements[p + 1].kind != Element::Kind::kEnd) return Shape{};
    if (first) {
      s.tail = t;
    } else if (t.kind != s.tail.kind || (t.kind == Element::Kind::kRule && (t.arg != s.tail.arg || t.repeat != s.tail.repeat))) {
      return Shape{};
    }
    first = false;
    ++k;
  }
  s.pieces = k == pieces.size();
  return s;
}

int32_t AddChars(int32_t a, int32_t b) {
  return a >= kUnboundedChars - b ? kUnboundedChars : a + b;
}

}  // namespace

const std::vector<std::vector<ByteSet>>& JsonCharPieces() {
  static const Pieces* pieces = new Pieces(BuildPieces());
  return *pieces;
}

std::vector<StringPosition> FindStringPositions(const Grammar& g, const std::vector<ByteSet>& follow) {
  std::vector<StringPosition> out(g.elements.size());
  const Pieces& pieces = JsonCharPieces();
  if (pieces.empty()) return out;
  const ByteSet leads = LeadBytes(pieces);
  const size_t nr = g.rules.size();
  std::vector<Shape> shape(nr);
  for (size_t r = 0; r < nr; ++r) shape[r] = ShapeOf(g, g.rules[r], pieces);
  // Per rule: the characters it matches, [count_lo, count_hi], and after its first one,
  // [after_lo, after_hi]; both must be intervals (the crossing test below assumes it). Rules
  // refer along chains (a bounded repetition is a chain of 10000 rules at most), resolved from
  // the end of each chain without recursion.
  enum State : uint8_t { kUnknown, kOn, kNo, kYes };
  std::vector<State> state(nr, kUnknown);
  std::vector<int32_t> count_lo(nr), count_hi(nr), after_lo(nr), after_hi(nr);
  auto resolve = [&](size_t r) {  // the ranges of r, its tail's being known (or r's own)
    const Shape& s = shape[r];
    int32_t lo = 0, hi = 0;
    if (s.tail.kind == Element::Kind::kRule) {
      const size_t q = static_cast<size_t>(s.tail.arg);
      if (q == r) {  // x r | "": any number
        if (!s.empty_alt || s.tail.repeat != Repetition::kOne) return false;
        lo = 0, hi = kUnboundedChars;
      } else {
        if (state[q] != kYes) return false;
        if (s.tail.repeat == Repetition::kOne) {
          lo = count_lo[q], hi = count_hi[q];
        } else if (s.tail.repeat == Repetition::kOptional && count_lo[q] <= 1) {
          lo = 0, hi = count_hi[q];
        } else {
          return false;
        }
      }
    }
    if (s.empty_alt && lo > 0) return false;
    after_lo[r] = lo, after_hi[r] = hi;
    count_lo[r] = s.empty_alt ? 0 : AddChars(lo, 1);
    count_hi[r] = AddChars(hi, 1);
    return true;
  };
  std::vector<size_t> chain;
  for (size_t r0 = 0; r0 < nr; ++r0) {
    chain.clear();
    for (size_t r = r0; state[r] == kUnknown;) {
      state[r] = kOn;
      chain.push_back(r);
      if (!shape[r].pieces) break;
      if (shape[r].tail.kind != Element::Kind::kRule || static_cast<size_t>(shape[r].tail.arg) == r) break;
      r = static_cast<size_t>(shape[r].tail.arg);  // a rule already kOn: a cycle, which fails below
    }
    for (size_t i = chain.size(); i-- > 0;) {
      const size_t r = chain[i];
      state[r] = shape[r].pieces && !Intersects(follow[r], leads) && resolve(r) ? kYes : kNo;
    }
  }
  for (size_t r = 0; r < nr; ++r) {
    if (state[r] != kYes) continue;
    size_t k = 0;
    for (int32_t start : g.rules[r].alternatives) {
      if (g.elements[start].kind == Element::Kind::kEnd) continue;
      for (size_t i = 0; i < pieces[k].size(); ++i) {
        out[start + i] = StringPosition{static_cast<int32_t>(k), static_cast<int32_t>(i), after_lo[r], after_hi[r]};
      }
      ++k;
    }
  }
  return out;
}

StringContentIndex::StringContentIndex(const TokenVocabulary& vocab) {
  const Pieces& pieces = JsonCharPieces();
  const ByteSet leads = LeadBytes(pieces);
  const int32_t n = static_cast<int32_t>(vocab.sorted().size());
  // first[b]: the first rank whose token starts with a byte >= b.
  std::vector<int32_t> first(257, n);
  for (int32_t rank = n - 1; rank >= 0; --rank) first[static_cast<uint8_t>(vocab.sorted_bytes(rank)[0])] = rank;
  for (int b = 255; b >= 0; --b) first[b] = std::min(first[b], first[b + 1]);
  entries_.resize(pieces.size());
  std::vector<std::pair<int32_t, int32_t>> counted;  // (characters added, id)
  for (size_t k = 0; k < pieces.size(); ++k) {
    entries_[k].resize(pieces[k].size());
    for (size_t i = 0; i < pieces[k].size(); ++i) {
      Entry& e = entries_[k][i];
      const size_t rest = pieces[k].size() - i;  // bytes left of the current character
      counted.clear();
      for (int b = 0; b < 256; ++b) {
        if (!pieces[k][i].Has(static_cast<uint8_t>(b))) continue;
        for (int32_t rank = first[b]; rank < first[b + 1]; ++rank) {
          const std::string_view t = vocab.sorted_bytes(rank);
          size_t j = 1;
          while (j < rest && j < t.size() && pieces[k][i + j].Has(static_cast<uint8_t>(t[j]))) ++j;
          if (j < rest && j < t.size()) continue;  // the current character is broken
          const Content c = ReadContent(pieces, t, std::min(rest, t.size()));
          if (c.whole_token(t)) {
            counted.emplace_back(c.chars + (c.cut ? 1 : 0), vocab.sorted()[rank]);
          } else if (!leads.Has(static_cast<uint8_t>(t[c.stop]))) {
            // Only a byte that starts no character can be one that follows the string: the
            // rules that take this path have no such byte in their follow sets.
            e.stops.push_back(Entry::Stop{rank, c.chars, static_cast<int32_t>(c.stop), static_cast<uint8_t>(t[c.stop])});
            e.most_stopped = std::max(e.most_stopped, c.chars);
          }
        }
      }
      std::sort(counted.begin(), counted.end());
      const int32_t max_count = counted.empty() ? 0 : counted.back().first;
      e.count_start.assign(static_cast<size_t>(max_count) + 2, static_cast<int32_t>(counted.size()));
      e.all.assign(static_cast<size_t>(vocab.mask_words()), 0);
      for (size_t x = counted.size(); x-- > 0;) {
        e.count_start[counted[x].first] = static_cast<int32_t>(x);
        const int32_t id = counted[x].second;
        e.ids_by_count.push_back(id);
        e.all[id >> 6] |= uint64_t{1} << (id & 63);
      }
      std::reverse(e.ids_by_count.begin(), e.ids_by_count.end());
      // Counts without tokens start where the next count does.
      for (size_t c = e.count_start.size() - 1; c-- > 0;) e.count_start[c] = std::min(e.count_start[c], e.count_start[c + 1]);
    }
  }
}

StringPosition StringContentIndex::Canonical(const StringPosition& at) const {
  const Entry& e = entries_[at.piece][at.element];
  const int32_t most_stopped = e.most_stopped;
  const int32_t most_added = static_cast<int32_t>(e.count_start.size()) - 2;
  StringPosition c = at;
  // Above both, hi neither cuts the accepted tokens nor the stops; lo above every stop keeps
  // none of them, as most_stopped + 1 does.
  c.hi = std::min(at.hi, std::max(most_added, most_stopped));
  c.lo = std::min(at.lo, most_stopped + 1);
  return c;
}

void StringContentIndex::Mask(const StringPosition& at, const ByteSet& follow, PositionMask* out) const {
  const Entry& e = entries_[at.piece][at.element];
  const int64_t max_count = static_cast<int64_t>(e.count_start.size()) - 2;
  if (at.hi >= max_count) {
    out->accepted = e.all;
  } else {
    // ids_by_count[0, split) add at most hi characters: set those or clear the others,
    // whichever is fewer.
    const size_t split = static_cast<size_t>(e.count_start[at.hi + 1]);
    const bool set = split <= e.ids_by_count.size() - split;
    if (set) {
      out->accepted.assign(e.all.size(), 0);
    } else {
      out->accepted = e.all;
    }
    const size_t from = set ? 0 : split, to = set ? split : e.ids_by_count.size();
    for (size_t x = from; x < to; ++x) out->accepted[e.ids_by_count[x] >> 6] ^= uint64_t{1} << (e.ids_by_count[x] & 63);
  }
  out->uncertain.clear();
  out->leave.clear();
  for (const Entry::Stop& s : e.stops) {
    if (s.chars >= at.lo && s.chars <= at.hi && follow.Has(s.next)) {
      out->uncertain.push_back(s.rank);
      out->leave.push_back(s.at);
    }
  }
}

}  // namespace tandem::grammar
