#include "controller/control_client.h"

#include <grpcpp/grpcpp.h>

#include <fstream>
#include <optional>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "controller/rpc_error.h"
#include "rpc/grpc_status.h"

namespace tandem::controller {

namespace {

// The agent's ControlError details of `st`: nullopt when there are none (the status did not come
// from the agent's handler: transport, auth) or they say nothing.
std::optional<v1::ControlError> AgentDetails(const grpc::Status& st) {
  v1::ControlError details;
  if (st.error_details().empty() || !details.ParseFromString(st.error_details()) ||
      details.outcome() == v1::ControlError::OUTCOME_UNSPECIFIED) {
    return std::nullopt;
  }
  return details;
}

}  // namespace

absl::Status ControlOpError(const grpc::Status& st, const char* what, std::chrono::milliseconds timeout) {
  const std::optional<v1::ControlError> details = AgentDetails(st);
  if (!details) return AgentRpcError(st, what, timeout);
  const absl::StatusCode code = rpc::FromGrpcStatus(st).code();
  if (details->outcome() == v1::ControlError::FAILED) return absl::Status(code, st.error_message());
  return absl::Status(code, absl::StrCat(what, ": ", st.error_message()));
}

absl::Status ControlAnswerError(const grpc::Status& st, const char* what, std::chrono::milliseconds timeout) {
  if (!AgentDetails(st)) return AgentRpcError(st, what, timeout);
  const absl::StatusCode code = rpc::FromGrpcStatus(st).code();
  return absl::Status(code, absl::StrCat(what, ": the agent answered ", absl::StatusCodeToString(code), ": ",
                                         st.error_message()));
}

ControlClient::ControlClient(const std::string& address, const AgentCredentials& credentials)
    : address_(address),
      token_(credentials.token),
      stub_(v1::AgentControl::NewStub(grpc::CreateChannel(address, credentials.Channel()))) {}

void ControlClient::Prepare(grpc::ClientContext* ctx, std::chrono::milliseconds timeout) const {
  ctx->set_deadline(std::chrono::system_clock::now() + timeout);
  if (!token_.empty()) ctx->AddMetadata("authorization", "Bearer " + token_);
}

absl::StatusOr<v1::LoadModelEvent> ControlClient::LoadModel(
    const v1::LoadModelRequest& req, std::chrono::milliseconds timeout,
    const std::function<void(const v1::LoadModelEvent&)>& on_event) {
  grpc::ClientContext ctx;
  Prepare(&ctx, timeout);
  std::unique_ptr<grpc::ClientReader<v1::LoadModelEvent>> reader = stub_->LoadModel(&ctx, req);
  v1::LoadModelEvent ev;
  std::optional<v1::LoadModelEvent> last;
  while (reader->Read(&ev)) {
    if (on_event) on_event(ev);
    if (ev.done()) last = ev;
  }
  grpc::Status st = reader->Finish();
  if (!st.ok()) return ControlOpError(st, "LoadModel", timeout);
  if (!last) return absl::InternalError("LoadModel: the stream ended without a final event");
  return *last;
}

absl::StatusOr<v1::JoinGroupResponse> ControlClient::JoinGroup(const v1::JoinGroupRequest& req,
                                                                std::chrono::milliseconds timeout) {
  grpc::ClientContext ctx;
  Prepare(&ctx, timeout);
  v1::JoinGroupResponse resp;
  grpc::Status st = stub_->JoinGroup(&ctx, req, &resp);
  if (!st.ok()) return ControlOpError(st, "JoinGroup", timeout);
  return resp;
}

absl::Status ControlClient::LeaveGroup(bool unload, const std::string& reason, std::chrono::milliseconds timeout) {
  grpc::ClientContext ctx;
  Prepare(&ctx, timeout);
  v1::LeaveGroupRequest req;
  req.set_unload(unload);
  req.set_reason(reason);
  v1::LeaveGroupResponse resp;
  grpc::Status st = stub_->LeaveGroup(&ctx, req, &resp);
  if (!st.ok()) return ControlAnswerError(st, "LeaveGroup", timeout);
  return absl::OkStatus();
}

absl::Status ControlClient::SetServing(bool serving, std::chrono::milliseconds timeout) {
  grpc::ClientContext ctx;
  Prepare(&ctx, timeout);
  v1::SetServingRequest req;
  req.set_serving(serving);
  v1::SetServingResponse resp;
  grpc::Status st = stub_->SetServing(&ctx, req, &resp);
  if (!st.ok()) return ControlAnswerError(st, "SetServing", timeout);
  return absl::OkStatus();
}

absl::StatusOr<v1::GenerateResponse> ControlClient::Generate(const v1::GenerateRequest& req,
                                                              std::chrono::milliseconds timeout) {
  grpc::ClientContext ctx;
  Prepare(&ctx, timeout);
  v1::GenerateResponse resp;
  grpc::Status st = stub_->Generate(&ctx, req, &resp);
  if (!st.ok()) return ControlAnswerError(st, "Generate", timeout);
  return resp;
}

absl::StatusOr<v1::RankStatus> ControlClient::GetStatus(std::chrono::milliseconds timeout) {
  grpc::ClientContext ctx;
  Prepare(&ctx, timeout);
  v1::GetStatusRequest req;
  v1::RankStatus resp;
  grpc::Status st = stub_->GetStatus(&ctx, req, &resp);
  if (!st.ok()) return AgentRpcError(st, "GetStatus", timeout);
  return resp;
}

absl::StatusOr<v1::CheckFabricResponse> ControlClient::CheckFabric(const v1::CheckFabricRequest& req,
                                                                    std::chrono::milliseconds timeout) {
  grpc::ClientContext ctx;
  Prepare(&ctx, timeout);
  v1::CheckFabricResponse resp;
  grpc::Status st = stub_->CheckFabric(&ctx, req, &resp);
  if (!st.ok()) return ControlAnswerError(st, "CheckFabric", timeout);
  return resp;
}

}  // namespace tandem::controller
