#include "infer/infer.h"

#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>

#include <nlohmann/json.hpp>

#include "common/log.h"
#include "common/status.h"
#include "engine/comm/gloo_comm.h"
#include "engine/comm/rank_threads.h"
#include "engine/comm/store.h"
#include "engine/generate.h"
#include "engine/model.h"
#include "engine/model/safetensors.h"
#include "infer/rank_processes.h"
#include "engine/step_driver.h"
#include "engine/tokenizer/chat_prompt.h"
#include "engine/tokenizer/tokenizer.h"

#ifdef TANDEM_HAVE_CUDA
#include <cuda_runtime.h>

#include "engine/cuda/nccl_comm.h"
#endif

namespace tandem::infer {
using engine::DType;
using engine::GenerationPrefix;
using engine::Model;
using engine::ModelLoadOptions;
using engine::Store;

using engine::Comm;
using engine::CreateGlooComm;
using engine::FileStore;
using engine::GenerateOptions;
using engine::GenerateResult;
using engine::GlooCommOptions;
using engine::LoadModelConfig;
using engine::Logits;
using engine::ModelConfig;
using engine::NamedTensorData;
using engine::PrefixStore;
using engine::PromptLogits;
using engine::RankThreadsOptions;
using engine::RunRanksAsThreads;
using engine::RunWorkerLoop;
using engine::StepDriver;
using engine::WriteSafetensors;

namespace {

using tokenizer::Tokenizer;
// What rank 0 does once every rank has loaded the model; returns what to print.
using Rank0Work = std::function<absl::StatusOr<std::string>(StepDriver&)>;

bool HasTokenizer(const std::string& dir) { return std::filesystem::exists(dir + "/tokenizer.json"); }

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& dir) {
  if (!HasTokenizer(dir)) {
    return absl::FailedPreconditionError(dir + " has no tokenizer.json (use --prompt-ids)");
  }
  return Tokenizer::LoadFromDir(dir);
}

std::string RunTokenize(const InferOptions& o, const Tokenizer& tok) {
  nlohmann::json j;
  j["ids"] = tok.Encode(o.text);
  return j.dump();
}

ModelLoadOptions LoadOptions(const InferOptions& o, int rank, int world, Comm* comm) {
  ModelLoadOptions m;
  m.backend = o.backend;
  m.rank = rank;
  m.world = world;
  m.comm = comm;
  m.threads = o.threads;
  m.kv_cache_dtype = o.kv_cache_dtype;
  return m;
}

// One rank's life: load its shard; rank 0 drives `work`, the others follow its steps.
absl::StatusOr<std::string> RunRank(const InferOptions& o, int rank, int world, Comm* comm, const Rank0Work& work) {
  // A long load says how far it is on stderr (every 5 s and per 10%), each rank for itself.
  engine::LoadProgress progress;
  engine::LoadProgressLog progress_log(
      world > 1 ? o.model_dir + " (rank " + std::to_string(rank) + " of " + std::to_string(world) + ")" : o.model_dir,
      &progress);
  ModelLoadOptions load = LoadOptions(o, rank, world, comm);
  load.progress = &progress;
  ASSIGN_OR_RETURN(auto model, Model::Load(o.model_dir, load));
  progress_log.Done();
  // Test hook: a spawned rank that dies mid-run (tests check that rank 0 fails fast and clearly).
  if (const char* r = std::getenv("TANDEM_INFER_TEST_EXIT_RANK"); r != nullptr && o.world > 0 && std::atoi(r) == rank) {
    std::fprintf(stderr, "tandem-infer: rank %d exits on purpose (TANDEM_INFER_TEST_EXIT_RANK)\n", rank);
    _exit(3);
  }
  if (rank != 0) {
    RETURN_IF_ERROR(RunWorkerLoop(*model, *comm));
    return std::string();
  }
  StepDriver driver(model.get(), comm);
  absl::StatusOr<std::string> out = work(driver);
  if (!out.ok()) return out.status();
  RETURN_IF_ERROR(driver.Stop());
  return out;
}

absl::StatusOr<std::string> RunAsThreads(const InferOptions& o, const Rank0Work& work) {
  std::string output;
  RankThreadsOptions opts;
  opts.timeout = std::chrono::milliseconds(o.timeout_ms);
  opts.connect_timeout = std::chrono::milliseconds(2 * o.timeout_ms);
  RETURN_IF_ERROR(RunRanksAsThreads(
      o.tp,
      [&](Comm& comm) -> absl::Status {
        ASSIGN_OR_RETURN(std::string out, RunRank(o, comm.rank(), comm.world_size(), &comm, work));
        if (comm.rank() == 0) output = std::move(out);
        return absl::OkStatus();
      },
      opts));
  return output;
}

// Ranks as processes: the cuda backend joins an NCCL group, one GPU per rank (device rank % the
// devices this process sees), and its model enqueues the all-reduces on its own stream (graphs
// on); the cpu backend joins Gloo over TCP.
absl::StatusOr<std::unique_ptr<Comm>> ConnectProcessRank(const InferOptions& o, Store& store, int rank, int world) {
  if (o.backend == "cuda") {
#ifdef TANDEM_HAVE_CUDA
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
      cudaGetLastError();
      return absl::FailedPreconditionError("--backend cuda: no usable CUDA device");
    }
    if (world > devices) {
      // NCCL refuses two ranks on one GPU (and would say so less clearly).
      return absl::FailedPreconditionError(
          "--backend cuda --tp " + std::to_string(world) + " --ranks processes needs " + std::to_string(world) +
          " GPUs (NCCL, one per rank); this machine has " + std::to_string(devices) +
          " (--ranks threads runs every rank on one GPU through the host)");
    }
    engine::cuda::NcclCommOptions n;
    n.rank = rank;
    n.world_size = world;
    n.device = rank % devices;  // also made current on this thread, where the model then loads
    n.store = &store;
    n.timeout = std::chrono::milliseconds(o.timeout_ms);
    n.connect_timeout = std::chrono::milliseconds(2 * o.timeout_ms);
    return engine::cuda::CreateNcclComm(n);
#else
    return absl::UnimplementedError("--backend cuda: this build has no CUDA (TANDEM_CUDA=OFF)");
#endif
  }
  GlooCommOptions g;
  g.store = &store;
  g.rank = rank;
  g.world_size = world;
  g.timeout = std::chrono::milliseconds(o.timeout_ms);
  g.connect_timeout = std::chrono::milliseconds(2 * o.timeout_ms);
  return CreateGlooComm(g);
}

// A spawned rank (hidden flags): join the group through the file store, follow rank 0.
absl::Status RunSpawnedRank(const InferOptions& o) {
  SetLogTag("rank " + std::to_string(o.rank));
  FileStore files(o.store_dir);
  PrefixStore store(files, GenerationPrefix(1));
  ASSIGN_OR_RETURN(auto comm, ConnectProcessRank(o, store, o.rank, o.world));
  ASSIGN_OR_RETURN(std::string ignored, RunRank(o, o.rank, o.world, comm.get(), nullptr));
  (void)ignored;
  return absl::OkStatus();
}

// Rank 0 of a process group: spawn the others, run, reap them, remove the rendezvous folder.
absl::StatusOr<std::string> RunAsProcesses(const InferOptions& o, const Rank0Work& work) {
  ASSIGN_OR_RETURN(std::string exe, SelfExecutable());
  std::string tmpl = (std::filesystem::temp_directory_path() / "tandem-infer-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) return absl::InternalError("mkdtemp failed for " + tmpl);
  const std::string store_dir = tmpl;
  struct RemoveDir {
    std::string dir;
    ~RemoveDir() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } remove_dir{store_dir};

  ASSIGN_OR_RETURN(auto children, RankProcesses::Spawn(exe, o.argv, o.tp, store_dir));
  SetLogTag("rank 0");
  FileStore files(store_dir);
  PrefixStore store(files, GenerationPrefix(1));
  absl::StatusOr<std::string> out;
  {
    auto comm = ConnectProcessRank(o, store, 0, o.tp);
    if (!comm.ok()) return comm.status();
    children->SetComm(comm->get());
    out = RunRank(o, 0, o.tp, comm->get(), work);
    children->SetComm(nullptr);
  }
  // Children exit after Stop; give them a moment, and report the first that failed.
  absl::Status reaped = children->Finish(std::chrono::milliseconds(out.ok() ? 10000 : 3000));
  if (!reaped.ok()) {
    std::string msg = std::string(reaped.message());
    if (!out.ok()) msg = std::string(out.status().message()) + " (" + msg + ")";
    return absl::Status(reaped.code(), msg);
  }
  return out;
}

absl::StatusOr<std::string> RunModelCommand(const InferOptions& o, const Rank0Work& work) {
  if (o.tp < 1) return absl::InvalidArgumentError("--tp must be >= 1");
  if (o.tp == 1) return RunRank(o, 0, 1, nullptr, work);
  if (o.ranks == "threads") return RunAsThreads(o, work);
  if (o.ranks == "processes") return RunAsProcesses(o, work);
  return absl::InvalidArgumentError("--ranks must be threads or processes, not \"" + o.ranks + "\"");
}

absl::StatusOr<std::vector<int32_t>> PromptIds(const InferOptions& o, const Tokenizer* tok) {
  if (!o.prompt_ids.empty()) return o.prompt_ids;
  if (!o.has_text) return absl::InvalidArgumentError("give --prompt TEXT or --prompt-ids 1,2,3");
  if (tok == nullptr) return absl::FailedPreconditionError(o.model_dir + " has no tokenizer.json (use --prompt-ids)");
  if (!o.chat) return tok->Encode(o.text);
  tokenizer::ChatTemplateOptions chat;
  chat.enable_thinking = o.enable_thinking;
  ASSIGN_OR_RETURN(auto prompt, tokenizer::ChatPrompt::Load(o.model_dir));  // the model's own template
  ASSIGN_OR_RETURN(std::string text, prompt->Render({{"user", o.text, std::nullopt, {}}}, chat));
  return tok->Encode(text);
}

absl::StatusOr<std::string> Generate(const InferOptions& o) {
  std::unique_ptr<Tokenizer> tok;
  if (HasTokenizer(o.model_dir)) {
    ASSIGN_OR_RETURN(tok, LoadTokenizer(o.model_dir));
  }
  ASSIGN_OR_RETURN(std::vector<int32_t> prompt, PromptIds(o, tok.get()));
  ASSIGN_OR_RETURN(ModelConfig cfg, LoadModelConfig(o.model_dir));
  GenerateOptions gen;
  gen.max_tokens = o.max_tokens;
  gen.temperature = o.temperature;
  gen.seed = o.seed;
  gen.eos_ids = cfg.eos_token_ids;
  gen.block_size = o.kv_block_size;
  return RunModelCommand(o, [&](StepDriver& driver) -> absl::StatusOr<std::string> {
    ASSIGN_OR_RETURN(GenerateResult r, engine::Generate(driver, prompt, gen));
    if (o.stats) {
      std::fprintf(stderr,
                   "tandem-infer: tp=%d ranks=%s: prefill %zu tokens in %.3f s; decode %d tokens in %.3f s = "
                   "%.1f tokens/s\n",
                   o.tp, o.tp > 1 ? o.ranks.c_str() : "single", prompt.size(), r.prefill_seconds, r.decode_steps,
                   r.decode_seconds, r.decode_tokens_per_second());
    }
    const std::string text = tok ? tok->Decode(r.token_ids, /*skip_special_tokens=*/true) : "";
    if (!o.json) return tok ? text : nlohmann::json(r.token_ids).dump();
    nlohmann::json j;
    j["token_ids"] = r.token_ids;
    if (tok) j["text"] = text;
    j["finish_reason"] = r.finish_reason;
    return j.dump();
  });
}

absl::StatusOr<std::string> DumpLogits(const InferOptions& o) {
  if (o.prompt_ids.empty()) return absl::InvalidArgumentError("logits needs --prompt-ids 1,2,3");
  if (o.out.empty()) return absl::InvalidArgumentError("logits needs --out FILE");
  return RunModelCommand(o, [&](StepDriver& driver) -> absl::StatusOr<std::string> {
    ASSIGN_OR_RETURN(Logits logits, PromptLogits(driver, o.prompt_ids, o.kv_block_size));
    NamedTensorData t;
    t.name = "logits";
    t.dtype = DType::kF32;
    t.shape = {logits.rows(), logits.vocab};
    t.floats.assign(logits.data.begin(), logits.data.end());
    RETURN_IF_ERROR(WriteSafetensors(o.out, {t}));
    nlohmann::json j;
    j["out"] = o.out;
    j["shape"] = t.shape;
    return j.dump();
  });
}

}  // namespace

absl::StatusOr<std::vector<int32_t>> ParseIdList(const std::string& text) {
  std::vector<int32_t> ids;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = text.substr(start, comma - start);
    char* end = nullptr;
    errno = 0;
    long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || errno != 0 || v < 0 || v > INT32_MAX) {
      return absl::InvalidArgumentError("bad token id \"" + item + "\" in \"" + text + "\"");
    }
    ids.push_back(static_cast<int32_t>(v));
    start = comma + 1;
  }
  return ids;
}

absl::StatusOr<std::string> RunInfer(const InferOptions& o) {
  if (o.model_dir.empty()) return absl::InvalidArgumentError("--model DIR is required");
  if (o.world > 0) {
    RETURN_IF_ERROR(RunSpawnedRank(o));
    return std::string();
  }
  if (o.command == "tokenize") {
    if (!o.has_text) return absl::InvalidArgumentError("tokenize needs --text TEXT");
    ASSIGN_OR_RETURN(auto tok, LoadTokenizer(o.model_dir));
    return RunTokenize(o, *tok);
  }
  if (o.command == "generate") return Generate(o);
  if (o.command == "logits") return DumpLogits(o);
  return absl::InvalidArgumentError("unknown command \"" + o.command + "\" (tokenize, generate, logits)");
}

}  // namespace tandem::infer
