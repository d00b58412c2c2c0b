// EngineHost::StartHead: rank 0's serving stack (openai/serving_stack.h, as tandem-infer serve
// builds it) over the loaded model and the group's comm, timed into the API's metrics.
#include <filesystem>

#include "agentd/engine_group.h"
#include "common/status.h"
#include "proto/rank_state.h"

namespace tandem::agentd {
namespace {

// "host:port" -> (host, port). "[::1]:80" keeps the brackets off the host.
absl::Status SplitHostPort(const std::string& hp, std::string* host, int* port) {
  const size_t colon = hp.rfind(':');
  if (colon == std::string::npos || colon + 1 >= hp.size()) {
    return absl::InvalidArgumentError("api_listen '" + hp + "' is not HOST:PORT");
  }
  *host = hp.substr(0, colon);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') *host = host->substr(1, host->size() - 2);
  char* end = nullptr;
  const long p = std::strtol(hp.c_str() + colon + 1, &end, 10);
  if (*end != '\0' || p < 0 || p > 65535) return absl::InvalidArgumentError("api_listen '" + hp + "': bad port");
  *port = static_cast<int>(p);
  return absl::OkStatus();
}

}  // namespace

absl::Status EngineHost::StartHead(Group& g, const v1::JoinGroupRequest& req) {
  Loaded& ld = *g.loaded;
  const std::string name = ld.request.served_model_name().empty()
                               ? std::filesystem::path(ld.request.model_path()).lexically_normal().filename().string()
                               : ld.request.served_model_name();
  g.serve_metrics = std::make_unique<openai::ServeMetrics>(name);
  engine::Comm* model_comm = nullptr;
  if (g.comm) {
    g.timed = std::make_unique<engine::TimedComm>(
        g.comm.get(), [m = g.serve_metrics.get()](double s, size_t) { m->ObserveAllReduce(s); });
    ld.comm->Attach(g.timed.get(), g.comm.get());  // device collectives (cuda) go to the comm itself
    model_comm = ld.comm.get();
  }
  g.driver = std::make_unique<engine::StepDriver>(ld.model.get(), model_comm);
  openai::ServingStackOptions so;
  if (req.max_num_seqs() > 0) so.engine.max_num_seqs = static_cast<int32_t>(req.max_num_seqs());
  so.engine.max_model_len = static_cast<int32_t>(req.max_model_len());  // 0: the stack's default
  so.engine.kv_tokens = req.kv_tokens();
  so.engine.memory_fraction = ld.request.memory_fraction();  // 0: the backend's default; else checked in (0, 1]
  so.engine.backend = ld.request.backend();
  RETURN_IF_ERROR(
      SplitHostPort(req.api_listen().empty() ? "127.0.0.1:8000" : req.api_listen(), &so.server.host, &so.server.port));
  so.server.served_model_name = name;
  so.server.api_key = req.api_key();
  so.chat_template_dir = ld.folder;
  if (req.api_max_body_bytes() > 0) so.server.max_body_bytes = static_cast<size_t>(req.api_max_body_bytes());
  // /health and new requests: only while the cluster is serving (the controller opens it after
  // the first probe passes).
  so.server.ready = [this] { return state() == v1::RANK_STATE_SERVING; };
  ASSIGN_OR_RETURN(g.stack,
                   openai::ServingStack::Start(g.driver.get(), ld.tokenizer.get(), g.serve_metrics.get(), so));
  const engine::EngineStats stats = g.stack->engine().Stats();
  // The workers learn the pool sizes from here (they only see them allocated). state_slots is
  // set first: a worker that reads kv_tokens then finds it too.
  const std::string prefix = engine::GenerationPrefix(g.generation);
  (void)options_.local_store->Set(prefix + "/state_slots", std::to_string(stats.state_slots_total));
  (void)options_.local_store->Set(prefix + "/kv_tokens", std::to_string(stats.kv_tokens_total));
  std::lock_guard<std::mutex> l(mu_);
  kv_tokens_ = stats.kv_tokens_total;
  state_slots_ = stats.state_slots_total;
  api_endpoint_ = so.server.host + ":" + std::to_string(g.stack->server().port());
  return absl::OkStatus();
}

}  // namespace tandem::agentd
