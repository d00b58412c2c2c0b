#include "proto/rank_state.h"

namespace tandem {

const char* RankStateName(v1::RankState state, const char* unspecified) {
  switch (state) {
    case v1::RANK_STATE_IDLE: return "idle";
    case v1::RANK_STATE_LOADING: return "loading";
    case v1::RANK_STATE_LOADED: return "loaded";
    case v1::RANK_STATE_JOINING: return "joining";
    case v1::RANK_STATE_READY: return "ready";
    case v1::RANK_STATE_SERVING: return "serving";
    case v1::RANK_STATE_FAILED: return "failed";
    default: return unspecified;
  }
}

}  // namespace tandem
