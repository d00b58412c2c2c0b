// The decode benchmark's options and flags (`tandem-infer bench --backend cuda`, cuda_decode_bench):
// parsed without a GPU, so the CPU tests check them (tests/bench/decode_bench_flags_test.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/quant_weight.h"

namespace tandem::bench {

// One batched prefill row: `sequences` prompts of `tokens` tokens each, all in one model step, each
// from position 0 in KV blocks (and a state slot) of its own, as the serving scheduler batches the
// prompts that arrive together.
struct PrefillBatch {
  int sequences = 0;
  int tokens = 0;
  bool operator==(const PrefillBatch&) const = default;
};

struct DecodeBenchOptions {
  std::string synthetic = "qwen3-30b-a3b";  // the shapes: SyntheticModelNames() (bench/synthetic_configs.h)
  std::vector<int> batches = {1, 8, 32};
  std::vector<int> contexts = {1024, 4096};
  std::vector<int> prefill_lengths = {512, 2048};  // --prefill: one sequence per step
  // --prefill-batch 8x1024,4x2048: several prompts in one step (an empty value: no such rows).
  std::vector<PrefillBatch> prefill_batches = {{8, 1024}};
  int runs = 5;       // timed runs per point (median and spread reported)
  int steps = 32;     // decode steps per run
  int block_size = 16;
  std::string kv_dtype = "bf16";  // --kv-dtype bf16|f32|fp8
  uint64_t seed = 1;
  // --weights bf16|fp8|nvfp4, or a list (bf16,fp8,nvfp4): the format of the linears a quantized
  // checkpoint quantizes (bench/decode_bytes.h lists them). With several, the same shapes run once
  // per format in this process, one model at a time, and a final table compares batch 1.
  std::vector<kernels::WeightFormat> weights = {kernels::WeightFormat::kBf16};
  // --tp N: N ranks as threads of this process, rank r on GPU r, one NCCL group (fails when the
  // machine has fewer than N GPUs). The report is rank 0's: step times of the whole group, bytes
  // and GB/s of one GPU's shard, and the latency of a 4 KiB NCCL all-reduce measured in the run.
  int tp = 1;
  // --no-kernel-table: skip the per-kernel timings (e.g. under a profiler, to keep its capture to the
  // decode steps).
  bool kernel_table = true;
  // --quant-prefill-split: the quantized formats' prefill products float32-grade
  // (ModelLoadOptions::cuda_quant_prefill_split), for timing them against the rounded default.
  bool quant_prefill_split = false;
  // --decode-attention split|paged: ModelLoadOptions::cuda_decode_attention.
  std::string decode_attention = "split";
  // --decode-attention-buffers N: ModelLoadOptions::cuda_decode_attention_buffers.
  int decode_attention_buffers = 3;
  bool help = false;  // --help: print DecodeBenchUsage() and run nothing
};

// Parses bench flags (--synthetic NAME --batches 1,8 --contexts 1024 --prefill 512
// --prefill-batch 8x1024 --runs N --steps N --kv-dtype bf16|f32|fp8 --weights bf16,fp8,nvfp4 --tp N
// --no-kernel-table --help);
// InvalidArgument naming a bad flag or value, NotFound listing the known names for an unknown
// --synthetic.
absl::StatusOr<DecodeBenchOptions> ParseDecodeBenchFlags(const std::vector<std::string>& args);

// The flags and the known --synthetic names (`bench --help`).
std::string DecodeBenchUsage();

// "8x1024": a --prefill-batch row as the flag spells it.
std::string PrefillBatchName(const PrefillBatch& b);

// "bf16", "fp8", "nvfp4": the --weights names.
std::string WeightFormatName(kernels::WeightFormat f);

}  // namespace tandem::bench
