// Logprobs and n > 1 choices on the cuda backend with qwen3moe-tiny (the checks are
// tests/engine/batching/engine_outputs_checks.h, which the cpu test runs too): logprobs and
// prompt logprobs against a log-softmax of a cuda prefill's own logits, three greedy choices equal
// to n = 1 (also with blocks of 4 and preemptions), seeded choice i equal to n = 1 with seed + i.
// Steps are kept to 32 tokens, the decode-sized path, so a token's numbers do not depend on which
// other sequences share its step; the reference is one prefill of the whole sequence, which may
// take the multi-token product paths, hence the looser logprob bound.
#include <gtest/gtest.h>

#include "tests/engine/batching/engine_outputs_checks.h"
#include "tests/kernels/gpu_test_util.h"

namespace tandem::engine {
namespace {

testing::OutputsBackend Cuda() {
  testing::OutputsBackend b;
  b.options.backend = "cuda";
  b.options.kv_tokens = 4096;
  b.options.max_model_len = 256;
  b.options.max_num_batched_tokens = 32;
  b.tolerance = 2e-2;
  b.greedy_is_golden = false;  // n = 1 is the reference; transformers' tokens are the golden tests'
  return b;
}

TEST(cuda_llm_engine_outputs, LogprobsAreTheModelsLogSoftmax) {
  SKIP_WITHOUT_GPU();
  testing::CheckLogprobsAreTheModelsLogSoftmax(Cuda());
}

TEST(cuda_llm_engine_outputs, ThreeGreedyChoicesAreWhatOneGives) {
  SKIP_WITHOUT_GPU();
  testing::CheckThreeGreedyChoicesAreWhatOneGives(Cuda());
}

TEST(cuda_llm_engine_outputs, SeededChoicesAreReproducibleAndDiffer) {
  SKIP_WITHOUT_GPU();
  testing::CheckSeededChoicesAreReproducibleAndDiffer(Cuda());
}

}  // namespace
}  // namespace tandem::engine
