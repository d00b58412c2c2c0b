// The decode benchmark's summaries that need no GPU: a median with its range, and the table that
// compares weight formats at batch 1 (issue 15's targets: FP8 >= 1.7x, NVFP4 >= 2.5x the bf16
// tokens/s of the same run). bench/decode_bench.cc fills them; tests/bench checks them.
#pragma once

#include <string>
#include <vector>

#include "kernels/quant_weight.h"

namespace tandem::bench {

struct Spread {
  double median = 0, min = 0, max = 0;
};

// Median (of the middle two for an even count), min and max; `v` not empty.
Spread Summarize(std::vector<double> v);

// One timed decode point: the step times of the runs (ms) and the bytes a step read.
struct DecodePoint {
  kernels::WeightFormat format = kernels::WeightFormat::kBf16;
  int batch = 0, context = 0;
  std::vector<double> ms;
  double bytes = 0;
};

// The speed-up over bf16 issue 15 asks of a format at batch 1 (1 for bf16).
double TargetSpeedup(kernels::WeightFormat format);

// The formats side by side, one row per point (the smallest batch of the run, every context):
// tokens/s of each run (median, min-max), GB/step, the ratio to bf16 at the same context, the byte
// ratio and the target. The runs of two formats are not paired, so the ratio's range is the widest
// the runs allow: this format's slowest run over bf16's fastest .. its fastest over bf16's slowest.
std::string CompareFormats(const std::vector<DecodePoint>& points);

}  // namespace tandem::bench
