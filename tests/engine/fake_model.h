// A Model with no weights for the tests of what drives a model (engine/step_driver.h,
// engine/generate.h): it checks each step as a backend does (engine/step.h CheckBatch), records
// the KV pools and steps it was given, and answers logits whose argmax is the next token id
// (token + 1) % vocab, so a greedy continuation of t is t+1, t+2, ...
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/status.h"
#include "engine/model.h"
#include "engine/step.h"

namespace tandem::engine::testing {

class FakeModel final : public Model {
 public:
  explicit FakeModel(int64_t vocab = 8, int rank = 0, int world = 1) : rank_(rank), world_(world) {
    config_.vocab_size = vocab;
  }

  const ModelConfig& config() const override { return config_; }
  int rank() const override { return rank_; }
  int world() const override { return world_; }
  KvCacheSpec kv_spec() const override { return {1, 1, 1, 4}; }
  int32_t kv_block_size() const override { return block_size_; }
  absl::Status AllocateKvCache(int32_t num_blocks, int32_t block_size) override {
    pools.emplace_back(num_blocks, block_size);
    num_blocks_ = num_blocks;
    block_size_ = block_size;
    return absl::OkStatus();
  }
  absl::StatusOr<Logits> Forward(const StepBatch& batch) override {
    RETURN_IF_ERROR(CheckBatch(batch, num_blocks_, block_size_, config_.vocab_size));
    steps.push_back(batch.Serialize());
    if (!fail_forward.ok()) return fail_forward;
    Logits out;
    if (rank_ != 0) return out;
    out.vocab = config_.vocab_size;
    for (const SeqChunk& s : batch.seqs) {
      const size_t n = s.tokens.size();
      for (size_t i = s.want_all_logits ? 0 : n - 1; i < n; ++i) {
        if (!s.want_all_logits && !s.want_logits) break;
        std::vector<float> row(out.vocab, 0.0f);
        row[(s.tokens[i] + 1) % out.vocab] = 1.0f;
        out.data.insert(out.data.end(), row.begin(), row.end());
        out.seq_ids.push_back(s.seq_id);
        out.positions.push_back(s.start_pos + static_cast<int32_t>(i));
      }
    }
    return out;
  }

  std::vector<std::pair<int32_t, int32_t>> pools;  // (num_blocks, block_size) per AllocateKvCache
  std::vector<std::string> steps;                  // each Forward's batch, serialized
  absl::Status fail_forward;                       // returned by Forward (after recording) when set

 private:
  ModelConfig config_;
  int rank_, world_;
  int32_t num_blocks_ = 0, block_size_ = 0;
};

}  // namespace tandem::engine::testing
