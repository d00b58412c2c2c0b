// Checks over a Prometheus text exposition (what a /metrics scrape returns), so every exporter's
// test holds its registry to the same rules without an outside tool: every family has HELP and
// TYPE before its samples, counters end in _total and nothing else does, values are numbers.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tandem::testing {

// Series with their values ("name{labels}", value), and a list of problems (empty: none).
using Series = std::vector<std::pair<std::string, double>>;
using Problems = std::vector<std::string>;

// What breaks the rules in `text`, one line each; empty when it passes.
Problems ExpositionProblems(const std::string& text);

// The value of one series, written as it is exposed: "name" or "name{a=\"x\",b=\"y\"}" (labels in
// the exporter's order); nullopt when the text has no such series.
std::optional<double> SeriesValue(const std::string& text, const std::string& series);

// Every series in `want` whose value in `text` differs ("series: want 1, got 0", "series: want 1,
// absent"); empty when all match. For tables of expected series.
Problems SeriesMismatches(const std::string& text, const Series& want);

}  // namespace tandem::testing
