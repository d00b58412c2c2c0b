#include "engine/step.h"

#include <algorithm>
#include <cstring>

namespace tandem::engine {

namespace {

constexpr uint32_t kMagic = 0x50455453;  // "STEP"
constexpr uint32_t kVersion = 3;  // 2: state_slot; 3: block and state copies

template <typename T>
void Put(std::string& out, T v) {
  char buf[sizeof(T)];
  std::memcpy(buf, &v, sizeof(T));
  out.append(buf, sizeof(T));
}

template <typename T>
void PutVector(std::string& out, const std::vector<T>& v) {
  Put<uint64_t>(out, v.size());
  out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

// Reads fixed-size values from a byte string; every read checks the remaining length.
class Reader {
 public:
  explicit Reader(const std::string& s) : s_(s) {}
  template <typename T>
  bool Get(T* v) {
    if (s_.size() - pos_ < sizeof(T)) return false;
    std::memcpy(v, s_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  template <typename T>
  bool GetVector(std::vector<T>* v) {
    uint64_t n = 0;
    if (!Get(&n)) return false;
    if (n > (s_.size() - pos_) / sizeof(T)) return false;
    v->resize(n);
    std::memcpy(v->data(), s_.data() + pos_, n * sizeof(T));
    pos_ += n * sizeof(T);
    return true;
  }
  bool done() const { return pos_ == s_.size(); }

 private:
  const std::string& s_;
  size_t pos_ = 0;
};

}  // namespace

int64_t StepBatch::num_tokens() const {
  int64_t n = 0;
  for (const auto& s : seqs) n += static_cast<int64_t>(s.tokens.size());
  return n;
}

std::string StepBatch::Serialize() const {
  std::string out;
  Put<uint32_t>(out, kMagic);
  Put<uint32_t>(out, kVersion);
  Put<uint64_t>(out, seqs.size());
  for (const auto& s : seqs) {
    Put<int64_t>(out, s.seq_id);
    Put<int32_t>(out, s.start_pos);
    Put<int32_t>(out, s.state_slot);
    Put<uint8_t>(out, (s.want_logits ? 1 : 0) | (s.want_all_logits ? 2 : 0));
    PutVector(out, s.tokens);
    PutVector(out, s.block_table);
  }
  // One byte when there are no copies (nearly every step): a decode step's plan rides inside the
  // driver's fixed-size command only while it is small (step_driver.cc).
  const bool copies = !block_copies.empty() || !state_copies.empty();
  Put<uint8_t>(out, copies ? 1 : 0);
  if (copies) {
    PutVector(out, block_copies);
    PutVector(out, state_copies);
  }
  return out;
}

absl::StatusOr<StepBatch> StepBatch::Deserialize(const std::string& bytes) {
  Reader r(bytes);
  uint32_t magic = 0, version = 0;
  uint64_t n = 0;
  if (!r.Get(&magic) || magic != kMagic) return absl::InvalidArgumentError("step batch: bad magic");
  if (!r.Get(&version) || version != kVersion) {
    return absl::InvalidArgumentError("step batch: unsupported version " + std::to_string(version));
  }
  if (!r.Get(&n) || n > bytes.size()) return absl::InvalidArgumentError("step batch: bad sequence count");
  StepBatch batch;
  batch.seqs.resize(n);
  for (auto& s : batch.seqs) {
    uint8_t flags = 0;
    if (!r.Get(&s.seq_id) || !r.Get(&s.start_pos) || !r.Get(&s.state_slot) || !r.Get(&flags) || !r.GetVector(&s.tokens) ||
        !r.GetVector(&s.block_table)) {
      return absl::InvalidArgumentError("step batch: truncated");
    }
    s.want_logits = flags & 1;
    s.want_all_logits = flags & 2;
  }
  uint8_t copies = 0;
  if (!r.Get(&copies) || copies > 1 ||
      (copies == 1 && (!r.GetVector(&batch.block_copies) || !r.GetVector(&batch.state_copies)))) {
    return absl::InvalidArgumentError("step batch: truncated");
  }
  if (!r.done()) return absl::InvalidArgumentError("step batch: trailing bytes");
  return batch;
}

absl::Status CheckBatch(const StepBatch& batch, int32_t num_blocks, int32_t block_size, int64_t vocab,
                        int32_t state_slots) {
  if (num_blocks <= 0) return absl::FailedPreconditionError("Forward before AllocateKvCache");
  if (state_slots == 0 && !batch.seqs.empty()) {
    return absl::FailedPreconditionError("Forward before allocating state slots");
  }
  // Copies: each inside its pool (a model without state has none), never onto itself.
  auto check_copies = [](const std::vector<CopyOp>& copies, int32_t pool, const char* what) -> absl::Status {
    for (const CopyOp& c : copies) {
      if (c.src < 0 || c.src >= pool || c.dst < 0 || c.dst >= pool || c.src == c.dst) {
        return absl::InvalidArgumentError(std::string("step: ") + what + " copy " + std::to_string(c.src) + " -> " +
                                          std::to_string(c.dst) + " outside the pool of " + std::to_string(pool) +
                                          " or onto itself");
      }
    }
    return absl::OkStatus();
  };
  if (absl::Status st = check_copies(batch.block_copies, num_blocks, "KV block"); !st.ok()) return st;
  if (absl::Status st = check_copies(batch.state_copies, std::max<int32_t>(state_slots, 0), "state slot"); !st.ok()) {
    return st;
  }
  std::vector<bool> slot_taken(std::max<int32_t>(state_slots, 0), false);
  for (const auto& s : batch.seqs) {
    const std::string who = "step: sequence " + std::to_string(s.seq_id) + ": ";
    if (state_slots > 0) {
      if (s.state_slot < 0 || s.state_slot >= state_slots) {
        return absl::InvalidArgumentError(who + "state slot " + std::to_string(s.state_slot) +
                                          " outside the pool of " + std::to_string(state_slots));
      }
      if (slot_taken[s.state_slot]) {
        return absl::InvalidArgumentError(who + "state slot " + std::to_string(s.state_slot) +
                                          " is used by another sequence of the step");
      }
      slot_taken[s.state_slot] = true;
    }
    if (s.tokens.empty()) return absl::InvalidArgumentError(who + "empty chunk");
    if (s.start_pos < 0) return absl::InvalidArgumentError(who + "negative start_pos");
    const int64_t end = s.start_pos + static_cast<int64_t>(s.tokens.size());
    if (static_cast<int64_t>(s.block_table.size()) * block_size < end) {
      return absl::InvalidArgumentError(who + "block table of " + std::to_string(s.block_table.size()) +
                                        " blocks does not cover " + std::to_string(end) + " positions");
    }
    for (int32_t b : s.block_table) {
      if (b < 0 || b >= num_blocks) {
        return absl::InvalidArgumentError(who + "block id " + std::to_string(b) + " outside the pool of " +
                                          std::to_string(num_blocks));
      }
    }
    for (int32_t t : s.tokens) {
      if (t < 0 || t >= vocab) {
        return absl::InvalidArgumentError(who + "token id " + std::to_string(t) + " outside the vocabulary of " +
                                          std::to_string(vocab));
      }
    }
  }
  return absl::OkStatus();
}

StepMeta PlanStepMeta(const StepBatch& batch, bool pad_tables) {
  StepMeta m;
  m.T = batch.num_tokens();
  m.S = static_cast<int64_t>(batch.seqs.size());
  for (const auto& s : batch.seqs) {
    m.max_blocks = std::max<int64_t>(m.max_blocks, static_cast<int64_t>(s.block_table.size()));
    const int64_t n = static_cast<int64_t>(s.tokens.size());
    m.R += s.want_all_logits ? n : (s.want_logits ? 1 : 0);
  }
  if (pad_tables) {
    int64_t w = 1;
    while (w < m.max_blocks) w *= 2;
    m.max_blocks = w;
  }
  return m;
}

void WriteStepMeta(const StepBatch& batch, const StepMeta& m, int32_t block_size, int32_t* h) {
  std::fill(h, h + m.total(), 0);  // padded table entries point at block 0 and are never read
  int64_t t = 0, r = 0;
  for (int64_t s = 0; s < m.S; ++s) {
    const SeqChunk& c = batch.seqs[s];
    const int64_t n = static_cast<int64_t>(c.tokens.size());
    std::copy(c.block_table.begin(), c.block_table.end(), h + m.tables() + s * m.max_blocks);
    h[m.state_slots() + s] = c.state_slot;
    h[m.seq_starts() + s] = static_cast<int32_t>(t);
    for (int64_t i = 0; i < n; ++i, ++t) {
      const int32_t p = c.start_pos + static_cast<int32_t>(i);
      h[m.tokens() + t] = c.tokens[i];
      h[m.pos() + t] = p;
      h[m.slot() + t] = c.block_table[p / block_size] * block_size + p % block_size;
      h[m.token_seq() + t] = static_cast<int32_t>(s);
      if (c.want_all_logits || (c.want_logits && i == n - 1)) h[m.rows() + r++] = static_cast<int32_t>(t);
    }
  }
  h[m.seq_starts() + m.S] = static_cast<int32_t>(t);
}

}  // namespace tandem::engine
