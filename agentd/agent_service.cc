#include "agentd/agent_service.h"

#include "agentd/link_rdma.h"
#include "agentd/link_transfer.h"
#include "common/log.h"
#include "common/status.h"
#include "rpc/grpc_status.h"

namespace tandem::agentd {

AgentService::AgentService(AgentConfig config, AgentMetrics* metrics)
    : config_(std::move(config)), metrics_(metrics), hasher_(config_.state_dir) {}

grpc::Status AgentService::Authorize(const grpc::ServerContext& context, const char* method) const {
  return config_.auth != nullptr ? config_.auth->Check(context, method) : grpc::Status::OK;
}

grpc::Status AgentService::GetFacts(grpc::ServerContext* context, const v1::GetFactsRequest* request,
                                    v1::NodeFacts* response) {
  if (grpc::Status st = Authorize(*context, "Agent.GetFacts"); !st.ok()) return st;
  // The model folder fact only for a path inside the roots; otherwise the fact says why not
  // (the other facts stay useful for preflight).
  absl::StatusOr<std::string> model = request->model_path().empty() ? absl::StatusOr<std::string>("")
                                                                    : config_.model_roots.Resolve(request->model_path());
  *response = CollectNodeFacts(config_.roots, config_.node_name, model.ok() ? *model : "");
  if (!model.ok()) {
    v1::ModelFolderFact* f = response->mutable_model();
    f->set_path(request->model_path());
    f->set_error(std::string(absl::StatusCodeToString(model.status().code())) + ": " + StatusText(model.status()));
  } else if (!model->empty()) {
    response->mutable_model()->set_path(request->model_path());
  }
  *response->mutable_security() = config_.security;
  return grpc::Status::OK;
}

grpc::Status AgentService::HashWeights(grpc::ServerContext* context, const v1::HashWeightsRequest* request,
                                       grpc::ServerWriter<v1::HashWeightsEvent>* writer) {
  if (grpc::Status st = Authorize(*context, "Agent.HashWeights"); !st.ok()) return st;
  if (request->model_path().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "model_path is empty");
  }
  const absl::StatusOr<std::string> folder = config_.model_roots.ResolveTree(request->model_path());
  if (!folder.ok()) {
    TLOG(WARN) << "refused to hash for " << context->peer() << ": " << StatusText(folder.status());
    return rpc::ToGrpcStatus(folder.status());
  }
  TLOG(INFO) << "hashing " << request->model_path() << " (threads " << request->threads()
             << (request->ignore_cache() ? ", cache ignored" : "") << ")";
  bool stream_broken = false;
  HashOptions opts;
  opts.threads = request->threads();
  opts.use_cache = !request->ignore_cache();
  opts.cancelled = [&] { return stream_broken || context->IsCancelled(); };
  opts.on_progress = [&](const v1::HashProgress& p) {
    if (metrics_) metrics_->SetHashProgress(p.files_done(), p.bytes_done(), p.bytes_total());
    v1::HashWeightsEvent ev;
    *ev.mutable_progress() = p;
    if (!stream_broken && !writer->Write(ev)) stream_broken = true;
  };
  auto manifest = hasher_.Hash(request->model_path(), opts);
  if (!manifest.ok()) {
    if (manifest.status().code() == absl::StatusCode::kCancelled) {
      TLOG(INFO) << "hashing " << request->model_path() << " cancelled by the client";
      return grpc::Status(grpc::StatusCode::CANCELLED, "hashing cancelled");
    }
    // The request failed as a whole (the folder went away since it was resolved, ...): the
    // stream ends with that status, no manifest.
    TLOG(WARN) << "hashing " << request->model_path() << " failed: " << StatusText(manifest.status());
    return rpc::ToGrpcStatus(manifest.status());
  }
  if (metrics_) metrics_->RecordHashDone(*manifest);
  TLOG(INFO) << "hashed " << request->model_path() << ": " << manifest->files_size() << " files, "
             << manifest->total_bytes() << " bytes in " << manifest->seconds() << " s";
  v1::HashWeightsEvent ev;
  *ev.mutable_manifest() = std::move(*manifest);
  if (!writer->Write(ev)) return grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
  return grpc::Status::OK;
}

grpc::Status AgentService::LinkReceive(grpc::ServerContext* context, const v1::LinkReceiveRequest* request,
                                       grpc::ServerWriter<v1::LinkReceiveEvent>* writer) {
  if (grpc::Status st = Authorize(*context, "Agent.LinkReceive"); !st.ok()) return st;
  absl::StatusOr<std::unique_ptr<LinkReceiver>> receiver = LinkReceiver::Open(config_.roots, *request, ListLocalIpv4());
  if (!receiver.ok()) {
    TLOG(WARN) << "link test receive refused for " << context->peer() << ": " << StatusText(receiver.status());
    return rpc::ToGrpcStatus(receiver.status());
  }
  TLOG(INFO) << "link test: receiving on " << request->endpoints_size() << " interfaces for " << context->peer();
  v1::LinkReceiveEvent ev;
  *ev.mutable_listening() = (*receiver)->Listening();
  if (!writer->Write(ev)) return grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
  *ev.mutable_summary() = (*receiver)->Run([context] { return context->IsCancelled(); });
  receiver->reset();
  if (context->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "link test cancelled by the client");
  if (!writer->Write(ev)) return grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
  return grpc::Status::OK;
}

grpc::Status AgentService::LinkSend(grpc::ServerContext* context, const v1::LinkSendRequest* request,
                                    v1::LinkSendResponse* response) {
  if (grpc::Status st = Authorize(*context, "Agent.LinkSend"); !st.ok()) return st;
  TLOG(INFO) << "link test: sending on " << request->targets_size() << " interfaces for " << context->peer();
  absl::StatusOr<v1::LinkSendResponse> sent =
      RunLinkSend(config_.roots, *request, ListLocalIpv4(), [context] { return context->IsCancelled(); });
  if (!sent.ok()) {
    TLOG(WARN) << "link test send for " << context->peer() << ": " << StatusText(sent.status());
    return rpc::ToGrpcStatus(sent.status());
  }
  *response = std::move(*sent);
  response->set_rdma(DescribeRdma());
  return grpc::Status::OK;
}

}  // namespace tandem::agentd
