#include "agentd/grpc_store.h"

#include <thread>

#include <grpcpp/grpcpp.h>

#include "agentd/auth.h"
#include "rpc/grpc_status.h"

namespace tandem::agentd {
namespace {

using Clock = std::chrono::steady_clock;
using rpc::FromGrpcStatus;

// The head's answer to a StoreGet whose key did not appear within the wait it was given
// (ControlService::StoreGet): the key is not there yet, which is not an error of the call.
bool NotThereYet(const grpc::Status& st) { return st.error_code() == grpc::StatusCode::NOT_FOUND; }

// Worth another try: the store's agent was unreachable or did not answer in time.
bool Retryable(const grpc::Status& st) {
  return st.error_code() == grpc::StatusCode::UNAVAILABLE || st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}

}  // namespace

GrpcStore::GrpcStore(std::string endpoint, std::string token, std::shared_ptr<grpc::ChannelCredentials> credentials,
                     std::chrono::milliseconds slice)
    : endpoint_(std::move(endpoint)), token_(std::move(token)), slice_(slice) {
  grpc::ChannelArguments args;
  // Reconnect quickly: a head agent that restarts should be found again within a poll or two.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  if (!credentials) credentials = grpc::InsecureChannelCredentials();
  stub_ = v1::AgentControl::NewStub(grpc::CreateCustomChannel(endpoint_, credentials, args));
}

void GrpcStore::Prepare(grpc::ClientContext* ctx, std::chrono::milliseconds rpc_deadline) const {
  TokenAuth::AddTo(ctx, token_);
  ctx->set_deadline(std::chrono::system_clock::now() + rpc_deadline);
}

grpc::Status GrpcStore::SetRpc(const std::string& key, const std::string& value,
                              std::chrono::milliseconds rpc_deadline) {
  grpc::ClientContext ctx;
  Prepare(&ctx, rpc_deadline);
  v1::StoreSetRequest req;
  req.set_key(key);
  req.set_value(value);
  v1::StoreSetResponse resp;
  return stub_->StoreSet(&ctx, req, &resp);
}

absl::Status GrpcStore::Set(const std::string& key, const std::string& value) {
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  for (;;) {
    const grpc::Status st = SetRpc(key, value, std::chrono::seconds(2));
    if (st.ok()) return absl::OkStatus();
    if (!Retryable(st) || Clock::now() >= deadline) return FromGrpcStatus(st, "setting '" + key + "' in " + Describe());
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

absl::Status GrpcStore::SetOnce(const std::string& key, const std::string& value,
                                std::chrono::milliseconds rpc_deadline) {
  return FromGrpcStatus(SetRpc(key, value, rpc_deadline), "setting '" + key + "' in " + Describe());
}

absl::StatusOr<std::string> GrpcStore::Get(const std::string& key, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  absl::Status last;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    const auto wait = std::max(std::chrono::milliseconds(0), std::min(left, slice_));
    grpc::ClientContext ctx;
    Prepare(&ctx, wait + std::chrono::seconds(2));  // the server waits `wait`, plus a round trip
    v1::StoreGetRequest req;
    req.set_key(key);
    req.set_timeout_ms(static_cast<uint32_t>(wait.count()));
    v1::StoreGetResponse resp;
    const grpc::Status st = stub_->StoreGet(&ctx, req, &resp);
    if (st.ok()) return resp.value();
    // Not there yet (a slice passed) or no answer in time: ask again until our own deadline.
    if (!NotThereYet(st) && !Retryable(st)) return FromGrpcStatus(st, "reading '" + key + "' from " + Describe());
    if (st.error_code() == grpc::StatusCode::UNAVAILABLE) {
      last = FromGrpcStatus(st, Describe() + " unreachable");
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (Clock::now() >= deadline) {
      std::string msg = "rendezvous key '" + key + "' did not appear in " + Describe() + " within " +
                        std::to_string(timeout.count()) + " ms";
      if (!last.ok()) msg += " (last error: " + std::string(last.message()) + ")";
      return absl::DeadlineExceededError(msg);
    }
  }
}

absl::StatusOr<std::optional<std::string>> GrpcStore::Probe(const std::string& key,
                                                            std::chrono::milliseconds rpc_deadline) {
  grpc::ClientContext ctx;
  Prepare(&ctx, rpc_deadline);
  v1::StoreGetRequest req;
  req.set_key(key);
  req.set_timeout_ms(0);
  v1::StoreGetResponse resp;
  const grpc::Status st = stub_->StoreGet(&ctx, req, &resp);
  if (st.ok()) return std::optional<std::string>(resp.value());
  // A missing key is the head's NOT_FOUND; a DEADLINE_EXCEEDED is this call's own deadline (no
  // answer at all) and counts as unreachable.
  if (NotThereYet(st)) return std::optional<std::string>();
  return FromGrpcStatus(st, Describe());
}

}  // namespace tandem::agentd
