// The plan of a TP group: PURE. Ranks (head = rank 0 = nodes[0]), the group generation, the
// rendezvous endpoint, and every rank's LoadModel and JoinGroup requests, with the
// communication environment taken from the preflight report (the one place it is derived).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "controller/cluster_spec.h"
#include "controller/preflight.h"
#include "tandem/v1/agent.pb.h"

namespace tandem::controller {

struct RankPlan {
  std::string node;   // node name
  std::string agent;  // HOST:PORT of its agent
  int rank = 0;
  v1::LoadModelRequest load;
  v1::JoinGroupRequest join;
};

struct ClusterPlan {
  uint64_t generation = 0;
  std::string store_endpoint;  // the head's agent
  std::vector<RankPlan> ranks;  // ranks[i].rank == i; ranks[0] is the head
};

// `max_seen_generation`: the largest generation any agent reported (current or persisted) or
// the controller's state file remembers; the plan uses one more, so no rank of an older group
// can mistake the new group for its own. `api_key`: the contents of api.key_file ("" = open).
absl::StatusOr<ClusterPlan> MakeClusterPlan(const ClusterSpec& spec, const PreflightReport& preflight,
                                            uint64_t max_seen_generation, const std::string& api_key);

// "3 ranks, generation 7, store 10.0.0.1:9300" and one line per rank.
std::string DescribePlan(const ClusterPlan& plan);

}  // namespace tandem::controller
