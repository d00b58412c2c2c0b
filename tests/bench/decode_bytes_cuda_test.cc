// The byte accounting against the cuda engine it describes, on the real shapes of the three
// synthetic models cut to their first four layers (qwen3.5 / qwen3-next: three Gated DeltaNet
// layers and one gated full-attention layer; the full models need 61-159 GB): the engine's state
// slot and KV bytes per position equal decode_bytes.h's counts, and the bench's decode step
// (four sequences in their own state slots, mid-context) and a prefill run on those shapes
// (head_dim 256 attention, 128 x 128 delta-rule state, 256 / 512 experts), with the weights in bf16,
// fp8 and nvfp4: the device memory the model takes holds at least the counted weight bytes, and a
// quantized model less than its bf16 weights would (no bf16 copy). Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <tuple>

#include <cuda_runtime.h>

#include "bench/decode_bench_flags.h"
#include "bench/decode_bytes.h"
#include "bench/synthetic_configs.h"
#include "engine/cuda/cuda_model.h"
#include "engine/step.h"
#include "tests/kernels/gpu_test_util.h"

namespace tandem::bench {
namespace {

using engine::StepBatch;

using kernels::WeightFormat;

class decode_bytes_cuda : public ::testing::TestWithParam<std::tuple<std::string, WeightFormat>> {};

size_t FreeBytes() {
  size_t free_bytes = 0, total = 0;
  EXPECT_EQ(cudaMemGetInfo(&free_bytes, &total), cudaSuccess);
  return free_bytes;
}

TEST_P(decode_bytes_cuda, EngineMatchesTheCountsOnTheRealShapes) {
  SKIP_WITHOUT_GPU();
  const auto& [name, format] = GetParam();
  auto cfg = SyntheticConfig(name);
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  cfg->num_hidden_layers = 4;
  if (!cfg->layer_types.empty()) cfg->layer_types.resize(4);
  auto reads = DescribeDecodeReads(*cfg, 0, 1, format);
  ASSERT_TRUE(reads.ok()) << reads.status();
  auto bf16_reads = DescribeDecodeReads(*cfg, 0, 1);
  ASSERT_TRUE(bf16_reads.ok()) << bf16_reads.status();

  const size_t free_before = FreeBytes();
  auto model = engine::cuda::CreateSyntheticCudaModel(*cfg, 1, format);
  ASSERT_TRUE(model.ok()) << model.status();
  // The weights the bench counts are resident; a quantized model holds no bf16 copy of them (its
  // dequantization scratch for prefill is one matrix or expert stack, not the model).
  const double taken = static_cast<double>(free_before) - static_cast<double>(FreeBytes());
  std::printf("  %s, %s weights (4 layers): the model takes %.3f GB, the weights count %.3f GB (bf16 %.3f GB)\n",
              name.c_str(), WeightFormatName(format).c_str(), taken / 1e9, reads->TotalBytes() / 1e9,
              bf16_reads->TotalBytes() / 1e9);
  EXPECT_GE(taken, static_cast<double>(reads->TotalBytes()));
  if (format != WeightFormat::kBf16) {
    EXPECT_LT(taken, static_cast<double>(bf16_reads->TotalBytes()));
  }
  engine::Model& m = **model;
  ASSERT_TRUE(engine::cuda::SetKvDtype(m, "bf16").ok());
  constexpr int kSeqs = 4, kBlocks = 16, kBlockSize = 16, kPos = 100;
  ASSERT_TRUE(m.AllocateKvCache(kSeqs * kBlocks, kBlockSize, kSeqs).ok());

  const engine::KvCacheSpec kv = m.kv_spec();
  EXPECT_EQ(kv.num_layers, reads->full_attention_layers);
  EXPECT_EQ(kv.bytes_per_token(), reads->full_attention_layers * 2 * cfg->num_key_value_heads * cfg->head_dim * 2);
  EXPECT_EQ(static_cast<double>(kv.state_bytes_per_slot), reads->StateBytesPerSeq());
  EXPECT_EQ(kv.has_state(), reads->linear_attention_layers > 0);

  // The bench's decode step: sequence s in slot s, at a position inside its blocks.
  StepBatch decode;
  for (int s = 0; s < kSeqs; ++s) {
    engine::SeqChunk c;
    c.seq_id = s;
    c.tokens = {(s * 7919) % static_cast<int>(cfg->vocab_size)};
    c.start_pos = kPos;
    for (int b = 0; b < kBlocks; ++b) c.block_table.push_back(s * kBlocks + b);
    c.want_logits = true;
    c.state_slot = s;
    decode.seqs.push_back(std::move(c));
  }
  ASSERT_TRUE(engine::cuda::FillKvRandom(m, 2).ok());
  auto st = engine::cuda::MeasureStepStats(m, decode);
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_GE(st->distinct_experts_per_layer, cfg->num_experts_per_tok);
  EXPECT_LE(st->distinct_experts_per_layer, kSeqs * cfg->num_experts_per_tok);
  auto logits = m.Forward(decode);
  ASSERT_TRUE(logits.ok()) << logits.status();
  EXPECT_EQ(logits->rows(), kSeqs);
  EXPECT_EQ(logits->vocab, cfg->vocab_size);

  // The bench's prefill: one sequence from position 0 in slot 0 (long enough for a chunked prefill).
  StepBatch prefill;
  engine::SeqChunk c;
  for (int i = 0; i < 200; ++i) c.tokens.push_back((i * 7919) % static_cast<int>(cfg->vocab_size));
  for (int b = 0; b < kBlocks; ++b) c.block_table.push_back(b);
  c.want_logits = true;
  c.state_slot = 0;
  prefill.seqs.push_back(std::move(c));
  auto pl = m.Forward(prefill);
  ASSERT_TRUE(pl.ok()) << pl.status();
  EXPECT_EQ(pl->rows(), 1);

  const StepBytes bytes = DecodeStepBytes(*reads, kSeqs, kPos + 1, st->distinct_experts_per_layer,
                                          static_cast<double>(kv.bytes_per_token()),
                                          static_cast<double>(kv.state_bytes_per_slot));
  std::printf("  %s, %s weights (4 layers): %.3f GB per decode step of %d sequences (state %.1f MB, KV %.2f MB)\n",
              name.c_str(), WeightFormatName(format).c_str(), bytes.total() / 1e9, kSeqs, bytes.state / 1e6,
              bytes.kv / 1e6);
}

INSTANTIATE_TEST_SUITE_P(Synthetic, decode_bytes_cuda,
                         ::testing::Combine(::testing::Values("qwen3-30b-a3b", "qwen3.5-35b-a3b", "qwen3-next-80b-a3b"),
                                            ::testing::Values(WeightFormat::kBf16, WeightFormat::kFp8Block,
                                                              WeightFormat::kNvfp4)),
                         [](const auto& p) {
                           std::string s = std::get<0>(p.param) + "_" + WeightFormatName(std::get<1>(p.param));
                           for (char& ch : s) ch = (ch == '-' || ch == '.') ? '_' : ch;
                           return s;
                         });

}  // namespace
}  // namespace tandem::bench
