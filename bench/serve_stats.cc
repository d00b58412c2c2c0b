#include "bench/serve_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/bench_serve.h"
#include "common/file_text.h"
#include "common/json_integer.h"
#include "common/status.h"
#include "nlohmann/json.hpp"

namespace tandem::bench {
namespace {

using Json = nlohmann::json;

constexpr const char* kOverall = "overall";

// The p50 of bench-serve's percentiles is the median (the mean of the middle two for an even
// count); 0 for no values.
double Median(std::vector<double> v) { return ComputePercentiles(std::move(v)).p50; }

// The value of figure `f` for one sample; nullopt when that sample does not measure it.
std::optional<double> SampleValue(const PromptSample& s, Figure f) {
  if (!s.ok) return std::nullopt;
  switch (f) {
    case Figure::kDecodeTokS: return DecodeTokensPerSecond(s);
    case Figure::kTtftMs: return s.ttft_ms;
    case Figure::kE2eMs: return s.e2e_ms;
    case Figure::kTokens: return static_cast<double>(s.tokens);
  }
  return std::nullopt;
}

CategorySummary SummarizeCategory(const BenchResults& r, const std::string& category) {
  CategorySummary out;
  out.category = category;
  const bool all = category == kOverall;
  for (size_t ri = 0; ri < r.runs.size(); ++ri) {
    int prompts = 0;
    for (const PromptSample& s : r.runs[ri]) {
      if (!all && s.category != category) continue;
      ++prompts;
      if (!s.ok) ++out.failed;
    }
    out.prompts = std::max(out.prompts, prompts);
  }
  for (Figure f : kFigures) {
    std::vector<double> run_medians;
    for (const auto& run : r.runs) {
      std::vector<double> values;
      for (const PromptSample& s : run) {
        if (!all && s.category != category) continue;
        if (std::optional<double> v = SampleValue(s, f)) values.push_back(*v);
      }
      if (!values.empty()) run_medians.push_back(Median(std::move(values)));
    }
    out.figures[static_cast<size_t>(f)] = SummarizeFigure(run_medians);
  }
  return out;
}

// "1234.5" with a precision that suits the magnitude.
std::string Num(double v) {
  if (v >= 1000 || v == static_cast<double>(static_cast<int64_t>(v))) return absl::StrFormat("%.0f", v);
  if (v >= 100) return absl::StrFormat("%.1f", v);
  return absl::StrFormat("%.2f", v);
}

}  // namespace

std::optional<double> DecodeTokensPerSecond(const PromptSample& s) {
  const double decode_ms = s.e2e_ms - s.ttft_ms;
  if (!s.ok || s.tokens < 2 || decode_ms <= 0) return std::nullopt;
  const double rate = static_cast<double>(s.tokens - 1) / (decode_ms / 1000.0);
  // A results.json from elsewhere may hold times no client measured (a zero-length decode
  // rounding to a denormal): such a rate is no figure.
  if (!std::isfinite(rate)) return std::nullopt;
  return rate;
}

const char* FigureLabel(Figure f) {
  switch (f) {
    case Figure::kDecodeTokS: return "decode tok/s";
    case Figure::kTtftMs: return "ttft ms";
    case Figure::kE2eMs: return "e2e ms";
    case Figure::kTokens: return "tokens";
  }
  return "?";
}

const char* FigureKey(Figure f) {
  switch (f) {
    case Figure::kDecodeTokS: return "decode_tok_s";
    case Figure::kTtftMs: return "ttft_ms";
    case Figure::kE2eMs: return "e2e_ms";
    case Figure::kTokens: return "tokens";
  }
  return "?";
}

int FigureDirection(Figure f) {
  switch (f) {
    case Figure::kDecodeTokS: return 1;
    case Figure::kTtftMs:
    case Figure::kE2eMs: return -1;
    case Figure::kTokens: return 0;
  }
  return 0;
}

FigureSummary SummarizeFigure(const std::vector<double>& run_medians) {
  FigureSummary s;
  s.run_medians = run_medians;
  if (run_medians.empty()) return s;
  s.headline = Median(run_medians);
  s.min = *std::min_element(run_medians.begin(), run_medians.end());
  s.max = *std::max_element(run_medians.begin(), run_medians.end());
  s.spread_pct = s.headline != 0 ? (s.max - s.min) / s.headline * 100 : 0;
  return s;
}

std::vector<CategorySummary> Summarize(const BenchResults& r) {
  std::vector<std::string> categories = {kOverall};
  for (const auto& run : r.runs) {
    for (const PromptSample& s : run) {
      if (std::find(categories.begin(), categories.end(), s.category) == categories.end()) {
        categories.push_back(s.category);
      }
    }
  }
  std::vector<CategorySummary> out;
  for (const std::string& c : categories) out.push_back(SummarizeCategory(r, c));
  return out;
}

std::string FormatBenchResultsJson(const BenchResults& r) {
  Json runs = Json::array();
  for (const auto& run : r.runs) {
    Json prompts = Json::array();
    for (const PromptSample& s : run) {
      Json p = {{"category", s.category}, {"ok", s.ok},         {"ttft_ms", s.ttft_ms},
                {"e2e_ms", s.e2e_ms},     {"tokens", s.tokens}, {"decode_tok_s", nullptr}};
      if (std::optional<double> rate = DecodeTokensPerSecond(s)) p["decode_tok_s"] = *rate;
      if (!s.ok) p["error"] = s.error;
      prompts.push_back(std::move(p));
    }
    runs.push_back({{"prompts", std::move(prompts)}});
  }
  Json summary = Json::array();
  for (const CategorySummary& c : Summarize(r)) {
    Json figures = Json::object();
    for (Figure f : kFigures) {
      const FigureSummary& s = c.figure(f);
      figures[FigureKey(f)] = {{"median", s.headline}, {"min", s.min},          {"max", s.max},
                               {"spread_pct", s.spread_pct}, {"run_medians", s.run_medians}};
    }
    summary.push_back({{"category", c.category}, {"prompts", c.prompts}, {"failed", c.failed}, {"figures", figures}});
  }
  Json j = {{"url", r.url},
            {"model", r.model},
            {"prompt_set", r.prompt_set},
            {"concurrency", r.concurrency},
            {"max_tokens", r.max_tokens},
            {"kv_tokens", r.kv_tokens},
            {"started_at", r.started_at},
            {"summary", std::move(summary)},
            {"runs", std::move(runs)}};
  return j.dump(2);
}

absl::StatusOr<BenchResults> ParseBenchResults(const std::string& text, const std::string& file) {
  const Json j = Json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return absl::InvalidArgumentError(file + ": not a JSON object");
  BenchResults r;
  // nlohmann throws on a type mismatch: the one place that reads the file turns it into a Status.
  std::string key;
  try {
    key = "url", r.url = j.value("url", "");
    key = "model", r.model = j.value("model", "");
    key = "prompt_set", r.prompt_set = j.value("prompt_set", "");
    // Integers only through JsonInteger: nlohmann would cast a float such as 2e43 (undefined
    // behaviour; found by the bench_files fuzz target) or wrap one past an int.
    const auto integer = [&](const Json& obj, const char* name, int64_t def, int64_t lo,
                             int64_t hi) -> absl::StatusOr<int64_t> {
      if (!obj.contains(name)) return def;
      const std::optional<int64_t> v = JsonInteger(obj[name], lo, hi);
      if (v) return *v;
      const std::string where = key == name ? key : absl::StrCat(key, ".", name);
      return absl::InvalidArgumentError(absl::StrCat(file, ": ", where, ": expected an integer in [", lo, ", ", hi,
                                                     "], found ", obj[name].dump().substr(0, 64)));
    };
    key = "concurrency";
    ASSIGN_OR_RETURN(const int64_t concurrency, integer(j, "concurrency", 1, 1, kJsonInt32Max));
    key = "max_tokens";
    ASSIGN_OR_RETURN(const int64_t max_tokens, integer(j, "max_tokens", 0, 0, kJsonInt32Max));
    key = "kv_tokens";
    ASSIGN_OR_RETURN(r.kv_tokens, integer(j, "kv_tokens", 0, 0, kJsonInt64Max));
    r.concurrency = static_cast<int>(concurrency), r.max_tokens = static_cast<int>(max_tokens);
    key = "started_at", r.started_at = j.value("started_at", "");
    key = "runs";
    if (!j.contains("runs") || !j["runs"].is_array() || j["runs"].empty()) {
      return absl::InvalidArgumentError(file + ": runs: expected a non-empty array (a results.json of tandemctl bench)");
    }
    for (size_t ri = 0; ri < j["runs"].size(); ++ri) {
      std::vector<PromptSample> run;
      const Json& prompts = j["runs"][ri].at("prompts");
      for (size_t pi = 0; pi < prompts.size(); ++pi) {
        key = absl::StrCat("runs[", ri, "].prompts[", pi, "]");
        const Json& p = prompts[pi];
        PromptSample s;
        s.category = p.at("category").get<std::string>();
        s.ok = p.at("ok").get<bool>();
        s.error = p.value("error", "");
        s.ttft_ms = p.at("ttft_ms").get<double>();
        s.e2e_ms = p.at("e2e_ms").get<double>();
        if (!p.contains("tokens")) return absl::InvalidArgumentError(absl::StrCat(file, ": ", key, ": no tokens"));
        ASSIGN_OR_RETURN(s.tokens, integer(p, "tokens", 0, 0, kJsonInt64Max));
        run.push_back(std::move(s));
      }
      r.runs.push_back(std::move(run));
    }
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": ", key, ": ", e.what()));
  }
  return r;
}

absl::StatusOr<BenchResults> LoadBenchResults(const std::string& path) {
  std::optional<std::string> text = ReadFileText(path);
  if (!text) return absl::NotFoundError("cannot read results file " + path);
  return ParseBenchResults(*text, path);
}

std::string FormatResultsTable(const BenchResults& r) {
  const std::vector<CategorySummary> summary = Summarize(r);
  std::string out = absl::StrFormat("%s  model %s  prompts %s  runs %d  concurrency %d  max_tokens %d\n", r.url,
                                    r.model.empty() ? "(default)" : r.model, r.prompt_set, r.runs.size(),
                                    r.concurrency, r.max_tokens);
  out += r.kv_tokens > 0 ? absl::StrFormat("KV pool: %d tokens\n", r.kv_tokens) : "KV pool: unknown\n";
  const FigureSummary& head = summary[0].figure(Figure::kDecodeTokS);
  std::string medians;
  for (double m : head.run_medians) absl::StrAppend(&medians, medians.empty() ? "" : ", ", Num(m));
  out += absl::StrFormat("headline: %s decode tok/s (the median of %d run medians: %s; spread %.1f%%)\n",
                         Num(head.headline), head.run_medians.size(), medians, head.spread_pct);
  out += absl::StrFormat("%-12s %7s %6s  %-13s %10s %21s %8s\n", "CATEGORY", "PROMPTS", "FAILED", "FIGURE", "MEDIAN",
                         "MIN-MAX", "SPREAD");
  for (const CategorySummary& c : summary) {
    for (Figure f : kFigures) {
      const FigureSummary& s = c.figure(f);
      const std::string range = Num(s.min) + "-" + Num(s.max);
      out += absl::StrFormat("%-12s %7d %6d  %-13s %10s %21s %7.1f%%\n", c.category, c.prompts, c.failed,
                             FigureLabel(f), s.run_medians.empty() ? "-" : Num(s.headline), range, s.spread_pct);
    }
  }
  return out;
}

}  // namespace tandem::bench
