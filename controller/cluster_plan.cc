#include "controller/cluster_plan.h"

#include <map>

#include "absl/strings/str_cat.h"

namespace tandem::controller {

absl::StatusOr<ClusterPlan> MakeClusterPlan(const ClusterSpec& spec, const PreflightReport& preflight,
                                            uint64_t max_seen_generation, const std::string& api_key) {
  if (spec.nodes.empty()) return absl::InvalidArgumentError("no nodes in the cluster file");
  if (spec.tensor_parallel != static_cast<int>(spec.nodes.size())) {
    // Replicas (nodes / tensor groups) need one API per group and a router in front: not yet.
    return absl::UnimplementedError(absl::StrCat("parallel.tensor = ", spec.tensor_parallel, " with ",
                                                 spec.nodes.size(),
                                                 " nodes: `up` forms one group over all nodes; set parallel.tensor to ",
                                                 spec.nodes.size()));
  }
  ClusterPlan plan;
  plan.generation = max_seen_generation + 1;
  plan.store_endpoint = spec.nodes[0].agent;
  const uint32_t world = static_cast<uint32_t>(spec.nodes.size());
  const std::string backend = spec.engine_backend.empty() ? "cpu" : spec.engine_backend;
  for (size_t i = 0; i < spec.nodes.size(); ++i) {
    const NodeSpec& node = spec.nodes[i];
    RankPlan r;
    r.node = node.name;
    r.agent = node.agent;
    r.rank = static_cast<int>(i);

    v1::LoadModelRequest& load = r.load;
    load.set_model_path(node.model_path);
    load.set_backend(backend);
    load.set_rank(static_cast<uint32_t>(i));
    load.set_world_size(world);
    load.set_generation(plan.generation);
    load.set_memory_fraction(spec.memory_fraction);
    load.set_kv_cache_dtype(spec.engine_kv_cache_dtype);
    load.set_served_model_name(spec.model_served_name);

    v1::JoinGroupRequest& join = r.join;
    join.set_generation(plan.generation);
    join.set_rank(static_cast<uint32_t>(i));
    join.set_world_size(world);
    join.set_store_endpoint(plan.store_endpoint);
    // The transport binds to the NCCL/Gloo interface when one is named (Gloo takes an interface
    // name), else to the address the controller reaches the agent on.
    std::string host;
    int port = 0;
    SplitHostPort(node.agent, &host, &port);
    join.set_comm_host(node.nccl.socket_ifname.empty() ? host : node.nccl.socket_ifname);
    if (auto it = preflight.nccl_env.find(node.name); it != preflight.nccl_env.end()) {
      for (const auto& [k, v] : it->second) (*join.mutable_comm_env()->mutable_env())[k] = v;
    }
    if (i == 0) {
      join.set_api_listen(spec.api_listen);
      join.set_kv_tokens(spec.engine_kv_tokens);
      join.set_max_num_seqs(static_cast<uint32_t>(spec.engine_max_num_seqs));
      join.set_max_model_len(static_cast<uint32_t>(spec.engine_max_model_len));
      join.set_api_key(api_key);
      join.set_api_max_body_bytes(static_cast<uint64_t>(spec.api_max_body_bytes));
    }
    plan.ranks.push_back(std::move(r));
  }
  return plan;
}

std::string DescribePlan(const ClusterPlan& plan) {
  std::string out = absl::StrCat("plan: ", plan.ranks.size(), " ranks, generation ", plan.generation, ", store ",
                                 plan.store_endpoint, "\n");
  for (const RankPlan& r : plan.ranks) {
    std::string env;
    // A proto map has no order: sort so the line reads the same every time.
    std::map<std::string, std::string> sorted(r.join.comm_env().env().begin(), r.join.comm_env().env().end());
    for (const auto& [k, v] : sorted) absl::StrAppend(&env, " ", k, "=", v);
    absl::StrAppend(&out, "  rank ", r.rank, r.rank == 0 ? " (head)" : "", ": ", r.node, " ", r.agent, " comm_host=",
                    r.join.comm_host(), env, "\n");
  }
  return out;
}

}  // namespace tandem::controller
