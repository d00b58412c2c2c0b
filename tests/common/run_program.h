// Runs a program to its end with its output captured: the command-line tests of tandemctl,
// tandem-agentd and tandem-infer check exit codes and what each stream got.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace tandem::testing {

struct ProgramResult {
  int exit_code = -1;  // -1: killed at the deadline, or ended by a signal
  std::string out, err;
};

// argv[0] is the program's path. Waits at most `timeout`, then kills it.
ProgramResult RunProgram(const std::vector<std::string>& argv,
                         std::chrono::milliseconds timeout = std::chrono::seconds(30));

}  // namespace tandem::testing
