// tandem-agentd: flags and wiring only. Everything else is in the tandem_agent library.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "agentd/agent_readiness.h"
#include "agentd/agent_service.h"
#include "agentd/auth.h"
#include "agentd/control_service.h"
#include "agentd/engine_host.h"
#include "agentd/group_transport.h"
#include "agentd/listen_policy.h"
#include "agentd/rendezvous_store.h"
#include "agentd/metrics.h"
#include "agentd/model_roots.h"
#include "agentd/weights_manifest.h"
#include "common/log.h"
#include "common/net_address.h"
#include "common/status.h"
#include "common/systemd_notify.h"
#include "common/version.h"
#include "rpc/tls.h"

namespace {

constexpr const char* kUsage = R"(usage: tandem-agentd [flags]
  --listen HOST:PORT          gRPC address (port 0: any free port)       [0.0.0.0:50051, or
                              127.0.0.1:50051 when no authentication is configured]
  --node-name NAME            name reported in facts and metrics         [hostname]
  --model-root DIR            model folders must lie under DIR (repeatable); without one every
                              model path is refused (PERMISSION_DENIED)  [none]
  --token-file PATH           cluster token (mode 0600, >= 16 bytes); every RPC then needs
                              "authorization: Bearer <token>"            [none]
  --tls-cert PATH             this node's certificate (PEM), with --tls-key and --tls-ca: the gRPC
  --tls-key PATH              port speaks TLS and requires a client certificate signed by the CA
  --tls-ca PATH               (mutual TLS; `tandemctl certs` makes them)  [none]
  --insecure                  allow a non-loopback --listen without --token-file or TLS (anyone
                              who reaches the port controls the agent; preflight fails it)
  --sysfs-root DIR            where sysfs is mounted                     [/sys]
  --procfs-root DIR           where procfs is mounted                    [/proc]
  --state-dir DIR             hash cache and persistent state            [none: no cache]
                              (assignment.json: the group this rank was last told to join)
  --metrics-listen HOST:PORT  Prometheus /metrics (port 0: any free)     [none: off]
  --hash-once DIR             hash DIR once, print a summary, exit (benchmark)
  --threads N                 hashing threads for --hash-once            [cores]
  --version, --help
Without --token-file and TLS the agent authenticates nobody, so it listens on loopback only:
a non-loopback --listen is refused unless --insecure is given.
On start it prints one line to stdout:
  tandem-agentd ready node=NAME grpc=HOST:PORT metrics=HOST:PORT|off
)";

struct Flags {
  std::string listen;  // "" = agentd/listen_policy.h decides
  std::string node_name;
  std::string sysfs_root = "/sys";
  std::string procfs_root = "/proc";
  std::string state_dir;
  std::string metrics_listen;
  std::string hash_once;
  std::string token_file;
  std::vector<std::string> model_roots;
  tandem::rpc::TlsFiles tls;
  bool insecure = false;
  unsigned threads = 0;
};

// Accepts "--flag value" and "--flag=value". Returns false (after printing why) on bad input.
bool ParseFlags(int argc, char** argv, Flags* f) {
  std::map<std::string, std::string*> strings = {
      {"--listen", &f->listen},         {"--node-name", &f->node_name},
      {"--sysfs-root", &f->sysfs_root}, {"--procfs-root", &f->procfs_root},
      {"--state-dir", &f->state_dir},   {"--metrics-listen", &f->metrics_listen},
      {"--hash-once", &f->hash_once},   {"--token-file", &f->token_file},
      {"--tls-cert", &f->tls.cert},     {"--tls-key", &f->tls.key},
      {"--tls-ca", &f->tls.ca}};
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], value;
    bool has_value = false;
    if (auto eq = arg.find('='); eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_value = true;
    }
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      std::exit(0);
    }
    if (arg == "--version") {
      std::cout << "tandem-agentd " << tandem::Version() << "\n";
      std::exit(0);
    }
    if (arg == "--insecure") {
      if (has_value) {
        std::cerr << "tandem-agentd: --insecure takes no value\n";
        return false;
      }
      f->insecure = true;
      continue;
    }
    bool known = strings.count(arg) || arg == "--threads" || arg == "--model-root";
    if (!known) {
      std::cerr << "tandem-agentd: unknown flag " << arg << "\n" << kUsage;
      return false;
    }
    if (!has_value) {
      if (i + 1 >= argc) {
        std::cerr << "tandem-agentd: " << arg << " needs a value\n";
        return false;
      }
      value = argv[++i];
    }
    if (arg == "--model-root") {
      f->model_roots.push_back(value);
    } else if (arg == "--threads") {
      char* end = nullptr;
      long n = std::strtol(value.c_str(), &end, 10);
      if (*end != '\0' || n < 0 || n > 1024) {
        std::cerr << "tandem-agentd: --threads wants a number 0..1024, got " << value << "\n";
        return false;
      }
      f->threads = static_cast<unsigned>(n);
    } else {
      *strings[arg] = value;
    }
  }
  return true;
}

// "HOST:PORT" -> HOST ("[::]" stays bracketed).
std::string HostOf(const std::string& host_port) {
  auto colon = host_port.rfind(':');
  return colon == std::string::npos ? host_port : host_port.substr(0, colon);
}

int HashOnce(const Flags& flags) {
  tandem::agentd::WeightsHasher hasher(flags.state_dir);
  tandem::agentd::HashOptions opts;
  opts.threads = flags.threads;
  auto m = hasher.Hash(flags.hash_once, opts);
  if (!m.ok()) {
    std::cerr << "tandem-agentd: " << m.status() << "\n";
    return 1;
  }
  size_t cached = 0, errors = 0;
  for (const auto& f : m->files()) {
    cached += f.cached();
    errors += !f.error().empty();
    std::cout << f.sha256() << "  " << f.path() << (f.cached() ? "  (cached)" : "")
              << (f.error().empty() ? "" : "  ERROR " + f.error()) << "\n";
  }
  std::printf("files=%d cached=%zu errors=%zu bytes=%llu seconds=%.3f hashed_MBps=%.1f effective_MBps=%.1f\n",
              m->files_size(), cached, errors, static_cast<unsigned long long>(m->total_bytes()), m->seconds(),
              m->hashed_bytes_per_second() / 1e6, m->seconds() > 0 ? m->total_bytes() / m->seconds() / 1e6 : 0.0);
  return errors ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  if (!ParseFlags(argc, argv, &flags)) return 2;
  if (!flags.hash_once.empty()) return HashOnce(flags);  // a local command: no server, no roots
  if (flags.node_name.empty()) {
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    flags.node_name = host;
  }
  tandem::SetLogTag(flags.node_name);

  // Block the stop signals before any thread exists, so every thread inherits the mask and
  // the main thread alone receives them through sigwait().
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  tandem::agentd::FactsRoots roots{flags.sysfs_root, flags.procfs_root};
  tandem::agentd::AgentMetrics metrics(roots, flags.node_name);
  std::string metrics_addr = "off";
  if (!flags.metrics_listen.empty()) {
    absl::Status st = metrics.Listen(flags.metrics_listen);
    if (!st.ok()) {
      TLOG(ERROR) << tandem::StatusText(st);
      return 1;
    }
    metrics_addr = HostOf(flags.metrics_listen) + ":" + std::to_string(metrics.port());
  }

  std::string token;
  if (!flags.token_file.empty()) {
    auto t = tandem::agentd::ReadTokenFile(flags.token_file);
    if (!t.ok()) {
      TLOG(ERROR) << tandem::StatusText(t.status()) << ": refusing to start without the cluster token";
      return 2;
    }
    token = std::move(*t);
  }
  auto tls = tandem::rpc::LoadTls(flags.tls, "--tls-cert/--tls-key/--tls-ca");
  if (!tls.ok()) {
    TLOG(ERROR) << tandem::StatusText(tls.status());
    return 2;
  }
  auto listen = tandem::agentd::DecideListen(flags.listen, !token.empty() || tls->has_value(), flags.insecure);
  if (!listen.ok()) {
    TLOG(ERROR) << tandem::StatusText(listen.status());
    return 2;
  }
  flags.listen = listen->address;
  auto model_roots = tandem::agentd::ModelRoots::Create(flags.model_roots);
  if (!model_roots.ok()) {
    TLOG(ERROR) << tandem::StatusText(model_roots.status());
    return 2;
  }
  const tandem::agentd::TokenAuth auth(token);

  tandem::v1::SecurityFact security;
  security.set_token_auth(!token.empty());
  security.set_tls(tls->has_value());
  security.set_client_cert_required(tls->has_value());
  security.set_listen(flags.listen);
  security.set_loopback_only(tandem::IsLoopbackHost(flags.listen));
  security.set_insecure(listen->insecure);
  for (const auto& r : model_roots->roots()) security.add_model_roots(r);
  if (tls->has_value()) {
    security.set_tls_subject((*tls)->subject);
    security.set_tls_not_after_unix((*tls)->not_after_unix);
  }
  if (security.insecure()) {
    TLOG(WARN) << "INSECURE: listening on " << flags.listen
               << " with neither a cluster token nor TLS (--insecure): anyone who reaches this port controls "
                  "this agent. Preflight reports it as a failed check.";
  }
  if (model_roots->empty()) {
    TLOG(WARN) << "no --model-root: every model path will be refused (give the folder that holds the models)";
  }

  tandem::agentd::AgentConfig agent_config{flags.node_name, roots, flags.state_dir};
  agent_config.auth = &auth;
  agent_config.model_roots = *model_roots;
  agent_config.security = security;
  tandem::agentd::AgentService service(agent_config, &metrics);

  tandem::agentd::RendezvousStore store;
  tandem::agentd::EngineHostOptions host_options;
  host_options.node_name = flags.node_name;
  host_options.state_dir = flags.state_dir;
  host_options.token = token;
  host_options.store_credentials = tandem::rpc::ChannelCredentials(*tls);
  host_options.model_roots = &agent_config.model_roots;
  host_options.local_store = &store;
  // A group whose threads stayed stuck after the comm abort holds memory (GPU memory for cuda)
  // that only a new process gets back. The port is already free; exit a second later (the
  // LeaveGroup reply and the log lines get out first) and let systemd start a clean agent.
  host_options.on_stuck = [](const std::string& what) {
    std::thread([what] {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      TLOG(ERROR) << "exiting with status 75 so that a fresh agent starts: " << what;
      std::fflush(nullptr);
      std::_Exit(75);
    }).detach();
  };
  tandem::agentd::EngineHost host(host_options);
  metrics.SetRankStatusSource([&host] { return host.Status(); });
  tandem::agentd::ControlService control(&host, &store, &auth);

  grpc::ServerBuilder builder;
  // Two agents must not share a port (gRPC sets SO_REUSEPORT by default: both would say ready).
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  int grpc_port = 0;
  builder.AddListeningPort(flags.listen, tandem::rpc::ServerCredentials(*tls), &grpc_port);
  builder.RegisterService(&service);
  builder.RegisterService(&control);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || grpc_port == 0) {
    TLOG(ERROR) << "cannot listen on " << flags.listen;
    return 1;
  }
  TLOG(INFO) << "tandem-agentd " << tandem::Version() << " sysfs=" << flags.sysfs_root
             << " procfs=" << flags.procfs_root << " state=" << (flags.state_dir.empty() ? "none" : flags.state_dir)
             << " auth=" << (auth.enabled() ? "token" : "none") << " tls="
             << (tls->has_value() ? "mutual (" + (*tls)->subject + ")" : std::string("off"))
             << " model_roots=" << model_roots->roots().size() << " cuda="
             << (!tandem::agentd::BuildHasCuda() ? std::string("not in this build")
                 : std::getenv("CUDA_VISIBLE_DEVICES") ? "device 0 of CUDA_VISIBLE_DEVICES=" +
                                                              std::string(std::getenv("CUDA_VISIBLE_DEVICES"))
                                                        : std::string("device 0 (CUDA_VISIBLE_DEVICES unset)"));
  std::cout << "tandem-agentd ready node=" << flags.node_name << " grpc=" << HostOf(flags.listen) << ":"
            << grpc_port << " metrics=" << metrics_addr << std::endl;

  // READY=1 only once the server answers its own GetFacts; then the watchdog pings vouch for it.
  tandem::agentd::AgentSelfCheck self_check(server.get(), token);
  const std::string serving_line = "serving gRPC on " + HostOf(flags.listen) + ":" + std::to_string(grpc_port);
  absl::StatusOr<int> sig = tandem::agentd::AnnounceReadyAndWait(self_check, serving_line, stop_signals);
  if (!sig.ok()) {
    TLOG(ERROR) << tandem::StatusText(sig.status());
    return 1;
  }
  TLOG(INFO) << "signal " << *sig << ": shutting down";
  tandem::systemd::NotifyStopping("signal " + std::to_string(*sig) + ": shutting down");
  // The engine rank first (bounded): the API stops, the comm closes, watchers are released.
  host.Shutdown();
  // In-flight RPCs get 2 s to finish, then they are cancelled (a long hash notices within
  // ~200 ms). Measured: while any client still holds a connection (a controller keeps its
  // channel open) this gRPC waits out the whole deadline even with no RPC in flight, so keep
  // it short; unary GetFacts takes milliseconds.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  server->Wait();
  metrics.SetRankStatusSource(nullptr);
  TLOG(INFO) << "gRPC server stopped";
  return 0;
}
