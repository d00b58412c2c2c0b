#include "agentd/control_service.h"

#include <algorithm>

#include "common/log.h"
#include "common/status.h"
#include "rpc/grpc_status.h"

namespace tandem::agentd {

using rpc::ToGrpcStatus;

namespace {

v1::ControlError::Outcome OutcomeOf(const absl::Status& st) {
  if (IsRankFailure(st)) return v1::ControlError::FAILED;
  if (IsProbeFailure(st)) return v1::ControlError::PROBE_FAILED;
  if (IsFabricCheckFailure(st)) return v1::ControlError::CHECK_FAILED;
  return v1::ControlError::REFUSED;
}

// The error of an operation on the rank (LoadModel, JoinGroup, LeaveGroup, SetServing, Generate):
// the code and message, and as the error details a ControlError saying that the agent answered
// and whether it refused the request or ran it and failed (the controller never reads this
// UNAVAILABLE or DEADLINE_EXCEEDED as a transport error, and words a refusal and a failure
// differently).
grpc::Status ControlOpStatus(const absl::Status& st) {
  if (st.ok()) return grpc::Status::OK;
  v1::ControlError details;
  details.set_code(static_cast<int32_t>(st.code()));
  details.set_message(std::string(st.message()));
  details.set_outcome(OutcomeOf(st));
  const grpc::Status plain = ToGrpcStatus(st);
  return grpc::Status(plain.error_code(), plain.error_message(), details.SerializeAsString());
}

}  // namespace

ControlService::ControlService(EngineHost* host, RendezvousStore* store, const TokenAuth* auth, FabricCheck* fabric)
    : host_(host), store_(store), auth_(auth), fabric_(fabric) {}

#define TANDEM_CHECK_AUTH(method)                                  \
  do {                                                             \
    grpc::Status _auth = auth_->Check(*context, "AgentControl." method); \
    if (!_auth.ok()) return _auth;                                 \
  } while (0)

grpc::Status ControlService::LoadModel(grpc::ServerContext* context, const v1::LoadModelRequest* request,
                                       grpc::ServerWriter<v1::LoadModelEvent>* writer) {
  TANDEM_CHECK_AUTH("LoadModel");
  bool broken = false;
  absl::Status st = host_->LoadModel(*request, [&](const v1::LoadModelEvent& ev) {
    // A client that went away stops the events, not the load (the controller sees the state).
    if (!broken && !context->IsCancelled() && !writer->Write(ev)) broken = true;
  });
  return ControlOpStatus(st);
}

grpc::Status ControlService::JoinGroup(grpc::ServerContext* context, const v1::JoinGroupRequest* request,
                                       v1::JoinGroupResponse* response) {
  TANDEM_CHECK_AUTH("JoinGroup");
  auto r = host_->JoinGroup(*request);
  if (!r.ok()) return ControlOpStatus(r.status());
  *response = std::move(*r);
  return grpc::Status::OK;
}

grpc::Status ControlService::LeaveGroup(grpc::ServerContext* context, const v1::LeaveGroupRequest* request,
                                        v1::LeaveGroupResponse* response) {
  TANDEM_CHECK_AUTH("LeaveGroup");
  return ControlOpStatus(host_->LeaveGroup(request->unload(), request->reason()));
}

grpc::Status ControlService::SetServing(grpc::ServerContext* context, const v1::SetServingRequest* request,
                                        v1::SetServingResponse* response) {
  TANDEM_CHECK_AUTH("SetServing");
  return ControlOpStatus(host_->SetServing(request->serving()));
}

grpc::Status ControlService::Generate(grpc::ServerContext* context, const v1::GenerateRequest* request,
                                      v1::GenerateResponse* response) {
  TANDEM_CHECK_AUTH("Generate");
  auto r = host_->Generate(*request, [context] { return context->IsCancelled(); });
  if (!r.ok()) return ControlOpStatus(r.status());
  *response = std::move(*r);
  return grpc::Status::OK;
}

grpc::Status ControlService::Watch(grpc::ServerContext* context, const v1::WatchRequest* request,
                                   grpc::ServerWriter<v1::RankStatus>* writer) {
  TANDEM_CHECK_AUTH("Watch");
  const auto interval = std::chrono::milliseconds(std::max<uint32_t>(50, request->interval_ms() ? request->interval_ms() : 1000));
  uint64_t version = 0;
  for (;;) {
    // Read the version before the status so that a change in between is sent again, not lost.
    version = host_->WaitForChange(version, std::chrono::milliseconds(0));
    if (!writer->Write(host_->Status())) return grpc::Status::OK;  // the client went away
    // Wake at least every 200 ms to notice a cancelled client or a shutdown.
    const auto until = std::chrono::steady_clock::now() + interval;
    for (;;) {
      if (context->IsCancelled() || host_->shutting_down()) return grpc::Status::OK;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      const uint64_t now = host_->WaitForChange(version, std::min(left, std::chrono::milliseconds(200)));
      if (now != version) break;
    }
  }
}

grpc::Status ControlService::GetStatus(grpc::ServerContext* context, const v1::GetStatusRequest* request,
                                       v1::RankStatus* response) {
  TANDEM_CHECK_AUTH("GetStatus");
  *response = host_->Status();
  return grpc::Status::OK;
}

grpc::Status ControlService::StoreSet(grpc::ServerContext* context, const v1::StoreSetRequest* request,
                                      v1::StoreSetResponse* response) {
  TANDEM_CHECK_AUTH("StoreSet");
  if (request->key().empty()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "empty key");
  return ToGrpcStatus(store_->Set(request->key(), request->value()));
}

grpc::Status ControlService::StoreGet(grpc::ServerContext* context, const v1::StoreGetRequest* request,
                                      v1::StoreGetResponse* response) {
  TANDEM_CHECK_AUTH("StoreGet");
  // A gRPC thread is held while waiting: cap the wait (clients loop in slices anyway).
  const auto timeout = std::chrono::milliseconds(std::min<uint32_t>(request->timeout_ms(), 10000));
  auto v = store_->Get(request->key(), timeout);
  // A key that did not appear within the wait is NOT_FOUND ("not there yet"), so that the caller
  // (GrpcStore) tells it from its own call's DEADLINE_EXCEEDED (no answer) by the code alone.
  if (absl::IsDeadlineExceeded(v.status())) return ToGrpcStatus(absl::NotFoundError(v.status().message()));
  if (!v.ok()) return ToGrpcStatus(v.status());
  response->set_value(std::move(*v));
  return grpc::Status::OK;
}

grpc::Status ControlService::CheckFabric(grpc::ServerContext* context, const v1::CheckFabricRequest* request,
                                         v1::CheckFabricResponse* response) {
  TANDEM_CHECK_AUTH("CheckFabric");
  if (fabric_ == nullptr) return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "this agent runs no fabric checks");
  auto r = fabric_->Run(*request);
  if (!r.ok()) return ControlOpStatus(r.status());
  *response = std::move(*r);
  return grpc::Status::OK;
}

}  // namespace tandem::agentd
