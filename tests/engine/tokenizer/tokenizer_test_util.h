// What the tokenizer tests share: where the Qwen3 reference data is, and a CPU clock.
#pragma once

#include <cstdlib>
#include <ctime>
#include <string>

#include "tests/common/test_util.h"

namespace tandem::tokenizer::testing {

// <reference data>/qwen3-tokenizer (tests/common/test_util.h TestdataDir()).
inline std::string Qwen3TokenizerDir() { return ::tandem::testing::TestdataDir() + "/qwen3-tokenizer"; }

// CPU time of this thread: budgets are about our code, not about how many other jobs share the
// two cores of the build machine.
inline double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

}  // namespace tandem::tokenizer::testing
