// The security rows of preflight: PURE, like the rest of the comparison. An agent that
// authenticates nobody, runs with --insecure, or takes the cluster token over a network in clear
// fails; so does an OpenAI API on a network address that asks for no key.
#pragma once

#include <cstdint>

#include "controller/cluster_spec.h"
#include "controller/preflight.h"
#include "tandem/v1/agent.pb.h"

namespace tandem::controller {

// One agent-security row for `node` from the SecurityFact its agent reported. `now_unix`: for the
// certificate's expiry (warn within 30 days, fail once expired).
CheckResult CheckAgentSecurity(const NodeSpec& node, const v1::NodeFacts& facts, int64_t now_unix);

// One api-auth row (on the head, nodes[0]): the API on a non-loopback address needs api.key_file.
CheckResult CheckApiAuth(const ClusterSpec& spec);

}  // namespace tandem::controller
