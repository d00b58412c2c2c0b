// Fuzz target: the agent's gRPC request handlers (Agent and AgentControl services), reached the
// way a network client reaches them — raw request bytes through a real gRPC server (in-process
// channel) with the cluster token check on, so the server's own parsing, the auth check and
// every handler behind it run on hostile input.
//
// Input: up to kMaxCalls calls, each
//   [method byte][auth byte][request length, 2 bytes little-endian][request bytes]
// method: 255 is Watch (see kMethods), any other value indexes the rest of kMethods modulo
// their count; auth: 0 none, 1 wrong token, 2 not "Bearer", anything else the right token (so
// most inputs get past the check). The corpus is written by
// tests/fuzz/make_agent_rpc_corpus.py.
//
// The environment, set up once per process inside one temp dir (removed at exit): a fake
// sysfs/procfs node tree, a state dir, and one model root holding a tiny random model (a few
// KB, loads in milliseconds) with a tiny tokenizer, so LoadModel -> JoinGroup -> Generate can
// be reached within one input. Model paths that start with "$ROOT" are rewritten to the
// model root (the corpus cannot know the temp dir); every other path goes to the agent as sent,
// and its --model-root confinement refuses it.
//
// What the harness bounds, and why (each is an operator's knob, honoured as given by design;
// unbounded, one input would take seconds or spawn thousands of threads, not find bugs):
//   JoinGroup: rendezvous and collective deadlines <= 100 ms, API on 127.0.0.1:0, the head's
//     store endpoint (ranks > 0) this agent's own unix socket in the temp dir (the real client,
//     GrpcStore, then rendezvouses and times out waiting for rank 0), comm_host 127.0.0.1, comm_env
//     dropped (it is setenv()'d process-wide), kv_tokens in (4096, 2^36) -> 4096, max_num_seqs
//     <= 4, max_model_len <= 512;
//   LoadModel: threads 0..1024 -> at most 2; Generate: timeout <= 500 ms, max_tokens <= 16;
//   values past those ranges (threads > 1024; kv_tokens >= 2^36, over 2 TB for the tiny model)
//   go as sent: the agent must refuse them (both used to kill it: 30000 threads, a 1e12-token
//   KV pool);
//   StoreGet: wait <= 10 ms; Watch: interval 50 ms, one message read, then cancelled.
// Every call has a 2 s deadline and reads at most 8 response messages.
//
// What counts as a bug (besides sanitizer reports): a call without the right token that
// succeeds or returns any message; UNKNOWN status (a handler threw); a handler still running
// 10 s after its call ended; a LeaveGroup (the harness's reset between inputs) that fails.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <google/protobuf/stubs/logging.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/server_interceptor.h>

#include "agentd/agent_service.h"
#include "agentd/auth.h"
#include "agentd/control_service.h"
#include "agentd/engine_host.h"
#include "agentd/model_roots.h"
#include "agentd/node_facts.h"
#include "agentd/rendezvous_store.h"
#include "common/log.h"
#include "infer/make_model.h"
#include "tests/common/fake_node.h"

namespace {

using namespace tandem;  // NOLINT: agentd, v1 and testing names below
using std::chrono::milliseconds;

constexpr int kMaxCalls = 4;
constexpr int kMaxReads = 8;  // response messages read per call (Watch: 1)
constexpr char kToken[] = "fuzz-cluster-token-0123456789abcdef";
constexpr char kRootPlaceholder[] = "$ROOT";
constexpr auto kCallDeadline = std::chrono::seconds(2);
constexpr auto kHandlerGrace = std::chrono::seconds(10);

[[noreturn]] void Bug(const std::string& what) {
  std::fprintf(stderr, "agent_rpc_fuzz: %s\n", what.c_str());
  std::abort();
}

// A tiny byte-level BPE tokenizer (a few words) with the ChatML special tokens, so text prompts
// and the chat template reach the tokenizer without loading Qwen3's 11 MB one for every input.
constexpr char kTokenizerJson[] = R"({"version": "1.0",
 "added_tokens": [
  {"id": 9, "content": "<|endoftext|>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
  {"id": 10, "content": "<|im_start|>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
  {"id": 11, "content": "<|im_end|>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}],
 "normalizer": {"type": "NFC"},
 "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
 "post_processor": {"type": "ByteLevel"}, "decoder": {"type": "ByteLevel"},
 "model": {"type": "BPE", "dropout": null, "unk_token": null, "byte_fallback": false,
  "vocab": {"h": 0, "e": 1, "l": 2, "o": 3, "\u0120": 4, "he": 5, "ll": 6, "hell": 7, "hello": 8},
  "merges": ["h e", "l l", "he ll", "hell o"]}})";

// Counts RPCs whose server side still exists: the interceptor lives as long as the call's
// ServerContext, which outlives the handler. Zero means no handler is running.
std::atomic<int> g_server_calls{0};

class CallCounter final : public grpc::experimental::Interceptor {
 public:
  CallCounter() { g_server_calls.fetch_add(1); }
  ~CallCounter() override { g_server_calls.fetch_sub(1); }
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override { methods->Proceed(); }
};

class CallCounterFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(grpc::experimental::ServerRpcInfo*) override {
    return new CallCounter();
  }
};

// The agent under test and its server, one per process.
struct Agent {
  std::string dir;  // everything this target writes lives under here
  std::string model_root;
  std::string socket;  // "unix:<dir>/agent.sock": the same server, for a worker's GrpcStore
  agentd::TokenAuth auth{kToken};
  agentd::ModelRoots model_roots;
  agentd::RendezvousStore store;
  std::unique_ptr<agentd::AgentService> service;
  std::unique_ptr<agentd::EngineHost> host;
  std::unique_ptr<agentd::ControlService> control;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<grpc::GenericStub> stub;
};

Agent* g_agent = nullptr;
// AGENT_RPC_FUZZ_VERBOSE=1: one line per call (method, auth, status, messages) on stderr, to see
// what a seed or a crashing input does.
const bool g_verbose = std::getenv("AGENT_RPC_FUZZ_VERBOSE") != nullptr;

void MustOk(const absl::Status& st, const char* what) {
  if (!st.ok()) Bug(std::string(what) + ": " + std::string(st.message()));
}

// At exit: stop the server and the engine, remove the temp dir. The objects themselves are left
// alone (still reachable, so not leaks): gRPC's globals may already be gone by then.
void StopAgent() {
  Agent* a = g_agent;
  if (a == nullptr) return;
  a->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  a->host->Shutdown();
  std::error_code ec;
  std::filesystem::remove_all(a->dir, ec);
}

Agent* StartAgent() {
  // A refused call logs a warning: millions of them otherwise. TANDEM_LOG_LEVEL still wins.
  if (std::getenv("TANDEM_LOG_LEVEL") == nullptr) SetMinLogLevel(LogLevel::kError);
  // protobuf logs every string field with invalid UTF-8 it refuses to parse.
  if (!g_verbose) google::protobuf::SetLogHandler(nullptr);
  // The first sha256 initialises OpenSSL (config file, error state) on the calling thread; done
  // on a gRPC pool thread that later exits, those 904 bytes are never freed and LeakSanitizer
  // reports them at exit. The agent build fact (a sha256 of this binary, cached) is that first
  // use: take it here, on the main thread.
  agentd::ReadAgentBuild();
  auto a = std::make_unique<Agent>();
  std::string tmpl = (std::filesystem::temp_directory_path() / "tandem-agent-rpc-fuzz-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) Bug("mkdtemp failed");
  a->dir = tmpl;
  const auto [sysfs, procfs] = testing::WriteFakeNode(a->dir + "/node", testing::FakeNodeOptions{});
  const std::string state_dir = a->dir + "/state";
  a->model_root = a->dir + "/models";
  std::filesystem::create_directories(state_dir);
  std::filesystem::create_directories(a->model_root);

  infer::MakeModelOptions mo;
  mo.out_dir = a->model_root + "/tiny";
  mo.vocab_size = 64;
  mo.hidden_size = 16;
  mo.num_layers = 1;
  mo.num_heads = 2;
  mo.num_kv_heads = 1;
  mo.head_dim = 8;
  mo.num_experts = 2;
  mo.experts_per_tok = 1;
  mo.moe_intermediate_size = 8;
  MustOk(infer::MakeRandomQwen3MoeModel(mo), "writing the tiny model");
  std::ofstream(mo.out_dir + "/tokenizer.json") << kTokenizerJson;

  auto roots = agentd::ModelRoots::Create({a->model_root});
  MustOk(roots.status(), "model roots");
  a->model_roots = std::move(*roots);

  agentd::AgentConfig config;
  config.node_name = "fuzz";
  config.roots = agentd::FactsRoots{sysfs, procfs};
  config.state_dir = state_dir;
  config.auth = &a->auth;
  config.model_roots = a->model_roots;
  a->service = std::make_unique<agentd::AgentService>(config, nullptr);

  agentd::EngineHostOptions ho;
  ho.node_name = "fuzz";
  ho.state_dir = state_dir;
  ho.token = kToken;
  ho.model_roots = &a->model_roots;
  ho.local_store = &a->store;
  a->host = std::make_unique<agentd::EngineHost>(ho);
  a->control = std::make_unique<agentd::ControlService>(a->host.get(), &a->store, &a->auth);

  grpc::ServerBuilder builder;
  a->socket = "unix:" + a->dir + "/agent.sock";
  builder.AddListeningPort(a->socket, grpc::InsecureServerCredentials());
  // gRPC's sync server keeps one idle poller by default and retires the extra ones, so nearly
  // every call starts a thread. Let idle threads stay: less time per input, and no thread being
  // started while libFuzzer's leak check runs (clang 14's LeakSanitizer does not see the start
  // argument of a thread in creation and reports it as leaked).
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, 64);
  builder.RegisterService(a->service.get());
  builder.RegisterService(a->control.get());
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<CallCounterFactory>());
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  a->server = builder.BuildAndStart();
  if (!a->server) Bug("the gRPC server did not start");
  a->stub = std::make_unique<grpc::GenericStub>(a->server->InProcessChannel(grpc::ChannelArguments()));
  g_agent = a.release();
  std::atexit(StopAgent);
  return g_agent;
}

// ---- Requests: rewrite what must stay inside this process's sandbox (see the header) ----

void RootPath(const Agent& a, std::string* path) {
  if (path->rfind(kRootPlaceholder, 0) == 0) path->replace(0, sizeof(kRootPlaceholder) - 1, a.model_root);
}

template <typename T>
uint32_t AtMost(T value, uint32_t cap) {
  return value == 0 || value > cap ? cap : static_cast<uint32_t>(value);
}

// Parses `bytes` as M, lets `fix` adjust it, and serializes it again. Bytes that do not parse
// go out unchanged: the server's own parser must refuse them.
template <typename M, typename Fix>
std::string Rewrite(const std::string& bytes, Fix fix) {
  M m;
  if (!m.ParseFromString(bytes)) return bytes;
  fix(m);
  return m.SerializeAsString();
}

struct Method {
  const char* path;
  std::string (*rewrite)(const Agent& a, const std::string& bytes);
  int max_reads = kMaxReads;
};

const Method kMethods[] = {
    {"/tandem.v1.Agent/GetFacts",
     [](const Agent& a, const std::string& b) {
       return Rewrite<v1::GetFactsRequest>(b, [&](auto& m) { RootPath(a, m.mutable_model_path()); });
     }},
    {"/tandem.v1.Agent/HashWeights",
     [](const Agent& a, const std::string& b) {
       return Rewrite<v1::HashWeightsRequest>(b, [&](auto& m) { RootPath(a, m.mutable_model_path()); });
     }},
    {"/tandem.v1.AgentControl/LoadModel",
     [](const Agent& a, const std::string& b) {
       return Rewrite<v1::LoadModelRequest>(b, [&](auto& m) {
         RootPath(a, m.mutable_model_path());
         if (m.threads() <= 1024) m.set_threads(AtMost(m.threads(), 2));
       });
     }},
    {"/tandem.v1.AgentControl/JoinGroup",
     [](const Agent& a, const std::string& b) {
       return Rewrite<v1::JoinGroupRequest>(b, [&](auto& m) {
         m.set_timeout_ms(AtMost(m.timeout_ms(), 100));
         m.set_collective_timeout_ms(AtMost(m.collective_timeout_ms(), 100));
         m.set_api_listen("127.0.0.1:0");
         if (!m.store_endpoint().empty()) m.set_store_endpoint(a.socket);
         m.set_comm_host("127.0.0.1");
         m.clear_comm_env();
         if (m.kv_tokens() > 4096 && m.kv_tokens() < (int64_t{1} << 36)) m.set_kv_tokens(4096);
         m.set_max_num_seqs(AtMost(m.max_num_seqs(), 4));
         m.set_max_model_len(AtMost(m.max_model_len(), 512));
       });
     }},
    {"/tandem.v1.AgentControl/LeaveGroup", [](const Agent&, const std::string& b) { return b; }},
    {"/tandem.v1.AgentControl/SetServing", [](const Agent&, const std::string& b) { return b; }},
    {"/tandem.v1.AgentControl/Generate",
     [](const Agent&, const std::string& b) {
       return Rewrite<v1::GenerateRequest>(b, [](auto& m) {
         m.set_timeout_ms(AtMost(m.timeout_ms(), 500));
         m.set_max_tokens(AtMost(m.max_tokens(), 16));
       });
     }},
    {"/tandem.v1.AgentControl/GetStatus", [](const Agent&, const std::string& b) { return b; }},
    {"/tandem.v1.AgentControl/StoreSet", [](const Agent&, const std::string& b) { return b; }},
    {"/tandem.v1.AgentControl/StoreGet",
     [](const Agent&, const std::string& b) {
       return Rewrite<v1::StoreGetRequest>(b, [](auto& m) { m.set_timeout_ms(std::min<uint32_t>(m.timeout_ms(), 10)); });
     }},
    // Not a method of either service: the server's answer, not a handler's.
    {"/tandem.v1.AgentControl/NoSuchMethod", [](const Agent&, const std::string& b) { return b; }},
    // Last, picked by method byte 255 only: a Watch call costs one 50 ms poll of the handler (it
    // notices the cancelled client at its next wake-up) whatever its input, and interval_ms is
    // its only field; at 1 in 12 it would set the pace of the whole target.
    {"/tandem.v1.AgentControl/Watch",
     [](const Agent&, const std::string& b) {
       return Rewrite<v1::WatchRequest>(b, [](auto& m) { m.set_interval_ms(50); });
     },
     1},
};
constexpr size_t kNumMethods = sizeof(kMethods) / sizeof(kMethods[0]);

// ---- One call over the generic stub: the request goes out as raw bytes ----

struct CallResult {
  grpc::Status status;
  int messages = 0;
};

// Waits for the one operation in flight on `cq`.
bool Await(grpc::CompletionQueue& cq) {
  void* tag = nullptr;
  bool ok = false;
  if (!cq.Next(&tag, &ok)) Bug("completion queue shut down early");
  return ok;
}

CallResult Call(Agent& a, const char* method, int max_reads, int auth_mode, const std::string& request) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + kCallDeadline);
  switch (auth_mode) {
    case 0: break;
    case 1: ctx.AddMetadata("authorization", std::string("Bearer ") + kToken + "x"); break;
    case 2: ctx.AddMetadata("authorization", kToken); break;
    default: ctx.AddMetadata("authorization", std::string("Bearer ") + kToken);
  }
  grpc::CompletionQueue cq;
  CallResult r;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call = a.stub->PrepareCall(&ctx, method, &cq);
  void* const tag = &r;
  call->StartCall(tag);
  if (Await(cq)) {
    grpc::Slice slice(request.data(), request.size());
    grpc::ByteBuffer buffer(&slice, 1);
    call->WriteLast(buffer, grpc::WriteOptions(), tag);
    if (Await(cq)) {
      for (; r.messages < max_reads; ++r.messages) {
        grpc::ByteBuffer response;
        call->Read(&response, tag);
        if (!Await(cq)) break;
      }
    }
  }
  if (r.messages == max_reads) ctx.TryCancel();  // a stream that goes on (Watch): enough
  call->Finish(&r.status, tag);
  Await(cq);
  cq.Shutdown();
  void* ignored_tag;
  bool ignored_ok;
  while (cq.Next(&ignored_tag, &ignored_ok)) {
  }
  return r;
}

// Every handler of the input must have returned before the next input starts.
void WaitForHandlers(const char* method) {
  const auto until = std::chrono::steady_clock::now() + kHandlerGrace;
  while (g_server_calls.load() > 0) {
    if (std::chrono::steady_clock::now() > until) {
      Bug(std::string("a handler is still running ") + std::to_string(kHandlerGrace.count()) +
          " s after its call ended (last method " + method + ")");
    }
    std::this_thread::sleep_for(milliseconds(1));
  }
}

// Back to a fresh agent: no model, no group, no assignment on disk, no generation in the store.
void Reset(Agent& a) {
  const v1::RankStatus s = a.host->Status();
  if (s.state() != v1::RANK_STATE_IDLE || s.persisted().present()) {
    if (absl::Status st = a.host->LeaveGroup(true, "fuzz input done"); !st.ok()) {
      Bug("LeaveGroup after an input failed: " + std::string(st.message()));
    }
  }
  if (a.store.TryGet(agentd::kGenerationKey).has_value()) {
    MustOk(a.store.Set(agentd::kGenerationKey, "0"), "resetting the store's generation");
    a.store.DropGenerationsBefore(UINT64_MAX);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Agent* agent = StartAgent();
  size_t pos = 0;
  for (int c = 0; c < kMaxCalls && size - pos >= 4; ++c) {
    const Method& m = data[pos] == 255 ? kMethods[kNumMethods - 1] : kMethods[data[pos] % (kNumMethods - 1)];
    const int auth_mode = data[pos + 1];
    size_t len = data[pos + 2] | (static_cast<size_t>(data[pos + 3]) << 8);
    pos += 4;
    len = std::min(len, size - pos);
    const std::string raw(reinterpret_cast<const char*>(data + pos), len);
    pos += len;

    const CallResult r = Call(*agent, m.path, m.max_reads, auth_mode, m.rewrite(*agent, raw));
    const bool authenticated = auth_mode > 2;
    if (g_verbose) {
      std::fprintf(stderr, "agent_rpc_fuzz: %s auth %d: %d %s (%d messages)\n", m.path, auth_mode,
                   static_cast<int>(r.status.error_code()), r.status.error_message().c_str(), r.messages);
    }
    if (!authenticated && (r.status.ok() || r.messages > 0)) {
      Bug(std::string(m.path) + " without the right token returned " + (r.status.ok() ? "OK" : "a message"));
    }
    if (r.status.error_code() == grpc::StatusCode::UNKNOWN) {
      Bug(std::string(m.path) + " returned UNKNOWN (a handler threw?): " + r.status.error_message());
    }
    WaitForHandlers(m.path);
  }
  Reset(*agent);
  return 0;
}
