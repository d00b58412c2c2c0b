// cluster.yaml: the operator's description of a cluster (nodes, agents, model, NCCL settings).
// Parsing is strict: unknown keys are errors (a typo silently ignored is an outage later), and
// every error names the file, line and key: `cluster.yaml:7: nodes[1].agent: expected ...`.
// The schema is documented in docs/cluster-yaml.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem::controller {

// NCCL settings; top-level `nccl:` gives defaults, `nodes[].nccl:` overrides them key by key.
struct NcclSpec {
  std::optional<std::vector<std::string>> hca;  // RDMA devices; absent: every HCA with an ACTIVE Ethernet port
  std::string socket_ifname;                    // "" = choose automatically
  std::optional<int> gid_index;                 // absent = choose the RoCE v2 IPv4 entry
};

struct NodeSpec {
  std::string name;
  std::string agent;       // "host:port" of tandem-agentd
  std::string model_path;  // effective: nodes[].model_path, else model.path
  NcclSpec nccl;           // effective, after merging the top-level defaults
  // nodes[].linktest.interfaces: the interfaces `tandemctl linktest` tests from this node
  // (empty: every interface whose subnet holds an address of the other node).
  std::vector<std::string> linktest_interfaces;
  int line = 0;            // 1-based line of this node's entry, for messages
};

// `probe:` — the inference probe run through the head (see docs/orchestration.md).
struct ProbeSpec {
  std::string prompt = "The capital of France is";  // text prompt (no chat template)
  std::vector<int32_t> prompt_ids;                  // probe.prompt_ids: token ids instead of text (no tokenizer needed)
  std::string expect;                               // substring the answer must contain; "" = golden token ids
  int max_tokens = 8;
  std::chrono::milliseconds interval{30000};  // how often `serve` probes a serving group
  std::chrono::milliseconds timeout{30000};   // deadline of one probe
};

// `serve:` — the long-running controller.
struct ServeSpec {
  int restart_budget = 3;                          // restarts allowed per window ...
  std::chrono::milliseconds restart_window{600000};  // ... "3 per 10m"
  std::string metrics_listen;                      // "" = no /metrics unless --metrics-listen
  std::chrono::milliseconds stuck_after{60000};    // queue > 0 and iterations flat this long = stuck
};

// `timeouts:` — the deadline of each phase of `up` (and of single RPCs).
struct TimeoutSpec {
  std::chrono::milliseconds preflight{60000};
  std::chrono::milliseconds load{1800000};
  std::chrono::milliseconds join{120000};
  std::chrono::milliseconds probe{60000};
  std::chrono::milliseconds leave{15000};
  std::chrono::milliseconds status{2000};
};

// `fabric_check:` — the group's own collectives before `up` loads weights (docs/linktest.md
// "Collectives"): `true`, or a mapping with optional thresholds (the mapping turns it on).
struct FabricCheckSpec {
  bool enabled = false;
  std::optional<double> min_busbw_gbps;  // large all-reduce bus bandwidth, GB/s, every rank
  std::optional<double> max_latency_us;  // 4 KiB all-reduce median latency, us, every rank
  std::chrono::milliseconds timeout{60000};  // every rank present and the comm formed
};

struct ClusterSpec {
  std::string file;  // as given; used in messages
  std::string name;  // `cluster`
  std::string model_path;
  std::string model_served_name;    // model.served_name: the name in /v1/models ("" = folder name)
  int tensor_parallel = 0;          // parallel.tensor; default = number of nodes
  // engine.memory_fraction, in (0, 1]. Unset: 0.70 (cpu: of MemTotal) or 0.90 (cuda: of each
  // GPU's memory, weights included); memory_fraction_set says whether the file gave it.
  double memory_fraction = 0.70;
  bool memory_fraction_set = false;
  std::string engine_backend;       // engine.backend: cpu|cuda ("" = cpu)
  int64_t engine_kv_tokens = 0;     // engine.kv_tokens: 0 = sized from memory_fraction
  std::string engine_kv_cache_dtype;  // engine.kv_cache_dtype: auto|f32|bf16|fp8 ("" = auto)
  int engine_max_num_seqs = 16;     // engine.max_num_seqs
  int engine_max_model_len = 0;     // engine.max_model_len: 0 = the model's own limit
  std::string api_listen;           // api.listen: HOST:PORT of the OpenAI API on the head (nodes[0])
  std::string api_key_file;         // api.key_file: clients must send this key ("" = open)
  int64_t api_max_body_bytes = 0;   // api.max_body_bytes: larger request bodies get 413 (0 = 4 MiB)
  std::string auth_token_file;      // auth.token_file: cluster token for every agent RPC
  // tls: the controller's client certificate, its key and the cluster CA (mutual TLS to every
  // agent). All three or none.
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  // preflight.verify: "cache" (the agents may answer from their digest cache, keyed on device,
  // inode, size, mtime and ctime) or "full" (every byte is read again on every preflight/up).
  bool preflight_verify_full = false;
  ProbeSpec probe;
  FabricCheckSpec fabric_check;
  ServeSpec serve;
  TimeoutSpec timeouts;
  std::vector<NodeSpec> nodes;
};

// Parses cluster.yaml text. `file` is only used in messages. Errors are kInvalidArgument with
// "<file>:<line>: <key>: <what>".
absl::StatusOr<ClusterSpec> ParseClusterSpec(const std::string& yaml_text, const std::string& file);

// Reads and parses a file. A file that cannot be read is kNotFound / kPermissionDenied.
absl::StatusOr<ClusterSpec> LoadClusterSpec(const std::string& path);

// Splits "host:port" ("[v6]:port" too). Returns false when malformed or the port is not 1..65535.
bool SplitHostPort(const std::string& address, std::string* host, int* port);

// Parses a duration: "500ms", "30s", "10m", "1h", or a bare number of seconds. False when malformed
// or not positive.
bool ParseDuration(const std::string& text, std::chrono::milliseconds* out);

// Every key the parser knows, dotted ("nodes[].nccl.hca"), for docs and tests.
const std::vector<std::string>& KnownClusterKeys();

}  // namespace tandem::controller
