#include "controller/agent_client.h"

#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "controller/rpc_error.h"

namespace tandem::controller {
namespace {

// Serializes progress lines of concurrent hashing threads.
std::mutex& ProgressMutex() {
  static std::mutex mu;
  return mu;
}

}  // namespace

AgentClient::AgentClient(const std::string& address, const AgentCredentials& credentials)
    : address_(address),
      token_(credentials.token),
      stub_(v1::Agent::NewStub(grpc::CreateChannel(address, credentials.Channel()))) {}

void AgentClient::Prepare(grpc::ClientContext* ctx, std::chrono::milliseconds timeout) const {
  ctx->set_deadline(std::chrono::system_clock::now() + timeout);
  if (!token_.empty()) ctx->AddMetadata("authorization", "Bearer " + token_);
}

absl::StatusOr<v1::NodeFacts> AgentClient::GetFacts(const std::string& model_path, std::chrono::milliseconds timeout) {
  grpc::ClientContext ctx;
  Prepare(&ctx, timeout);
  v1::GetFactsRequest req;
  req.set_model_path(model_path);
  v1::NodeFacts facts;
  grpc::Status st = stub_->GetFacts(&ctx, req, &facts);
  if (!st.ok()) return AgentRpcError(st, "GetFacts", timeout);
  return facts;
}

absl::StatusOr<v1::WeightsManifest> AgentClient::HashWeights(
    const std::string& model_path, std::chrono::milliseconds timeout,
    const std::function<void(const v1::HashProgress&)>& on_progress, bool ignore_cache) {
  grpc::ClientContext ctx;
  Prepare(&ctx, timeout);
  v1::HashWeightsRequest req;
  req.set_model_path(model_path);
  req.set_ignore_cache(ignore_cache);
  std::unique_ptr<grpc::ClientReader<v1::HashWeightsEvent>> reader = stub_->HashWeights(&ctx, req);
  v1::HashWeightsEvent ev;
  std::optional<v1::WeightsManifest> manifest;
  while (reader->Read(&ev)) {
    if (ev.has_progress() && on_progress) on_progress(ev.progress());
    if (ev.has_manifest()) manifest = ev.manifest();
  }
  // A request that failed as a whole ends with its status, after the progress already read.
  grpc::Status st = reader->Finish();
  if (!st.ok()) return AgentRpcError(st, "HashWeights", timeout);
  if (!manifest) return absl::InternalError("HashWeights ended without a manifest");
  return *manifest;
}

std::vector<NodeObservation> ObserveNodes(const ClusterSpec& spec, const ObserveOptions& options) {
  std::vector<NodeObservation> out(spec.nodes.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < spec.nodes.size(); ++i) {
    threads.emplace_back([&, i] {
      const NodeSpec& node = spec.nodes[i];
      AgentClient client(node.agent, options.credentials);
      NodeObservation& obs = out[i];
      obs.facts = client.GetFacts(node.model_path, options.facts_timeout);
      if (!obs.facts.ok()) return;
      if (!options.hash_weights) {
        obs.manifest_skipped_reason = "skipped (--skip-weights)";
        return;
      }
      const v1::ModelFolderFact& model = obs.facts->model();
      if (!model.exists() || !model.has_config()) {
        obs.manifest_skipped_reason = "model folder missing or incomplete";
        return;
      }
      auto last = std::chrono::steady_clock::now() - std::chrono::seconds(10);
      bool printed_done = false;
      auto progress = [&](const v1::HashProgress& p) {
        if (!options.show_progress || printed_done) return;
        auto now = std::chrono::steady_clock::now();
        bool done = p.files_total() > 0 && p.files_done() == p.files_total();
        if (!done && now - last < std::chrono::milliseconds(500)) return;  // at most two lines a second
        last = now;
        printed_done = done;
        // GB as operators think of model sizes; MB for small folders so the numbers move.
        bool gb = p.bytes_total() >= 1000000000ull;
        double unit = gb ? 1e9 : 1e6;
        std::lock_guard<std::mutex> lock(ProgressMutex());
        std::fprintf(stderr, "hashing %s: %llu/%llu files %.1f/%.1f %s\n", node.name.c_str(),
                     static_cast<unsigned long long>(p.files_done()), static_cast<unsigned long long>(p.files_total()),
                     p.bytes_done() / unit, p.bytes_total() / unit, gb ? "GB" : "MB");
      };
      obs.manifest = client.HashWeights(node.model_path, options.hash_timeout, progress, options.rehash);
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

}  // namespace tandem::controller
