#include "controller/preflight_output.h"

#include <algorithm>
#include <set>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tandem::controller {

std::string CheckDetail(const CheckResult& row) {
  std::string d = absl::StrCat("found: ", row.found, "; expected: ", row.expected);
  if (!row.fix.empty()) absl::StrAppend(&d, "; fix: ", row.fix);
  return d;
}

std::string SummarizeFailedChecks(const PreflightReport& report) {
  std::string out;
  for (const auto& c : report.checks) {
    if (c.status != CheckStatus::kFail) continue;
    absl::StrAppend(&out, out.empty() ? "" : ", ", c.check, " on ", c.node, " (found: ", c.found, ")");
  }
  return out;
}

namespace {
int CountNodes(const PreflightReport& report) {
  std::set<std::string> nodes;
  for (const auto& c : report.checks) nodes.insert(c.node);
  return static_cast<int>(nodes.size());
}
}  // namespace

std::string FormatPreflightTable(const PreflightReport& report, double wall_seconds) {
  const std::vector<std::string> header = {"CHECK", "NODE", "STATUS", "FOUND", "EXPECTED", "FIX"};
  std::vector<std::vector<std::string>> cells;
  cells.push_back(header);
  for (const auto& c : report.checks) {
    cells.push_back({c.check, c.node, CheckStatusName(c.status), c.found, c.expected, c.fix.empty() ? "-" : c.fix});
  }
  std::vector<size_t> width(header.size(), 0);
  for (const auto& row : cells) {
    for (size_t k = 0; k < row.size(); ++k) width[k] = std::max(width[k], row[k].size());
  }
  std::string out;
  for (const auto& row : cells) {
    std::string line;
    for (size_t k = 0; k < row.size(); ++k) {
      absl::StrAppend(&line, row[k]);
      if (k + 1 < row.size()) line.append(width[k] - row[k].size() + 2, ' ');
    }
    absl::StrAppend(&out, line, "\n");
  }
  if (!report.nccl_env.empty()) {
    absl::StrAppend(&out, "\ncommunication environment (derived from these facts):\n");
    for (const auto& [node, env] : report.nccl_env) {
      std::string line = "  " + node + ":";
      for (const auto& [k, v] : env) absl::StrAppend(&line, " ", k, "=", v.empty() ? "(unset)" : v);
      absl::StrAppend(&out, line, "\n");
    }
    absl::StrAppend(&out, "\n");
  }
  absl::StrAppend(&out, absl::StrFormat("preflight %s: %d pass, %d warn, %d fail over %d nodes in %.2f s\n",
                                        report.ok() ? "OK" : "FAILED", report.Count(CheckStatus::kPass),
                                        report.Count(CheckStatus::kWarn), report.Count(CheckStatus::kFail),
                                        CountNodes(report),
                                        wall_seconds));
  return out;
}

std::string FormatPreflightJson(const PreflightReport& report, double wall_seconds) {
  nlohmann::ordered_json j;
  j["ok"] = report.ok();
  j["checks"] = nlohmann::ordered_json::array();
  for (const auto& c : report.checks) {
    j["checks"].push_back({{"check", c.check},
                           {"node", c.node},
                           {"status", CheckStatusName(c.status)},
                           {"detail", CheckDetail(c)},
                           {"found", c.found},
                           {"expected", c.expected},
                           {"fix", c.fix}});
  }
  j["nccl_env"] = nlohmann::ordered_json::object();
  for (const auto& [node, env] : report.nccl_env) {
    nlohmann::ordered_json e = nlohmann::ordered_json::object();
    for (const auto& [k, v] : env) e[k] = v;
    j["nccl_env"][node] = e;
  }
  j["summary"] = {{"pass", report.Count(CheckStatus::kPass)},
                  {"warn", report.Count(CheckStatus::kWarn)},
                  {"fail", report.Count(CheckStatus::kFail)}};
  j["wall_seconds"] = wall_seconds;
  // Facts come from files on the nodes: never let a stray byte abort the report.
  return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace tandem::controller
