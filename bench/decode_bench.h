// The cuda backend's roofline benchmark: a model of real shapes with random weights made on the
// GPU, decode tokens/s at several batch sizes and contexts, prefill tokens/s (one prompt per step,
// and several prompts in one step as the server batches them), the bytes each decode step must
// read, the achieved GB/s, and the device-to-device copy bandwidth measured in the same run as the
// ceiling. Used by `tandem-infer bench --backend cuda` and cuda_decode_bench. The CPU side (shapes,
// flags, byte accounting, prefill steps, KV pool and table) is in synthetic_configs.h,
// decode_bench_flags.h, decode_bytes.h and decode_bench_prefill.h.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/decode_bench_flags.h"

namespace tandem::bench {

// Receives each section of the report (markdown) as soon as it is measured.
using ReportSink = std::function<void(const std::string& section)>;

// Runs the benchmark on GPU 0 (GPUs 0..tp-1 at --tp); returns the report (markdown tables), every
// section of which went to `emit` first when one is given. With several --weights formats: one
// decode table per format (each model loaded, timed and freed before the next) and a final
// comparison of the smallest batch against bf16.
absl::StatusOr<std::string> RunDecodeBench(const DecodeBenchOptions& options, const ReportSink& emit = nullptr);

// `bench` as a command: parses `args` (--help prints the usage), runs, prints the report; returns
// the exit code.
int RunDecodeBenchCommand(const std::vector<std::string>& args);

}  // namespace tandem::bench
