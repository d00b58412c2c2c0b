// Runs a program to its end with its output captured: the command-line tests of tandemctl,
// tandem-agentd and tandem-infer check exit codes and what each stream got.
#pragma once

#include <chrono>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "common/subprocess.h"

namespace tandem::testing {

struct ProgramResult {
  int exit_code = -1;  // -1: killed at the deadline, or ended by a signal
  std::string out, err;
};

// argv[0] is the program's path. Waits at most `timeout`, then kills it.
ProgramResult RunProgram(const std::vector<std::string>& argv,
                         std::chrono::milliseconds timeout = std::chrono::seconds(30));

// Waits until the file at `path` (a running child's stdout) matches `re`: the match and its groups
// ([0] the whole match), or nullopt when `child` ended or `timeout` passed first.
std::optional<std::vector<std::string>> WaitForMatch(Subprocess& child, const std::string& path, const std::regex& re,
                                                     std::chrono::milliseconds timeout = std::chrono::seconds(20));

}  // namespace tandem::testing
