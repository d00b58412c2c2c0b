// Checks over a Prometheus text exposition (what a /metrics scrape returns), so every exporter's
// test holds its registry to the same rules without an outside tool: every family has HELP and
// TYPE before its samples, counters end in _total, values are numbers.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace tandem::testing {

// What breaks the rules in `text`, one line each; empty when it passes.
std::vector<std::string> ExpositionProblems(const std::string& text);

// The value of one series, written as it is exposed: "name" or "name{a=\"x\",b=\"y\"}" (labels in
// the exporter's order); nullopt when the text has no such series.
std::optional<double> SeriesValue(const std::string& text, const std::string& series);

}  // namespace tandem::testing
