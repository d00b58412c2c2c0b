// EngineHost::LoadModel: this rank's shard (and, on rank 0, the tokenizer) loaded on a background
// thread while the caller gets progress events.
#include <filesystem>
#include <future>

#include "agentd/engine_group.h"
#include "common/log.h"
#include "common/status.h"
#include "engine/model.h"
#include "engine/tokenizer/tokenizer.h"
#include "proto/rank_state.h"

namespace tandem::agentd {
namespace {

uint64_t FolderBytes(const std::string& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.is_regular_file(ec) && e.path().extension() == ".safetensors") total += e.file_size(ec);
  }
  return total;
}

}  // namespace

using std::chrono::milliseconds;

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
    return absl::UnavailableError("another load, join or leave is in progress");
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
  // What the load has read (engine/model/load_progress.h): the log lines every 5 s and per 10%,
  // and the events' bytes_done as that share of the folder's bytes (a rank reads only its shard
  // of each tensor, so the tensors read make the percentage).
  engine::LoadProgress load_progress;
  engine::LoadProgressLog progress_log(path + " (rank " + std::to_string(req.rank()) + " of " + std::to_string(world) + ")",
                                       &load_progress);
  auto event = [&](const std::string& phase, bool done) {
    v1::LoadModelEvent ev;
    ev.set_phase(phase);
    ev.set_bytes_total(total);
    const int64_t tensors = load_progress.tensors_total.load();
    const uint64_t share = tensors > 0 ? static_cast<uint64_t>(static_cast<double>(total) *
                                                               load_progress.tensors_read.load() / tensors)
                                       : 0;
    ev.set_bytes_done(done ? total : std::min(share, total));
    ev.set_done(done);
    ev.set_seconds(SecondsSince(t0));
    if (progress) progress(ev);
  };
  event("config", false);

  auto loaded = std::make_shared<Loaded>();
  loaded->request = req;
  loaded->request.set_world_size(world);
  if (loaded->request.backend().empty()) loaded->request.set_backend("cpu");
  if (world > 1) loaded->comm = std::make_unique<GroupComm>(static_cast<int>(req.rank()), static_cast<int>(world));
  // The loading thread runs Model::Load while this one sends a "weights" event every 500 ms (the
  // RPC's liveness, with the bytes so far), then the final one.
  auto result = std::async(std::launch::async, [&]() -> absl::Status {
    engine::ModelLoadOptions lo;
    lo.backend = loaded->request.backend();
    lo.rank = static_cast<int>(req.rank());
    lo.world = static_cast<int>(world);
    lo.comm = loaded->comm.get();
    lo.threads = static_cast<int>(req.threads());
    lo.kv_cache_dtype = req.kv_cache_dtype().empty() ? "auto" : req.kv_cache_dtype();
    lo.progress = &load_progress;
    // cuda: device 0 of CUDA_VISIBLE_DEVICES (agentd/group_transport.h), made current here.
    ASSIGN_OR_RETURN(const std::string device, PrepareRankDevice(lo.backend));
    if (!device.empty()) TLOG(INFO) << "rank " << req.rank() << " of " << world << " on " << device;
    ASSIGN_OR_RETURN(loaded->model, engine::Model::Load(folder, lo));
    loaded->folder = folder;
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
  while (result.wait_for(milliseconds(500)) != std::future_status::ready) event("weights", false);
  const absl::Status st = result.get();
  if (!st.ok()) {
    SetState(v1::RANK_STATE_FAILED, "load failed: " + StatusText(st));
    return RankFailure(st);
  }
  const double seconds = SecondsSince(t0);
  progress_log.Done();
  {
    std::lock_guard<std::mutex> l(mu_);
    loaded_ = std::move(loaded);
    group_comm_ = loaded_->comm.get();
    SetStateLocked(v1::RANK_STATE_LOADED, "loaded " + path + " in " + std::to_string(seconds) + " s");
  }
  event("done", true);
  return absl::OkStatus();
}

}  // namespace tandem::agentd
