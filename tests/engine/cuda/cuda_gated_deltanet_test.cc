// The cuda Gated DeltaNet mixer (engine/cuda/gated_deltanet.h) against the cpu one on layer 0 of
// qwen35moe-tiny (split projections) and qwen3next-tiny (fused in_proj_qkvz / in_proj_ba), at
// TP 1 and on rank 1 of TP 2 (the head slices of the packed input projection): three steps over
// the same state slots, a prefill of two sequences (70 + 7 tokens: the chunked form and the
// prefill products), a decode of both (the token-by-token form, the norm fused into the product)
// and a 5-token chunk continuing one of them. Each step's partial out_proj sum within 1e-2
// relative L2 of the cpu's (the prefill products round their input to bf16, kernels/gemm.h, about
// 2^-9 per value; a wrong weight order, head slice or slot is O(1)). Skips where no GPU is present.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/cpu/gated_deltanet.h"
#include "engine/cpu/ops.h"
#include "engine/cuda/gated_deltanet.h"
#include "engine/model/checkpoint.h"
#include "engine/model/layer_weights.h"
#include "engine/model/model_config.h"
#include "engine/model/tp_shard.h"
#include "engine/model/weight_names.h"
#include "engine/step.h"
#include "tests/common/test_util.h"
#include "tests/kernels/gpu_test_util.h"

namespace tandem::engine {
namespace {

constexpr int32_t kSlots = 4;
constexpr int32_t kBlockSize = 128;  // one block holds every position of the test

// A step of chunks (state slot, start position, tokens).
struct ChunkSpec {
  int32_t slot, start, len;
};

StepBatch MakeBatch(const std::vector<ChunkSpec>& chunks) {
  StepBatch batch;
  int64_t id = 0;
  for (const ChunkSpec& c : chunks) {
    SeqChunk s;
    s.seq_id = id++;
    s.state_slot = c.slot;
    s.start_pos = c.start;
    s.tokens.assign(c.len, 1);
    s.block_table = {0};
    batch.seqs.push_back(s);
  }
  return batch;
}

std::vector<float> Residual(int64_t n, float phase) {
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = std::sin(0.37f * static_cast<float>(i) + phase);
  return x;
}

class CudaGatedDeltaNet : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(CudaGatedDeltaNet, MatchesCpuOverPrefillDecodeAndChunk) {
  SKIP_WITHOUT_GPU();
  const auto& [model, world] = GetParam();
  const std::string dir = ::tandem::testing::TestdataDir() + "/" + model;
  auto cfg = LoadModelConfig(dir);
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  auto ckpt = Checkpoint::Open(dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  auto names = ResolveWeightNames(**ckpt, *cfg);
  ASSERT_TRUE(names.ok()) << names.status();
  ASSERT_TRUE(cfg->IsLinearAttentionLayer(0));
  const TpShard shard = ComputeTpShard(*cfg, world - 1, world);
  const LinearAttentionWeightSpec spec = DescribeLinearAttention(*names, *cfg, shard, 0);
  const int64_t H = cfg->hidden_size;
  const float eps = static_cast<float>(cfg->rms_norm_eps);

  auto cpu_mixer = cpu::GatedDeltaNet::Load(**ckpt, spec, *cfg, shard);
  ASSERT_TRUE(cpu_mixer.ok()) << cpu_mixer.status();
  (*cpu_mixer)->AllocateStates(kSlots);
  cuda::CheckpointWeights src(**ckpt);
  auto gpu_mixer = cuda::GatedDeltaNet::Load(src, spec, *cfg, shard);
  ASSERT_TRUE(gpu_mixer.ok()) << gpu_mixer.status();
  ASSERT_TRUE((*gpu_mixer)->AllocateStates(kSlots).ok());
  const kernels::DeltaNetLayout L = cuda::GatedDeltaNet::Layout(*cfg, shard);
  EXPECT_EQ((*gpu_mixer)->state_bytes_per_slot(),
            static_cast<int64_t>(sizeof(float)) * (L.conv_state_size() + L.state_size()));

  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  const std::vector<kernels::bf16_bits> ones_bf16(H, kernels::FloatToBf16(1.0f));
  const std::vector<float> ones(H, 1.0f);
  kernels::testing::DeviceBuffer<kernels::bf16_bits> norm_w(ones_bf16);

  const std::vector<std::vector<ChunkSpec>> steps = {
      {{2, 0, 70}, {0, 0, 7}},  // prefill: 77 tokens (chunked form)
      {{2, 70, 1}, {0, 7, 1}},  // decode of both
      {{0, 8, 5}},              // a chunk continuing slot 0
  };
  for (size_t si = 0; si < steps.size(); ++si) {
    const StepBatch batch = MakeBatch(steps[si]);
    const StepMeta m = PlanStepMeta(batch, false);
    std::vector<int32_t> meta(m.total());
    WriteStepMeta(batch, m, kBlockSize, meta.data());
    const int64_t T = m.T;
    const std::vector<float> x = Residual(T * H, 0.1f + static_cast<float>(si));

    // cpu: the mixer reads the normed input.
    std::vector<float> xn(T * H), want(T * H);
    cpu::rmsnorm<float>(xn.data(), x.data(), ones.data(), T, H, eps);
    cpu::StepContext cctx;
    cctx.m = m;
    cctx.meta = meta.data();
    cctx.block_size = kBlockSize;
    cctx.batch = &batch;
    const absl::Status cst = (*cpu_mixer)->Forward(cctx, xn.data(), want.data());
    ASSERT_TRUE(cst.ok()) << cst;

    // cuda: the residual stream in, the norm folded into the input projection for small steps.
    cuda::Activations a;
    for (cuda::DeviceArray<float>* p : {&a.x, &a.x2, &a.xn, &a.delta}) ASSERT_TRUE(p->Allocate(T * H).ok());
    ASSERT_TRUE(a.linear.Allocate(cuda::GatedDeltaNet::ScratchFloats(L, T)).ok());
    ASSERT_TRUE(a.meta.Allocate(m.total()).ok());
    ASSERT_EQ(cudaMemcpy(a.meta.get(), meta.data(), meta.size() * sizeof(int32_t), cudaMemcpyHostToDevice),
              cudaSuccess);
    ASSERT_EQ(cudaMemcpy(a.x.get(), x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    cuda::StepContext ctx;
    ctx.m = m;
    ctx.meta = a.meta.get();
    ctx.stream = stream;
    ctx.a = &a;
    ctx.hidden = H;
    ctx.eps = eps;
    ctx.fuse = T <= 32;
    ctx.x = a.x.get();
    ctx.x_next = a.x2.get();
    const absl::Status gst = (*gpu_mixer)->Forward(ctx, nullptr, norm_w.get());
    ASSERT_TRUE(gst.ok()) << gst;
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    std::vector<float> got(T * H);
    ASSERT_EQ(cudaMemcpy(got.data(), a.delta.get(), got.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    kernels::testing::ExpectClose(model + " tp" + std::to_string(world) + " step " + std::to_string(si) +
                                      " T=" + std::to_string(T),
                                  got, want, 1e-2);
  }
  cudaStreamDestroy(stream);
}

INSTANTIATE_TEST_SUITE_P(Models, CudaGatedDeltaNet,
                         ::testing::Combine(::testing::Values("qwen35moe-tiny", "qwen3next-tiny"),
                                            ::testing::Values(1, 2)),
                         [](const auto& p) {
                           std::string n = std::get<0>(p.param);
                           for (char& c : n) c = c == '-' ? '_' : c;
                           return n + "_tp" + std::to_string(std::get<1>(p.param));
                         });

}  // namespace
}  // namespace tandem::engine
