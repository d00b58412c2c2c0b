// The cuda backend against the transformers golden for qwen3moe-tiny (float32 reference): logits
// at every position of the three prompts within 1e-2 relative (max abs diff / max abs logit, as
// the cpu test measures it) and the identical 16-token greedy continuations, with decode steps
// replayed from CUDA graphs and without, and once with every multi-token step on the prefill paths
// (ModelLoadOptions::cuda_gemm_min_tokens = 1). Also a batched decode step against the same
// sequences run one at a time. Skips where no GPU is present.
#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/cuda/cuda_model.h"
#include "engine/generate.h"
#include "engine/model.h"
#include "engine/step_driver.h"
#include "kernels/attention_decode.h"
#include "kernels/matmul.h"
#include "tests/engine/cpu/golden_check.h"
#include "tests/kernels/gpu_test_util.h"

namespace tandem::engine {
namespace {

struct GoldenCase {
  bool graphs;
  const char* kv_dtype;
  double bound;  // max abs diff / max abs logit
  // ModelLoadOptions::cuda_gemm_min_tokens. 1: every multi-token step (the prompts' prefill) on the
  // prefill paths (cuBLAS, grouped MoE GEMM, x rounded to bf16); decode steps replay graphs, which
  // keep the decode kernels. (With bf16 activations in the decode steps too, prompt0's greedy
  // continuation flips at a near-tie at token 13: reproduced on the cpu backend with bf16-rounded
  // matmul inputs, logits error 0.003-0.004.)
  int64_t gemm_min_tokens = kernels::kGemmMinTokens;
};

// The engine's default (float32 KV) meets 1e-2 with and without graphs. A bf16 KV cache rounds
// every cached k and v (2^-9 relative): measured 1.1e-2 and 1.3e-2 on prompts 0 and 2 on an H200,
// so that variant is held to 2e-2, and to the same greedy tokens.
class cuda_model_golden : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(cuda_model_golden, LogitsAndGreedyMatchTransformers) {
  SKIP_WITHOUT_GPU();
  const bool graphs = GetParam().graphs;
  const double bound = GetParam().bound;
  auto golden = testing::LoadGolden(testing::TinyModelDir());
  ASSERT_TRUE(golden.ok()) << golden.status();
  ModelLoadOptions opt;
  opt.backend = "cuda";
  opt.cuda_graphs = graphs;
  opt.cuda_gemm_min_tokens = GetParam().gemm_min_tokens;
  auto model = Model::Load(testing::TinyModelDir(), opt);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_TRUE(cuda::SetKvDtype(**model, GetParam().kv_dtype).ok());
  StepDriver driver(model->get(), nullptr);
  for (size_t i = 0; i < golden->size(); ++i) {
    const testing::GoldenPrompt& g = (*golden)[i];
    auto logits = PromptLogits(driver, g.ids);
    ASSERT_TRUE(logits.ok()) << logits.status();
    ASSERT_EQ(logits->rows(), static_cast<int64_t>(g.ids.size()));
    const double rel = testing::RelativeError(logits->data, g.logits);
    std::printf("cuda kv=%s graphs=%d gemm_min_tokens=%lld prompt%zu (%zu tokens): max abs diff / max abs logit = "
                "%.3g; logits[0][0..2] = %.5f %.5f %.5f vs golden %.5f %.5f %.5f\n",
                GetParam().kv_dtype, graphs, static_cast<long long>(GetParam().gemm_min_tokens), i, g.ids.size(), rel,
                logits->data[0], logits->data[1], logits->data[2], g.logits[0], g.logits[1], g.logits[2]);
    EXPECT_LT(rel, bound) << "prompt" << i;

    GenerateOptions gen;
    gen.max_tokens = static_cast<int>(g.greedy.size());
    auto r = Generate(driver, g.ids, gen);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->token_ids, g.greedy) << "prompt" << i;
    std::printf("cuda graphs=%d prompt%zu greedy: %zu tokens, %s\n", graphs, i, r->token_ids.size(),
                r->token_ids == g.greedy ? "identical to golden" : "DIFFERENT from golden");
  }
}

INSTANTIATE_TEST_SUITE_P(kv, cuda_model_golden,
                         ::testing::Values(GoldenCase{false, "f32", 1e-2}, GoldenCase{true, "f32", 1e-2},
                                           GoldenCase{true, "bf16", 2e-2}, GoldenCase{true, "f32", 1e-2, 1}),
                         [](const ::testing::TestParamInfo<GoldenCase>& p) {
                           return std::string(p.param.kv_dtype) + (p.param.graphs ? "_graphs" : "_no_graphs") +
                                  (p.param.gemm_min_tokens == 1 ? "_gemm_path" : "");
                         });

// N sequences prefilled separately, then one decode step of all N at once: each row against the
// logits of the same sequence decoded alone.
//  - 3 sequences over the default float32 cache keep the single-token kernels: the rows equal the
//    alone ones to 1e-5 (measured 0 on the H200: batching changes nothing).
//  - 8 and 32 sequences over a bf16 cache take the batch kernels (engine/cuda/layers.cc: the split
//    tensor-core attention and the tensor-core products from 8, moe_batched's experts from 10),
//    where each sequence alone takes paged_attention, the matrix-vector kernels and the per-token
//    experts: 1e-2, since the attention's tensor cores see Q and the softmax weights in bf16
//    (kernels/attention_decode.h, its own test's bound) and the products and experts the activations
//    as bf16 hi + lo (~2^-16). Measured on the H200: at most 1.3e-3 (8) and 2.0e-3 (32).
struct DecodeBatchCase {
  int sequences;
  const char* kv_dtype;
  double bound;
};
class cuda_model_decode_batch : public ::testing::TestWithParam<DecodeBatchCase> {};

TEST_P(cuda_model_decode_batch, RowsMatchAlone) {
  SKIP_WITHOUT_GPU();
  const DecodeBatchCase& c = GetParam();
  auto golden = testing::LoadGolden(testing::TinyModelDir());
  ASSERT_TRUE(golden.ok()) << golden.status();
  ModelLoadOptions opt;
  opt.backend = "cuda";
  auto model = Model::Load(testing::TinyModelDir(), opt);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_TRUE(cuda::SetKvDtype(**model, c.kv_dtype).ok());
  auto r = testing::DecodeBatchedAndAlone(**model, *golden, c.sequences);
  ASSERT_TRUE(r.ok()) << r.status();
  testing::ExpectBatchedRowsMatchAlone(
      *r, "cuda " + std::to_string(c.sequences) + "-sequence decode, kv " + c.kv_dtype, c.bound);
}

INSTANTIATE_TEST_SUITE_P(sequences, cuda_model_decode_batch,
                         ::testing::Values(DecodeBatchCase{3, "f32", 1e-5}, DecodeBatchCase{8, "bf16", 1e-2},
                                           DecodeBatchCase{32, "bf16", 1e-2}),
                         [](const ::testing::TestParamInfo<DecodeBatchCase>& p) {
                           return std::to_string(p.param.sequences) + "_" + p.param.kv_dtype;
                         });

// ModelLoadOptions::cuda_graphs decides whether decode steps replay a captured graph, and
// SetUseGraphs changes it after the load; a prefill step never does.
TEST(cuda_model, GraphsOptionDecidesReplay) {
  SKIP_WITHOUT_GPU();
  auto golden = testing::LoadGolden(testing::TinyModelDir());
  ASSERT_TRUE(golden.ok()) << golden.status();
  // A prompt of several tokens: a one-token prompt's prefill step has a decode step's shape (and
  // replays a graph like one).
  const std::vector<int32_t>& prompt = golden->back().ids;
  ASSERT_GT(prompt.size(), 1u);
  for (const bool graphs : {false, true}) {
    ModelLoadOptions opt;
    opt.backend = "cuda";
    opt.cuda_graphs = graphs;
    auto model = Model::Load(testing::TinyModelDir(), opt);
    ASSERT_TRUE(model.ok()) << model.status();
    StepDriver driver(model->get(), nullptr);
    GenerateOptions gen;
    gen.max_tokens = 3;  // the prompt's prefill step, then decode steps
    auto r = Generate(driver, prompt, gen);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->decode_steps, 2);  // the last Forward was a decode step
    EXPECT_EQ(cuda::LastForwardReplayedGraph(**model), graphs) << "cuda_graphs=" << graphs;
    ASSERT_TRUE(PromptLogits(driver, prompt).ok());  // a prefill step: never a graph
    EXPECT_FALSE(cuda::LastForwardReplayedGraph(**model));
    if (!graphs) continue;
    cuda::SetUseGraphs(**model, false);
    r = Generate(driver, prompt, gen);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_FALSE(cuda::LastForwardReplayedGraph(**model)) << "after SetUseGraphs(false)";
  }
}

// Loading the tiny model on the cuda backend with one option set by `set` is refused as an invalid
// argument whose message names `option` (the checks run before the device is touched, so no GPU).
template <class Set>
void ExpectLoadRefusesOption(const std::string& option, Set set, const std::string& what) {
  ModelLoadOptions opt;
  opt.backend = "cuda";
  set(opt);
  auto model = Model::Load(testing::TinyModelDir(), opt);
  ASSERT_FALSE(model.ok()) << what;
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument) << model.status();
  EXPECT_NE(model.status().message().find(option), std::string::npos) << model.status();
}

// A prefill threshold below 1 token is refused at load, naming the option, before the device is
// touched (so this needs no GPU); 1 is the smallest accepted.
TEST(cuda_model_check, RefusesGemmThresholdBelowOne) {
  for (const int64_t bad : {int64_t{0}, int64_t{-5}}) {
    ExpectLoadRefusesOption(
        "cuda_gemm_min_tokens", [&](ModelLoadOptions& o) { o.cuda_gemm_min_tokens = bad; }, std::to_string(bad));
  }
}

// ModelLoadOptions::cuda_decode_attention: the split tensor-core kernel and paged_attention agree on
// one-token decode steps and a decode batch over a bf16 cache (the split kernel rounds Q and the
// softmax weights to bf16: about 1e-3); an unknown value is refused at load before the device is
// touched.
TEST(cuda_model, DecodeAttentionChoicesAgree) {
  SKIP_WITHOUT_GPU();
  auto golden = testing::LoadGolden(testing::TinyModelDir());
  ASSERT_TRUE(golden.ok()) << golden.status();
  std::vector<testing::BatchedAndAlone> runs;
  for (const char* kernel : {"split", "paged"}) {
    ModelLoadOptions opt;
    opt.backend = "cuda";
    opt.cuda_decode_attention = kernel;
    auto model = Model::Load(testing::TinyModelDir(), opt);
    ASSERT_TRUE(model.ok()) << model.status();
    ASSERT_TRUE(cuda::SetKvDtype(**model, "bf16").ok());
    auto r = testing::DecodeBatchedAndAlone(**model, *golden, 3);
    ASSERT_TRUE(r.ok()) << r.status();
    runs.push_back(std::move(*r));
  }
  for (size_t s = 0; s < runs[0].alone.size(); ++s) {
    const double rel = testing::RelativeError(runs[0].alone[s], runs[1].alone[s]);
    std::printf("decode attention split vs paged, sequence %zu alone: %.3g\n", s, rel);
    EXPECT_LT(rel, 1e-2) << "sequence " << s;
  }
  const double rel = testing::RelativeError(runs[0].batched.data, runs[1].batched.data);
  std::printf("decode attention split vs paged, 3-sequence batch: %.3g\n", rel);
  EXPECT_LT(rel, 1e-2);
  EXPECT_GT(rel, 0.0) << "the kernels round differently: equal logits mean one of them did not run";
}

TEST(cuda_model_check, RefusesUnknownDecodeAttention) {
  ExpectLoadRefusesOption(
      "cuda_decode_attention", [](ModelLoadOptions& o) { o.cuda_decode_attention = "tiled"; }, "tiled");
}

TEST(cuda_model_check, RefusesDecodeAttentionBuffersOutOfRange) {
  for (const int buffers : {1, kernels::kMaxDecodeBuffers + 1}) {
    ExpectLoadRefusesOption(
        "cuda_decode_attention_buffers", [&](ModelLoadOptions& o) { o.cuda_decode_attention_buffers = buffers; },
        std::to_string(buffers));
  }
}

TEST(cuda_model, KvBlocksFromDeviceMemory) {
  SKIP_WITHOUT_GPU();
  ModelLoadOptions opt;
  opt.backend = "cuda";
  auto model = Model::Load(testing::TinyModelDir(), opt);
  ASSERT_TRUE(model.ok()) << model.status();
  auto blocks = cuda::KvBlocksFromDeviceMemory(**model, 0.5, 16);
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  std::printf("KV pool at memory_fraction 0.5: %d blocks of 16 tokens (%lld bytes per token)\n", *blocks,
              static_cast<long long>((*model)->kv_spec().bytes_per_token()));
  EXPECT_GT(*blocks, 1000);
  EXPECT_FALSE(cuda::KvBlocksFromDeviceMemory(**model, 1.5, 16).ok());
}

}  // namespace
}  // namespace tandem::engine
