// The golden comparison every backend's test makes (cpu at TP 1/2/4, cuda at TP 2/4): the model
// loaded on `tp` ranks as threads, rank 0 driving; each golden prompt's logits at every position
// within a relative bound and its greedy continuation identical, both printed.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/model.h"
#include "engine/step_driver.h"
#include "tests/engine/cpu/golden.h"

namespace tandem::engine::testing {

// Loads the tiny model (`model_dir`, qwen3moe-tiny unless given) with `opt` (rank, world and comm filled in) on `tp` ranks as threads;
// `on_rank` (may be empty) runs first on each rank's thread (e.g. cudaSetDevice). Rank 0 runs
// `check(driver)`, the others serve steps.
absl::Status RunOnRanks(int tp, ModelLoadOptions opt, const std::function<absl::Status()>& on_rank,
                        const std::function<absl::Status(StepDriver&)>& check,
                        const std::string& model_dir = TinyModelDir());

// For every prompt: PromptLogits vs the golden logits (max |diff| / max |logit| < bound) and
// Generate's greedy tokens vs the golden continuation, as gtest expectations; prints each
// comparison as "<tag> promptN ...".
absl::Status CheckGoldenPrompts(StepDriver& driver, const std::vector<GoldenPrompt>& golden, const std::string& tag,
                                double bound);

// As CheckGoldenPrompts, for a path that rounds activations to bf16 (a bf16 KV cache, the bf16
// prefill GEMMs): logits within `bound`, and the greedy continuation identical or, where it parts
// from the golden, a near tie in this run: its token's logit above the golden token's by less than
// the largest |logit - golden| this path showed on the prompt (the golden's own logits along the
// continuation are not stored, so the check is one-sided). Prints the gap.
absl::Status CheckGoldenPromptsRounded(StepDriver& driver, const std::vector<GoldenPrompt>& golden,
                                       const std::string& tag, double bound);

// The whole golden test of one testdata model: LoadGolden(<testdata>/`name`), then on `tp` ranks
// (RunOnRanks with `opt` and `on_rank`) CheckGoldenPrompts tagged "<name> tp=<tp>" within `bound`.
absl::Status CheckTestdataModelGolden(const std::string& name, int tp, const ModelLoadOptions& opt,
                                      const std::function<absl::Status()>& on_rank, double bound);

// The batching invariant: `sequences` sequences (sequence s from golden prompt s mod the prompts'
// count) prefilled one at a time, then token 42 + s decoded for each sequence alone and for all of
// them in one step (which rewrites the same KV slots with the same values). `batched` holds rank
// 0's rows (none on other ranks). Three sequences keep every backend on its single-token kernels;
// eight or more put the CUDA decode step on its batch kernels (engine/cuda/layers.cc).
struct BatchedAndAlone {
  std::vector<std::vector<float>> alone;  // (sequences, vocab)
  Logits batched;
};
absl::StatusOr<BatchedAndAlone> DecodeBatchedAndAlone(Model& model, const std::vector<GoldenPrompt>& golden,
                                                      int sequences = 3);

// Each batched row within `bound` (relative: max abs diff / max abs logit) of the same sequence
// decoded alone, as gtest expectations; prints "<tag> row N vs alone ...".
void ExpectBatchedRowsMatchAlone(const BatchedAndAlone& r, const std::string& tag, double bound = 1e-5);

}  // namespace tandem::engine::testing
