// `promtool check metrics` over a /metrics text: the outside linter that holds an exposition to
// Prometheus's own rules (metric naming, units, HELP wording) beyond what metrics_text.h checks.
// Every exporter's test that runs it asks here, so all of them read its verdict the same way.
#pragma once

#include <optional>
#include <string>

namespace tandem::testing {

// "" when promtool accepts `metrics_text`; otherwise its findings (and how it ended when it did
// not exit 0); nullopt when /usr/bin/promtool is not installed (scripts/setup-debian.sh installs it).
std::optional<std::string> PromtoolFindings(const std::string& metrics_text);

// The findings, or "" when promtool passes the text or is not installed: for EXPECT_EQ(..., "").
inline std::string PromtoolFindingsOrEmpty(const std::string& metrics_text) {
  return PromtoolFindings(metrics_text).value_or("");
}

}  // namespace tandem::testing
