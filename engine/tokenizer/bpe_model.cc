#include "engine/tokenizer/bpe_model.h"

#include <algorithm>
#include <queue>

#include "common/status.h"

namespace tandem::tokenizer {

absl::Status BpeModel::AddToken(std::string bytes, int32_t id) {
  if (id < 0 || id > (1 << 28)) {
    return absl::InvalidArgumentError("model.vocab: id " + std::to_string(id) + " is out of range");
  }
  if (static_cast<size_t>(id) >= id_to_bytes_.size()) {
    id_to_bytes_.resize(id + 1);
    has_id_.resize(id + 1, false);
  }
  if (has_id_[id]) {
    return absl::InvalidArgumentError("model.vocab: id " + std::to_string(id) + " is used twice");
  }
  id_to_bytes_[id] = bytes;
  has_id_[id] = true;
  token_to_id_.emplace(std::move(bytes), id);
  return absl::OkStatus();
}

int32_t BpeModel::FindToken(std::string_view bytes) const {
  auto it = token_to_id_.find(AsAbsl(bytes));
  return it == token_to_id_.end() ? -1 : it->second;
}

absl::Status BpeModel::AddMerge(std::string_view left, std::string_view right) {
  const int32_t rank = static_cast<int32_t>(merges_.size());
  const int32_t a = FindToken(left), b = FindToken(right);
  std::string joined(left);
  joined.append(right);
  const int32_t c = FindToken(joined);
  if (a < 0 || b < 0 || c < 0) {
    const std::string_view missing = a < 0 ? left : b < 0 ? right : std::string_view(joined);
    return absl::InvalidArgumentError("model.merges[" + std::to_string(rank) +
                                      "]: token of " + std::to_string(missing.size()) +
                                      " bytes is not in model.vocab");
  }
  // A repeated pair keeps its first (lowest) rank, as the reference implementation does.
  merges_.try_emplace(PairKey(a, b), Merge{rank, c});
  return absl::OkStatus();
}

absl::Status BpeModel::Finish() {
  for (int b = 0; b < 256; ++b) {
    // -1 when missing: such bytes are dropped from words, as the reference implementation
    // does for unknown symbols when there is no unk_token. Real byte-level vocabularies have
    // all 256; tiny test vocabularies need not.
    byte_ids_[b] = FindToken(std::string(1, static_cast<char>(b)));
  }
  all_bytes_ = std::all_of(byte_ids_.begin(), byte_ids_.end(), [](int32_t id) { return id >= 0; });
  for (const std::string& t : id_to_bytes_) max_token_bytes_ = std::max(max_token_bytes_, t.size());
  return absl::OkStatus();
}

void BpeModel::EncodeWord(std::string_view word, std::vector<int32_t>* out) const {
  if (word.empty()) return;
  if (word.size() == 1) {
    const int32_t id = byte_ids_[static_cast<unsigned char>(word[0])];
    if (id >= 0) out->push_back(id);
    return;
  }
  if (ignore_merges_) {
    const int32_t id = FindToken(word);
    if (id >= 0) {
      out->push_back(id);
      return;
    }
  }
  const bool cacheable = word.size() <= kMaxCachedWordBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mu_);
    auto it = cache_.find(AsAbsl(word));
    if (it != cache_.end()) {
      out->insert(out->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t start = out->size();
  MergeWord(word, out);
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mu_);
    if (cache_.size() >= kCacheCapacity) cache_.clear();
    cache_.emplace(std::string(word), std::vector<int32_t>(out->begin() + start, out->end()));
  }
}

// The merge loop over a linked list of symbols with a min-heap of candidate pairs keyed by
// (rank, position). Entries go stale when a neighbour merges; they are checked when popped.
void BpeModel::MergeWord(std::string_view word, std::vector<int32_t>* out) const {
  struct Symbol {
    int32_t id;
    int32_t prev;  // index of the previous live symbol, -1 at the start
    int32_t next;  // index of the next live symbol, -1 at the end
    bool alive;
  };
  struct Candidate {
    int32_t rank, pos, left, right;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::vector<Symbol> sym;
  sym.reserve(word.size());
  for (unsigned char byte : word) {
    if (byte_ids_[byte] >= 0) sym.push_back(Symbol{byte_ids_[byte], 0, 0, true});
  }
  const int32_t n = static_cast<int32_t>(sym.size());
  if (n == 0) return;
  for (int32_t i = 0; i < n; ++i) {
    sym[i].prev = i - 1;
    sym[i].next = i + 1 < n ? i + 1 : -1;
  }
  std::vector<Candidate> storage;
  storage.reserve(n);
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap(
      std::greater<Candidate>(), std::move(storage));
  auto push_pair = [&](int32_t pos) {
    if (pos < 0 || sym[pos].next < 0) return;
    auto it = merges_.find(PairKey(sym[pos].id, sym[sym[pos].next].id));
    if (it != merges_.end()) heap.push({it->second.rank, pos, sym[pos].id, sym[sym[pos].next].id});
  };
  for (int32_t i = 0; i + 1 < n; ++i) push_pair(i);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    Symbol& left = sym[c.pos];
    if (!left.alive || left.id != c.left || left.next < 0 || sym[left.next].id != c.right) {
      continue;  // stale: one side merged since this candidate was pushed
    }
    Symbol& right = sym[left.next];
    left.id = merges_.find(PairKey(c.left, c.right))->second.result;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) sym[right.next].prev = c.pos;
    push_pair(left.prev);
    push_pair(c.pos);
  }
  for (int32_t i = 0; i >= 0; i = sym[i].next) out->push_back(sym[i].id);
}

}  // namespace tandem::tokenizer
