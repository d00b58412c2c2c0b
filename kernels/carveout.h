// The shared-memory / L1 split that kernels::Launch (kernels/launch.cuh) asks for: a host-side
// launch option of the calling thread, set by the engine per step (CudaModel::RunLayers).
#pragma once

namespace tandem::kernels {

// The shared-memory / L1 split this thread's launches ask for (a launch attribute, so graphs
// capture it with each kernel node). An SM holds blocks of one split at a time, so a kernel whose
// split differs from the previous kernel's waits for that kernel's blocks to leave the SM, and PDL's
// overlap is lost (our reading of the A/B in docs/bench/decode-h200.md, session 22). kDefault
// leaves the split to the driver (kernels that keep their inputs in L1, such as the per-token
// products of a batch, get a large L1). kFitDecodeAttention asks every kernel for the smallest
// shared memory that holds one attention_decode block an SM (DecodeAttentionCarveoutPercent; the
// driver rounds it up to a split the SM has: 100 KB of 228 on the H100 / H200), leaving the rest to
// L1, so that a step with attention_decode's 68 KB blocks does not switch splits twice a layer.
// (Asking for the largest shared memory instead, until session 32, starved the weight-streaming
// kernels of L1: docs/bench/decode-h200.md.)
enum class LaunchCarveout { kDefault, kFitDecodeAttention };
LaunchCarveout CurrentLaunchCarveout();
// The K/V buffers of the attention_decode block kFitDecodeAttention fits (2 unless the step's
// launch takes the deep walk: kernels/attention_decode.h attention_decode_buffers).
int CurrentDecodeBuffers();
// The carveout (percent of the SM's shared memory) of kFitDecodeAttention on the current device, for
// an attention_decode block of `buffers` K/V buffers.
int DecodeAttentionCarveoutPercent(int buffers);

// Sets this thread's LaunchCarveout (and the attention block it fits) for its lifetime, restoring
// the previous ones after.
class ScopedLaunchCarveout {
 public:
  explicit ScopedLaunchCarveout(LaunchCarveout c, int decode_buffers = 2);
  ~ScopedLaunchCarveout();
  ScopedLaunchCarveout(const ScopedLaunchCarveout&) = delete;
  ScopedLaunchCarveout& operator=(const ScopedLaunchCarveout&) = delete;

 private:
  LaunchCarveout previous_;
  int previous_buffers_;
};

}  // namespace tandem::kernels
