// gRPC client for tandem-agentd. Every call carries a deadline: nothing waits forever.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "controller/agent_credentials.h"
#include "controller/cluster_spec.h"
#include "controller/preflight.h"
#include "tandem/v1/agent.grpc.pb.h"

namespace tandem::controller {

class AgentClient {
 public:
  // `credentials`: the cluster token and TLS (default: none, plaintext).
  explicit AgentClient(const std::string& address, const AgentCredentials& credentials = {});

  const std::string& address() const { return address_; }

  // Node facts. Unreachable agents fail within `timeout` (connection refused: at once).
  absl::StatusOr<v1::NodeFacts> GetFacts(const std::string& model_path, std::chrono::milliseconds timeout);

  // The weights manifest; `on_progress` sees every progress event (called on this thread).
  // `ignore_cache`: the agent reads every byte (preflight --rehash, preflight.verify: full).
  // The agent's refusal or failure of the whole request keeps its code ("HashWeights: <why>":
  // NOT_FOUND, PERMISSION_DENIED, ...); per-file and per-folder errors are in the manifest.
  absl::StatusOr<v1::WeightsManifest> HashWeights(const std::string& model_path, std::chrono::milliseconds timeout,
                                                  const std::function<void(const v1::HashProgress&)>& on_progress,
                                                  bool ignore_cache = false);

  // For a caller that drives a call itself (linktest keeps LinkReceive's stream open around
  // LinkSend): the deadline and the token on `ctx`, and the stub.
  void Prepare(grpc::ClientContext* ctx, std::chrono::milliseconds timeout) const;
  v1::Agent::Stub& stub() { return *stub_; }

 private:
  std::string address_;
  std::string token_;
  std::unique_ptr<v1::Agent::Stub> stub_;
};

struct ObserveOptions {
  std::chrono::milliseconds facts_timeout{5000};
  std::chrono::milliseconds hash_timeout{30 * 60 * 1000};
  bool hash_weights = true;
  bool show_progress = true;  // "hashing spark1: 12/40 files 3.2/60.1 GB" lines on stderr
  bool rehash = false;       // ignore the agents' digest caches
  AgentCredentials credentials;  // cluster token and TLS
};

// Contacts every node's agent in parallel (one thread per node): facts, then the weights
// manifest when the model folder is there. Result i belongs to spec.nodes[i].
std::vector<NodeObservation> ObserveNodes(const ClusterSpec& spec, const ObserveOptions& options);

}  // namespace tandem::controller
