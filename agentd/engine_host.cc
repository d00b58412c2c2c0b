#include "agentd/engine_host.h"

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <thread>

#include "agentd/assignment.h"
#include "agentd/bounded_thread.h"
#include "agentd/engine_group.h"
#include "agentd/group_transport.h"
#include "agentd/grpc_store.h"
#include "common/failpoint.h"
#include "common/log.h"
#include "common/status.h"
#include "engine/model.h"
#include "engine/batching/llm_engine.h"
#include "openai/openai_server.h"
#include "openai/serve_metrics.h"
#include "engine/batching/timed_comm.h"
#include "engine/step_driver.h"
#include "engine/tokenizer/tokenizer.h"
#include "proto/rank_state.h"

namespace tandem::agentd {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

double SecondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

int64_t UnixMs() {
  return std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

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

// NCCL_* or GLOO_* followed by upper-case letters, digits and '_': the transport's variables.
bool IsCommEnvName(const std::string& name) {
  const bool prefix = name.rfind("NCCL_", 0) == 0 || name.rfind("GLOO_", 0) == 0;
  if (!prefix || name.size() == 5) return false;
  for (char c : name) {
    if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

uint64_t FolderBytes(const std::string& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.is_regular_file(ec) && e.path().extension() == ".safetensors") total += e.file_size(ec);
  }
  return total;
}

}  // namespace

EngineHost::EngineHost(EngineHostOptions options) : options_(std::move(options)) {
  if (!options_.state_dir.empty()) {
    auto a = LoadAssignment(options_.state_dir);
    if (!a.ok()) {
      TLOG(WARN) << a.status().message();
    } else if (a->has_value()) {
      persisted_ = **a;
      reason_ = "restarted; last assignment generation " + std::to_string(persisted_.generation()) + " rank " +
                std::to_string(persisted_.rank()) + " of " + std::to_string(persisted_.world_size()) +
                " (model " + persisted_.model_path() + "); waiting for the controller";
      TLOG(INFO) << reason_;
    }
  }
}

EngineHost::~EngineHost() { Shutdown(); }

void EngineHost::Shutdown() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (shutting_down_) return;
  }
  // Keep the assignment on disk: a restart (systemd) reports it and the controller decides.
  if (op_mu_.try_lock_for(options_.leave_deadline)) {
    std::shared_ptr<Group> g;
    {
      std::lock_guard<std::mutex> l(mu_);
      g = group_;
    }
    if (g) Teardown(g);
    op_mu_.unlock();
  }
  std::lock_guard<std::mutex> l(mu_);
  shutting_down_ = true;
  ++version_;
  changed_.notify_all();
}

bool EngineHost::shutting_down() const {
  std::lock_guard<std::mutex> l(mu_);
  return shutting_down_;
}

void EngineHost::SetStateLocked(v1::RankState state, const std::string& reason) {
  if (state != state_ || reason != reason_) {
    TLOG(INFO) << "rank state " << RankStateName(state_) << " -> " << RankStateName(state)
               << (reason.empty() ? "" : ": " + reason);
  }
  state_ = state;
  reason_ = reason;
  ++version_;
  changed_.notify_all();
}

void EngineHost::SetState(v1::RankState state, const std::string& reason) {
  std::lock_guard<std::mutex> l(mu_);
  SetStateLocked(state, reason);
}

v1::RankState EngineHost::state() const {
  std::lock_guard<std::mutex> l(mu_);
  return state_;
}

uint64_t EngineHost::WaitForChange(uint64_t seen, milliseconds timeout) const {
  std::unique_lock<std::mutex> l(mu_);
  changed_.wait_for(l, timeout, [&] { return version_ != seen || shutting_down_; });
  return version_;
}

v1::RankStatus EngineHost::Status() const {
  std::lock_guard<std::mutex> l(mu_);
  v1::RankStatus s;
  s.set_node_name(options_.node_name);
  s.set_state(state_);
  s.set_reason(reason_);
  s.set_generation(generation_);
  s.set_rank(rank_);
  s.set_world_size(world_);
  s.set_kv_tokens(kv_tokens_);
  s.set_model_path(model_path_);
  s.set_api_endpoint(api_endpoint_);
  s.set_transport(transport_);
  if (group_ && group_->engine) {
    const engine::EngineStats st = group_->engine->Stats();
    s.set_iterations(static_cast<uint64_t>(st.iterations));
    s.set_queue_depth(static_cast<uint32_t>(st.running + st.waiting));
  } else if (group_comm_ != nullptr) {
    s.set_iterations(group_comm_->steps());
  }
  *s.mutable_persisted() = persisted_;
  s.set_updated_unix_ms(UnixMs());
  return s;
}

// ---- LoadModel ----

absl::Status EngineHost::LoadModel(const v1::LoadModelRequest& req, const LoadProgress& progress) {
  if (req.model_path().empty()) return absl::InvalidArgumentError("model_path is empty");
  const uint32_t world = std::max<uint32_t>(1, req.world_size());
  if (req.rank() >= world) {
    return absl::InvalidArgumentError("rank " + std::to_string(req.rank()) + " outside a group of " +
                                      std::to_string(world));
  }
  // The cpu backend starts every thread at load: threads 30000 (found by the agent_rpc fuzz
  // target) ran the agent out of thread stacks and killed it. The bound is --threads' bound.
  if (req.threads() > 1024) {
    return absl::InvalidArgumentError("threads " + std::to_string(req.threads()) + " is more than 1024");
  }
  // Confinement before anything is opened: the folder and every symlink in it stay in the roots.
  static const ModelRoots kNoRoots;
  const ModelRoots& roots = options_.model_roots ? *options_.model_roots : kNoRoots;
  ASSIGN_OR_RETURN(const std::string folder, roots.ResolveTree(req.model_path()));
  std::unique_lock<std::timed_mutex> op(op_mu_, std::defer_lock);
  if (!op.try_lock_for(std::chrono::seconds(2))) {
    return absl::FailedPreconditionError("another load, join or leave is in progress");
  }
  {
    const v1::RankState s = state();
    if (s == v1::RANK_STATE_JOINING || s == v1::RANK_STATE_READY || s == v1::RANK_STATE_SERVING) {
      return absl::FailedPreconditionError(std::string("this rank is ") + RankStateName(s) +
                                           " in a group: leave it first");
    }
  }
  RETURN_IF_ERROR(LeaveLocked(true, "reloading"));  // remnants of a failed group, old weights

  const std::string path = req.model_path();  // as asked (reports); `folder` is what is opened
  const uint64_t total = FolderBytes(folder);
  {
    std::lock_guard<std::mutex> l(mu_);
    model_path_ = path;
    SetStateLocked(v1::RANK_STATE_LOADING, "loading " + path + " (rank " + std::to_string(req.rank()) + " of " +
                                               std::to_string(world) + ", " + req.backend() + ")");
  }
  const auto t0 = Clock::now();
  auto event = [&](const std::string& phase, bool done, const std::string& error) {
    v1::LoadModelEvent ev;
    ev.set_phase(phase);
    ev.set_bytes_total(total);
    ev.set_bytes_done(done && error.empty() ? total : 0);
    ev.set_done(done);
    ev.set_error(error);
    ev.set_seconds(SecondsSince(t0));
    if (progress) progress(ev);
  };
  event("config", false, "");

  auto loaded = std::make_shared<Loaded>();
  loaded->request = req;
  loaded->request.set_world_size(world);
  if (loaded->request.backend().empty()) loaded->request.set_backend("cpu");
  if (world > 1) loaded->comm = std::make_unique<GroupComm>(static_cast<int>(req.rank()), static_cast<int>(world));
  // Model::Load has no progress of its own: the loading thread runs it while this one sends a
  // "weights" event every 500 ms (the RPC's liveness), then the final one.
  auto result = std::async(std::launch::async, [&]() -> absl::Status {
    engine::ModelLoadOptions lo;
    lo.backend = loaded->request.backend();
    lo.rank = static_cast<int>(req.rank());
    lo.world = static_cast<int>(world);
    lo.comm = loaded->comm.get();
    lo.threads = static_cast<int>(req.threads());
    // cuda: device 0 of CUDA_VISIBLE_DEVICES (agentd/group_transport.h), made current here.
    ASSIGN_OR_RETURN(const std::string device, PrepareRankDevice(lo.backend));
    if (!device.empty()) TLOG(INFO) << "rank " << req.rank() << " of " << world << " on " << device;
    ASSIGN_OR_RETURN(loaded->model, engine::Model::Load(folder, lo));
    if (req.rank() == 0 && std::filesystem::exists(std::filesystem::path(folder) / "tokenizer.json")) {
      auto tok = tokenizer::Tokenizer::LoadFromDir(folder);
      if (tok.ok()) {
        loaded->tokenizer = std::move(*tok);
      } else {
        loaded->tokenizer_error = StatusText(tok.status());
        TLOG(WARN) << "tokenizer of " << path << ": " << tok.status().message() << " (token-id prompts only)";
      }
    }
    return absl::OkStatus();
  });
  while (result.wait_for(milliseconds(500)) != std::future_status::ready) event("weights", false, "");
  const absl::Status st = result.get();
  if (!st.ok()) {
    SetState(v1::RANK_STATE_FAILED, "load failed: " + StatusText(st));
    event("done", true, StatusText(st));
    return absl::OkStatus();  // the failure travels in the final event
  }
  const double seconds = SecondsSince(t0);
  {
    std::lock_guard<std::mutex> l(mu_);
    loaded_ = std::move(loaded);
    group_comm_ = loaded_->comm.get();
    SetStateLocked(v1::RANK_STATE_LOADED, "loaded " + path + " in " + std::to_string(seconds) + " s");
  }
  TLOG(INFO) << "loaded " << path << " (rank " << req.rank() << " of " << world << ") in " << seconds << " s";
  event("done", true, "");
  return absl::OkStatus();
}

// ---- JoinGroup ----

void EngineHost::Persist(const v1::JoinGroupRequest& req) {
  if (options_.state_dir.empty()) return;
  v1::PersistedAssignment a;
  a.set_present(true);
  a.set_model_path(loaded_->request.model_path());
  a.set_backend(loaded_->request.backend());
  a.set_served_model_name(loaded_->request.served_model_name());
  a.set_rank(req.rank());
  a.set_world_size(req.world_size());
  a.set_generation(req.generation());
  a.set_store_endpoint(req.store_endpoint());
  a.set_comm_host(req.comm_host());
  a.set_api_listen(req.api_listen());
  *a.mutable_comm_env() = req.comm_env();
  a.set_saved_unix_ms(UnixMs());
  absl::Status st = SaveAssignment(options_.state_dir, a);
  if (!st.ok()) TLOG(WARN) << "persisting the assignment: " << st.message();
  std::lock_guard<std::mutex> l(mu_);
  persisted_ = a;
}

absl::StatusOr<v1::JoinGroupResponse> EngineHost::JoinGroup(const v1::JoinGroupRequest& req) {
  const auto t0 = Clock::now();
  std::unique_lock<std::timed_mutex> op(op_mu_, std::defer_lock);
  if (!op.try_lock_for(std::chrono::seconds(2))) {
    return absl::FailedPreconditionError("another load, join or leave is in progress");
  }
  if (!loaded_) return absl::FailedPreconditionError("no model is loaded: LoadModel first");
  const uint32_t world = loaded_->request.world_size();
  if (req.rank() != loaded_->request.rank() || std::max<uint32_t>(1, req.world_size()) != world) {
    return absl::FailedPreconditionError(
        "the model is loaded for rank " + std::to_string(loaded_->request.rank()) + " of " + std::to_string(world) +
        ", the join asks for rank " + std::to_string(req.rank()) + " of " + std::to_string(req.world_size()) +
        ": load again");
  }
  if (req.rank() > 0 && req.store_endpoint().empty()) {
    return absl::InvalidArgumentError("store_endpoint (the head agent's host:port) is required for rank > 0");
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    if (group_ && (state_ == v1::RANK_STATE_READY || state_ == v1::RANK_STATE_SERVING)) {
      if (generation_ == req.generation()) {
        v1::JoinGroupResponse r;  // a retried JoinGroup of the same group: already in it
        r.set_ok(true);
        r.set_kv_tokens(kv_tokens_);
        r.set_transport(transport_);
        r.set_api_endpoint(api_endpoint_);
        return r;
      }
      return absl::FailedPreconditionError("this rank is in generation " + std::to_string(generation_) +
                                           ": leave it before joining " + std::to_string(req.generation()));
    }
  }
  // The comm environment is set process-wide (this agent hosts one rank), so only the transport's
  // own variables: any other name (LD_PRELOAD, PATH...) would reach every later subprocess.
  for (const auto& [k, v] : req.comm_env().env()) {
    if (!IsCommEnvName(k)) {
      return absl::InvalidArgumentError("comm_env: " + k + " is not an NCCL_* or GLOO_* variable");
    }
  }
  RETURN_IF_ERROR(LeaveLocked(false, "rejoining"));  // remnants of a failed or stopped group

  for (const auto& [k, v] : req.comm_env().env()) setenv(k.c_str(), v.c_str(), 1);

  auto g = std::make_shared<Group>();
  g->generation = req.generation();
  g->rank = static_cast<int>(req.rank());
  g->world = static_cast<int>(world);
  g->loaded = loaded_;
  engine::Store* base = options_.local_store;
  if (g->rank == 0) {
    // The head announces the generation before it rendezvouses: ranks of older groups that
    // still poll see it and abort themselves.
    if (auto cur = options_.local_store->TryGet(kGenerationKey)) {
      const uint64_t cur_gen = std::strtoull(cur->c_str(), nullptr, 10);
      if (cur_gen > req.generation()) {
        return absl::FailedPreconditionError("the store is already at generation " + *cur +
                                             ", newer than " + std::to_string(req.generation()));
      }
    }
    RETURN_IF_ERROR(options_.local_store->Set(kGenerationKey, std::to_string(req.generation())));
    options_.local_store->DropGenerationsBefore(req.generation());
  } else {
    g->remote = std::make_unique<GrpcStore>(req.store_endpoint(), options_.token, options_.store_credentials);
    base = g->remote.get();
  }
  g->cancellable = std::make_unique<CancellableStore>(*base);
  g->prefixed = std::make_unique<engine::PrefixStore>(*g->cancellable, engine::GenerationPrefix(req.generation()));
  {
    std::lock_guard<std::mutex> l(mu_);
    group_ = g;
    generation_ = req.generation();
    rank_ = g->rank;
    world_ = world;
    kv_tokens_ = 0;
    api_endpoint_.clear();
    transport_.clear();
    SetStateLocked(v1::RANK_STATE_JOINING, "rendezvous of generation " + std::to_string(req.generation()) +
                                               " through " + (g->rank == 0 ? std::string("this agent's store")
                                                                           : g->remote->Describe()));
  }
  Persist(req);

  auto fail = [&](const absl::Status& st) -> absl::StatusOr<v1::JoinGroupResponse> {
    const std::string msg = "join of generation " + std::to_string(req.generation()) + " failed: " + StatusText(st);
    g->settled.store(true);
    g->Abort(msg);
    Teardown(g);
    SetState(v1::RANK_STATE_FAILED, msg);
    v1::JoinGroupResponse r;
    r.set_ok(false);
    r.set_error(msg);
    r.set_seconds(SecondsSince(t0));
    return r;
  };

  if (world > 1) {
    // Gloo for cpu ranks, NCCL for cuda ranks, through the same prefixed store.
    GroupCommOptions co;
    co.backend = loaded_->request.backend();
    co.store = g->prefixed.get();
    co.rank = g->rank;
    co.world_size = g->world;
    co.comm_host = req.comm_host();
    co.connect_timeout = milliseconds(req.timeout_ms() > 0 ? req.timeout_ms() : 60000);
    co.timeout = milliseconds(req.collective_timeout_ms() > 0 ? req.collective_timeout_ms() : 30000);
    auto comm = CreateGroupComm(co);
    if (!comm.ok()) return fail(comm.status());
    g->comm = std::move(*comm);
  }
  if (g->cancellable->cancelled()) return fail(absl::CancelledError("left the group during the rendezvous"));

  if (g->rank == 0) {
    absl::Status st = StartHead(*g, req);
    if (!st.ok()) return fail(st);
  } else {
    if (loaded_->comm) loaded_->comm->Attach(g->comm.get());
    g->worker.Start([this, gp = g.get()] { WorkerLoop(*gp); });
    if (options_.peer_heartbeat.count() > 0) g->heartbeat.Start([this, gp = g.get()] { HeartbeatLoop(*gp); });
  }
  g->monitor.Start([this, gp = g.get()] { MonitorLoop(*gp); });

  v1::JoinGroupResponse r;
  r.set_ok(true);
  r.set_transport(g->comm ? g->comm->transport() : "local");
  r.set_seconds(SecondsSince(t0));
  {
    std::lock_guard<std::mutex> l(mu_);
    transport_ = r.transport();
    r.set_kv_tokens(kv_tokens_);
    r.set_api_endpoint(api_endpoint_);
    if (!g->settled.load()) {
      SetStateLocked(v1::RANK_STATE_READY, "in generation " + std::to_string(g->generation) + " as rank " +
                                               std::to_string(g->rank) + " of " + std::to_string(g->world) + " (" +
                                               r.transport() + ")");
    }
  }
  TLOG(INFO) << "joined generation " << g->generation << " as rank " << g->rank << " of " << g->world << " in "
             << r.seconds() << " s";
  return r;
}

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

void EngineHost::WorkerLoop(Group& g) {
  // Every new thread starts on device 0 already; set it anyway so the choice is in one place.
  if (auto dev = PrepareRankDevice(g.loaded->request.backend()); !dev.ok()) TLOG(WARN) << dev.status().message();
  const absl::Status st = engine::RunWorkerLoop(*g.loaded->model, *g.loaded->comm);
  if (st.ok()) {
    if (!g.settled.exchange(true)) {
      SetState(v1::RANK_STATE_LOADED, "the head stopped the group of generation " + std::to_string(g.generation));
      if (!options_.state_dir.empty()) (void)ClearAssignment(options_.state_dir);
      std::lock_guard<std::mutex> l(mu_);
      persisted_.Clear();
    }
  } else if (!g.settled.load()) {
    // Name the likely cause: a head whose agent no longer answers is gone, not just slow.
    auto probe = g.remote->Probe(kGenerationKey, milliseconds(500));
    const std::string cause = probe.ok() ? "lost the group" : "head lost";
    FailGroup(g, cause + " (generation " + std::to_string(g.generation) + "): " + StatusText(st));
  }
  std::lock_guard<std::mutex> l(g.stop_mu);
  g.stop = true;
  g.stop_cv.notify_all();
}

void EngineHost::FailGroup(Group& g, const std::string& reason) {
  if (g.settled.exchange(true)) return;
  TLOG(ERROR) << "rank failed: " << reason;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (group_.get() == &g) SetStateLocked(v1::RANK_STATE_FAILED, reason);
  }
  // The other ranks notice at once (closed connections) instead of at their next deadline.
  g.Abort(reason);
}

void EngineHost::HeartbeatLoop(Group& g) {
  // Its own thread, one short RPC per beat: an unreachable head must neither delay the monitor's
  // head-lost check nor keep a leave waiting.
  const std::string key = HeartbeatKey(g.generation, g.rank);
  for (uint64_t beat = 1;; ++beat) {
    (void)g.remote->SetOnce(key, std::to_string(beat), milliseconds(1000));  // the monitor reports a lost head
    std::unique_lock<std::mutex> l(g.stop_mu);
    if (g.stop_cv.wait_for(l, options_.peer_heartbeat, [&] { return g.stop; })) return;
  }
}

void EngineHost::MonitorLoop(Group& g) {
  const std::string gen = std::to_string(g.generation);
  auto next_poll = Clock::now() + options_.generation_poll;
  auto last_reached = Clock::now();
  bool kv_known = g.rank == 0;
  const bool watch_peers = g.rank == 0 && g.world > 1 && options_.peer_heartbeat.count() > 0 &&
                           options_.peer_lost_after.count() > 0;
  PeerWatch peers(g.world, options_.peer_lost_after, Clock::now());
  for (;;) {
    {
      std::unique_lock<std::mutex> l(g.stop_mu);
      g.stop_cv.wait_for(l, milliseconds(100), [&] { return g.stop; });
      if (g.stop) return;
    }
    if (g.settled.load()) continue;
    if (g.engine && !g.engine->healthy()) {
      FailGroup(g, "engine failed: " + StatusText(g.engine->fatal_error()));
      continue;
    }
    if (watch_peers) {
      const auto now = Clock::now();
      for (int r = 1; r < g.world; ++r) peers.Observe(r, options_.local_store->TryGet(HeartbeatKey(g.generation, r)), now);
      if (auto lost = peers.Lost(now)) {
        // Aborting the comm ends the step in flight: every request fails now, not at the
        // collective's deadline (NCCL between local GPUs never sees the peer's death itself).
        FailGroup(g, "rank " + std::to_string(lost->first) + " lost: no heartbeat for " +
                         std::to_string(lost->second.count()) + " ms (generation " + gen + ")");
        continue;
      }
    }
    if (Clock::now() < next_poll) continue;
    next_poll = Clock::now() + options_.generation_poll;
    std::optional<std::string> value;
    if (g.rank == 0) {
      value = options_.local_store->TryGet(kGenerationKey);
    } else {
      auto probe = g.remote->Probe(kGenerationKey, milliseconds(1000));
      if (!probe.ok()) {
        const double away = SecondsSince(last_reached);
        if (away * 1000 >= static_cast<double>(options_.head_lost_after.count())) {
          FailGroup(g, "head lost: its store has been unreachable for " + std::to_string(away) + " s (" +
                           StatusText(probe.status()) + ")");
        }
        continue;
      }
      last_reached = Clock::now();
      value = *probe;
      if (!kv_known) {
        auto kv = g.remote->Probe(engine::GenerationPrefix(g.generation) + "/kv_tokens", milliseconds(1000));
        if (kv.ok() && kv->has_value()) {
          kv_known = true;
          std::lock_guard<std::mutex> l(mu_);
          kv_tokens_ = std::strtoll((*kv)->c_str(), nullptr, 10);
          ++version_;
          changed_.notify_all();
        }
      }
    }
    if (!value.has_value()) {
      FailGroup(g, "head lost: its store no longer knows generation " + gen + " (the head agent restarted?)");
      continue;
    }
    const uint64_t current = std::strtoull(value->c_str(), nullptr, 10);
    if (current > g.generation) {
      FailGroup(g, "stale generation: the group moved on to generation " + *value + "; this rank was in " + gen +
                       " and aborted itself");
    }
  }
}

// ---- LeaveGroup ----

bool EngineHost::Teardown(const std::shared_ptr<Group>& g) {
  g->settled.store(true);  // what follows is our doing, not a failure to report
  {
    std::lock_guard<std::mutex> l(g->stop_mu);
    g->stop = true;
    g->stop_cv.notify_all();
  }
  bool clean = true;
  if (g->rank == 0 && (g->engine || g->server || g->driver)) {
    // The API port is released first and at once (never blocks), so a later group can bind it
    // even if what follows gets stuck.
    if (g->server) g->server->StopListening();
    // Graceful first: no new requests, the engine aborts what is in flight and releases the
    // workers (Stop); then the HTTP threads end. A stuck collective is cut by aborting the comm.
    BoundedThread stopper;
    stopper.Start([g] {
      // Failpoint "engine_shutdown_hang": the shutdown never finishes, as a collective wedged
      // in a driver would (tests of the stuck path below).
      while (FailpointEnabled("engine_shutdown_hang")) std::this_thread::sleep_for(std::chrono::seconds(1));
      if (g->server) g->server->Drain(milliseconds(0));
      if (g->engine) g->engine->Shutdown();
      if (g->server) g->server->Stop();
      if (g->driver) {
        absl::Status st = g->driver->Stop();
        if (!st.ok()) TLOG(WARN) << "releasing the workers: " << st.message();
      }
    });
    if (!stopper.JoinFor(options_.leave_deadline)) {
      TLOG(WARN) << "engine shutdown did not finish in " << options_.leave_deadline.count() << " ms: aborting the comm";
      g->Abort("leaving the group: shutdown timed out");
      if (!stopper.JoinFor(milliseconds(3000))) {
        TLOG(ERROR) << "the engine shutdown is stuck after the comm abort; the API port is released, its threads "
                       "are left behind";
        new std::shared_ptr<Group>(g);  // deliberately leaked: its threads still use it
        stopper.Detach();
        return false;
      }
    }
  }
  if (g->rank > 0 || !g->engine) g->Abort("leaving the group");
  clean = g->worker.JoinFor(options_.leave_deadline) && g->monitor.JoinFor(options_.leave_deadline) &&
          g->heartbeat.JoinFor(options_.leave_deadline);
  if (!clean) {
    TLOG(ERROR) << "a thread of generation " << g->generation << " did not stop in time; leaving it behind";
    new std::shared_ptr<Group>(g);  // deliberately leaked: its threads still use it
    return false;
  }
  if (g->loaded && g->loaded->comm) g->loaded->comm->Detach();
  return true;
}

absl::Status EngineHost::LeaveLocked(bool unload, const std::string& reason) {
  std::shared_ptr<Group> g;
  {
    std::lock_guard<std::mutex> l(mu_);
    g = group_;
  }
  bool clean = true;
  if (g) {
    TLOG(INFO) << "leaving generation " << g->generation << (reason.empty() ? "" : ": " + reason);
    clean = Teardown(g);
  }
  std::lock_guard<std::mutex> l(mu_);
  group_.reset();
  rank_ = -1;
  world_ = 0;
  kv_tokens_ = 0;
  api_endpoint_.clear();
  transport_.clear();
  if (unload) {
    group_comm_ = nullptr;
    loaded_.reset();  // a leaked group holds its own reference
  }
  if (!clean) {
    // The port is free (Teardown closed it first) and the comm aborted; what cannot be taken back
    // is the memory the stuck threads hold. A fresh process is the only clean state: say so, and
    // let on_stuck (the agent: exit so systemd restarts it) act on it.
    const std::string what = "left generation " + std::to_string(g->generation) +
                             ", but a thread of it was still stuck after the comm abort: API port released, comm "
                             "aborted, the stuck threads (and the memory they hold) left behind; " +
                             (options_.on_stuck ? "the agent exits (status 75) to start clean"
                                                : "restart the agent to reclaim that memory");
    SetStateLocked(v1::RANK_STATE_FAILED, what);
    if (options_.on_stuck) options_.on_stuck(what);
    // ABORTED, not DEADLINE_EXCEEDED: the caller's own deadline did not pass, and its message
    // (what was released, what was not) must reach the operator.
    return absl::AbortedError(what);
  }
  if (g || unload) {
    if (loaded_) {
      SetStateLocked(v1::RANK_STATE_LOADED, reason.empty() ? "left the group" : reason);
    } else {
      SetStateLocked(v1::RANK_STATE_IDLE, reason.empty() ? "unloaded" : reason);
    }
  }
  return absl::OkStatus();
}

absl::Status EngineHost::LeaveGroup(bool unload, const std::string& reason) {
  // A join in progress (waiting in the rendezvous) is called off first, so that it releases
  // the operation lock within a slice of its store wait.
  {
    std::lock_guard<std::mutex> l(mu_);
    if (group_ && state_ == v1::RANK_STATE_JOINING) {
      group_->settled.store(true);
      if (group_->cancellable) group_->cancellable->Cancel();
    }
  }
  std::unique_lock<std::timed_mutex> op(op_mu_, std::defer_lock);
  if (!op.try_lock_for(options_.leave_deadline)) {
    SetState(v1::RANK_STATE_FAILED, "leave: the operation in progress did not stop within " +
                                        std::to_string(options_.leave_deadline.count()) + " ms");
    return absl::DeadlineExceededError("another operation did not stop in time");
  }
  RETURN_IF_ERROR(LeaveLocked(unload, reason.empty() ? "left the group" : "left the group: " + reason));
  if (!options_.state_dir.empty()) {
    absl::Status st = ClearAssignment(options_.state_dir);
    if (!st.ok()) TLOG(WARN) << st.message();
  }
  std::lock_guard<std::mutex> l(mu_);
  persisted_.Clear();
  if (!loaded_ && state_ != v1::RANK_STATE_IDLE) SetStateLocked(v1::RANK_STATE_IDLE, "unloaded");
  ++version_;
  changed_.notify_all();
  return absl::OkStatus();
}

absl::Status EngineHost::SetServing(bool serving) {
  std::lock_guard<std::mutex> l(mu_);
  if (serving && state_ == v1::RANK_STATE_READY) {
    SetStateLocked(v1::RANK_STATE_SERVING, "serving generation " + std::to_string(generation_));
    return absl::OkStatus();
  }
  if (!serving && state_ == v1::RANK_STATE_SERVING) {
    SetStateLocked(v1::RANK_STATE_READY, "serving stopped by the controller");
    return absl::OkStatus();
  }
  if ((serving && state_ == v1::RANK_STATE_SERVING) || (!serving && state_ == v1::RANK_STATE_READY)) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(std::string("cannot ") + (serving ? "start" : "stop") + " serving: this rank is " +
                                       RankStateName(state_) + (reason_.empty() ? "" : " (" + reason_ + ")"));
}

}  // namespace tandem::agentd
