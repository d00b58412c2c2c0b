// The byte accounting against the cuda engine it describes, on the real shapes of the three
// synthetic models cut to their first four layers (qwen3.5 / qwen3-next: three Gated DeltaNet
// layers and one gated full-attention layer; the full models need 61-159 GB): the engine's state
// slot and KV bytes per position equal decode_bytes.h's counts, and the bench's decode step
// (four sequences in their own state slots, mid-context) and a prefill run on those shapes
// (head_dim 256 attention, 128 x 128 delta-rule state, 256 / 512 experts). Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>

#include "bench/decode_bytes.h"
#include "bench/synthetic_configs.h"
#include "engine/cuda/cuda_model.h"
#include "engine/step.h"
#include "tests/kernels/gpu_test_util.h"

namespace tandem::bench {
namespace {

using engine::StepBatch;

class decode_bytes_cuda : public ::testing::TestWithParam<std::string> {};

TEST_P(decode_bytes_cuda, EngineMatchesTheCountsOnTheRealShapes) {
  SKIP_WITHOUT_GPU();
  auto cfg = SyntheticConfig(GetParam());
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  cfg->num_hidden_layers = 4;
  if (!cfg->layer_types.empty()) cfg->layer_types.resize(4);
  auto reads = DescribeDecodeReads(*cfg, 0, 1);
  ASSERT_TRUE(reads.ok()) << reads.status();

  auto model = engine::cuda::CreateSyntheticCudaModel(*cfg, 1);
  ASSERT_TRUE(model.ok()) << model.status();
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
  std::printf("  %s (4 layers): %.3f GB per decode step of %d sequences (state %.1f MB, KV %.2f MB)\n",
              GetParam().c_str(), bytes.total() / 1e9, kSeqs, bytes.state / 1e6, bytes.kv / 1e6);
}

INSTANTIATE_TEST_SUITE_P(Synthetic, decode_bytes_cuda,
                         ::testing::Values("qwen3-30b-a3b", "qwen3.5-35b-a3b", "qwen3-next-80b-a3b"),
                         [](const auto& p) {
                           std::string s = p.param;
                           for (char& ch : s) ch = (ch == '-' || ch == '.') ? '_' : ch;
                           return s;
                         });

}  // namespace
}  // namespace tandem::bench
