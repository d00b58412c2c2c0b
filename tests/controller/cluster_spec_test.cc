// cluster.yaml parsing: the shipped examples parse, and every malformed case names file:line: key.
#include "controller/cluster_spec.h"

#include <gtest/gtest.h>

#include <chrono>

#include "common/status.h"

namespace tandem::controller {
namespace {

constexpr char kGood[] = R"(cluster: pair
model:
  path: /models/q
engine:
  memory_fraction: 0.8
nccl:
  hca: [rocep1s0f0, rocep1s0f1]
  socket_ifname: enp1s0f0np0
nodes:
  - name: spark1
    agent: 10.0.0.1:9300
  - name: spark2
    agent: "[fe80::1]:9300"
    model_path: /other/q
    nccl:
      gid_index: 3
)";

// Expects a parse error whose message is exactly `want` (file:line: key: what...) as a prefix.
void ExpectError(const std::string& yaml, const std::string& want_prefix) {
  absl::StatusOr<ClusterSpec> spec = ParseClusterSpec(yaml, "cluster.yaml");
  ASSERT_FALSE(spec.ok()) << "parsed but should not:\n" << yaml;
  std::string msg = StatusText(spec.status());
  std::printf("  error: %s\n", msg.c_str());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(msg.substr(0, want_prefix.size()), want_prefix) << msg;
}

TEST(ClusterSpec, ParsesGoodFileWithDefaultsAndOverrides) {
  absl::StatusOr<ClusterSpec> spec = ParseClusterSpec(kGood, "cluster.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name, "pair");
  EXPECT_DOUBLE_EQ(spec->memory_fraction, 0.8);
  EXPECT_EQ(spec->tensor_parallel, 2);  // default: number of nodes
  ASSERT_EQ(spec->nodes.size(), 2u);
  EXPECT_EQ(spec->nodes[0].model_path, "/models/q");
  EXPECT_EQ(spec->nodes[1].model_path, "/other/q");
  EXPECT_EQ(spec->nodes[1].agent, "[fe80::1]:9300");
  ASSERT_TRUE(spec->nodes[0].nccl.hca.has_value());
  EXPECT_EQ(*spec->nodes[0].nccl.hca, (std::vector<std::string>{"rocep1s0f0", "rocep1s0f1"}));
  EXPECT_EQ(spec->nodes[1].nccl.socket_ifname, "enp1s0f0np0");  // inherited from top-level nccl
  EXPECT_FALSE(spec->nodes[0].nccl.gid_index.has_value());
  EXPECT_EQ(spec->nodes[1].nccl.gid_index, 3);
  EXPECT_EQ(spec->nodes[1].line, 12);
}

TEST(ClusterSpec, DefaultMemoryFractionIs070) {
  auto spec = ParseClusterSpec("model: {path: /m}\nnodes:\n  - {name: a, agent: 'h:1'}\n", "c.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_DOUBLE_EQ(spec->memory_fraction, 0.70);
  EXPECT_FALSE(spec->memory_fraction_set);
}

TEST(ClusterSpec, CudaDefaultMemoryFractionIs090AndAGivenOneWins) {
  auto spec = ParseClusterSpec("model: {path: /m}\nengine: {backend: cuda}\nnodes:\n  - {name: a, agent: 'h:1'}\n", "c.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_DOUBLE_EQ(spec->memory_fraction, 0.90);  // of each GPU's memory
  auto given = ParseClusterSpec(
      "model: {path: /m}\nengine: {backend: cuda, memory_fraction: 0.5}\nnodes:\n  - {name: a, agent: 'h:1'}\n", "c.yaml");
  ASSERT_TRUE(given.ok()) << given.status();
  EXPECT_DOUBLE_EQ(given->memory_fraction, 0.5);
  EXPECT_TRUE(given->memory_fraction_set);
}

TEST(ClusterSpec, ShippedExamplesParse) {
  for (const char* f : {"deploy/examples/dgx-spark-pair.yaml", "deploy/examples/local-two-agents.yaml"}) {
    std::string path = std::string(TANDEM_SOURCE_DIR) + "/" + f;
    absl::StatusOr<ClusterSpec> spec = LoadClusterSpec(path);
    ASSERT_TRUE(spec.ok()) << spec.status();
    std::printf("  %s: cluster %s, %zu nodes, tensor %d\n", f, spec->name.c_str(), spec->nodes.size(), spec->tensor_parallel);
    EXPECT_EQ(spec->nodes.size(), 2u);
  }
  auto spark = LoadClusterSpec(std::string(TANDEM_SOURCE_DIR) + "/deploy/examples/dgx-spark-pair.yaml");
  ASSERT_TRUE(spark.ok());
  EXPECT_EQ(*spark->nodes[1].nccl.hca, (std::vector<std::string>{"rocep1s0f0", "rocep1s0f1"}));
  EXPECT_EQ(spark->nodes[1].nccl.socket_ifname, "enp1s0f0np0");
}

TEST(ClusterSpec, ReservedKeysOfLaterIssuesAreAccepted) {
  auto spec = ParseClusterSpec(R"(cluster: c
model: {path: /m, served_name: qwen}
engine: {backend: cpu}
api: {listen: "0.0.0.0:8000"}
auth: {token_file: /etc/tandem/token}
probe: {prompt: "2+2=", expect: "4", interval: 30s}
nodes:
  - {name: a, agent: "h:1"}
)", "c.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->engine_backend, "cpu");
}

TEST(ClusterSpec, BadYamlSyntaxNamesLine) {
  ExpectError("cluster: c\nnodes:\n  - name: a\n    agent: [unclosed\n", "cluster.yaml:5: invalid YAML");
}

TEST(ClusterSpec, MissingNodes) { ExpectError("cluster: c\nmodel:\n  path: /m\n", "cluster.yaml:1: nodes: required key is missing"); }

TEST(ClusterSpec, EmptyNodes) { ExpectError("cluster: c\nmodel:\n  path: /m\nnodes: []\n", "cluster.yaml:4: nodes: the list is empty"); }

TEST(ClusterSpec, DuplicateNodeName) {
  ExpectError("model: {path: /m}\nnodes:\n  - name: a\n    agent: h:1\n  - name: a\n    agent: h:2\n",
              "cluster.yaml:5: nodes[1].name: duplicate node name \"a\"");
}

TEST(ClusterSpec, BadAgentAddress) {
  ExpectError("cluster: c\nmodel:\n  path: /m\nnodes:\n  - name: spark1\n    agent: spark1:9300\n  - name: spark2\n    agent: spark2\n",
              "cluster.yaml:8: nodes[1].agent: expected HOST:PORT, got \"spark2\"");
  ExpectError("model: {path: /m}\nnodes:\n  - {name: a, agent: 'h:0'}\n", "cluster.yaml:3: nodes[0].agent: expected HOST:PORT");
  ExpectError("model: {path: /m}\nnodes:\n  - {name: a, agent: 'h:70000'}\n", "cluster.yaml:3: nodes[0].agent: expected HOST:PORT");
}

TEST(ClusterSpec, MissingAgent) {
  ExpectError("model: {path: /m}\nnodes:\n  - name: a\n", "cluster.yaml:3: nodes[0].agent: required key is missing");
}

TEST(ClusterSpec, MemoryFractionOutOfRange) {
  ExpectError("model: {path: /m}\nengine:\n  memory_fraction: 1.5\nnodes:\n  - {name: a, agent: 'h:1'}\n",
              "cluster.yaml:3: engine.memory_fraction: expected a number in (0, 1], got 1.5");
  ExpectError("model: {path: /m}\nengine:\n  memory_fraction: 0\nnodes:\n  - {name: a, agent: 'h:1'}\n",
              "cluster.yaml:3: engine.memory_fraction: expected a number in (0, 1], got 0");
  ExpectError("model: {path: /m}\nengine:\n  memory_fraction: lots\nnodes:\n  - {name: a, agent: 'h:1'}\n",
              "cluster.yaml:3: engine.memory_fraction: expected a number in (0, 1], got \"lots\"");
}

TEST(ClusterSpec, UnknownKeyWithSuggestion) {
  ExpectError("model: {path: /m}\nnodes:\n  - name: a\n    agnet: h:1\n",
              "cluster.yaml:4: nodes[0].agnet: unknown key (did you mean \"agent\"?)");
  ExpectError("cluster: c\nmodle:\n  path: /m\n", "cluster.yaml:2: modle: unknown key (did you mean \"model\"?)");
  ExpectError("model: {path: /m}\nnccl:\n  hcas: [x]\nnodes:\n  - {name: a, agent: 'h:1'}\n",
              "cluster.yaml:3: nccl.hcas: unknown key (did you mean \"hca\"?)");
}

TEST(ClusterSpec, DuplicateKey) {
  ExpectError("model: {path: /m}\nnodes:\n  - name: a\n    agent: h:1\n    agent: h:2\n", "cluster.yaml:5: nodes[0].agent: duplicate key");
}

TEST(ClusterSpec, TensorParallelMustDivideNodes) {
  ExpectError("model: {path: /m}\nparallel:\n  tensor: 3\nnodes:\n  - {name: a, agent: 'h:1'}\n  - {name: b, agent: 'h:2'}\n",
              "cluster.yaml:3: parallel.tensor: expected a divisor of the node count (2), got 3");
  auto spec = ParseClusterSpec("model: {path: /m}\nparallel:\n  tensor: 1\nnodes:\n  - {name: a, agent: 'h:1'}\n  - {name: b, agent: 'h:2'}\n", "c");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->tensor_parallel, 1);  // two replicas
}

TEST(ClusterSpec, MissingModelPath) {
  ExpectError("nodes:\n  - {name: a, agent: 'h:1'}\n", "cluster.yaml:2: nodes[0].model_path: no model folder");
}

TEST(ClusterSpec, BadGidIndexAndHcaShape) {
  ExpectError("model: {path: /m}\nnccl:\n  gid_index: three\nnodes:\n  - {name: a, agent: 'h:1'}\n",
              "cluster.yaml:3: nccl.gid_index: expected a whole number, got \"three\"");
  ExpectError("model: {path: /m}\nnccl:\n  hca: rocep1s0f0\nnodes:\n  - {name: a, agent: 'h:1'}\n",
              "cluster.yaml:3: nccl.hca: expected a list");
}

TEST(ClusterSpec, EmptyFileAndTopLevelList) {
  ExpectError("", "cluster.yaml:1: empty file");
  ExpectError("- a\n- b\n", "cluster.yaml:1: expected a mapping");
}

TEST(ClusterSpec, UnreadableFile) {
  auto spec = LoadClusterSpec("/nonexistent/cluster.yaml");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kNotFound);
}

TEST(ClusterSpec, SplitHostPort) {
  std::string h;
  int p = 0;
  EXPECT_TRUE(SplitHostPort("127.0.0.1:9300", &h, &p));
  EXPECT_EQ(h, "127.0.0.1");
  EXPECT_EQ(p, 9300);
  EXPECT_TRUE(SplitHostPort("[::1]:80", &h, &p));
  EXPECT_EQ(h, "::1");
  EXPECT_FALSE(SplitHostPort("::1:80", &h, &p));
  EXPECT_FALSE(SplitHostPort("host", &h, &p));
  EXPECT_FALSE(SplitHostPort(":80", &h, &p));
  EXPECT_FALSE(SplitHostPort("host:8x", &h, &p));
}

}  // namespace
}  // namespace tandem::controller

namespace tandem::controller {
namespace {

TEST(ClusterSpec, TlsAndPreflightVerify) {
  const std::string base = "cluster: c\nmodel:\n  path: /m\nnodes:\n  - {name: a, agent: '10.0.0.1:9300'}\n";
  auto spec = ParseClusterSpec(base + "tls:\n  ca: /etc/tandem/tls/ca.pem\n  cert: /etc/tandem/tls/controller.pem\n"
                                      "  key: /etc/tandem/tls/controller.key\npreflight:\n  verify: full\n",
                               "cluster.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->tls_ca, "/etc/tandem/tls/ca.pem");
  EXPECT_EQ(spec->tls_cert, "/etc/tandem/tls/controller.pem");
  EXPECT_EQ(spec->tls_key, "/etc/tandem/tls/controller.key");
  EXPECT_TRUE(spec->preflight_verify_full);
  auto cache = ParseClusterSpec(base + "preflight:\n  verify: cache\n", "cluster.yaml");
  ASSERT_TRUE(cache.ok());
  EXPECT_FALSE(cache->preflight_verify_full);
  ExpectError(base + "preflight:\n  verify: sometimes\n", "cluster.yaml:7: preflight.verify: expected cache or full");
  ExpectError(base + "tls:\n  ca: /ca.pem\n  cert: /c.pem\n", "cluster.yaml:7: tls.key: required key is missing");
}

// The orchestration keys (engine, api, auth, probe, serve, timeouts) and their defaults.
constexpr char kFull[] = R"(cluster: pair
model:
  path: /models/q
  served_name: qwen3
engine:
  backend: cuda
  kv_tokens: 65536
  kv_cache_dtype: fp8
  max_num_seqs: 32
  max_model_len: 8192
api:
  listen: 0.0.0.0:8000
  key_file: /etc/tandem/api.key
  max_body_bytes: 1048576
auth:
  token_file: /etc/tandem/token
probe:
  prompt: "2+2="
  expect: "4"
  max_tokens: 4
  interval: 45s
  timeout: 500ms
serve:
  restart_budget: 5 per 30m
  metrics_listen: 127.0.0.1:9500
  stuck_after: 90s
timeouts:
  load: 1h
  join: 2m
nccl:
  socket_ifname: enp1s0f0np0
nodes:
  - name: spark1
    agent: 10.0.0.1:9300
  - name: spark2
    agent: 10.0.0.2:9300
)";

TEST(OrchestrationKeys, ParsesEveryNewKey) {
  auto spec = ParseClusterSpec(kFull, "c.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->engine_backend, "cuda");
  EXPECT_EQ(spec->engine_kv_tokens, 65536);
  EXPECT_EQ(spec->engine_kv_cache_dtype, "fp8");
  EXPECT_EQ(spec->engine_max_num_seqs, 32);
  EXPECT_EQ(spec->engine_max_model_len, 8192);
  EXPECT_EQ(spec->model_served_name, "qwen3");
  EXPECT_EQ(spec->api_listen, "0.0.0.0:8000");
  EXPECT_EQ(spec->api_key_file, "/etc/tandem/api.key");
  EXPECT_EQ(spec->api_max_body_bytes, 1048576);
  EXPECT_EQ(spec->auth_token_file, "/etc/tandem/token");
  EXPECT_EQ(spec->probe.prompt, "2+2=");
  EXPECT_EQ(spec->probe.expect, "4");
  EXPECT_TRUE(spec->probe.prompt_ids.empty());
  EXPECT_EQ(spec->probe.max_tokens, 4);
  EXPECT_EQ(spec->probe.interval, std::chrono::seconds(45));
  EXPECT_EQ(spec->probe.timeout, std::chrono::milliseconds(500));
  EXPECT_EQ(spec->serve.restart_budget, 5);
  EXPECT_EQ(spec->serve.restart_window, std::chrono::minutes(30));
  EXPECT_EQ(spec->serve.metrics_listen, "127.0.0.1:9500");
  EXPECT_EQ(spec->serve.stuck_after, std::chrono::seconds(90));
  EXPECT_EQ(spec->timeouts.load, std::chrono::hours(1));
  EXPECT_EQ(spec->timeouts.join, std::chrono::minutes(2));
  EXPECT_EQ(spec->timeouts.status, std::chrono::seconds(2));  // default
}

TEST(OrchestrationKeys, Defaults) {
  auto spec = ParseClusterSpec("model: {path: /m}\nnodes:\n  - {name: a, agent: 'h:1'}\n", "c.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->engine_max_num_seqs, 16);
  EXPECT_EQ(spec->probe.max_tokens, 8);
  EXPECT_EQ(spec->probe.interval, std::chrono::seconds(30));
  EXPECT_EQ(spec->serve.restart_budget, 3);
  EXPECT_EQ(spec->serve.restart_window, std::chrono::minutes(10));
}

// A minimal spec plus `extra`: the error names cluster.yaml:LINE: key.
void ExpectKeyError(const std::string& extra, const std::string& want_prefix) {
  ExpectError("model: {path: /m}\nnodes:\n  - {name: a, agent: 'h:1'}\n" + extra, want_prefix);
}

TEST(OrchestrationKeys, BadValuesNameFileLineKey) {
  ExpectKeyError("engine:\n  backend: rocm\n", "cluster.yaml:5: engine.backend: expected cpu or cuda");
  ExpectKeyError("engine:\n  kv_tokens: -5\n", "cluster.yaml:5: engine.kv_tokens: expected 0..");
  ExpectKeyError("engine:\n  kv_cache_dtype: fp16\n",
                 "cluster.yaml:5: engine.kv_cache_dtype: expected auto, f32, bf16 or fp8, got \"fp16\"");
  ExpectKeyError("engine:\n  max_num_seqs: lots\n", "cluster.yaml:5: engine.max_num_seqs: expected a whole number");
  ExpectKeyError("api:\n  listen: 8000\n", "cluster.yaml:5: api.listen: expected HOST:PORT");
  ExpectKeyError("api:\n  max_body_bytes: -1\n", "cluster.yaml:5: api.max_body_bytes: expected 0..");
  ExpectKeyError("probe:\n  interval: often\n", "cluster.yaml:5: probe.interval: expected a duration");
  ExpectKeyError("probe:\n  max_tokens: 0\n", "cluster.yaml:5: probe.max_tokens: expected 1..4096");
  ExpectKeyError("probe:\n  prompt: \"\"\n", "cluster.yaml:5: probe.prompt: expected a non-empty prompt");
  ExpectKeyError("serve:\n  restart_budget: 3 every 10m\n", "cluster.yaml:5: serve.restart_budget: expected \"N per DURATION\"");
  ExpectKeyError("serve:\n  metrics_listen: nohost\n", "cluster.yaml:5: serve.metrics_listen: expected HOST:PORT");
  ExpectKeyError("timeouts:\n  lod: 5s\n", "cluster.yaml:5: timeouts.lod: unknown key (did you mean \"load\"?)");
  ExpectKeyError("probe:\n  prompt_ids: [1, x]\n", "cluster.yaml:5: probe.prompt_ids[1]: expected a token id");
  ExpectKeyError("probe:\n  prompt_ids: []\n", "cluster.yaml:5: probe.prompt_ids: expected at least one token id");
  ExpectKeyError("timeouts:\n  join: 0s\n", "cluster.yaml:5: timeouts.join: expected a duration");
}

TEST(OrchestrationKeys, FabricCheckIsABoolOrAMappingOfThresholds) {
  const std::string base = "model: {path: /m}\nnodes:\n  - {name: a, agent: 'h:1'}\n";
  auto off = ParseClusterSpec(base, "c.yaml");
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_FALSE(off->fabric_check.enabled);
  auto on = ParseClusterSpec(base + "fabric_check: true\n", "c.yaml");
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_TRUE(on->fabric_check.enabled);
  EXPECT_FALSE(on->fabric_check.min_busbw_gbps.has_value());
  EXPECT_EQ(on->fabric_check.timeout, std::chrono::seconds(60));
  auto limits = ParseClusterSpec(base + "fabric_check: {min_busbw_gbps: 12.5, max_latency_us: 80, timeout: 20s}\n", "c.yaml");
  ASSERT_TRUE(limits.ok()) << limits.status();
  EXPECT_TRUE(limits->fabric_check.enabled);
  EXPECT_EQ(*limits->fabric_check.min_busbw_gbps, 12.5);
  EXPECT_EQ(*limits->fabric_check.max_latency_us, 80);
  EXPECT_EQ(limits->fabric_check.timeout, std::chrono::seconds(20));
  ExpectKeyError("fabric_check: sometimes\n", "cluster.yaml:4: fabric_check: expected true, false or a mapping");
  ExpectKeyError("fabric_check:\n  min_busbw_gbps: 0\n", "cluster.yaml:5: fabric_check.min_busbw_gbps: expected a number > 0");
  ExpectKeyError("fabric_check:\n  max_latncy_us: 5\n",
                 "cluster.yaml:5: fabric_check.max_latncy_us: unknown key (did you mean \"max_latency_us\"?)");
  ExpectKeyError("fabric_check: [1]\n", "cluster.yaml:4: fabric_check: expected a value or a mapping");
}

TEST(OrchestrationKeys, PromptIds) {
  auto spec = ParseClusterSpec("model: {path: /m}\nprobe:\n  prompt_ids: [1, 22, 333]\nnodes:\n  - {name: a, agent: 'h:1'}\n", "c.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->probe.prompt_ids, (std::vector<int32_t>{1, 22, 333}));
}

TEST(OrchestrationKeys, ParseDuration) {
  std::chrono::milliseconds d{0};
  EXPECT_TRUE(ParseDuration("250ms", &d));
  EXPECT_EQ(d.count(), 250);
  EXPECT_TRUE(ParseDuration("1.5s", &d));
  EXPECT_EQ(d.count(), 1500);
  EXPECT_TRUE(ParseDuration("2", &d));
  EXPECT_EQ(d.count(), 2000);
  EXPECT_TRUE(ParseDuration("10m", &d));
  EXPECT_EQ(d.count(), 600000);
  EXPECT_FALSE(ParseDuration("", &d));
  EXPECT_FALSE(ParseDuration("s", &d));
  EXPECT_FALSE(ParseDuration("5 s", &d));
  EXPECT_FALSE(ParseDuration("3d", &d));
  EXPECT_FALSE(ParseDuration("-1s", &d));
}

}  // namespace
}  // namespace tandem::controller
