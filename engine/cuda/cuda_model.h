// The cuda backend: the same forward structure and names as engine/cpu (embedding; per layer
// input norm -> attention -> o_proj, post norm -> router -> experts; final norm -> lm_head), in bf16
// weights (an FP8 / NVFP4 checkpoint's linears kept quantized: engine/cuda/linear.h) with float32
// activations and accumulation, over kernels/. The KV pool (float32, or bf16
// by SetKvDtype) lives in device memory. Decode steps (one token per sequence) replay a captured CUDA graph.
// Tensor parallelism (TP=N): each rank uploads only its shard, exactly as engine/cpu shards it
// (tp_shard.h: q/kv heads, o_proj columns, every expert's and the MLP's intermediate slice, lm_head
// rows by vocabulary; embedding, norms and router replicated), all-reduces after o_proj and after
// the ffn down projection on device buffers, and gathers the lm_head slices on rank 0, which alone
// returns logits. The collectives come from the Comm in ModelLoadOptions (device_collectives.h): an
// NCCL comm enqueues them on the model's stream (decode graphs capture them); any other comm
// (Gloo, threads on one GPU in tests) is staged through the host, and that model runs without graphs.
// A model uses the CUDA device current when it is created (one GPU per rank for NCCL).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/model.h"
#include "kernels/quant_weight.h"

namespace tandem::engine::cuda {

// Checks that the cuda backend supports `config` at this tensor-parallel size, reading no weights.
absl::Status CheckSupported(const ModelConfig& config, int world);

// Loads this rank's shard of <dir> (config already parsed) onto the current CUDA device. Called by
// Model::Load; options.comm is required when options.world > 1.
absl::StatusOr<std::unique_ptr<Model>> LoadCudaModel(const std::string& dir, const ModelConfig& config,
                                                     const ModelLoadOptions& options);

// A model of `config`'s shapes with random weights drawn on the GPU (no files): benchmarks.
// `tp` gives rank, world and comm (backend and threads are ignored): this rank's shard only. The
// same seed on every rank gives every rank the same replicated weights (so they route alike).
// `weights` kFp8Block (128 x 128 blocks) or kNvfp4 keeps the linears a real checkpoint quantizes
// (attention, Gated DeltaNet in_proj qkv|z and out_proj, experts, dense MLP) in that format, with
// the bf16 weights' value scale; everything else stays bf16.
absl::StatusOr<std::unique_ptr<Model>> CreateSyntheticCudaModel(
    const ModelConfig& config, uint64_t seed, const ModelLoadOptions& tp,
    kernels::WeightFormat weights = kernels::WeightFormat::kBf16);
absl::StatusOr<std::unique_ptr<Model>> CreateSyntheticCudaModel(
    const ModelConfig& config, uint64_t seed, kernels::WeightFormat weights = kernels::WeightFormat::kBf16);

// KV blocks that fit when the process may use `memory_fraction` of the device's memory in all:
// (fraction * total - already used) / (bytes per token * block_size). Call after loading.
absl::StatusOr<int32_t> KvBlocksFromDeviceMemory(const Model& model, double memory_fraction, int32_t block_size);

// Statistics of one step run eagerly by MeasureStepStats (benchmarks): distinct experts per MoE
// layer, averaged over layers. (Whether a step replayed a graph: LastForwardReplayedGraph.)
struct CudaStepStats {
  double distinct_experts_per_layer = 0;
};
// Fills the KV pool with random values (bf16, or e4m3 for an fp8 cache; benchmarks measure decode at a context without
// running the prefill first). Both need `model` to be a cuda model.
absl::Status FillKvRandom(Model& model, uint64_t seed);
// Counts distinct experts (a device-to-host copy per layer: only for benchmarks' bookkeeping).
absl::StatusOr<CudaStepStats> MeasureStepStats(Model& model, const StepBatch& batch);
// KV cache element type, before AllocateKvCache, as ModelLoadOptions::kv_cache_dtype sets it at
// load (ParseKvDtype): "f32" (default; the golden bound needs it), "bf16" (half the KV bytes) or
// "fp8" (e4m3 with the checkpoint's per-layer k/v scales, else 1: a quarter of float32's bytes).
absl::Status SetKvDtype(Model& model, const std::string& dtype);
// Turns graph capture of decode steps on or off after the load (ModelLoadOptions::cuda_graphs sets it
// at load; on by default). A model whose collectives cannot be captured stays off.
void SetUseGraphs(Model& model, bool on);
// Whether the last Forward of `model` (a cuda model; false otherwise) replayed a captured graph:
// what tests of ModelLoadOptions::cuda_graphs and SetUseGraphs observe, since a graph gives the
// same logits as launching the kernels one by one.
bool LastForwardReplayedGraph(const Model& model);

}  // namespace tandem::engine::cuda
