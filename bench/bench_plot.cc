#include "bench/bench_plot.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tandem::bench {
namespace {

constexpr double kWidth = 900, kHeight = 480;
constexpr double kLeft = 70, kRight = 150, kTop = 40, kBottom = 70;  // margins around the plot area
// Distinct on white and for the common colour-vision deficiencies (Okabe-Ito).
constexpr const char* kColors[] = {"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000"};

std::string Escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// A round step for about five ticks up to `top`.
double TickStep(double top) {
  const double raw = top / 5;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0}) {
    if (raw <= m * magnitude) return m * magnitude;
  }
  return 10 * magnitude;
}

}  // namespace

std::string PlotDecodeRatesSvg(const BenchResults& r) {
  size_t prompts = 0;
  double top = 0;
  for (const auto& run : r.runs) {
    prompts = std::max(prompts, run.size());
    for (const PromptSample& s : run) top = std::max(top, DecodeTokensPerSecond(s).value_or(0));
  }
  // Below a millionth of a token per second the tick arithmetic underflows; such rates show as 0.
  if (top < 1e-6) top = 1;
  const double step = TickStep(top);
  top = std::ceil(top / step) * step;
  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  auto x_of = [&](size_t i) { return kLeft + (prompts <= 1 ? plot_w / 2 : plot_w * i / (prompts - 1)); };
  auto y_of = [&](double v) { return kTop + plot_h * (1 - v / top); };

  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
      kWidth, kHeight, kWidth, kHeight);
  absl::StrAppend(&svg, absl::StrFormat("<text x=\"%.0f\" y=\"22\" font-size=\"15\">decode tok/s per prompt, %d "
                                        "run(s): %s</text>\n",
                                        kLeft, r.runs.size(), Escape(r.model.empty() ? r.url : r.model)));
  // Axes, horizontal grid lines with their values, the axis titles.
  for (double v = 0; v <= top + step / 2; v += step) {
    absl::StrAppend(&svg, absl::StrFormat("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                                          "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n",
                                          kLeft, y_of(v), kLeft + plot_w, y_of(v), kLeft - 6, y_of(v) + 4, v));
  }
  absl::StrAppend(&svg, absl::StrFormat("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n",
                                        kLeft, kTop + plot_h, kLeft + plot_w, kTop + plot_h));
  absl::StrAppend(&svg, absl::StrFormat("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">prompt</text>\n",
                                        kLeft + plot_w / 2, kHeight - 12));
  absl::StrAppend(&svg, absl::StrFormat("<text transform=\"translate(16 %.1f) rotate(-90)\" "
                                        "text-anchor=\"middle\">decode tok/s</text>\n",
                                        kTop + plot_h / 2));
  // Prompt numbers, and a dashed line where the category changes (named at its first prompt).
  const std::vector<PromptSample>* first = r.runs.empty() ? nullptr : &r.runs[0];
  for (size_t i = 0; i < prompts; ++i) {
    absl::StrAppend(&svg, absl::StrFormat("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%d</text>\n", x_of(i),
                                          kTop + plot_h + 16, i + 1));
    if (first && i < first->size() && (i == 0 || (*first)[i].category != (*first)[i - 1].category)) {
      absl::StrAppend(&svg, absl::StrFormat("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#999\" "
                                            "stroke-dasharray=\"4 3\"/><text x=\"%.1f\" y=\"%.1f\">%s</text>\n",
                                            x_of(i), kTop, x_of(i), kTop + plot_h, x_of(i) + 3, kTop + plot_h + 34,
                                            Escape((*first)[i].category)));
    }
  }
  // One line per run; a missing value starts a new segment.
  for (size_t ri = 0; ri < r.runs.size(); ++ri) {
    const char* color = kColors[ri % std::size(kColors)];
    std::string path;
    bool pen_down = false;
    for (size_t i = 0; i < r.runs[ri].size(); ++i) {
      std::optional<double> v = DecodeTokensPerSecond(r.runs[ri][i]);
      if (!v) {
        pen_down = false;
        continue;
      }
      absl::StrAppend(&path, pen_down ? " L" : " M", absl::StrFormat("%.1f %.1f", x_of(i), y_of(*v)));
      absl::StrAppend(&svg, absl::StrFormat("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", x_of(i),
                                            y_of(*v), color));
      pen_down = true;
    }
    if (!path.empty()) {
      absl::StrAppend(&svg, absl::StrFormat("<path d=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\"/>\n",
                                            path.substr(1), color));
    }
    const double ly = kTop + 10 + 18 * ri;
    absl::StrAppend(&svg, absl::StrFormat("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                                          "stroke-width=\"2\"/><text x=\"%.1f\" y=\"%.1f\">run %d</text>\n",
                                          kWidth - kRight + 15, ly, kWidth - kRight + 40, ly, color,
                                          kWidth - kRight + 46, ly + 4, ri + 1));
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace tandem::bench
