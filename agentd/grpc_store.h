// A rendezvous Store on another agent (the head's), through AgentControl.StoreSet / StoreGet.
// Gloo's rendezvous of the workers goes through it, so every rank only needs to reach the head
// agent's gRPC port to find its peers. Every RPC has a deadline: a long Get is a series of
// short StoreGet calls (so an unreachable head shows up as Unavailable, retried until the Get's
// own deadline, and a restarted head is picked up on the next call). The head answers NOT_FOUND
// for a key that did not appear within a call's wait; a DEADLINE_EXCEEDED of a call is the call's
// own deadline (the head did not answer).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include <grpcpp/security/credentials.h>

#include "engine/comm/store.h"
#include "tandem/v1/agent.grpc.pb.h"

namespace tandem::agentd {

class GrpcStore final : public engine::Store {
 public:
  // `endpoint` "host:port" of the agent that hosts the store; `token` "" = none; `credentials`
  // the channel's (rpc::ChannelCredentials: mutual TLS), null = plaintext.
  GrpcStore(std::string endpoint, std::string token, std::shared_ptr<grpc::ChannelCredentials> credentials = nullptr,
            std::chrono::milliseconds slice = std::chrono::milliseconds(1000));

  // Retries an unreachable store for up to 5 s.
  absl::Status Set(const std::string& key, const std::string& value) override;
  // One StoreSet within `rpc_deadline`, no retry (heartbeats: the next one is the retry).
  absl::Status SetOnce(const std::string& key, const std::string& value, std::chrono::milliseconds rpc_deadline);
  absl::StatusOr<std::string> Get(const std::string& key, std::chrono::milliseconds timeout) override;
  std::string Describe() const override { return "the store at " + endpoint_; }

  // One StoreGet that does not wait for the key: its value, nullopt when absent, or the RPC
  // error (Unavailable: the head agent cannot be reached) within `rpc_deadline`.
  absl::StatusOr<std::optional<std::string>> Probe(const std::string& key,
                                                   std::chrono::milliseconds rpc_deadline);

 private:
  // The token and a deadline `rpc_deadline` from now, on a call's context.
  void Prepare(grpc::ClientContext* ctx, std::chrono::milliseconds rpc_deadline) const;
  // One StoreSet RPC within `rpc_deadline`.
  grpc::Status SetRpc(const std::string& key, const std::string& value, std::chrono::milliseconds rpc_deadline);

  const std::string endpoint_;
  const std::string token_;
  const std::chrono::milliseconds slice_;
  std::unique_ptr<v1::AgentControl::Stub> stub_;
};

}  // namespace tandem::agentd
