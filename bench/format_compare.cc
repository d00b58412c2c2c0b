#include "bench/format_compare.h"

#include <algorithm>
#include <cstdio>

#include "bench/decode_bench_flags.h"

namespace tandem::bench {

using kernels::WeightFormat;

namespace {

std::string Fmt(const char* f, double a, double b = 0, double c = 0, double d = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, f, a, b, c, d);
  return buf;
}

// Tokens/s of each run of a point.
Spread TokensPerSecond(const DecodePoint& p) {
  std::vector<double> t;
  for (double ms : p.ms) t.push_back(p.batch * 1e3 / ms);
  return Summarize(t);
}

}  // namespace

Spread Summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  Spread s;
  s.min = v.front();
  s.max = v.back();
  const size_t n = v.size();
  s.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  return s;
}

double TargetSpeedup(WeightFormat f) { return f == WeightFormat::kFp8Block ? 1.7 : f == WeightFormat::kNvfp4 ? 2.5 : 1.0; }

std::string CompareFormats(const std::vector<DecodePoint>& points) {
  if (points.empty()) return "";
  // "bytes ratio": bf16's bytes per step over this format's, the speed-up a step bound by its
  // bytes would get.
  std::string out = "\n## batch " + std::to_string(points.front().batch) +
                    " decode by weight format (this run)\n\n| weights | context | tokens/s (median, min-max) | "
                    "GB/step | vs bf16 (median, min-max) | bytes ratio | target | met |\n"
                    "| --- | ---: | ---: | ---: | ---: | ---: | ---: | :---: |\n";
  for (const DecodePoint& p : points) {
    const Spread t = TokensPerSecond(p);
    out += "| " + WeightFormatName(p.format) + " | " + std::to_string(p.context) +
           Fmt(" | %.0f (%.0f-%.0f) | %.2f |", t.median, t.min, t.max, p.bytes / 1e9);
    const auto base = std::find_if(points.begin(), points.end(), [&](const DecodePoint& b) {
      return b.format == WeightFormat::kBf16 && b.context == p.context;
    });
    if (p.format == WeightFormat::kBf16) {
      out += " 1.00x | 1.00x | | |\n";
      continue;
    }
    if (base == points.end()) {
      out += " (no bf16 run) | | " + Fmt(">= %.1fx | |\n", TargetSpeedup(p.format));
      continue;
    }
    const Spread b = TokensPerSecond(*base);
    const double ratio = t.median / b.median, target = TargetSpeedup(p.format);
    out += Fmt(" %.2fx (%.2f-%.2f) | %.2fx |", ratio, t.min / b.max, t.max / b.min, base->bytes / p.bytes) +
           Fmt(" >= %.1fx | ", target) + (ratio >= target ? "yes" : "no") + " |\n";
  }
  return out;
}

}  // namespace tandem::bench
