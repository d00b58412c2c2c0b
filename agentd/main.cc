// tandem-agentd: flags and wiring only. Everything else is in the tandem_agent library.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
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
#include "agentd/link_rates.h"
#include "agentd/listen_policy.h"
#include "agentd/rendezvous_store.h"
#include "agentd/metrics.h"
#include "agentd/model_roots.h"
#include "agentd/node_facts.h"
#include "agentd/weights_manifest.h"
#include "common/cli.h"
#include "common/crash_report.h"
#include "common/log.h"
#include "common/net_address.h"
#include "common/status.h"
#include "common/systemd_notify.h"
#include "common/version.h"
#include "rpc/tls.h"

namespace {

constexpr char kDescription[] =
    "tandem-agentd: the node agent. Reports node facts, hashes model weights, exports metrics and hosts one rank "
    "of the engine (on the head also the OpenAI API and the rendezvous store).";

constexpr char kFooter[] = R"(Without --token-file and TLS the agent authenticates nobody, so it listens on loopback only:
a non-loopback --listen is refused unless --insecure is given.
On start it prints one line to stdout:
  tandem-agentd ready node=NAME grpc=HOST:PORT metrics=HOST:PORT|off
Exit status: 0 stopped by SIGTERM/SIGINT, 1 could not start (a port in use, ...), 2 bad usage, token,
TLS files or model roots, 75 a group stayed stuck (a fresh process gets its memory back).)";

// What preflight's agent-build-parity check compares between nodes (agentd/node_facts.cc): the
// version, the binary's sha256 and the image digest; so an operator can compare by hand too.
std::string BuildLine() {
  const tandem::v1::AgentBuild b = tandem::agentd::ReadAgentBuild();
  std::string line = "tandem-agentd " + b.version() + " sha256:" + b.binary_sha256();
  if (!b.image_digest().empty()) line += " image " + b.image_digest();
  if (!b.error().empty()) line += " (" + b.error() + ")";
  return line;
}

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
  std::vector<std::string> link_interfaces;  // empty: every interface with IPv4 but lo
  tandem::rpc::TlsFiles tls;
  bool insecure = false;
  unsigned threads = 0;
};

// The flags into `f`. nullopt: start; otherwise the exit code (--help, --version, a usage error).
std::optional<int> ParseFlags(int argc, char** argv, Flags* f) {
  auto app = tandem::cli::NewApp("tandem-agentd", kDescription, BuildLine);
  app->footer(kFooter);
  app->add_option("--listen", f->listen,
                  "gRPC address (port 0: any free port) [0.0.0.0:50051, or 127.0.0.1:50051 when no authentication "
                  "is configured]")
      ->type_name("HOST:PORT");
  app->add_option("--node-name", f->node_name, "name reported in facts and metrics [hostname]")->type_name("NAME");
  tandem::cli::AddRepeated(app.get(), "--model-root", &f->model_roots,
                           "model folders must lie under DIR (repeatable); without one every model path is refused "
                           "(PERMISSION_DENIED)")
      ->type_name("DIR");
  app->add_option("--token-file", f->token_file,
                  "cluster token (mode 0600, >= 16 bytes); every RPC then needs \"authorization: Bearer <token>\"")
      ->type_name("PATH");
  app->add_option("--tls-cert", f->tls.cert,
                  "this node's certificate (PEM); with --tls-key and --tls-ca the gRPC port speaks TLS and requires "
                  "a client certificate signed by the CA (mutual TLS; `tandemctl certs` makes them)")
      ->type_name("PATH");
  app->add_option("--tls-key", f->tls.key, "this node's private key (PEM)")->type_name("PATH");
  app->add_option("--tls-ca", f->tls.ca, "the cluster CA (PEM) that signs the clients' certificates")->type_name("PATH");
  app->add_flag("--insecure", f->insecure,
                "allow a non-loopback --listen without --token-file or TLS (anyone who reaches the port controls "
                "the agent; preflight fails it)");
  app->add_option("--sysfs-root", f->sysfs_root, "where sysfs is mounted")->type_name("DIR");
  app->add_option("--procfs-root", f->procfs_root, "where procfs is mounted")->type_name("DIR");
  app->add_option("--state-dir", f->state_dir,
                  "hash cache and persistent state (assignment.json: the group this rank was last told to join) "
                  "[none: no cache]")
      ->type_name("DIR");
  app->add_option("--metrics-listen", f->metrics_listen, "Prometheus /metrics (port 0: any free) [none: off]")
      ->type_name("HOST:PORT");
  tandem::cli::AddRepeated(app.get(), "--link-interfaces", &f->link_interfaces,
                           "interfaces whose bytes/s /metrics exports (tandem_link_*), sampled every 5 s; "
                           "comma-separated or repeated [every interface with IPv4 but lo]")
      ->delimiter(',')
      ->type_name("IF,IF");
  app->add_option("--hash-once", f->hash_once, "hash DIR once, print a summary, exit (benchmark)")->type_name("DIR");
  app->add_option("--threads", f->threads, "hashing threads for --hash-once, 0..1024 (0: one per core)")
      ->check(CLI::Range(0, 1024).description(""))
      ->type_name("N");
  return tandem::cli::Parse(*app, std::vector<std::string>(argv + 1, argv + argc));
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
  tandem::InstallCrashReport(argv[0]);
  Flags flags;
  if (std::optional<int> rc = ParseFlags(argc, argv, &flags)) return *rc;
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
  std::shared_ptr<tandem::agentd::LinkRates> link_rates;  // only sampled when someone can scrape it
  if (!flags.metrics_listen.empty()) {
    absl::Status st = metrics.Listen(flags.metrics_listen);
    if (!st.ok()) {
      TLOG(ERROR) << tandem::StatusText(st);
      return 1;
    }
    metrics_addr = HostOf(flags.metrics_listen) + ":" + std::to_string(metrics.port());
    link_rates = std::make_shared<tandem::agentd::LinkRates>(roots, flags.link_interfaces);
    link_rates->Start(std::chrono::seconds(5));
    metrics.SetLinkRates(link_rates);
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
  tandem::agentd::FabricCheckOptions fabric_options;
  fabric_options.local_store = &store;
  fabric_options.token = token;
  fabric_options.store_credentials = host_options.store_credentials;
  fabric_options.busy = [&host] { return tandem::agentd::FabricCheckBusyReason(host.Status()); };
  tandem::agentd::FabricCheck fabric(fabric_options);
  tandem::agentd::ControlService control(&host, &store, &auth, &fabric);

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
  if (link_rates) link_rates->Stop();
  TLOG(INFO) << "gRPC server stopped";
  return 0;
}
