// BringUp and its phases over a scripted fake of the agents: no network, no processes, a fake
// clock. Each test says how every agent answers; the fake records what the controller asked,
// in which order and with which deadline.
#include "controller/cluster_ops.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "controller/control_client.h"
#include "tests/controller/agent_answer.h"

namespace tandem::controller {
namespace {

using std::chrono::milliseconds;
using Steady = std::chrono::steady_clock;

// How one fake agent answers. The load, join and probe failures are gRPC statuses as they arrive
// (with the agent's ControlError details when the agent answered: AgentAnswer), read the way
// ControlClient reads them.
struct AgentScript {
  v1::RankState state = v1::RANK_STATE_IDLE;  // what GetStatus reports
  uint64_t generation = 0;
  absl::Status status_error;    // GetStatus fails with it
  grpc::Status load_error;      // LoadModel fails with it at once
  grpc::Status load_failure;    // LoadModel streams its progress, then fails with it (the load ran)
  grpc::Status join_error;      // JoinGroup fails with it at once (and the group cannot form)
  absl::Status serving_error;   // SetServing(true) fails with it
};

struct Call {
  std::string agent;
  std::string rpc;  // "GetStatus", "LoadModel", ..., "SetServing(true)"
  milliseconds timeout{0};
  uint32_t request_timeout_ms = 0;  // what a JoinGroup or Generate request itself carries
};

class FakeAgents final : public ClusterAgents {
 public:
  FakeAgents(const ClusterSpec& spec) : head_(spec.nodes[0].agent), workers_(spec.nodes.size() - 1) {
    for (const auto& node : spec.nodes) script[node.agent] = {};
    observations.resize(spec.nodes.size());
    for (size_t i = 0; i < spec.nodes.size(); ++i) observations[i].facts = DevBoxFacts(spec.nodes[i].name);
    v1::GenerateResponse a;
    a.set_text("four");
    for (int32_t id : {7, 8, 9}) a.add_token_ids(id);
    answer = a;
  }

  std::map<std::string, AgentScript> script;  // by agent address
  std::vector<NodeObservation> observations;   // what preflight sees
  v1::GenerateResponse answer;                  // the head's answer to a probe
  grpc::Status probe_error;                     // or how its Generate fails
  int load_progress_events = 3;                 // before the final one, 1 s apart on the fake clock
  int32_t state_slots = 0;                      // what every JoinGroup reports beside the KV (hybrid models)

  std::unique_ptr<NodeControl> Control(const std::string& agent) override;
  std::vector<NodeObservation> Observe(const ClusterSpec&, const ObserveOptions& options) override {
    std::lock_guard<std::mutex> lock(mu_);
    observe_options_ = options;
    ++observed_;
    return observations;
  }

  // The clock of the run: time passes only when the controller waits or a load reports progress.
  // Its wait returns once every worker's JoinGroup waits for the head (or the controller says it
  // is done waiting), so "workers first" does not depend on the machine's speed.
  UpClock Clock() {
    UpClock c;
    c.now = [this] { return Steady::time_point(milliseconds(now_ms_.load())); };
    c.wait = [this](milliseconds d, const std::function<bool()>& done) {
      const auto give_up = Steady::now() + std::chrono::seconds(10);
      while (!done() && Steady::now() < give_up) {
        {
          std::lock_guard<std::mutex> lock(mu_);
          if (waiting_workers_ == workers_) break;
        }
        std::this_thread::sleep_for(milliseconds(1));
      }
      now_ms_ += d.count();
    };
    return c;
  }

  std::vector<Call> Calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }
  // The agents that got `rpc`, in call order.
  std::vector<std::string> Agents(const std::string& rpc) const {
    std::vector<std::string> out;
    for (const Call& c : Calls()) {
      if (c.rpc == rpc) out.push_back(c.agent);
    }
    return out;
  }
  int observed() const {
    std::lock_guard<std::mutex> lock(mu_);
    return observed_;
  }
  ObserveOptions observe_options() const {
    std::lock_guard<std::mutex> lock(mu_);
    return observe_options_;
  }
  int workers_waiting_when_head_joined() const {
    std::lock_guard<std::mutex> lock(mu_);
    return workers_at_head_;
  }

 private:
  friend class FakeNode;

  // A dev box that passes preflight: no driver, no RDMA, the model folder present.
  static v1::NodeFacts DevBoxFacts(const std::string& name) {
    v1::NodeFacts f;
    f.set_node_name(name);
    f.mutable_build()->set_version("0.1.0");
    f.mutable_build()->set_binary_sha256(std::string(64, 'a'));
    f.mutable_kernel()->set_release("6.8.0");
    f.mutable_memory()->set_total_bytes(64ull << 30);
    f.mutable_memory()->set_available_bytes(60ull << 30);
    f.mutable_model()->set_path("/models/q");
    f.mutable_model()->set_exists(true);
    f.mutable_model()->set_has_config(true);
    v1::SecurityFact* sec = f.mutable_security();
    sec->set_token_auth(true);
    sec->set_listen("127.0.0.1:9300");
    sec->set_loopback_only(true);
    sec->add_model_roots("/models");
    return f;
  }

  void Record(Call call) {
    std::lock_guard<std::mutex> lock(mu_);
    calls_.push_back(std::move(call));
  }
  AgentScript Script(const std::string& agent) {
    std::lock_guard<std::mutex> lock(mu_);
    return script.at(agent);
  }

  // The rendezvous: a worker's JoinGroup returns once the head's has arrived, and runs into its
  // deadline when a member failed (the group cannot form; the real one would wait timeouts.join).
  absl::StatusOr<v1::JoinGroupResponse> Join(const std::string& agent, const v1::JoinGroupRequest& req,
                                             milliseconds timeout, const grpc::Status& scripted) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!scripted.ok()) {
      group_broken_ = true;
      arrived_.notify_all();
      return ControlOpError(scripted, "JoinGroup", timeout);
    }
    if (agent == head_) {
      workers_at_head_ = waiting_workers_;
      head_arrived_ = true;
      arrived_.notify_all();
    } else {
      ++waiting_workers_;
      arrived_.wait_for(lock, std::chrono::seconds(10), [&] { return head_arrived_ || group_broken_; });
      if (!head_arrived_) return absl::DeadlineExceededError("JoinGroup: the group never formed");
    }
    v1::JoinGroupResponse resp;
    resp.set_transport("gloo/tcp");
    resp.set_kv_tokens(2048);
    resp.set_state_slots(state_slots);
    resp.set_seconds(0.5);
    if (req.rank() == 0) resp.set_api_endpoint("127.0.0.1:8000");
    return resp;
  }

  const std::string head_;
  const int workers_;
  mutable std::mutex mu_;
  std::condition_variable arrived_;
  std::vector<Call> calls_;
  int observed_ = 0;
  ObserveOptions observe_options_;
  int waiting_workers_ = 0;
  int workers_at_head_ = -1;  // -1: the head never joined
  bool head_arrived_ = false;
  bool group_broken_ = false;
  std::atomic<int64_t> now_ms_{1'000'000};
};

class FakeNode final : public NodeControl {
 public:
  FakeNode(FakeAgents* agents, std::string agent) : agents_(agents), agent_(std::move(agent)) {}

  absl::StatusOr<v1::LoadModelEvent> LoadModel(const v1::LoadModelRequest&, milliseconds timeout,
                                               const std::function<void(const v1::LoadModelEvent&)>& on_event) override {
    agents_->Record({agent_, "LoadModel", timeout});
    AgentScript s = agents_->Script(agent_);
    if (!s.load_error.ok()) return ControlOpError(s.load_error, "LoadModel", timeout);
    for (int i = 1; i <= agents_->load_progress_events; ++i) {
      v1::LoadModelEvent ev;
      ev.set_phase("weights");
      ev.set_bytes_done(i * 1000000ull);
      ev.set_bytes_total(agents_->load_progress_events * 1000000ull);
      on_event(ev);
      agents_->now_ms_ += 500;  // two events a second: every other one is shown
    }
    if (!s.load_failure.ok()) return ControlOpError(s.load_failure, "LoadModel", timeout);
    v1::LoadModelEvent done;
    done.set_done(true);
    done.set_seconds(1.25);
    on_event(done);
    return done;
  }
  absl::StatusOr<v1::JoinGroupResponse> JoinGroup(const v1::JoinGroupRequest& req, milliseconds timeout) override {
    agents_->Record({agent_, "JoinGroup", timeout, req.timeout_ms()});
    return agents_->Join(agent_, req, timeout, agents_->Script(agent_).join_error);
  }
  absl::Status LeaveGroup(bool unload, const std::string& reason, milliseconds timeout) override {
    agents_->Record({agent_, unload ? "LeaveGroup(unload)" : "LeaveGroup", timeout});
    return absl::OkStatus();
  }
  absl::Status SetServing(bool serving, milliseconds timeout) override {
    agents_->Record({agent_, serving ? "SetServing(true)" : "SetServing(false)", timeout});
    return serving ? agents_->Script(agent_).serving_error : absl::OkStatus();
  }
  absl::StatusOr<v1::GenerateResponse> Generate(const v1::GenerateRequest& req, milliseconds timeout) override {
    agents_->Record({agent_, "Generate", timeout, req.timeout_ms()});
    if (!agents_->probe_error.ok()) return ControlAnswerError(agents_->probe_error, "Generate", timeout);
    return agents_->answer;
  }
  absl::StatusOr<v1::RankStatus> GetStatus(milliseconds timeout) override {
    agents_->Record({agent_, "GetStatus", timeout});
    AgentScript s = agents_->Script(agent_);
    if (!s.status_error.ok()) return s.status_error;
    v1::RankStatus st;
    st.set_state(s.state);
    st.set_generation(s.generation);
    st.set_api_endpoint(agent_ == agents_->head_ ? "127.0.0.1:8000" : "");
    st.set_transport("gloo/tcp");
    return st;
  }
  // Every rank measures the same: 50 us for 4 KiB, 2 GB/s (fabric_check: true in the spec).
  absl::StatusOr<v1::CheckFabricResponse> CheckFabric(const v1::CheckFabricRequest& req,
                                                      milliseconds timeout) override {
    agents_->Record({agent_, "CheckFabric", timeout, req.timeout_ms()});
    v1::CheckFabricResponse r;
    r.set_rank(static_cast<int32_t>(req.rank()));
    r.set_transport("gloo/tcp");
    r.set_small_bytes(4096);
    r.set_small_iters(200);
    r.set_small_median_us(50);
    r.set_small_p99_us(80);
    r.set_large_bytes(64 << 20);
    r.set_large_iters(10);
    r.set_large_algbw_gbps(2);
    r.set_large_busbw_gbps(2);
    return r;
  }

 private:
  FakeAgents* agents_;
  std::string agent_;
};

std::unique_ptr<NodeControl> FakeAgents::Control(const std::string& agent) {
  return std::make_unique<FakeNode>(this, agent);
}

constexpr char kHead[] = "10.0.0.1:9300";
constexpr char kWorker1[] = "10.0.0.2:9300";
constexpr char kWorker2[] = "10.0.0.3:9300";

class ClusterOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tandem-cluster-ops-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A cluster of `nodes` agents (the head first) served by a fresh fake.
  void MakeCluster(int nodes, const std::string& probe = "probe:\n  prompt_ids: [1, 2, 3]\n  timeout: 5s\n") {
    std::string yaml = absl::StrCat("cluster: t\nmodel:\n  path: /models/q\n", probe,
                                    "timeouts:\n  load: 60s\n  join: 30s\n  probe: 3s\n  leave: 4s\n  status: 1s\n"
                                    "nodes:\n");
    for (int i = 0; i < nodes; ++i) {
      absl::StrAppend(&yaml, "  - {name: n", i + 1, ", agent: '10.0.0.", i + 1, ":9300'}\n");
    }
    absl::StatusOr<ClusterSpec> spec = ParseClusterSpec(yaml, "t.yaml");
    ASSERT_TRUE(spec.ok()) << spec.status();
    ctx_.spec = *spec;
    ctx_.state_dir = dir_;
    agents_ = std::make_shared<FakeAgents>(ctx_.spec);
    ctx_.agents = agents_;
    options_.hash_weights = false;
    options_.clock = agents_->Clock();
  }

  absl::StatusOr<UpResult> Up() {
    lines_.clear();
    return BringUp(ctx_, options_, [this](const std::string& line) { lines_.push_back(line); }, &trace_);
  }

  // Runs BringUp expecting a failure in `phase`; returns why.
  absl::Status UpFailsIn(const std::string& phase) {
    absl::StatusOr<UpResult> up = Up();
    EXPECT_FALSE(up.ok()) << Lines();
    EXPECT_EQ(trace_.failed_phase, phase);
    return up.status();
  }

  bool Said(const std::string& text) const {
    for (const auto& l : lines_) {
      if (absl::StrContains(l, text)) return true;
    }
    return false;
  }
  std::string Lines() const {
    std::string all;
    for (const auto& l : lines_) absl::StrAppend(&all, l, "\n");
    return all;
  }
  std::vector<std::string> PhaseNames() const {
    std::vector<std::string> out;
    for (const auto& p : trace_.phases) out.push_back(p.phase);
    return out;
  }
  // Every agent was asked to stop serving and leave (and unload): nothing stays half-alive.
  void ExpectLeftEverywhere() {
    std::vector<std::string> left = agents_->Agents("LeaveGroup(unload)");
    std::sort(left.begin(), left.end());
    std::vector<std::string> all;
    for (const auto& n : ctx_.spec.nodes) all.push_back(n.agent);
    EXPECT_EQ(left, all);
    EXPECT_TRUE(Said("leaving the group on every agent")) << Lines();
  }

  std::string dir_;
  ClusterContext ctx_;
  std::shared_ptr<FakeAgents> agents_;
  UpOptions options_;
  UpTrace trace_;
  std::vector<std::string> lines_;
};

TEST_F(ClusterOpsTest, BringsUpEveryPhaseInOrder) {
  MakeCluster(3);
  absl::StatusOr<UpResult> up = Up();
  ASSERT_TRUE(up.ok()) << up.status() << "\n" << Lines();
  std::printf("%s", Lines().c_str());
  EXPECT_FALSE(up->already_serving);
  EXPECT_EQ(up->generation, 1u);
  EXPECT_EQ(up->api_endpoint, "127.0.0.1:8000");
  EXPECT_EQ(up->transport, "gloo/tcp");
  EXPECT_EQ(PhaseNames(), (std::vector<std::string>{"preflight", "plan", "load", "join", "probe", "serving"}));
  EXPECT_EQ(trace_.failed_phase, "");
  // The fake clock: 3 loads of 1.5 s each in parallel threads share it; the join waited 200 ms.
  EXPECT_DOUBLE_EQ(trace_.phases[3].seconds, 0.2);
  EXPECT_GT(trace_.total_seconds, 0.2);
  EXPECT_EQ(agents_->observed(), 1);
  EXPECT_FALSE(agents_->observe_options().hash_weights);

  // Workers first: both were waiting in the rendezvous when the head's JoinGroup came.
  std::vector<std::string> joins = agents_->Agents("JoinGroup");
  ASSERT_EQ(joins.size(), 3u);
  EXPECT_EQ(joins.back(), kHead);
  EXPECT_EQ(agents_->workers_waiting_when_head_joined(), 2);
  // The gate opens after the probe, on every agent; nothing left the group.
  EXPECT_EQ(agents_->Agents("Generate"), std::vector<std::string>{kHead});
  EXPECT_EQ(agents_->Agents("SetServing(true)").size(), 3u);
  EXPECT_TRUE(agents_->Agents("LeaveGroup(unload)").empty());
  std::vector<Call> calls = agents_->Calls();
  auto index_of = [&](const std::string& rpc) {
    for (size_t i = 0; i < calls.size(); ++i) {
      if (calls[i].rpc == rpc) return i;
    }
    return calls.size();
  };
  EXPECT_LT(index_of("LoadModel"), index_of("JoinGroup"));
  EXPECT_LT(index_of("Generate"), index_of("SetServing(true)"));

  // What was said: the plan, progress throttled to one line a second per node, the joins, the
  // fabric, the probe (which recorded the reference ids) and each phase's time.
  EXPECT_TRUE(Said("generation 1")) << Lines();
  int progress = 0;
  for (const auto& l : lines_) progress += absl::StartsWith(l, "load n1: weights");
  EXPECT_GE(progress, 1);  // throttled per node: see LoadShowsProgressOncePerSecond
  EXPECT_TRUE(Said("load n2: done in 1.25 s"));
  EXPECT_TRUE(Said("join n3: rank 2 ready, kv 2048 tokens, transport gloo/tcp (0.50 s)"));
  EXPECT_FALSE(Said("state slots")) << "a model without per-sequence state keeps the old join line";
  EXPECT_TRUE(Said("fabric: transport gloo/tcp"));
  EXPECT_TRUE(Said("probe: ok in "));
  EXPECT_TRUE(Said("recorded greedy ids [7,8,9] as the reference of generation 1"));
  EXPECT_TRUE(Said("join: 0.20 s"));

  // The state file: the generation and the probe's reference.
  absl::StatusOr<ControllerState> st = LoadControllerState(dir_, "t");
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->last_generation, 1u);
  EXPECT_EQ(st->golden_generation, 1u);
  EXPECT_EQ(st->golden_ids, (std::vector<int32_t>{7, 8, 9}));
}

constexpr char kProbeYaml[] = "probe:\n  prompt_ids: [1, 2, 3]\n  timeout: 5s\n";

TEST_F(ClusterOpsTest, FabricCheckRunsBetweenThePlanAndTheLoad) {
  MakeCluster(2, std::string(kProbeYaml) + "fabric_check: {timeout: 7s}\n");
  absl::StatusOr<UpResult> up = Up();
  ASSERT_TRUE(up.ok()) << up.status() << "\n" << Lines();
  EXPECT_EQ(PhaseNames(), (std::vector<std::string>{"preflight", "plan", "fabric", "load", "join", "probe", "serving"}));
  ASSERT_TRUE(trace_.fabric.has_value());
  EXPECT_TRUE(trace_.fabric->ok());
  EXPECT_TRUE(Said("fabric: ok: latency median 50.0 us, p99 80.0 us, busbw 2.000 GB/s")) << Lines();
  // Both ranks were asked, with the spec's timeout, before any weights were loaded.
  std::vector<Call> calls = agents_->Calls();
  size_t last_check = 0, first_load = calls.size();
  int checks = 0;
  for (size_t i = 0; i < calls.size(); ++i) {
    if (calls[i].rpc == "CheckFabric") {
      last_check = i;
      ++checks;
      EXPECT_EQ(calls[i].request_timeout_ms, 7000u);
    }
    if (calls[i].rpc == "LoadModel") first_load = std::min(first_load, i);
  }
  EXPECT_EQ(checks, 2);
  EXPECT_LT(last_check, first_load);
}

TEST_F(ClusterOpsTest, AFabricCheckBelowItsThresholdStopsUpBeforeTheLoad) {
  MakeCluster(2, std::string(kProbeYaml) + "fabric_check: {min_busbw_gbps: 10}\n");
  absl::Status st = UpFailsIn("fabric");
  EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
  EXPECT_NE(st.message().find("n1 (rank 0): bus bandwidth 2 GB/s is below fabric_check.min_busbw_gbps 10"),
            std::string::npos)
      << st;
  EXPECT_TRUE(Said("fabric: FAILED: ")) << Lines();
  // Nothing was loaded, so nothing is torn down either.
  EXPECT_TRUE(agents_->Agents("LoadModel").empty());
  EXPECT_TRUE(agents_->Agents("LeaveGroup(unload)").empty());
}

TEST_F(ClusterOpsTest, EveryCallCarriesItsDeadline) {
  MakeCluster(2);
  ASSERT_TRUE(Up().ok()) << Lines();
  for (const Call& c : agents_->Calls()) {
    SCOPED_TRACE(c.agent + " " + c.rpc);
    if (c.rpc == "GetStatus" || c.rpc == "SetServing(true)") {
      EXPECT_EQ(c.timeout, milliseconds(1000));
    }
    if (c.rpc == "LoadModel") {
      EXPECT_EQ(c.timeout, milliseconds(60000));
    }
    if (c.rpc == "JoinGroup") {
      EXPECT_EQ(c.timeout, milliseconds(30000));
      EXPECT_EQ(c.request_timeout_ms, 30000u);  // the rendezvous gives up with the RPC
    }
    if (c.rpc == "Generate") {
      // The engine's deadline is the shorter of probe.timeout and timeouts.probe; the RPC's is
      // 2 s longer, so the agent's own error wins.
      EXPECT_EQ(c.request_timeout_ms, 3000u);
      EXPECT_EQ(c.timeout, milliseconds(5000));
    }
  }
  agents_->script[kHead].load_error = grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection refused");
  ASSERT_FALSE(Up().ok());
  for (const Call& c : agents_->Calls()) {
    if (absl::StartsWith(c.rpc, "LeaveGroup") || c.rpc == "SetServing(false)") {
      EXPECT_EQ(c.timeout, milliseconds(4000)) << c.agent << " " << c.rpc;
    }
  }
}

// A hybrid model's ranks also report their state slots at join; the line names them after the KV.
TEST_F(ClusterOpsTest, JoinNamesTheHybridsStateSlots) {
  MakeCluster(2);
  agents_->state_slots = 64;
  absl::StatusOr<UpResult> up = Up();
  ASSERT_TRUE(up.ok()) << up.status() << "\n" << Lines();
  EXPECT_TRUE(Said("join n1: rank 0 ready, kv 2048 tokens, 64 state slots, transport gloo/tcp (0.50 s)")) << Lines();
  EXPECT_TRUE(Said("join n2: rank 1 ready, kv 2048 tokens, 64 state slots, transport gloo/tcp (0.50 s)")) << Lines();
}

TEST_F(ClusterOpsTest, AlreadyServingDoesNothing) {
  MakeCluster(2);
  for (auto& [agent, s] : agents_->script) {
    s.state = v1::RANK_STATE_SERVING;
    s.generation = 7;
  }
  absl::StatusOr<UpResult> up = Up();
  ASSERT_TRUE(up.ok()) << up.status();
  EXPECT_TRUE(up->already_serving);
  EXPECT_EQ(up->generation, 7u);
  EXPECT_EQ(up->api_endpoint, "127.0.0.1:8000");
  EXPECT_TRUE(Said("already serving generation 7: nothing to do"));
  EXPECT_EQ(PhaseNames(), std::vector<std::string>{"preflight"});
  EXPECT_TRUE(agents_->Agents("LoadModel").empty());
  EXPECT_TRUE(agents_->Agents("LeaveGroup(unload)").empty());
}

TEST_F(ClusterOpsTest, LeftoversAreLeftBeforeLoadingAndGenerationMovesPast) {
  MakeCluster(2);
  options_.accept_serving = false;
  for (auto& [agent, s] : agents_->script) {
    s.state = v1::RANK_STATE_SERVING;
    s.generation = 7;
  }
  absl::StatusOr<UpResult> up = Up();
  ASSERT_TRUE(up.ok()) << up.status() << "\n" << Lines();
  EXPECT_EQ(up->generation, 8u);
  EXPECT_TRUE(Said("leaving the previous group on every agent first"));
  std::vector<Call> calls = agents_->Calls();
  size_t first_leave = calls.size(), first_load = calls.size();
  for (size_t i = calls.size(); i-- > 0;) {
    if (calls[i].rpc == "LeaveGroup(unload)") first_leave = i;
    if (calls[i].rpc == "LoadModel") first_load = i;
  }
  EXPECT_LT(first_leave, first_load);
}

// The head leaves first (its engine releases the workers over the comm while they are still in the
// group), then the workers: every worker call comes after the head's LeaveGroup.
TEST_F(ClusterOpsTest, TearDownLeavesTheHeadBeforeTheWorkers) {
  MakeCluster(3);
  const std::vector<absl::Status> left = controller::TearDown(ctx_, /*unload=*/true, "test", /*stop_serving=*/true);
  ASSERT_EQ(left.size(), 3u);
  for (const absl::Status& st : left) EXPECT_TRUE(st.ok()) << st;
  const std::vector<Call> calls = agents_->Calls();
  const std::string& head = ctx_.spec.nodes[0].agent;
  ASSERT_GE(calls.size(), 6u);
  EXPECT_EQ(calls[0].agent, head);
  EXPECT_EQ(calls[0].rpc, "SetServing(false)");
  EXPECT_EQ(calls[1].agent, head);
  EXPECT_EQ(calls[1].rpc, "LeaveGroup(unload)");
  for (size_t i = 2; i < calls.size(); ++i) EXPECT_NE(calls[i].agent, head) << calls[i].rpc;
  std::vector<std::string> workers = agents_->Agents("LeaveGroup(unload)");
  ASSERT_EQ(workers.size(), 3u);
  workers.erase(workers.begin());
  std::sort(workers.begin(), workers.end());
  EXPECT_EQ(workers, (std::vector<std::string>{ctx_.spec.nodes[1].agent, ctx_.spec.nodes[2].agent}));
}

TEST_F(ClusterOpsTest, FailedPreflightTouchesNoAgent) {
  MakeCluster(2);
  agents_->observations[1].facts = absl::UnavailableError("unreachable: connection refused");
  absl::Status up = UpFailsIn("preflight");
  EXPECT_EQ(up.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(up.message(), "preflight check(s) failed")) << up;
  EXPECT_TRUE(absl::StrContains(trace_.preflight_table, "agent-reachable")) << trace_.preflight_table;
  EXPECT_TRUE(agents_->Calls().empty());  // not even GetStatus
}

TEST_F(ClusterOpsTest, UnreachableAgentFailsThePlan) {
  MakeCluster(2);
  agents_->script[kWorker1].status_error = absl::UnavailableError("GetStatus: unreachable: connection refused");
  absl::Status up = UpFailsIn("plan");
  EXPECT_EQ(up.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(up.message(), "n2: GetStatus: unreachable: connection refused");
  EXPECT_EQ(PhaseNames(), std::vector<std::string>{"preflight"});
  EXPECT_TRUE(agents_->Agents("LoadModel").empty());
  EXPECT_TRUE(agents_->Agents("LeaveGroup(unload)").empty());  // nothing was loaded
}

TEST_F(ClusterOpsTest, FailingLoadNamesEveryFailedNodeAndLeaves) {
  MakeCluster(3);
  agents_->script[kWorker1].load_error = grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "Deadline Exceeded");
  agents_->script[kWorker2].load_failure =
      AgentAnswer(grpc::StatusCode::DATA_LOSS, "model.safetensors: truncated", v1::ControlError::FAILED);
  absl::Status up = UpFailsIn("load");
  EXPECT_EQ(up.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(up.message(), "n2: LoadModel: no answer within 60.0 s (agent down, firewalled or busy?); n3: model.safetensors: truncated");
  EXPECT_EQ(PhaseNames(), (std::vector<std::string>{"preflight", "plan", "load"}));
  EXPECT_TRUE(agents_->Agents("JoinGroup").empty());
  ExpectLeftEverywhere();
}

TEST_F(ClusterOpsTest, FailedWorkerJoinKeepsTheHeadOut) {
  MakeCluster(2);
  agents_->script[kWorker1].join_error =
      AgentAnswer(grpc::StatusCode::FAILED_PRECONDITION, "no model loaded", v1::ControlError::REFUSED);
  absl::Status up = UpFailsIn("join");
  EXPECT_EQ(up.message(), "n2: JoinGroup: no model loaded");
  EXPECT_EQ(agents_->Agents("JoinGroup"), std::vector<std::string>{kWorker1});  // the head never joined
  EXPECT_EQ(agents_->workers_waiting_when_head_joined(), -1);
  EXPECT_TRUE(agents_->Agents("Generate").empty());
  ExpectLeftEverywhere();
}

TEST_F(ClusterOpsTest, JoinDeadlineOfOneWorkerFailsTheJoin) {
  MakeCluster(3);
  agents_->script[kWorker2].join_error = grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "Deadline Exceeded");
  absl::Status up = UpFailsIn("join");
  EXPECT_EQ(up.code(), absl::StatusCode::kDeadlineExceeded);
  // n2 waited for a head that did not come, into its own deadline.
  EXPECT_TRUE(absl::StrContains(up.message(), "n3: JoinGroup: no answer within 30.0 s")) << up;
  EXPECT_EQ(agents_->workers_waiting_when_head_joined(), -1);
  ExpectLeftEverywhere();
}

TEST_F(ClusterOpsTest, FailingHeadJoinIsReported) {
  MakeCluster(2);
  agents_->script[kHead].join_error = AgentAnswer(
      grpc::StatusCode::INTERNAL, "join of generation 1 failed: rendezvous failed", v1::ControlError::FAILED);
  absl::Status up = UpFailsIn("join");
  EXPECT_EQ(up.message(), "n1: join of generation 1 failed: rendezvous failed; n2: JoinGroup: the group never formed");
  EXPECT_EQ(agents_->Agents("JoinGroup").back(), kHead);
  ExpectLeftEverywhere();
}

TEST_F(ClusterOpsTest, FailingProbeLeavesAndKeepsTheGateShut) {
  MakeCluster(2);
  agents_->probe_error = grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "Deadline Exceeded");
  absl::Status up = UpFailsIn("probe");
  EXPECT_EQ(up.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(up.message(), "Generate: no answer within 5.0 s (agent down, firewalled or busy?)");
  EXPECT_TRUE(Said("probe: FAILED in "));
  EXPECT_TRUE(agents_->Agents("SetServing(true)").empty());
  ExpectLeftEverywhere();
  absl::StatusOr<ControllerState> st = LoadControllerState(dir_, "t");
  ASSERT_TRUE(st.ok());
  ASSERT_TRUE(st->last_probe.has_value());
  EXPECT_FALSE(st->last_probe->ok);
}

TEST_F(ClusterOpsTest, FailingGateLeaves) {
  MakeCluster(2);
  agents_->script[kWorker1].serving_error = absl::UnavailableError("SetServing: unreachable");
  absl::Status up = UpFailsIn("serving");
  EXPECT_EQ(up.message(), "n2: SetServing: unreachable");
  ExpectLeftEverywhere();
}

TEST_F(ClusterOpsTest, ProbeComparesWithTheGenerationsReference) {
  MakeCluster(2);
  double latency = -1;
  absl::StatusOr<ProbeAnswer> first = RunProbe(ctx_, 4, &latency);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->recorded_golden);
  EXPECT_GE(latency, 0);
  absl::StatusOr<ProbeAnswer> again = RunProbe(ctx_, 4);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->recorded_golden);
  EXPECT_EQ(again->detail, "greedy ids match the reference of generation 4 (3 tokens)");

  v1::GenerateResponse other;
  other.add_token_ids(7);
  agents_->answer = other;
  absl::StatusOr<ProbeAnswer> wrong = RunProbe(ctx_, 4);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(wrong.status().message(), "greedy ids [7] differ from the reference [7,8,9] of generation 4");
  // A new generation has no reference yet: its first answer becomes it.
  EXPECT_TRUE(RunProbe(ctx_, 5).ok());

  // The agent's own UNAVAILABLE is its answer (with its code), not an unreachable head.
  agents_->probe_error = AgentAnswer(grpc::StatusCode::UNAVAILABLE, "the probe failed: engine stopped",
                                     v1::ControlError::PROBE_FAILED);
  absl::StatusOr<ProbeAnswer> failed = RunProbe(ctx_, 5);
  EXPECT_TRUE(absl::IsUnavailable(failed.status())) << failed.status();
  EXPECT_EQ(failed.status().message(), "Generate: the agent answered UNAVAILABLE: the probe failed: engine stopped");
  agents_->probe_error = grpc::Status::OK;
  agents_->answer = v1::GenerateResponse{};
  EXPECT_EQ(RunProbe(ctx_, 5).status().message(), "the head answered with no tokens");
  absl::StatusOr<ControllerState> st = LoadControllerState(dir_, "t");
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->last_probe->detail, "the head answered with no tokens");
}

TEST_F(ClusterOpsTest, ProbeWithExpectLooksForTheText) {
  MakeCluster(2, "probe:\n  prompt: \"2+2=\"\n  expect: four\n");
  absl::StatusOr<ProbeAnswer> ok = RunProbe(ctx_, 1);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->detail, "answer contains \"four\": \"four\"");
  v1::GenerateResponse five;
  five.set_text("five");
  agents_->answer = five;
  EXPECT_EQ(RunProbe(ctx_, 1).status().message(), "answer \"five\" does not contain \"four\"");
}

TEST_F(ClusterOpsTest, LoadShowsProgressOncePerSecond) {
  MakeCluster(1);
  absl::StatusOr<ClusterPlan> plan = MakeClusterPlan(ctx_.spec, PreflightReport{}, 0, "");
  ASSERT_TRUE(plan.ok()) << plan.status();
  // Three events half a second apart: the first and the third are shown, then the end.
  ASSERT_TRUE(LoadRanks(ctx_, *plan, options_.clock, [this](const std::string& l) { lines_.push_back(l); }).ok());
  EXPECT_EQ(lines_, (std::vector<std::string>{"load n1: weights 1.0/3.0 MB", "load n1: weights 3.0/3.0 MB",
                                              "load n1: done in 1.25 s"}));
}

TEST_F(ClusterOpsTest, PlanRecordsTheGenerationBeforeLoading) {
  MakeCluster(2);
  agents_->script[kWorker1].generation = 3;
  absl::StatusOr<ClusterNow> now = ObserveForUp(ctx_);
  ASSERT_TRUE(now.ok()) << now.status();
  EXPECT_FALSE(AlreadyServing(*now).has_value());
  absl::StatusOr<UpPlan> plan = PlanGroup(ctx_, *now, PreflightReport{});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->plan.generation, 4u);
  EXPECT_FALSE(plan->leftovers);
  EXPECT_EQ(plan->plan.ranks[1].join.timeout_ms(), 30000u);
  absl::StatusOr<ControllerState> st = LoadControllerState(dir_, "t");
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->last_generation, 4u);
  // The next plan moves past the recorded generation even when the agents forgot theirs.
  agents_->script[kWorker1].generation = 0;
  now = ObserveForUp(ctx_);
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(PlanGroup(ctx_, *now, PreflightReport{})->plan.generation, 5u);
}

}  // namespace
}  // namespace tandem::controller
