// The AgentControl gRPC service (proto/tandem/v1/agent.proto): orchestration of the engine rank
// this agent hosts (EngineHost) and the rendezvous store (RendezvousStore). Every RPC checks the
// cluster token first. Handlers run on gRPC's synchronous thread pool; the blocking ones
// (JoinGroup in rendezvous, Generate, StoreGet, Watch) all have deadlines of their own.
#pragma once

#include "agentd/auth.h"
#include "agentd/engine_host.h"
#include "agentd/fabric_check.h"
#include "agentd/rendezvous_store.h"
#include "tandem/v1/agent.grpc.pb.h"

namespace tandem::agentd {

class ControlService final : public v1::AgentControl::Service {
 public:
  // Not owned; all must outlive the service. `fabric` null: CheckFabric is UNIMPLEMENTED.
  ControlService(EngineHost* host, RendezvousStore* store, const TokenAuth* auth, FabricCheck* fabric = nullptr);

  grpc::Status LoadModel(grpc::ServerContext* context, const v1::LoadModelRequest* request,
                         grpc::ServerWriter<v1::LoadModelEvent>* writer) override;
  grpc::Status JoinGroup(grpc::ServerContext* context, const v1::JoinGroupRequest* request,
                         v1::JoinGroupResponse* response) override;
  grpc::Status LeaveGroup(grpc::ServerContext* context, const v1::LeaveGroupRequest* request,
                          v1::LeaveGroupResponse* response) override;
  grpc::Status SetServing(grpc::ServerContext* context, const v1::SetServingRequest* request,
                          v1::SetServingResponse* response) override;
  grpc::Status Generate(grpc::ServerContext* context, const v1::GenerateRequest* request,
                        v1::GenerateResponse* response) override;
  grpc::Status Watch(grpc::ServerContext* context, const v1::WatchRequest* request,
                     grpc::ServerWriter<v1::RankStatus>* writer) override;
  grpc::Status GetStatus(grpc::ServerContext* context, const v1::GetStatusRequest* request,
                         v1::RankStatus* response) override;
  grpc::Status StoreSet(grpc::ServerContext* context, const v1::StoreSetRequest* request,
                        v1::StoreSetResponse* response) override;
  // Waits up to min(timeout_ms, 10 s); a key still missing: NOT_FOUND ("did not appear").
  grpc::Status StoreGet(grpc::ServerContext* context, const v1::StoreGetRequest* request,
                        v1::StoreGetResponse* response) override;
  // Blocks for the whole check (its own deadlines: agentd/fabric_check.h).
  grpc::Status CheckFabric(grpc::ServerContext* context, const v1::CheckFabricRequest* request,
                           v1::CheckFabricResponse* response) override;

 private:
  EngineHost* host_;
  RendezvousStore* store_;
  const TokenAuth* auth_;
  FabricCheck* fabric_;
};

}  // namespace tandem::agentd
