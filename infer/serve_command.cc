#include "infer/serve_command.h"

#include <pthread.h>
#include <signal.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <thread>

#include "common/failpoint.h"
#include "common/log.h"
#include "common/systemd_notify.h"
#include "infer/loading_server.h"
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

constexpr char kServeFooter[] =
    "KV pool: --kv-tokens N exactly, else --memory-fraction F in (0, 1] (default: cpu 0.70 of MemAvailable; cuda\n"
    "0.90 of the GPU's memory, weights included). --backend cuda uses CUDA device 0 of what CUDA_VISIBLE_DEVICES\n"
    "exposes. Without --api-key-file the server listens on loopback only (a non-loopback --host needs --insecure).\n"
    "The port is bound before the model loads: a taken port fails at once; while loading, every route answers\n"
    "503 (/health: {\"status\": \"loading\"}). HTTP limits and deadlines: docs/http.md.";

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
                          const sigset_t& stop_signals, const std::function<bool()>& stop,
                          LoadingServer* loading) {
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
  // The watchdog's keep-alives come from the engine thread's own loop (each step, about once a
  // second idle): an engine stuck in a collective stops them.
  systemd::WatchdogKicker watchdog;
  so.engine.on_turn = [&watchdog] { watchdog.Kick(); };
  // The loading answers end here and the real server binds the same port: without SO_REUSEPORT
  // only one may hold it, so it is free for the moment the engine and its KV pool are set up.
  loading->Stop();
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
  systemd::NotifyReady("serving " + name + " on " + o.host + ":" + std::to_string(serving.server().port()));

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
  systemd::NotifyStopping("draining (up to " + std::to_string(o.shutdown_deadline.count()) + " ms)");
  serving.StopListening();  // the port is free at once; requests in flight go on draining
  const int left = serving.Drain(o.shutdown_deadline);
  if (left > 0) TLOG(WARN) << left << " request(s) still running at the shutdown deadline: aborting them";
  serving.Stop();  // aborts what is left, so the streaming handlers end
  return driver.Stop();  // releases the workers
}

}  // namespace

void AddServeFlags(CLI::App* command, ServeOptions* o) {
  command->footer(kServeFooter);
  auto ms = [command](const std::string& name, std::chrono::milliseconds* out, const std::string& help) {
    command
        ->add_option_function<int64_t>(
            name, [out](const int64_t& v) { *out = std::chrono::milliseconds(v); }, help)
        ->check(CLI::Range(int64_t{1}, int64_t{86400000}).description(""))
        ->type_name("MS");
  };
  command->add_option("--model", o->model_dir, "Hugging Face model folder")->type_name("DIR")->required();
  command->add_option("--backend", o->backend, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  command->add_option("--tp", o->tp, "ranks as threads of this process")->check(CLI::Range(1, 1024).description(""));
  command->add_option("--threads", o->threads, "matmul threads per rank (0: cores / tp)")
      ->check(CLI::Range(0, 4096).description(""));
  command
      ->add_option("--kv-cache-dtype", o->kv_cache_dtype,
                   "the KV cache's element type: auto (float32), f32, bf16, fp8 (e4m3 with per-layer scales)")
      ->check([](const std::string& v) {
        absl::StatusOr<engine::KvDtype> d = engine::ParseKvDtype(v, engine::KvDtype::kF32);
        return d.ok() ? std::string() : std::string(d.status().message());
      });
  command->add_option("--host", o->host, "listen address");
  command->add_option("--port", o->port, "listen port (0: any free port)")->check(CLI::Range(0, 65535).description(""));
  command->add_option("--served-model-name", o->served_model_name, "the model's name in the API [folder name]");
  command->add_option("--api-key-file", o->api_key_file,
                      "clients must send 'Authorization: Bearer <key>' (the file: mode 0600, at least 16 bytes)")
      ->type_name("PATH");
  // Gone: a key on the command line is readable by every user in /proc/PID/cmdline. Kept as a hidden
  // flag so that its error says what to do instead (and never echoes the key).
  command->add_option("--api-key")->group("")->check([](const std::string&) {
    return std::string("--api-key is gone: a key on the command line is readable by every user in /proc/PID/cmdline; "
                       "write it to a file (chmod 600) and pass --api-key-file PATH");
  });
  command->add_flag("--insecure", o->insecure, "allow a non-loopback --host without an API key");
  command->add_option("--max-num-seqs", o->max_num_seqs, "sequences in one batch")->check(CLI::PositiveNumber.description(""));
  command->add_option("--max-num-batched-tokens", o->max_num_batched_tokens, "tokens in one step")
      ->check(CLI::PositiveNumber.description(""));
  command->add_option("--max-model-len", o->max_model_len, "prompt + output tokens (0: min(4096, the model's))")
      ->check(CLI::PositiveNumber.description(""));
  command->add_option("--kv-tokens", o->kv_tokens, "KV pool size in tokens (0: from --memory-fraction)")
      ->check(CLI::PositiveNumber.description(""));
  command
      ->add_option("--memory-fraction", o->memory_fraction,
                   "KV pool sizing, in (0, 1] (0: the backend's default: cpu 0.70 of MemAvailable, cuda 0.90)")
      ->check([](const std::string& v) {
        char* end = nullptr;
        const double f = std::strtod(v.c_str(), &end);
        if (v.empty() || *end != '\0') return "needs a number in (0, 1], got '" + v + "'";
        const absl::Status st = engine::ValidateMemoryFraction(f, "the fraction");
        return st.ok() ? std::string() : std::string(st.message());
      });
  command->add_option("--max-waiting", o->max_waiting, "requests queued beyond max-num-seqs")
      ->check(CLI::NonNegativeNumber.description(""));
  command->add_option("--max-in-flight", o->max_in_flight, "HTTP requests in flight (0: max-num-seqs + max-waiting + 8)")
      ->check(CLI::PositiveNumber.description(""));
  command->add_option("--max-connections", o->max_connections, "open connections (0: 1024)")
      ->check(CLI::PositiveNumber.description(""));
  command->add_option("--max-body-bytes", o->max_body_bytes, "request body bytes (0: 4 MiB)")
      ->check(CLI::PositiveNumber.description(""));
  ms("--header-timeout-ms", &o->header_timeout, "deadline for a request's head [10000]");
  ms("--body-timeout-ms", &o->body_timeout, "deadline for a request's body [60000]");
  ms("--idle-timeout-ms", &o->idle_timeout, "an idle keep-alive connection is closed after [30000]");
  ms("--write-timeout-ms", &o->write_timeout, "deadline for a client to take a response's bytes [30000]");
  command
      ->add_option_function<int64_t>(
          "--shutdown-timeout-s", [o](const int64_t& s) { o->shutdown_deadline = std::chrono::seconds(s); },
          "SIGTERM lets the requests in flight finish this long")
      ->check(CLI::Range(int64_t{0}, int64_t{86400}).description(""))
      ->type_name("S")
      ->default_str("10");
}

absl::Status CheckServeOptions(const ServeOptions& o) {
  // Nothing listens on a network address unauthenticated: anyone who reaches it could spend the
  // GPU (and read what others are generating through the metrics).
  if (o.api_key_file.empty() && !IsLoopbackHost(o.host) && !o.insecure) {
    return absl::InvalidArgumentError("refusing to serve on " + o.host +
                                      " without an API key: pass --api-key-file PATH, listen on 127.0.0.1, "
                                      "or pass --insecure");
  }
  return absl::OkStatus();
}

absl::StatusOr<ServeOptions> ParseServeFlags(const std::vector<std::string>& args) {
  ServeOptions o;
  auto app = cli::NewApp("serve", "tandem-infer serve", [] { return std::string(); });
  AddServeFlags(app.get(), &o);
  RETURN_IF_ERROR(cli::ParseToStatus(*app, args));
  RETURN_IF_ERROR(CheckServeOptions(o));
  return o;
}

absl::Status Serve(const ServeOptions& o, const std::function<bool()>& stop) {
  // The key file is checked before the model is loaded: a bad one fails in a second, not after.
  std::string api_key;
  if (!o.api_key_file.empty()) {
    ASSIGN_OR_RETURN(api_key, ReadSecretFile(o.api_key_file, "--api-key-file"));
  }
  const sigset_t stop_signals = BlockStopSignals();
  // The API port before anything slow: a port another process holds fails now, naming the
  // address, and clients get 503 "loading" (with the progress) instead of "connection refused".
  engine::LoadProgress progress;
  ASSIGN_OR_RETURN(std::unique_ptr<LoadingServer> loading,
                   LoadingServer::Start(o.host, o.port, [&progress] { return engine::DescribeLoadProgress(progress); }));
  ServeOptions bound = o;
  bound.port = loading->port();  // port 0: the one the OS gave, kept for the real server
  // No URL in this line: scripts take the first "http://" they see as the ready server's.
  std::printf("tandem-infer loading model=%s port=%d (503 until the serving line)\n", o.model_dir.c_str(),
              bound.port);
  std::fflush(stdout);
  engine::LoadProgressLog progress_log(o.model_dir, &progress);
  // Failpoint "serve_slow_load": the load takes 3 s longer, so a test can see the 503s it gets.
  if (FailpointEnabled("serve_slow_load")) std::this_thread::sleep_for(std::chrono::seconds(3));
  const std::string name = ServedName(o);
  ServeMetrics metrics(name);
  if (o.tp == 1) {
    engine::ModelLoadOptions lo;
    lo.backend = o.backend;
    lo.threads = o.threads;
    lo.kv_cache_dtype = o.kv_cache_dtype;
    lo.progress = &progress;
    ASSIGN_OR_RETURN(std::unique_ptr<engine::Model> model, engine::Model::Load(o.model_dir, lo));
    progress_log.Done();
    return ServeOnRank0(bound, name, api_key, &metrics, *model, nullptr, stop_signals, stop, loading.get());
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
    lo.progress = &progress;  // the ranks' reads add up; the percentage is per tensor
    ASSIGN_OR_RETURN(std::unique_ptr<engine::Model> model, engine::Model::Load(o.model_dir, lo));
    if (comm.rank() != 0) return engine::RunWorkerLoop(*model, comm);
    progress_log.Done();
    return ServeOnRank0(bound, name, api_key, &metrics, *model, rank_comm, stop_signals, stop, loading.get());
  }, ro);
}

int RunServeCommand(const ServeOptions& options) {
  absl::Status st = Serve(options);
  if (!st.ok()) {
    std::fprintf(stderr, "tandem-infer serve: %s\n", StatusText(st).c_str());
    return 1;
  }
  return 0;
}

}  // namespace tandem::infer
