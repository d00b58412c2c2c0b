// The Agent gRPC service (proto/tandem/v1/agent.proto) on the synchronous API: handlers run on
// gRPC's thread pool. GetFacts reads every fact fresh; HashWeights streams progress events
// (at most one per ~200 ms) and then the manifest, and stops when the client cancels.
#pragma once

#include <string>

#include "agentd/auth.h"
#include "agentd/metrics.h"
#include "agentd/model_roots.h"
#include "agentd/node_facts.h"
#include "agentd/weights_manifest.h"
#include "tandem/v1/agent.grpc.pb.h"

namespace tandem::agentd {

struct AgentConfig {
  std::string node_name;
  FactsRoots roots;
  std::string state_dir;  // hash cache lives here; "" = no cache
  const TokenAuth* auth = nullptr;  // cluster token check; null = none (not owned)
  ModelRoots model_roots;           // model paths are confined to these (none: all refused)
  v1::SecurityFact security;        // reported in every GetFacts
};

class AgentService final : public v1::Agent::Service {
 public:
  // `metrics` may be null (no metrics endpoint); it must outlive the service otherwise.
  AgentService(AgentConfig config, AgentMetrics* metrics);

  grpc::Status GetFacts(grpc::ServerContext* context, const v1::GetFactsRequest* request,
                        v1::NodeFacts* response) override;

  // A model folder that does not exist is not an RPC failure: the stream ends with a manifest
  // whose `error` says so (like every other fact). A path outside the model roots (symlinks
  // inside the folder included) is PERMISSION_DENIED before anything is read. Cancelled by the
  // client: CANCELLED.
  grpc::Status HashWeights(grpc::ServerContext* context, const v1::HashWeightsRequest* request,
                           grpc::ServerWriter<v1::HashWeightsEvent>* writer) override;

 private:
  AgentConfig config_;
  AgentMetrics* metrics_;
  WeightsHasher hasher_;
};

}  // namespace tandem::agentd
