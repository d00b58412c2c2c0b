#include "engine/step.h"

#include <cstring>

namespace tandem::engine {

namespace {

constexpr uint32_t kMagic = 0x50455453;  // "STEP"
constexpr uint32_t kVersion = 1;

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
    Put<uint8_t>(out, (s.want_logits ? 1 : 0) | (s.want_all_logits ? 2 : 0));
    PutVector(out, s.tokens);
    PutVector(out, s.block_table);
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
    if (!r.Get(&s.seq_id) || !r.Get(&s.start_pos) || !r.Get(&flags) || !r.GetVector(&s.tokens) ||
        !r.GetVector(&s.block_table)) {
      return absl::InvalidArgumentError("step batch: truncated");
    }
    s.want_logits = flags & 1;
    s.want_all_logits = flags & 2;
  }
  if (!r.done()) return absl::InvalidArgumentError("step batch: trailing bytes");
  return batch;
}

}  // namespace tandem::engine
