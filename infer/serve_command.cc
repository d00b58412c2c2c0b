#include "infer/serve_command.h"

#include <pthread.h>
#include <signal.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "common/flag_args.h"
#include "common/log.h"
#include "common/net_address.h"
#include "common/secret_file.h"
#include "common/status.h"
#include "engine/comm/rank_threads.h"
#include "engine/model.h"
#include "engine/batching/kv_sizing.h"
#include "openai/serve_metrics.h"
#include "openai/serving_stack.h"
#include "engine/batching/timed_comm.h"
#include "engine/step_driver.h"
#include "engine/tokenizer/tokenizer.h"

namespace tandem::infer {

using openai::ServeMetrics;
using openai::ServingStack;
using openai::ServingStackOptions;
namespace {

const char kServeUsage[] =
    "usage: tandem-infer serve --model DIR [--backend cpu|cuda] [--tp N] [--threads N] [--host H] [--port P]\n"
    "           [--served-model-name NAME] [--api-key-file PATH] [--insecure] [--max-num-seqs N] [--max-num-batched-tokens N]\n"
    "           [--max-model-len N] [--kv-tokens N] [--memory-fraction F] [--kv-cache-dtype auto|f32|bf16|fp8]\n"
    "           [--max-waiting N]\n"
    "           [--max-in-flight N] [--max-connections N] [--max-body-bytes N] [--header-timeout-ms MS]\n"
    "           [--body-timeout-ms MS] [--idle-timeout-ms MS] [--write-timeout-ms MS] [--shutdown-timeout-s S]\n"
    "  KV pool: --kv-tokens N exactly, else --memory-fraction F in (0, 1] (default: cpu 0.70 of\n"
    "  MemAvailable; cuda 0.90 of the GPU's memory, weights included). --backend cuda uses CUDA\n"
    "  device 0 of what CUDA_VISIBLE_DEVICES exposes. --kv-cache-dtype: the KV cache's element type\n"
    "  (auto = float32; fp8 = e4m3 with per-layer scales: a quarter of float32's bytes, half of bf16's).\n"
    "  --api-key-file PATH: clients must send 'Authorization: Bearer <key>' (the file: mode 0600,\n"
    "  at least 16 bytes). Without it the server listens on loopback only (a non-loopback --host\n"
    "  needs --insecure).  HTTP limits (docs/http.md): requests in flight (default max-num-seqs +\n"
    "  max-waiting + 8), connections (1024), body bytes (4 MiB), and the head/body/idle/write deadlines\n"
    "  (10 s / 60 s / 30 s / 30 s).\n";

// Blocks SIGTERM/SIGINT in this thread (and every thread it starts later), so that the serving
// thread can take them synchronously with sigtimedwait instead of in a signal handler.
sigset_t BlockStopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

std::string ServedName(const ServeOptions& o) {
  if (!o.served_model_name.empty()) return o.served_model_name;
  std::string base = std::filesystem::path(o.model_dir).lexically_normal().filename().string();
  if (base.empty()) base = std::filesystem::path(o.model_dir).lexically_normal().parent_path().filename().string();
  return base.empty() ? "model" : base;
}

// Rank 0: engine + HTTP server on top of `model` (and the group's comm, already wrapped in a
// TimedComm feeding tandem_allreduce_seconds), until a stop signal.
absl::Status ServeOnRank0(const ServeOptions& o, const std::string& name, const std::string& api_key,
                          ServeMetrics* metrics, engine::Model& model, engine::Comm* comm,
                          const sigset_t& stop_signals, const std::function<bool()>& stop) {
  engine::StepDriver driver(&model, comm);

  std::unique_ptr<tokenizer::Tokenizer> tok;
  if (std::filesystem::exists(std::filesystem::path(o.model_dir) / "tokenizer.json")) {
    ASSIGN_OR_RETURN(tok, tokenizer::Tokenizer::LoadFromDir(o.model_dir));
  } else {
    TLOG(WARN) << o.model_dir << " has no tokenizer.json: only /v1/completions with token-id prompts will work";
  }

  ServingStackOptions so;
  so.engine.max_num_seqs = o.max_num_seqs;
  so.engine.max_num_batched_tokens = o.max_num_batched_tokens;
  so.engine.max_model_len = o.max_model_len;  // 0: the stack's default
  so.engine.kv_tokens = o.kv_tokens;
  so.engine.memory_fraction = o.memory_fraction;
  so.engine.backend = o.backend;
  so.engine.max_waiting = o.max_waiting;
  so.max_in_flight = o.max_in_flight;
  so.chat_template_dir = o.model_dir;
  so.server.host = o.host;
  so.server.port = o.port;
  so.server.served_model_name = name;
  so.server.api_key = api_key;
  if (o.max_connections > 0) so.server.max_connections = o.max_connections;
  if (o.max_body_bytes > 0) so.server.max_body_bytes = static_cast<size_t>(o.max_body_bytes);
  if (o.header_timeout.count() > 0) so.server.header_timeout = o.header_timeout;
  if (o.body_timeout.count() > 0) so.server.body_timeout = o.body_timeout;
  if (o.idle_timeout.count() > 0) so.server.idle_timeout = o.idle_timeout;
  if (o.write_timeout.count() > 0) so.server.write_timeout = o.write_timeout;
  absl::StatusOr<std::unique_ptr<ServingStack>> stack = ServingStack::Start(&driver, tok.get(), metrics, so);
  if (!stack.ok()) {
    (void)driver.Stop();
    return stack.status();
  }
  ServingStack& serving = **stack;
  std::printf("tandem-infer serving model=%s on http://%s:%d\n", name.c_str(), o.host.c_str(), serving.server().port());
  std::fflush(stdout);
  TLOG(INFO) << "serving " << name << " (tp " << o.tp << ", max_model_len " << serving.max_model_len() << ") on "
             << o.host << ":" << serving.server().port();

  // Wait for a stop signal (or the test's stop callback).
  timespec tick{0, 200 * 1000 * 1000};
  for (;;) {
    const int sig = sigtimedwait(&stop_signals, nullptr, &tick);
    if (sig == SIGTERM || sig == SIGINT) {
      TLOG(INFO) << "signal " << sig << ": draining (up to " << o.shutdown_deadline.count() << " ms)";
      break;
    }
    if (stop && stop()) break;
  }
  serving.StopListening();  // the port is free at once; requests in flight go on draining
  const int left = serving.Drain(o.shutdown_deadline);
  if (left > 0) TLOG(WARN) << left << " request(s) still running at the shutdown deadline: aborting them";
  serving.Stop();  // aborts what is left, so the streaming handlers end
  return driver.Stop();  // releases the workers
}

}  // namespace

absl::StatusOr<ServeOptions> ParseServeFlags(const std::vector<std::string>& args) {
  ServeOptions o;
  for (FlagArgs a(args); a.Next();) {
    const std::string flag = a.name();
    auto text = [&] { return a.Value(); };
    auto integer = [&](int64_t lo) -> absl::StatusOr<int64_t> {
      ASSIGN_OR_RETURN(std::string v, text());
      char* end = nullptr;
      long long n = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < lo) {
        return absl::InvalidArgumentError("flag " + flag + " needs an integer >= " + std::to_string(lo) + ", got '" + v + "'");
      }
      return static_cast<int64_t>(n);
    };
    if (flag == "--model") { ASSIGN_OR_RETURN(o.model_dir, text()); }
    else if (flag == "--backend") { ASSIGN_OR_RETURN(o.backend, text()); }
    else if (flag == "--tp") { ASSIGN_OR_RETURN(int64_t v, integer(1)); o.tp = static_cast<int>(v); }
    else if (flag == "--threads") { ASSIGN_OR_RETURN(int64_t v, integer(0)); o.threads = static_cast<int>(v); }
    else if (flag == "--kv-cache-dtype") {
      ASSIGN_OR_RETURN(o.kv_cache_dtype, text());
      if (auto d = engine::ParseKvDtype(o.kv_cache_dtype, engine::KvDtype::kF32); !d.ok()) {
        return absl::InvalidArgumentError("flag --kv-cache-dtype: " + std::string(d.status().message()));
      }
    }
    else if (flag == "--host") { ASSIGN_OR_RETURN(o.host, text()); }
    else if (flag == "--port") { ASSIGN_OR_RETURN(int64_t v, integer(0)); o.port = static_cast<int>(v); }
    else if (flag == "--served-model-name") { ASSIGN_OR_RETURN(o.served_model_name, text()); }
    else if (flag == "--api-key") {
      return absl::InvalidArgumentError(
          "--api-key is gone: a key on the command line is readable by every user in /proc/PID/cmdline; "
          "write it to a file (chmod 600) and pass --api-key-file PATH");
    }
    else if (flag == "--api-key-file") { ASSIGN_OR_RETURN(o.api_key_file, text()); }
    else if (flag == "--insecure") { o.insecure = true; }
    else if (flag == "--max-num-seqs") { ASSIGN_OR_RETURN(int64_t v, integer(1)); o.max_num_seqs = static_cast<int32_t>(v); }
    else if (flag == "--max-num-batched-tokens") { ASSIGN_OR_RETURN(int64_t v, integer(1)); o.max_num_batched_tokens = static_cast<int32_t>(v); }
    else if (flag == "--max-model-len") { ASSIGN_OR_RETURN(int64_t v, integer(1)); o.max_model_len = static_cast<int32_t>(v); }
    else if (flag == "--kv-tokens") { ASSIGN_OR_RETURN(o.kv_tokens, integer(1)); }
    else if (flag == "--memory-fraction") {
      ASSIGN_OR_RETURN(std::string v, text());
      char* end = nullptr;
      const double f = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0') return absl::InvalidArgumentError("flag --memory-fraction needs a number in (0, 1], got '" + v + "'");
      RETURN_IF_ERROR(engine::ValidateMemoryFraction(f, "flag --memory-fraction"));
      o.memory_fraction = f;
    }
    else if (flag == "--max-waiting") { ASSIGN_OR_RETURN(int64_t v, integer(0)); o.max_waiting = static_cast<int32_t>(v); }
    else if (flag == "--max-in-flight") { ASSIGN_OR_RETURN(int64_t v, integer(1)); o.max_in_flight = static_cast<int>(v); }
    else if (flag == "--max-connections") { ASSIGN_OR_RETURN(int64_t v, integer(1)); o.max_connections = static_cast<int>(v); }
    else if (flag == "--max-body-bytes") { ASSIGN_OR_RETURN(o.max_body_bytes, integer(1)); }
    else if (flag == "--header-timeout-ms") { ASSIGN_OR_RETURN(int64_t v, integer(1)); o.header_timeout = std::chrono::milliseconds(v); }
    else if (flag == "--body-timeout-ms") { ASSIGN_OR_RETURN(int64_t v, integer(1)); o.body_timeout = std::chrono::milliseconds(v); }
    else if (flag == "--idle-timeout-ms") { ASSIGN_OR_RETURN(int64_t v, integer(1)); o.idle_timeout = std::chrono::milliseconds(v); }
    else if (flag == "--write-timeout-ms") { ASSIGN_OR_RETURN(int64_t v, integer(1)); o.write_timeout = std::chrono::milliseconds(v); }
    else if (flag == "--shutdown-timeout-s") {
      ASSIGN_OR_RETURN(int64_t v, integer(0));
      o.shutdown_deadline = std::chrono::milliseconds(v * 1000);
    }
    else return absl::InvalidArgumentError("unknown flag " + flag);
  }
  if (o.model_dir.empty()) return absl::InvalidArgumentError("--model DIR is required");
  if (o.port > 65535) return absl::InvalidArgumentError("--port must be in [0, 65535]");
  // Nothing listens on a network address unauthenticated: anyone who reaches it could spend the
  // GPU (and read what others are generating through the metrics).
  if (o.api_key_file.empty() && !IsLoopbackHost(o.host) && !o.insecure) {
    return absl::InvalidArgumentError("refusing to serve on " + o.host +
                                      " without an API key: pass --api-key-file PATH, listen on 127.0.0.1, "
                                      "or pass --insecure");
  }
  return o;
}

absl::Status Serve(const ServeOptions& o, const std::function<bool()>& stop) {
  // The key file is checked before the model is loaded: a bad one fails in a second, not after.
  std::string api_key;
  if (!o.api_key_file.empty()) {
    ASSIGN_OR_RETURN(api_key, ReadSecretFile(o.api_key_file, "--api-key-file"));
  }
  const sigset_t stop_signals = BlockStopSignals();
  const std::string name = ServedName(o);
  ServeMetrics metrics(name);
  if (o.tp == 1) {
    engine::ModelLoadOptions lo;
    lo.backend = o.backend;
    lo.threads = o.threads;
    lo.kv_cache_dtype = o.kv_cache_dtype;
    ASSIGN_OR_RETURN(std::unique_ptr<engine::Model> model, engine::Model::Load(o.model_dir, lo));
    return ServeOnRank0(o, name, api_key, &metrics, *model, nullptr, stop_signals, stop);
  }
  // Tensor parallel inside this process: one thread per rank over loopback Gloo. Rank 0 serves;
  // the others run the steps it broadcasts until it stops them. An idle server leaves the
  // workers waiting in the step broadcast between requests, so the per-collective timeout must
  // outlast idle time (the engine sends no heartbeat steps yet).
  engine::RankThreadsOptions ro;
  ro.timeout = std::chrono::hours(24);
  return engine::RunRanksAsThreads(o.tp, [&](engine::Comm& comm) -> absl::Status {
    // Rank 0's model all-reduces through the timing wrapper: that is tandem_allreduce_seconds.
    engine::TimedComm timed(&comm, [&metrics](double s, size_t) { metrics.ObserveAllReduce(s); });
    engine::Comm* rank_comm = comm.rank() == 0 ? static_cast<engine::Comm*>(&timed) : &comm;
    engine::ModelLoadOptions lo;
    lo.backend = o.backend;
    lo.rank = comm.rank();
    lo.world = o.tp;
    lo.comm = rank_comm;
    lo.threads = o.threads;
    lo.kv_cache_dtype = o.kv_cache_dtype;
    ASSIGN_OR_RETURN(std::unique_ptr<engine::Model> model, engine::Model::Load(o.model_dir, lo));
    if (comm.rank() != 0) return engine::RunWorkerLoop(*model, comm);
    return ServeOnRank0(o, name, api_key, &metrics, *model, rank_comm, stop_signals, stop);
  }, ro);
}

int RunServeCommand(const std::vector<std::string>& args) {
  for (const std::string& a : args) {
    if (a == "--help" || a == "-h") {
      std::fputs(kServeUsage, stdout);
      return 0;
    }
  }
  absl::StatusOr<ServeOptions> o = ParseServeFlags(args);
  if (!o.ok()) {
    std::fprintf(stderr, "tandem-infer serve: %s\n%s", StatusText(o.status()).c_str(), kServeUsage);
    return 2;
  }
  absl::Status st = Serve(*o);
  if (!st.ok()) {
    std::fprintf(stderr, "tandem-infer serve: %s\n", StatusText(st).c_str());
    return 1;
  }
  return 0;
}

}  // namespace tandem::infer
