// The plan of a group: ranks, generation, store, comm env and the head's API (pure, no network).
#include "controller/cluster_plan.h"

#include <gtest/gtest.h>

#include "controller/cluster_spec.h"

namespace tandem::controller {
namespace {

constexpr char kPair[] = R"(cluster: pair
model:
  path: /models/q
engine:
  backend: cuda
  kv_cache_dtype: fp8
api:
  listen: 0.0.0.0:8000
  key_file: /etc/tandem/api.key
  max_body_bytes: 1048576
nccl:
  socket_ifname: enp1s0f0np0
nodes:
  - {name: spark1, agent: "10.0.0.1:9300"}
  - {name: spark2, agent: "10.0.0.2:9300"}
)";

TEST(ClusterPlan, RanksGenerationStoreAndCommEnv) {
  auto spec = ParseClusterSpec(kPair, "c.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  PreflightReport report;
  report.nccl_env["spark1"] = {{"NCCL_SOCKET_IFNAME", "enp1s0f0np0"}, {"NCCL_IB_GID_INDEX", "3"}};
  report.nccl_env["spark2"] = {{"NCCL_SOCKET_IFNAME", "enp1s0f0np0"}, {"NCCL_IB_GID_INDEX", "3"}};
  auto plan = MakeClusterPlan(*spec, report, 41, "sk-test");
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::printf("%s", DescribePlan(*plan).c_str());
  EXPECT_EQ(plan->generation, 42u);
  EXPECT_EQ(plan->store_endpoint, "10.0.0.1:9300");
  ASSERT_EQ(plan->ranks.size(), 2u);
  EXPECT_EQ(plan->ranks[0].node, "spark1");
  EXPECT_EQ(plan->ranks[1].join.rank(), 1u);
  EXPECT_EQ(plan->ranks[1].join.world_size(), 2u);
  EXPECT_EQ(plan->ranks[1].join.comm_host(), "enp1s0f0np0");  // socket_ifname set: bind to it
  EXPECT_EQ(plan->ranks[1].join.comm_env().env().at("NCCL_IB_GID_INDEX"), "3");
  EXPECT_EQ(plan->ranks[0].join.api_listen(), "0.0.0.0:8000");
  EXPECT_EQ(plan->ranks[0].join.api_key(), "sk-test");
  EXPECT_EQ(plan->ranks[0].join.api_max_body_bytes(), 1048576u);
  EXPECT_EQ(plan->ranks[1].join.api_listen(), "");  // workers serve no API
  EXPECT_EQ(plan->ranks[0].load.backend(), "cuda");
  EXPECT_EQ(plan->ranks[0].load.generation(), 42u);
  EXPECT_EQ(plan->ranks[1].load.kv_cache_dtype(), "fp8");  // every rank loads the same KV type
}

TEST(ClusterPlan, CommHostIsTheAgentHostWithoutIfname) {
  auto spec = ParseClusterSpec("model: {path: /m}\nnodes:\n  - {name: a, agent: '127.0.0.1:1'}\n  - {name: b, agent: 'h2:2'}\n",
                               "c.yaml");
  ASSERT_TRUE(spec.ok());
  auto plan = MakeClusterPlan(*spec, PreflightReport{}, 0, "");
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->generation, 1u);
  EXPECT_EQ(plan->ranks[0].join.comm_host(), "127.0.0.1");
  EXPECT_EQ(plan->ranks[1].join.comm_host(), "h2");
  EXPECT_EQ(plan->ranks[0].load.backend(), "cpu");  // default
  EXPECT_EQ(plan->ranks[0].load.kv_cache_dtype(), "");  // the engine's "auto"
}

TEST(ClusterPlan, ReplicasAreRefused) {
  auto spec = ParseClusterSpec(
      "model: {path: /m}\nparallel: {tensor: 1}\nnodes:\n  - {name: a, agent: 'h:1'}\n  - {name: b, agent: 'h:2'}\n", "c.yaml");
  ASSERT_TRUE(spec.ok());
  auto plan = MakeClusterPlan(*spec, PreflightReport{}, 0, "");
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace tandem::controller
