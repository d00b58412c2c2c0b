#include "engine/grammar/grammar.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <optional>

#include "absl/status/status.h"

namespace tandem::grammar {

namespace {

using Seq = std::vector<Element>;
using Alts = std::vector<Seq>;

// The UTF-8 byte sequences of the code points [lo, hi] (all of one encoded length) as
// alternatives of byte-range sequences, the standard split: a range whose tail bytes do not
// span a full 0x80..0xBF block is cut until every piece is a product of byte ranges.
void Utf8Ranges(char32_t lo, char32_t hi, std::vector<std::vector<std::pair<uint8_t, uint8_t>>>* out) {
  static constexpr char32_t kMax[] = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
  for (int n = 0; n < 3; ++n) {  // split at encoded-length boundaries first
    if (lo <= kMax[n] && hi > kMax[n]) {
      Utf8Ranges(lo, kMax[n], out);
      Utf8Ranges(kMax[n] + 1, hi, out);
      return;
    }
  }
  if (hi <= 0x7F) {
    out->push_back({{static_cast<uint8_t>(lo), static_cast<uint8_t>(hi)}});
    return;
  }
  const int len = hi <= 0x7FF ? 2 : hi <= 0xFFFF ? 3 : 4;
  for (int i = 1; i < len; ++i) {  // make the last i continuation bytes span full blocks
    const char32_t m = (char32_t{1} << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        Utf8Ranges(lo, lo | m, out);
        Utf8Ranges((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        Utf8Ranges(lo, (hi & ~m) - 1, out);
        Utf8Ranges(hi & ~m, hi, out);
        return;
      }
    }
  }
  auto encode = [len](char32_t c, uint8_t* b) {
    if (len == 2) {
      b[0] = 0xC0 | (c >> 6), b[1] = 0x80 | (c & 0x3F);
    } else if (len == 3) {
      b[0] = 0xE0 | (c >> 12), b[1] = 0x80 | ((c >> 6) & 0x3F), b[2] = 0x80 | (c & 0x3F);
    } else {
      b[0] = 0xF0 | (c >> 18), b[1] = 0x80 | ((c >> 12) & 0x3F), b[2] = 0x80 | ((c >> 6) & 0x3F),
      b[3] = 0x80 | (c & 0x3F);
    }
  };
  uint8_t a[4], z[4];
  encode(lo, a);
  encode(hi, z);
  std::vector<std::pair<uint8_t, uint8_t>> seq;
  for (int i = 0; i < len; ++i) seq.push_back({a[i], z[i]});
  out->push_back(std::move(seq));
}

Element BytesElement(int32_t set) { return Element{Element::Kind::kBytes, Repetition::kOne, set}; }
Element RuleElement(RuleId rule, Repetition r = Repetition::kOne) { return Element{Element::Kind::kRule, r, rule}; }

}  // namespace

// Turns the builder's expression trees into flat alternatives, adding helper rules for nested
// alternatives and repetitions of more than one element.
class GrammarFlattener {
 public:
  explicit GrammarFlattener(const GrammarBuilder& b) : b_(b) {}

  absl::StatusOr<Grammar> Run(RuleId root) {
    if (root < 0 || root >= static_cast<RuleId>(b_.rules_.size())) {
      return absl::InvalidArgumentError("grammar: the root rule does not exist");
    }
    for (const auto& r : b_.rules_) {
      if (r.body < 0) return absl::InvalidArgumentError("grammar: rule " + r.name + " is declared but not defined");
      names_.push_back(r.name);
      alts_.emplace_back();
    }
    for (size_t i = 0; i < b_.rules_.size(); ++i) {
      current_ = static_cast<RuleId>(i);
      absl::StatusOr<Alts> a = Flatten(b_.rules_[i].body);
      if (!a.ok()) return a.status();
      alts_[i] = std::move(*a);
    }
    Grammar g;
    g.byte_sets = std::move(sets_);
    g.root = root;
    for (size_t r = 0; r < alts_.size(); ++r) {
      Grammar::Rule rule{names_[r], {}};
      for (const Seq& s : alts_[r]) {
        rule.alternatives.push_back(static_cast<int32_t>(g.elements.size()));
        g.elements.insert(g.elements.end(), s.begin(), s.end());
        g.elements.push_back(Element{Element::Kind::kEnd, Repetition::kOne, static_cast<int32_t>(r)});
      }
      g.rules.push_back(std::move(rule));
    }
    if (absl::Status st = CheckLeftRecursion(g); !st.ok()) return st;
    return g;
  }

 private:
  int32_t SetIndex(const ByteSet& s) {
    for (size_t i = 0; i < sets_.size(); ++i) {
      if (sets_[i] == s) return static_cast<int32_t>(i);
    }
    sets_.push_back(s);
    return static_cast<int32_t>(sets_.size() - 1);
  }
  RuleId Helper(Alts alts, const char* what) {
    names_.push_back(names_[current_] + "." + what + std::to_string(++helpers_));
    alts_.push_back(std::move(alts));
    return static_cast<RuleId>(alts_.size() - 1);
  }
  // `a` as one element that matches once: itself when it is a single element matching once,
  // else a reference to a helper rule with those alternatives.
  Element AsElement(Alts a, const char* what) {
    if (a.size() == 1 && a[0].size() == 1 && a[0][0].repeat == Repetition::kOne) return a[0][0];
    return RuleElement(Helper(std::move(a), what));
  }

  absl::StatusOr<Alts> Flatten(int32_t id) {
    using K = GrammarBuilder::Node::Kind;
    const GrammarBuilder::Node& n = b_.nodes_[id];
    switch (n.kind) {
      case K::kEmpty:
        return Alts{Seq{}};
      case K::kLiteral: {
        Seq s;
        for (unsigned char c : n.literal) {
          ByteSet set;
          set.Add(c);
          s.push_back(BytesElement(SetIndex(set)));
        }
        return Alts{std::move(s)};
      }
      case K::kBytes:
        return Alts{Seq{BytesElement(SetIndex(n.bytes))}};
      case K::kRef:
        return Alts{Seq{RuleElement(n.rule)}};
      case K::kAlt: {
        Alts out;
        for (int32_t item : n.items) {
          absl::StatusOr<Alts> a = Flatten(item);
          if (!a.ok()) return a.status();
          for (Seq& s : *a) out.push_back(std::move(s));
        }
        return out;
      }
      case K::kSeq: {
        Alts out{Seq{}};
        for (int32_t item : n.items) {
          absl::StatusOr<Alts> a = Flatten(item);
          if (!a.ok()) return a.status();
          if (a->size() == 1) {
            for (Seq& s : out) s.insert(s.end(), (*a)[0].begin(), (*a)[0].end());
          } else if (out.size() * a->size() <= kMaxDistributed) {
            // Few alternatives are distributed over the sequence rather than put in a helper
            // rule, so that a token crossing them stays within one rule (matcher.h's cache).
            Alts product;
            for (const Seq& s : out) {
              for (const Seq& t : *a) {
                product.push_back(s);
                product.back().insert(product.back().end(), t.begin(), t.end());
              }
            }
            out = std::move(product);
          } else {
            const Element h = RuleElement(Helper(std::move(*a), "alt"));
            for (Seq& s : out) s.push_back(h);
          }
        }
        return out;
      }
      case K::kRepeat:
        return FlattenRepeat(n);
    }
    return absl::InternalError("grammar: unknown node");
  }

  absl::StatusOr<Alts> FlattenRepeat(const GrammarBuilder::Node& n) {
    if (n.min < 0 || n.min > GrammarBuilder::kMaxRepeat || n.max > GrammarBuilder::kMaxRepeat ||
        (n.max >= 0 && n.max < n.min)) {
      return absl::InvalidArgumentError("grammar: repeat bounds {" + std::to_string(n.min) + "," +
                                        std::to_string(n.max) + "} in rule " + names_[current_] +
                                        " are out of range (0 <= min <= max <= " +
                                        std::to_string(GrammarBuilder::kMaxRepeat) + ")");
    }
    absl::StatusOr<Alts> child = Flatten(n.items[0]);
    if (!child.ok()) return child.status();
    if (n.max == 0) return Alts{Seq{}};
    const bool single = child->size() == 1 && (*child)[0].size() == 1 && (*child)[0][0].repeat == Repetition::kOne;
    if (!single) {
      // Each repetition is a rule whose alternatives are x's, each followed by the rule of the
      // repetitions left: the matcher moves from one to the next by tail calls, so a token
      // spanning several x stays inside (compiled_grammar.h's mask cache), and the stack stays
      // one frame deep. Unbounded: h ::= x h | "".
      const Alts& x = *child;
      auto then = [&](const char* what, const std::optional<Element>& next) {
        Alts alts = x;
        if (next) {
          for (Seq& s : alts) s.push_back(*next);
        }
        return Helper(std::move(alts), what);
      };
      std::optional<Element> rest;  // what follows the repetitions still required
      if (n.max < 0) {
        const RuleId h = Helper(Alts{}, "star");
        Alts alts = x;
        for (Seq& s : alts) s.push_back(RuleElement(h));
        alts.push_back(Seq{});
        alts_[h] = std::move(alts);
        rest = RuleElement(h);
      } else {
        for (int32_t k = n.min; k < n.max; ++k) rest = RuleElement(then("upto", rest), Repetition::kOptional);
      }
      for (int32_t k = 0; k < n.min; ++k) rest = RuleElement(then("times", rest));
      return Alts{rest ? Seq{*rest} : Seq{}};
    }
    const Element x = AsElement(std::move(*child), "rep");
    Seq out(n.min, x);
    if (n.max < 0) {
      Element star = x;
      star.repeat = Repetition::kStar;
      out.push_back(star);
    } else if (n.max > n.min) {
      // (x (x (x)?)?)?: a chain of helper rules, each one more optional x.
      Element tail = x;
      tail.repeat = Repetition::kOptional;
      for (int32_t k = 1; k < n.max - n.min; ++k) {
        tail = RuleElement(Helper(Alts{Seq{x, tail}}, "upto"), Repetition::kOptional);
      }
      out.push_back(tail);
    }
    return Alts{std::move(out)};
  }

  // A rule that reaches itself before consuming a byte would make the matcher's closure grow
  // its stack forever.
  absl::Status CheckLeftRecursion(const Grammar& g) {
    const size_t nr = g.rules.size();
    std::vector<bool> nullable(nr, false);
    auto elem_nullable = [&](const Element& e) {
      if (e.repeat != Repetition::kOne) return true;
      return e.kind == Element::Kind::kRule && nullable[e.arg];
    };
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < nr; ++r) {
        if (nullable[r]) continue;
        for (int32_t p : g.rules[r].alternatives) {
          bool all = true;
          for (; g.elements[p].kind != Element::Kind::kEnd; ++p) all = all && elem_nullable(g.elements[p]);
          if (all) {
            nullable[r] = changed = true;
            break;
          }
        }
      }
    }
    std::vector<std::vector<RuleId>> first(nr);  // rules reachable at the start of r
    for (size_t r = 0; r < nr; ++r) {
      for (int32_t p : g.rules[r].alternatives) {
        for (; g.elements[p].kind != Element::Kind::kEnd; ++p) {
          const Element& e = g.elements[p];
          if (e.kind == Element::Kind::kRule) first[r].push_back(e.arg);
          if (!elem_nullable(e)) break;
        }
      }
    }
    std::vector<int> color(nr, 0);  // 0 new, 1 on the path, 2 done
    std::string cycle;
    std::function<bool(RuleId)> dfs = [&](RuleId r) {
      color[r] = 1;
      for (RuleId s : first[r]) {
        if (color[s] == 1 || (color[s] == 0 && dfs(s))) {
          if (cycle.empty()) cycle = g.rules[s].name;
          return true;
        }
      }
      color[r] = 2;
      return false;
    };
    for (size_t r = 0; r < nr; ++r) {
      if (color[r] == 0 && dfs(static_cast<RuleId>(r))) {
        return absl::InvalidArgumentError("grammar: left recursion through rule " + cycle +
                                          " (it can reach itself without consuming a byte)");
      }
    }
    return absl::OkStatus();
  }

  static constexpr size_t kMaxDistributed = 16;

  const GrammarBuilder& b_;
  std::vector<ByteSet> sets_;
  std::vector<std::string> names_;
  std::vector<Alts> alts_;
  RuleId current_ = 0;
  int helpers_ = 0;
};

RuleId GrammarBuilder::AddRule(std::string_view name) {
  std::string n(name.empty() ? "rule" : name);
  for (int k = 2;; ++k) {
    bool taken = false;
    for (const auto& r : rules_) taken = taken || r.name == n;
    if (!taken) break;
    n = std::string(name) + "_" + std::to_string(k);
  }
  rules_.push_back(RuleDecl{std::move(n), -1});
  return static_cast<RuleId>(rules_.size() - 1);
}

absl::Status GrammarBuilder::Define(RuleId rule, Expr body) {
  if (rule < 0 || rule >= static_cast<RuleId>(rules_.size())) return absl::InvalidArgumentError("grammar: no such rule");
  if (rules_[rule].body >= 0) return absl::InvalidArgumentError("grammar: rule " + rules_[rule].name + " is defined twice");
  rules_[rule].body = body.id;
  return absl::OkStatus();
}

Expr GrammarBuilder::Add(Node n) {
  nodes_.push_back(std::move(n));
  return Expr{static_cast<int32_t>(nodes_.size() - 1)};
}

Expr GrammarBuilder::Ref(RuleId rule) {
  Node n;
  n.kind = Node::Kind::kRef;
  n.rule = rule;
  return Add(std::move(n));
}

Expr GrammarBuilder::Empty() { return Add(Node()); }

Expr GrammarBuilder::Literal(std::string_view bytes) {
  if (bytes.empty()) return Empty();
  Node n;
  n.kind = Node::Kind::kLiteral;
  n.literal = std::string(bytes);
  return Add(std::move(n));
}

Expr GrammarBuilder::Bytes(const std::vector<std::pair<uint8_t, uint8_t>>& ranges, bool negated) {
  ByteSet s;
  for (const auto& [lo, hi] : ranges) s.AddRange(lo, hi);
  if (negated) {
    for (auto& w : s.bits) w = ~w;
  }
  Node n;
  n.kind = Node::Kind::kBytes;
  n.bytes = s;
  return Add(std::move(n));
}

Expr GrammarBuilder::Chars(const std::vector<std::pair<char32_t, char32_t>>& ranges, bool negated) {
  // The code points as sorted disjoint ranges without surrogates, complemented if negated.
  std::vector<std::pair<char32_t, char32_t>> in;
  for (auto [lo, hi] : ranges) {
    hi = std::min<char32_t>(hi, 0x10FFFF);
    if (lo <= hi) in.push_back({lo, hi});
  }
  std::sort(in.begin(), in.end());
  std::vector<std::pair<char32_t, char32_t>> merged;
  for (const auto& r : in) {
    if (!merged.empty() && r.first <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, r.second);
    } else {
      merged.push_back(r);
    }
  }
  if (negated) {
    std::vector<std::pair<char32_t, char32_t>> comp;
    char32_t next = 0;
    for (const auto& [lo, hi] : merged) {
      if (lo > next) comp.push_back({next, lo - 1});
      next = hi + 1;
    }
    if (next <= 0x10FFFF) comp.push_back({next, 0x10FFFF});
    merged = std::move(comp);
  }
  std::vector<std::pair<char32_t, char32_t>> valid;
  for (const auto& [lo, hi] : merged) {
    if (hi < 0xD800 || lo > 0xDFFF) {
      valid.push_back({lo, hi});
      continue;
    }
    if (lo < 0xD800) valid.push_back({lo, 0xD7FF});
    if (hi > 0xDFFF) valid.push_back({0xE000, hi});
  }
  std::vector<std::vector<std::pair<uint8_t, uint8_t>>> seqs;
  for (const auto& [lo, hi] : valid) Utf8Ranges(lo, hi, &seqs);
  // One-byte pieces share one byte set; longer ones become sequences of byte sets.
  std::vector<std::pair<uint8_t, uint8_t>> ascii;
  std::vector<Expr> alts;
  for (const auto& s : seqs) {
    if (s.size() == 1) {
      ascii.push_back(s[0]);
      continue;
    }
    std::vector<Expr> items;
    for (const auto& r : s) items.push_back(Bytes({r}));
    alts.push_back(Seq(std::move(items)));
  }
  if (!ascii.empty()) alts.insert(alts.begin(), Bytes(ascii));
  if (alts.empty()) return Bytes({}, false);  // matches nothing
  return alts.size() == 1 ? alts[0] : Alt(std::move(alts));
}

Expr GrammarBuilder::Seq(std::vector<Expr> items) {
  if (items.size() == 1) return items[0];
  Node n;
  n.kind = Node::Kind::kSeq;
  for (Expr e : items) n.items.push_back(e.id);
  return Add(std::move(n));
}

Expr GrammarBuilder::Alt(std::vector<Expr> items) {
  if (items.size() == 1) return items[0];
  Node n;
  n.kind = Node::Kind::kAlt;
  for (Expr e : items) n.items.push_back(e.id);
  return Add(std::move(n));
}

Expr GrammarBuilder::Repeat(Expr e, int32_t min, int32_t max) {
  Node n;
  n.kind = Node::Kind::kRepeat;
  n.items = {e.id};
  n.min = min;
  n.max = max;
  return Add(std::move(n));
}

Expr GrammarBuilder::Optional(Expr e) { return Repeat(e, 0, 1); }
Expr GrammarBuilder::Star(Expr e) { return Repeat(e, 0, -1); }
Expr GrammarBuilder::Plus(Expr e) { return Repeat(e, 1, -1); }

absl::StatusOr<Grammar> GrammarBuilder::Build(RuleId root) const { return GrammarFlattener(*this).Run(root); }

namespace {

std::string ByteText(uint8_t b, bool in_class) {
  if (b == '\\' || b == '"' || (in_class && (b == ']' || b == '-' || b == '^'))) return std::string("\\") + char(b);
  if (b >= 0x20 && b < 0x7F) return std::string(1, char(b));
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\x%02X", b);
  return buf;
}

std::string SetText(const ByteSet& s) {
  std::vector<std::pair<int, int>> ranges;
  for (int b = 0; b < 256; ++b) {
    if (!s.Has(static_cast<uint8_t>(b))) continue;
    if (!ranges.empty() && ranges.back().second == b - 1) {
      ranges.back().second = b;
    } else {
      ranges.push_back({b, b});
    }
  }
  if (ranges.size() == 1 && ranges[0].first == ranges[0].second) {
    return "\"" + ByteText(static_cast<uint8_t>(ranges[0].first), false) + "\"";
  }
  std::string out = "[";
  for (const auto& [lo, hi] : ranges) {
    out += ByteText(static_cast<uint8_t>(lo), true);
    if (hi > lo) out += "-" + ByteText(static_cast<uint8_t>(hi), true);
  }
  return out + "]";
}

}  // namespace

std::string Grammar::ToString() const {
  std::string out;
  for (size_t r = 0; r < rules.size(); ++r) {
    out += rules[r].name + " ::=";
    for (size_t a = 0; a < rules[r].alternatives.size(); ++a) {
      if (a > 0) out += " |";
      int32_t p = rules[r].alternatives[a];
      if (elements[p].kind == Element::Kind::kEnd) out += " \"\"";
      for (; elements[p].kind != Element::Kind::kEnd; ++p) {
        const Element& e = elements[p];
        out += " " + (e.kind == Element::Kind::kRule ? rules[e.arg].name : SetText(byte_sets[e.arg]));
        if (e.repeat == Repetition::kOptional) out += "?";
        if (e.repeat == Repetition::kStar) out += "*";
      }
    }
    out += "\n";
  }
  return out;
}

}  // namespace tandem::grammar
