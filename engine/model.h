// The backend-independent model interface. A backend ("cpu" now, "cuda" later) loads this rank's
// shard of the weights; every rank calls Forward with the same StepBatch, and rank 0 receives
// the logits (lm_head is split by vocabulary and gathered there).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/comm/comm.h"
#include "engine/kv_cache.h"
#include "engine/model/load_progress.h"
#include "engine/model/model_config.h"
#include "engine/step.h"

namespace tandem::engine {

struct ModelLoadOptions {
  std::string backend = "cpu";
  int rank = 0;
  int world = 1;
  Comm* comm = nullptr;  // required when world > 1; not owned
  int threads = 0;       // matmul threads; 0 = hardware_concurrency / world (at least 1)
  // The KV cache's element type (ParseKvDtype in kv_cache.h): "auto" (float32 on both backends),
  // "f32", "bf16" or "fp8"; kv_spec() reports it and its bytes.
  std::string kv_cache_dtype = "auto";
  // Optional, not owned: counts what the load reads (engine/model/load_progress.h), for the
  // progress lines of the programs that load (tandem-infer, the agent's rank).
  LoadProgress* progress = nullptr;
  // The cuda backend's choices (the cpu backend ignores them). They travel from here to the
  // kernels as arguments: no kernel reads an environment variable.
  // Tokens in a step from which its products take the prefill paths (cuBLAS GEMMs, the grouped MoE
  // GEMM, the tiled attention; kernels/gemm.h UseGemmPath). The default is kernels::kGemmMinTokens;
  // tests set 1 (every multi-token step on those paths) or a number above their prompts (every step
  // on the float32 decode kernels). At least 1 (the load refuses less).
  int64_t cuda_gemm_min_tokens = 64;
  // Decode steps replay captured CUDA graphs (off: every step launches its kernels one by one, as
  // prefill steps do; cuda::SetUseGraphs changes it after the load).
  bool cuda_graphs = true;
  // Prefill-sized products of quantized (FP8 / NVFP4) weights keep float32-grade accuracy: the
  // weight dequantized to bf16 hi + lo and the activations split alike, three tensor-core products
  // (kernels/gemm.h gemm_bf16_split with w_lo, kernels/moe_gemm.h with lo). Off: one product of
  // bf16-rounded weights and activations, about a third of the tensor-core work. On the quantized
  // fixtures' 150-token prompt the rounded products flip MoE router choices at near-ties (a few
  // tokens' logits 1-6% off the float32 golden, docs/cuda.md "Quantized weights"); split, none do.
  // Doubles the dequantization scratch. bf16 weights and decode steps are unaffected.
  bool cuda_quant_prefill_split = false;
  // Which attention kernel decode steps over a bf16 / fp8 cache take: "split" (the split
  // tensor-core kernel wherever it takes the shape: engine/cuda/layers.cc DecodeTakesSplitAttention
  // has the A/Bs) or "paged" (paged_attention), for measuring one against the other in place (the
  // bench's --decode-attention); the load refuses other values.
  std::string cuda_decode_attention = "split";
  // The most K/V tile buffers a block of the split decode attention may take (2 or 3): 3 (default)
  // lets a batch-1 step at a long context keep three of a partition's tiles in flight where the
  // device's shared memory holds them (Hopper; the GB10 takes 2 either way); 2 keeps the
  // double-buffered walk everywhere, e.g. to test the GB10's path on an H200
  // (kernels/attention_decode.h attention_decode_buffers; the bench's --decode-attention-buffers).
  int cuda_decode_attention_buffers = 3;
};

class Model {
 public:
  virtual ~Model() = default;

  // Reads <dir>/config.json, checks that the backend supports the model (model_type, layer
  // types, tensor-parallel divisibility) and loads this rank's shard of the weights.
  static absl::StatusOr<std::unique_ptr<Model>> Load(const std::string& dir,
                                                     const ModelLoadOptions& options);

  virtual const ModelConfig& config() const = 0;
  virtual int rank() const = 0;
  virtual int world() const = 0;
  virtual KvCacheSpec kv_spec() const = 0;
  // (Re)allocates this rank's KV pool and, for a model with per-sequence state
  // (kv_spec().has_state()), its pool of num_state_slots state slots (ignored otherwise); every
  // rank must use the same sizes. Slots start empty: a sequence's first chunk is at position 0.
  virtual absl::Status AllocateKvCache(int32_t num_blocks, int32_t block_size, int32_t num_state_slots) = 0;
  virtual int32_t kv_block_size() const = 0;
  // One step. All ranks call it with the same batch; rank 0 gets the logits, others an empty Logits.
  virtual absl::StatusOr<Logits> Forward(const StepBatch& batch) = 0;
};

}  // namespace tandem::engine
