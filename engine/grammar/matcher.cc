#include "engine/grammar/matcher.h"

#include <algorithm>
#include <array>
#include <string_view>
#include <unordered_map>

namespace tandem::grammar {

namespace {

// Above this many nodes the pool is compacted to the live stacks after a token (dead branches
// of every byte tried accumulate otherwise).
constexpr size_t kCompactAbove = size_t{1} << 16;

}  // namespace

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar) : grammar_(std::move(grammar)) {
  state_ = grammar_->Start(&pool_);
}

bool GrammarMatcher::Run(std::string_view bytes, MatchState* out) {
  MatchState cur = state_, next;
  for (char c : bytes) {
    grammar_->Advance(cur, static_cast<uint8_t>(c), &pool_, &next);
    if (!next.matched) return false;
    std::swap(cur, next);
  }
  *out = std::move(cur);
  return true;
}

bool GrammarMatcher::AcceptBytes(std::string_view bytes) {
  if (terminated_) return bytes.empty();
  const size_t before = pool_.size();
  MatchState next;
  if (!Run(bytes, &next)) {
    pool_.resize(before);
    return false;
  }
  state_ = std::move(next);
  if (pool_.size() > kCompactAbove) {
    // Copy the nodes the state still reaches into a fresh pool, parents before children.
    std::unordered_map<int32_t, int32_t> moved;
    std::vector<StackNode> fresh;
    auto copy = [&](auto&& self, int32_t id) -> int32_t {
      if (id < 0) return id;
      if (auto it = moved.find(id); it != moved.end()) return it->second;
      const int32_t parent = self(self, pool_[id].parent);
      fresh.push_back(StackNode{pool_[id].pos, parent});
      return moved[id] = static_cast<int32_t>(fresh.size() - 1);
    };
    for (int32_t& top : state_.tops) top = copy(copy, top);
    pool_ = std::move(fresh);
    recent_.clear();  // keyed by node ids, which changed
  }
  return true;
}

bool GrammarMatcher::AcceptToken(int32_t id) {
  const TokenVocabulary& v = grammar_->vocab();
  if (id < 0 || id >= v.size() || terminated_) return false;
  if (v.is_eos(id)) {
    if (!state_.can_end) return false;
    terminated_ = true;
    return true;
  }
  if (v.rank(id) < 0) return false;  // special, or no bytes
  return AcceptBytes(v.bytes(id));
}

void GrammarMatcher::FillMask(std::vector<uint64_t>* mask) {
  const TokenVocabulary& v = grammar_->vocab();
  mask->assign(static_cast<size_t>(v.mask_words()), 0);
  if (terminated_) return;
  std::vector<std::pair<int32_t, int32_t>> key;
  for (int32_t top : state_.tops) key.emplace_back(pool_[top].pos, pool_[top].parent);
  std::sort(key.begin(), key.end());
  if (state_.can_end) key.emplace_back(-1, -1);
  for (const RecentMask& r : recent_) {
    if (r.key == key) {
      *mask = r.mask;
      return;
    }
  }
  ComputeMask(mask);
  if (recent_.size() < kRecentMasks) {
    recent_.push_back(RecentMask{std::move(key), *mask});
  } else {
    recent_[recent_next_] = RecentMask{std::move(key), *mask};
    recent_next_ = (recent_next_ + 1) % kRecentMasks;
  }
}

void GrammarMatcher::ComputeMask(std::vector<uint64_t>* mask) {
  const TokenVocabulary& v = grammar_->vocab();
  auto set = [mask](int32_t id) { (*mask)[id >> 6] |= uint64_t{1} << (id & 63); };
  if (state_.can_end) {
    for (int32_t id : v.eos_ids()) set(id);
  }
  // Cached entries of the distinct top positions: their accepted tokens, and the uncertain
  // ones not already accepted, checked against the whole state below; those of string
  // positions are checked per top, from where they leave the string (CheckLeaving).
  uncertain_.clear();
  std::vector<std::pair<int32_t, int32_t>> tops;  // (position, top node)
  for (int32_t top : state_.tops) tops.emplace_back(pool_[top].pos, top);
  std::sort(tops.begin(), tops.end());
  size_t positions = 0;
  for (size_t i = 0; i < tops.size(); ++positions) {
    const int32_t pos = tops[i].first;
    const PositionMask& m = grammar_->MaskAt(pos);  // valid until the next MaskAt
    m.AddAcceptedTo(mask);
    if (m.leave.empty()) uncertain_.insert(uncertain_.end(), m.uncertain.begin(), m.uncertain.end());
    for (; i < tops.size() && tops[i].first == pos; ++i) {
      if (!m.leave.empty()) CheckLeaving(m, pool_[tops[i].second].parent, mask);
    }
  }
  if (positions > 1) {
    std::sort(uncertain_.begin(), uncertain_.end());
    uncertain_.erase(std::unique(uncertain_.begin(), uncertain_.end()), uncertain_.end());
  }
  uncertain_.erase(std::remove_if(uncertain_.begin(), uncertain_.end(),
                                  [&](int32_t rank) {
                                    const int32_t id = v.sorted()[rank];
                                    return ((*mask)[id >> 6] >> (id & 63)) & 1;
                                  }),
                   uncertain_.end());
  if (uncertain_.empty()) return;
  grammar_->WalkTokens(state_, &pool_, &uncertain_, nullptr, [&](int32_t rank, TokenResult r) {
    if (r == TokenResult::kAccepted) set(v.sorted()[rank]);
  });
}

void GrammarMatcher::CheckLeaving(const PositionMask& m, int32_t parent, std::vector<uint64_t>* mask) {
  // After the string's characters the stack returns to `parent`; a token that the string
  // leaves at byte k is taken when its bytes from k are taken from there. Those rests mostly
  // begin alike (",  "}  ": ...), so the state after each distinct first byte is made once.
  const TokenVocabulary& v = grammar_->vocab();
  const size_t before = pool_.size();
  const MatchState after = grammar_->Resume(parent, &pool_);
  auto rest_of = [&](size_t i) { return v.sorted_bytes(m.uncertain[i]).substr(static_cast<size_t>(m.leave[i])); };
  std::array<int16_t, 256> first_state;  // first byte -> index into leave_states_, -1 if none yet
  first_state.fill(-1);
  size_t used = 0;
  for (size_t i = 0; i < m.uncertain.size(); ++i) {
    const uint8_t b = static_cast<uint8_t>(rest_of(i)[0]);
    if (first_state[b] >= 0) continue;
    if (leave_states_.size() <= used) leave_states_.resize(used + 1);
    grammar_->Advance(after, b, &pool_, &leave_states_[used]);
    first_state[b] = static_cast<int16_t>(used++);
  }
  const size_t mark = pool_.size();
  MatchState cur, next;
  for (size_t i = 0; i < m.uncertain.size(); ++i) {
    const int32_t id = v.sorted()[m.uncertain[i]];
    if (((*mask)[id >> 6] >> (id & 63)) & 1) continue;
    const std::string_view rest = rest_of(i);
    const MatchState& first = leave_states_[first_state[static_cast<uint8_t>(rest[0])]];
    bool ok = first.matched;
    for (size_t k = 1; k < rest.size() && ok; ++k) {
      grammar_->Advance(k == 1 ? first : cur, static_cast<uint8_t>(rest[k]), &pool_, &next);
      ok = next.matched;
      std::swap(cur, next);
    }
    pool_.resize(mark);
    if (ok) (*mask)[id >> 6] |= uint64_t{1} << (id & 63);
  }
  pool_.resize(before);
}

int64_t GrammarMatcher::MinBytesToEnd() const {
  if (terminated_) return 0;
  int first = -1;
  return grammar_->MinBytesToEnd(state_, pool_, &first);
}

bool GrammarMatcher::FitsBudget(int32_t id, int64_t tokens_after) {
  const TokenVocabulary& v = grammar_->vocab();
  if (terminated_ || v.is_eos(id)) return true;
  if (id < 0 || id >= v.size() || v.rank(id) < 0) return false;
  const size_t before = pool_.size();
  MatchState next;
  bool fits = false;
  if (Run(v.bytes(id), &next)) {
    int first = -1;
    fits = grammar_->MinBytesToEnd(next, pool_, &first) <= tokens_after;
  }
  pool_.resize(before);
  return fits;
}

int32_t GrammarMatcher::CompletionToken() const {
  const TokenVocabulary& v = grammar_->vocab();
  if (terminated_) return -1;
  if (state_.can_end) return v.eos_ids().empty() ? -1 : v.eos_ids()[0];
  int first = -1;
  grammar_->MinBytesToEnd(state_, pool_, &first);
  return first < 0 ? -1 : v.byte_token(static_cast<uint8_t>(first));
}

}  // namespace tandem::grammar
