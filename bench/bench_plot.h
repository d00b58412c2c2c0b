// The plot of a bench: decode tok/s of every prompt (x, in prompt-set order), one line per run,
// the categories marked along the axis. SVG written directly, so no plotting package is needed
// to make it or to test it.
#pragma once

#include <string>

#include "bench/serve_stats.h"

namespace tandem::bench {

// A complete SVG document. A prompt that failed (or made fewer than two tokens) leaves a gap in
// its run's line.
std::string PlotDecodeRatesSvg(const BenchResults& results);

}  // namespace tandem::bench
