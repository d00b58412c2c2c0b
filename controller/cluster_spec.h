// cluster.yaml: the operator's description of a cluster (nodes, agents, model, NCCL settings).
// Parsing is strict: unknown keys are errors (a typo silently ignored is an outage later), and
// every error names the file, line and key: `cluster.yaml:7: nodes[1].agent: expected ...`.
// The schema is documented in docs/cluster-yaml.md.
#pragma once

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
  int line = 0;            // 1-based line of this node's entry, for messages
};

struct ClusterSpec {
  std::string file;  // as given; used in messages
  std::string name;  // `cluster`
  std::string model_path;
  std::string model_served_name;    // reserved (serving issue)
  int tensor_parallel = 0;          // parallel.tensor; default = number of nodes
  double memory_fraction = 0.70;    // engine.memory_fraction, in (0, 1]
  std::string engine_backend;       // reserved: engine.backend (cpu|cuda)
  std::string api_listen;           // reserved: api.listen
  std::string auth_token_file;      // reserved: auth.token_file
  std::vector<NodeSpec> nodes;
};

// Parses cluster.yaml text. `file` is only used in messages. Errors are kInvalidArgument with
// "<file>:<line>: <key>: <what>".
absl::StatusOr<ClusterSpec> ParseClusterSpec(const std::string& yaml_text, const std::string& file);

// Reads and parses a file. A file that cannot be read is kNotFound / kPermissionDenied.
absl::StatusOr<ClusterSpec> LoadClusterSpec(const std::string& path);

// Splits "host:port" ("[v6]:port" too). Returns false when malformed or the port is not 1..65535.
bool SplitHostPort(const std::string& address, std::string* host, int* port);

// Every key the parser knows, dotted ("nodes[].nccl.hca"), for docs and tests.
const std::vector<std::string>& KnownClusterKeys();

}  // namespace tandem::controller
