// The lowercase names of a rank's states ("idle", "loading", ... "failed") that the agent logs and
// errors and `tandemctl status` print.
#pragma once

#include "tandem/v1/agent.pb.h"

namespace tandem {

// `unspecified` for RANK_STATE_UNSPECIFIED and values this build does not know.
const char* RankStateName(v1::RankState state, const char* unspecified = "unspecified");

}  // namespace tandem
