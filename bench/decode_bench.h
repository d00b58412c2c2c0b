// The cuda backend's roofline benchmark: a model of real shapes with random weights made on the
// GPU, decode tokens/s at several batch sizes and contexts, prefill tokens/s, the bytes each
// decode step must read, the achieved GB/s, and the device-to-device copy bandwidth measured in
// the same run as the ceiling. Used by `tandem-infer bench --backend cuda` and cuda_decode_bench.
// The CPU side (shapes, flags, byte accounting) is in synthetic_configs.h, decode_bench_flags.h and
// decode_bytes.h.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/decode_bench_flags.h"

namespace tandem::bench {

// Runs the benchmark on GPU 0 (GPUs 0..tp-1 at --tp); returns the report (markdown tables).
absl::StatusOr<std::string> RunDecodeBench(const DecodeBenchOptions& options);

// `bench` as a command: parses `args` (--help prints the usage), runs, prints the report; returns
// the exit code.
int RunDecodeBenchCommand(const std::vector<std::string>& args);

}  // namespace tandem::bench
