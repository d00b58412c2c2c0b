// The comparison of two KV cache element types on one backend (the cpu and cuda kv dtype tests):
// the same model loaded twice, each golden prompt's logits at every position within a relative
// bound of the reference run's, and the 16-token greedy continuations identical, or, where they
// part, a near tie there. Prints every measurement.
#pragma once

#include <string>
#include <vector>

#include "engine/step_driver.h"
#include "tests/engine/cpu/golden.h"

namespace tandem::engine::testing {

// For every prompt: max |test - ref| / max |ref| over its logits < `bound` (and > 0: the element
// type made a difference), greedy identical or a near tie (ExpectNearTie), as gtest expectations.
// Returns the largest relative difference. `ref_name` names the reference run in the output.
double CompareKvDtypeRuns(StepDriver& ref, StepDriver& test, const std::vector<GoldenPrompt>& prompts,
                          const std::string& tag, const std::string& ref_name, double bound);

// Where the greedy runs part at step k, a near tie: in each run the gap between its token and the
// other run's is smaller than the largest difference between the two runs' logits at that step
// (the cache's quantization error there). The tiny models' logits are flat (gaps of 1e-3 between
// the best tokens are common), so a third token may come between them: the gaps are what is checked.
void ExpectNearTie(StepDriver& ref, StepDriver& test, std::vector<int32_t> ids, const std::vector<int32_t>& want,
                   const std::vector<int32_t>& got, const std::string& tag);

}  // namespace tandem::engine::testing
