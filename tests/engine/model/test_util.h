// Helpers shared by the engine/model tests: reference-data paths, whole-file reads and writes,
// hand-made safetensors bytes and shards.
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "engine/model/checkpoint.h"
#include "engine/model/layer_weights.h"
#include "engine/model/safetensors.h"
#include "tests/common/test_util.h"

namespace tandem::engine::testing {

inline std::string TestData(const std::string& rel) {
  return ::tandem::testing::TestdataDir() + "/" + rel;
}

// The message of a status as a std::string, for find() and printing.
inline std::string Msg(const absl::Status& st) { return std::string(st.message()); }

// The test's own temporary folder (removed when the test ends): the one all tests share.
using ::tandem::testing::TempDir;

// A whole file's bytes (tests/common).
using ::tandem::testing::ReadTextFile;

inline void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A safetensors file from a hand-written header (for byte surgery): [len][header][data].
inline std::string MakeSafetensorsBytes(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

// One small bf16 [2, 3] tensor per name, with values that differ between names (1..6, 11..16,
// ...): enough to write shards and checkpoints whose reads can be told apart.
inline std::vector<NamedTensorData> Shard(const std::vector<std::string>& names) {
  std::vector<NamedTensorData> out;
  float v = 1;
  for (const auto& n : names) out.push_back({n, DType::kBF16, {2, 3}, {v, v + 1, v + 2, v + 3, v + 4, v + 5}, {}, {}}), v += 10;
  return out;
}

// Every tensor of the checkpoint folder `dir`, as bf16 tensors to write again (exact for the
// bf16 fixtures), sorted by name: for tests that build other layouts of the same weights.
inline std::vector<NamedTensorData> ReadAllTensors(const std::string& dir) {
  std::vector<NamedTensorData> out;
  auto ckpt = Checkpoint::Open(dir);
  if (!ckpt.ok()) return out;
  for (const std::string& name : (*ckpt)->Names()) {
    auto shape = (*ckpt)->Shape(name);
    auto t = (*ckpt)->Read(name, *shape);
    if (!t.ok()) return {};
    out.push_back({name, DType::kBF16, *shape, std::move(t->data), {}, {}});
  }
  return out;
}

// A checkpoint that forwards to another and records the name of every tensor read.
class RecordingCheckpoint final : public Checkpoint {
 public:
  explicit RecordingCheckpoint(const Checkpoint& inner) : inner_(inner) {}
  bool Has(const std::string& name) const override { return inner_.Has(name); }
  absl::StatusOr<std::vector<int64_t>> Shape(const std::string& name) const override {
    return inner_.Shape(name);
  }
  absl::StatusOr<Tensor> Read(const std::string& name, const std::vector<int64_t>& shape) const override {
    read_.push_back(name);
    return inner_.Read(name, shape);
  }
  absl::StatusOr<Tensor> ReadSlice(const std::string& name, const std::vector<int64_t>& shape, int dim,
                                   int64_t start, int64_t len) const override {
    read_.push_back(name);
    return inner_.ReadSlice(name, shape, dim, start, len);
  }
  std::vector<std::string> Names() const override { return inner_.Names(); }
  // Not overridden: ReadIndexedSlice (the base class's, through ReadSlice above) and View.
  const std::vector<std::string>& read() const { return read_; }

 private:
  const Checkpoint& inner_;
  mutable std::vector<std::string> read_;
};

// One WeightSpec read the way the cpu backend reads it: slices packed, then zeros.
inline absl::StatusOr<std::vector<float>> ReadSpec(const Checkpoint& ckpt, const WeightSpec& spec) {
  std::vector<float> out(spec.numel(), 0.0f);
  size_t at = 0;
  for (const WeightSlice& s : spec.slices) {
    auto t = ReadWeightSlice(ckpt, s);
    if (!t.ok()) return t.status();
    if (t->data.size() != static_cast<size_t>(s.numel()) || at + t->data.size() > out.size()) {
      return absl::InternalError("slice of " + s.name + " does not fit its spec");
    }
    std::copy(t->data.begin(), t->data.end(), out.begin() + at);
    at += t->data.size();
  }
  return out;
}

// Every WeightSpec of a model description, in a fixed order (for comparing two layouts).
inline std::vector<const WeightSpec*> AllSpecs(const ModelWeightSpec& m) {
  std::vector<const WeightSpec*> out = {&m.embed, &m.final_norm, &m.lm_head};
  for (const LayerWeightSpec& l : m.layers) {
    for (const WeightSpec* w : {&l.input_norm, &l.post_norm}) out.push_back(w);
    if (l.linear) {
      const auto& a = l.linear_attention;
      for (const WeightSpec* w : {&a.in_qkv, &a.in_z, &a.in_b, &a.in_a, &a.conv, &a.a_log, &a.dt_bias, &a.norm, &a.out}) {
        out.push_back(w);
      }
    } else {
      const auto& a = l.attention;
      for (const WeightSpec* w : {&a.wqkv, &a.wo, &a.q_norm, &a.k_norm}) out.push_back(w);
      if (!a.gate.slices.empty()) out.push_back(&a.gate);
    }
    if (l.moe) {
      const auto& e = l.experts;
      for (const WeightSpec* w : {&e.router, &e.gate_up, &e.down}) out.push_back(w);
      if (e.shared) {
        for (const WeightSpec* w : {&e.shared_expert.gate_up, &e.shared_expert.down, &e.shared_expert.gate}) {
          out.push_back(w);
        }
      }
    } else {
      for (const WeightSpec* w : {&l.mlp.gate_up, &l.mlp.down}) out.push_back(w);
    }
  }
  return out;
}

// One case of a slice test: rows (dim 0) or columns (dim 1) [start, start + len) of a matrix, or
// with index >= 0 of the stack entry `index` (dims counted in the stack, 1 or 2).
struct SliceCase {
  int dim;
  int64_t start, len, index;
};
// The WeightSlice of case `c`: of `plain` [rows, cols], or of `stacked` [experts, rows, cols].
inline WeightSlice CaseSlice(const SliceCase& c, const std::string& plain, const std::string& stacked,
                             int64_t experts, int64_t rows, int64_t cols) {
  std::vector<int64_t> shape = {rows, cols};
  if (c.index >= 0) shape.insert(shape.begin(), experts);
  return WeightSlice{c.index >= 0 ? stacked : plain, shape, c.dim, c.start, c.len, c.index};
}

// A ReadWeightSlice result `t` of the slice `s` of a [rows, cols] matrix (or of the stack entry
// s.index of [E, rows, cols]) against want(e, o, i) at each element's absolute row o, column i.
template <typename Want>
void ExpectSliceValues(const Tensor& t, const WeightSlice& s, Want want) {
  const bool stack = s.index >= 0;
  const int64_t rows = s.shape[stack ? 1 : 0], cols = s.shape[stack ? 2 : 1];
  const int mdim = s.dim - (stack ? 1 : 0);
  const int64_t r0 = mdim == 0 ? s.start : 0, nr = mdim == 0 ? s.len : rows;
  const int64_t c0 = mdim == 1 ? s.start : 0, nc = mdim == 1 ? s.len : cols;
  ASSERT_EQ(t.data.size(), static_cast<size_t>(nr * nc)) << s.name;
  const int64_t e = stack ? s.index : 0;
  for (int64_t r = 0; r < nr; ++r) {
    for (int64_t k = 0; k < nc; ++k) {
      EXPECT_EQ(t.data[r * nc + k], want(e, r0 + r, c0 + k))
          << s.name << " dim " << s.dim << " [" << s.start << ", +" << s.len << ") at " << r << "," << k;
    }
  }
}

}  // namespace tandem::engine::testing
