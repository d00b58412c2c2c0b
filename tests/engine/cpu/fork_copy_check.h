// The copies a forked choice starts from (StepBatch::block_copies / state_copies), checked on a
// loaded model of either backend (cpu: cpu_model_fork_copy_test; cuda: cuda_llm_engine_hybrid_test)
// with the KV element type it was loaded with. A prompt of 6 tokens in blocks of 4 leaves a partial
// block; a step copies it (and, for a model with state, the prompt's state slot) for a fork that
// decodes token t at position 6 alone in that step; then the parent decodes t at 6 alone. Both
// steps read the same bytes in the same shapes, so their logits must be identical (bit for bit on
// the cpu; `tolerance`, relative to the largest logit, leaves room for a backend whose reductions
// are not ordered): any byte of a layer's K or V block, or of a DeltaNet layer's conv or recurrent
// state, that the copy missed or misplaced changes them by far more. A control without the block copy (its block holds
// another prompt's positions) must differ, so the check can fail.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/model.h"
#include "engine/step.h"

namespace tandem::engine::testing {

inline SeqChunk ForkCheckChunk(int64_t id, std::vector<int32_t> tokens, int32_t start, std::vector<int32_t> table,
                               int32_t slot) {
  SeqChunk c;
  c.seq_id = id;
  c.tokens = std::move(tokens);
  c.start_pos = start;
  c.block_table = std::move(table);
  c.state_slot = slot;
  c.want_logits = true;
  return c;
}

// The one row of logits of a single-sequence step (empty on failure, with the test failed).
inline std::vector<float> ForkCheckStep(Model& model, const StepBatch& batch, const std::string& what) {
  absl::StatusOr<Logits> out = model.Forward(batch);
  EXPECT_TRUE(out.ok()) << what << ": " << out.status();
  if (!out.ok()) return {};
  EXPECT_EQ(out->rows(), 1) << what;
  return std::vector<float>(out->data.begin(), out->data.end());
}

inline void CheckForkCopies(Model& model, const std::string& label, double tolerance = 0) {
  const bool state = model.kv_spec().has_state();
  ASSERT_TRUE(model.AllocateKvCache(/*num_blocks=*/8, /*block_size=*/4, /*num_state_slots=*/4).ok());
  auto slot = [state](int32_t s) { return state ? s : -1; };
  const std::vector<int32_t> prompt = {11, 22, 33, 44, 55, 66}, other = {5, 6, 7, 8, 9, 10};
  const int32_t t = 77;
  StepBatch step;
  // Another prompt in blocks 4 and 3 (slot 3): block 3 then holds positions 4 and 5 of it.
  step.seqs = {ForkCheckChunk(9, other, 0, {4, 3}, slot(3))};
  ASSERT_FALSE(ForkCheckStep(model, step, label + " other prompt").empty());
  // The parent's prompt in blocks 0 and 1 (positions 4, 5 in the partial block 1), slot 0.
  step.seqs = {ForkCheckChunk(1, prompt, 0, {0, 1}, slot(0))};
  ASSERT_FALSE(ForkCheckStep(model, step, label + " prompt").empty());
  // The fork: block 1 -> 2, slot 0 -> 1, before its decode of t at 6 in blocks {0, 2}.
  step.seqs = {ForkCheckChunk(2, {t}, 6, {0, 2}, slot(1))};
  step.block_copies = {{1, 2}};
  if (state) step.state_copies = {{0, 1}};
  const std::vector<float> fork = ForkCheckStep(model, step, label + " fork");
  // The control: the state copied but not the block (block 3 holds the other prompt's KV).
  step.seqs = {ForkCheckChunk(3, {t}, 6, {0, 3}, slot(2))};
  step.block_copies.clear();
  if (state) step.state_copies = {{0, 2}};
  const std::vector<float> control = ForkCheckStep(model, step, label + " control");
  // The parent's own decode, after the copies, in its own blocks and slot.
  step.seqs = {ForkCheckChunk(1, {t}, 6, {0, 1}, slot(0))};
  step.state_copies.clear();
  const std::vector<float> parent = ForkCheckStep(model, step, label + " parent");
  ASSERT_EQ(fork.size(), parent.size());
  ASSERT_EQ(control.size(), parent.size());
  ASSERT_FALSE(parent.empty());
  double scale = 0;
  for (float v : parent) scale = std::max(scale, std::fabs(static_cast<double>(v)));
  int64_t differing = 0;
  double control_diff = 0;
  for (size_t i = 0; i < parent.size(); ++i) {
    const double d = std::fabs(static_cast<double>(fork[i]) - parent[i]);
    differing += !(d <= tolerance * scale);  // NaN differs
    const double dc = std::fabs(static_cast<double>(control[i]) - parent[i]);
    control_diff = std::isnan(dc) ? INFINITY : std::max(control_diff, dc);
  }
  std::printf("%s: fork vs parent %lld of %zu logits differ; without the block copy max |diff| %.4g (max |logit| "
              "%.4g)\n",
              label.c_str(), static_cast<long long>(differing), parent.size(), control_diff, scale);
  EXPECT_EQ(differing, 0) << label << ": the fork's copies are not the parent's state after the prompt";
  EXPECT_GT(control_diff, 1e-3 * scale) << label << ": the control shows the check cannot fail";
}

}  // namespace tandem::engine::testing
