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
  ModelRoots model_roots{};         // model paths are confined to these (none: all refused)
  v1::SecurityFact security{};      // reported in every GetFacts
};

class AgentService final : public v1::Agent::Service {
 public:
  // `metrics` may be null (no metrics endpoint); it must outlive the service otherwise.
  AgentService(AgentConfig config, AgentMetrics* metrics);

  grpc::Status GetFacts(grpc::ServerContext* context, const v1::GetFactsRequest* request,
                        v1::NodeFacts* response) override;

  // A request that fails as a whole ends with its gRPC status and no manifest, before anything
  // is read: PERMISSION_DENIED for a path outside the model roots (symlinks inside the folder
  // included), NOT_FOUND for a folder that does not exist, INVALID_ARGUMENT for an empty or
  // relative path; cancelled by the client: CANCELLED. What failed for one entry stays in the
  // manifest (FileDigest.error, and WeightsManifest.error for sub-folders that could not be listed).
  grpc::Status HashWeights(grpc::ServerContext* context, const v1::HashWeightsRequest* request,
                           grpc::ServerWriter<v1::HashWeightsEvent>* writer) override;

  // The two ends of a link test (agentd/link_transfer.h): a bad request is INVALID_ARGUMENT
  // before anything listens or connects; the client's cancel stops either end at once.
  grpc::Status LinkReceive(grpc::ServerContext* context, const v1::LinkReceiveRequest* request,
                           grpc::ServerWriter<v1::LinkReceiveEvent>* writer) override;
  grpc::Status LinkSend(grpc::ServerContext* context, const v1::LinkSendRequest* request,
                        v1::LinkSendResponse* response) override;

 private:
  // The token check of `method`; OK when the agent runs without a token.
  grpc::Status Authorize(const grpc::ServerContext& context, const char* method) const;

  AgentConfig config_;
  AgentMetrics* metrics_;
  WeightsHasher hasher_;
};

}  // namespace tandem::agentd
