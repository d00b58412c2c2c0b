// Rendering a PreflightReport: an aligned table for people, JSON for scripts.
#pragma once

#include <string>

#include "controller/preflight.h"

namespace tandem::controller {

// CHECK NODE STATUS FOUND EXPECTED FIX, one row per check and node, then a summary line.
std::string FormatPreflightTable(const PreflightReport& report, double wall_seconds);

// {"ok", "checks": [{"check","node","status","detail","found","expected","fix"}], "nccl_env": {...},
//  "summary": {"pass","warn","fail"}, "wall_seconds"}. Pretty-printed, newline-terminated.
std::string FormatPreflightJson(const PreflightReport& report, double wall_seconds);

// One line naming every failed check: "weights-parity on n2 (found: ...), agent-reachable on n1
// (...)" — what `serve` says it is waiting for when the preflight before a restart fails.
std::string SummarizeFailedChecks(const PreflightReport& report);

// "found: X; expected: Y; fix: Z" (the "detail" of a row).
std::string CheckDetail(const CheckResult& row);

}  // namespace tandem::controller
