// The cuda backend's roofline benchmark: a model of real shapes with random weights made on the
// GPU, decode tokens/s at several batch sizes and contexts, prefill tokens/s, the bytes each
// decode step must read, the achieved GB/s, and the device-to-device copy bandwidth measured in
// the same run as the ceiling. Used by `tandem-infer bench --backend cuda` and cuda_decode_bench.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"

namespace tandem::bench {

struct DecodeBenchOptions {
  std::string synthetic = "qwen3-30b-a3b";  // the shapes (only this one is known)
  std::vector<int> batches = {1, 8, 32};
  std::vector<int> contexts = {1024, 4096};
  std::vector<int> prefill_lengths = {512, 2048};
  int runs = 5;       // timed runs per point (median and spread reported)
  int steps = 32;     // decode steps per run
  int block_size = 16;
  std::string kv_dtype = "bf16";  // --kv-dtype bf16|f32
  uint64_t seed = 1;
  // --tp N: N ranks as threads of this process, rank r on GPU r, one NCCL group (fails when the
  // machine has fewer than N GPUs). The report is rank 0's: step times of the whole group, bytes
  // and GB/s of one GPU's shard, and the latency of a 4 KiB NCCL all-reduce measured in the run.
  int tp = 1;
  // --no-kernel-table: skip the per-kernel timings (e.g. under a profiler, to keep its capture to the
  // decode steps).
  bool kernel_table = true;
};

// The config of a known synthetic model name; NotFound listing the known names.
absl::StatusOr<engine::ModelConfig> SyntheticConfig(const std::string& name);

// Runs the benchmark on GPU 0 (GPUs 0..tp-1 at --tp); returns the report (markdown tables).
absl::StatusOr<std::string> RunDecodeBench(const DecodeBenchOptions& options);

// Parses bench flags (--synthetic NAME --batches 1,8 --contexts 1024 --prefill 512 --runs N
// --steps N --kv-dtype bf16|f32 --tp N); InvalidArgument naming a bad flag.
absl::StatusOr<DecodeBenchOptions> ParseDecodeBenchFlags(const std::vector<std::string>& args);

// `bench` as a command: parses `args`, runs, prints the report; returns the exit code.
int RunDecodeBenchCommand(const std::vector<std::string>& args);

}  // namespace tandem::bench
