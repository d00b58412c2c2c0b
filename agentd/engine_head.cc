// EngineHost::StartHead: rank 0's serving stack over the loaded model and the group's comm
// (StepDriver, LLMEngine, the OpenAI server and its metrics).
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
  const engine::ModelConfig& cfg = ld.model->config();
  engine::EngineOptions eo;
  if (req.max_num_seqs() > 0) eo.max_num_seqs = static_cast<int32_t>(req.max_num_seqs());
  eo.max_model_len = req.max_model_len() > 0
                         ? static_cast<int32_t>(req.max_model_len())
                         : static_cast<int32_t>(cfg.max_position_embeddings > 0
                                                    ? std::min<int64_t>(4096, cfg.max_position_embeddings)
                                                    : 4096);
  eo.kv_tokens = req.kv_tokens();
  eo.memory_fraction = ld.request.memory_fraction();  // 0: the backend's default; else checked in (0, 1]
  eo.backend = ld.request.backend();
  eo.on_step = [m = g.serve_metrics.get()](const engine::StepMetrics& s) { m->ObserveStep(s.seconds); };
  ASSIGN_OR_RETURN(g.engine, engine::LLMEngine::Create(g.driver.get(), ld.tokenizer.get(), eo));
  const int64_t kv = g.engine->Stats().kv_tokens_total;
  // The workers learn the pool size from here (they only see its blocks allocated).
  (void)options_.local_store->Set(engine::GenerationPrefix(g.generation) + "/kv_tokens", std::to_string(kv));

  openai::OpenAIServerOptions so;
  RETURN_IF_ERROR(SplitHostPort(req.api_listen().empty() ? "127.0.0.1:8000" : req.api_listen(), &so.host, &so.port));
  so.served_model_name = name;
  so.api_key = req.api_key();
  so.max_in_flight = eo.max_num_seqs + eo.max_waiting + 8;
  if (req.api_max_body_bytes() > 0) so.max_body_bytes = static_cast<size_t>(req.api_max_body_bytes());
  so.max_model_len = eo.max_model_len;
  so.vocab_size = cfg.vocab_size;
  // /health and new requests: only while the cluster is serving (the controller opens it after
  // the first probe passes).
  so.ready = [this] { return state() == v1::RANK_STATE_SERVING; };
  g.server = std::make_unique<openai::OpenAIServer>(g.engine.get(), ld.tokenizer.get(), g.serve_metrics.get(), so);
  RETURN_IF_ERROR(g.server->Start());
  std::lock_guard<std::mutex> l(mu_);
  kv_tokens_ = kv;
  api_endpoint_ = so.host + ":" + std::to_string(g.server->port());
  return absl::OkStatus();
}

}  // namespace tandem::agentd
