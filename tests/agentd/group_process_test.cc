// Two real tandem-agentd processes form a TP=2 group over loopback with qwen3moe-tiny and the
// failure semantics of orchestration are checked end to end: golden greedy tokens through a
// probe, an HTTP completion through the head's API, a worker killed mid-stream, the head
// killed, a stale generation, a frozen worker (heartbeat watch), and (one agent, TP=1) the
// persisted assignment after a restart; and a hybrid model (qwen35moe-tiny) reporting its state
// slots.
#include <gtest/gtest.h>
#include <httplib.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "engine/batching/llm_engine.h"
#include "tests/agentd/agent_process.h"
#include "tests/common/test_util.h"
#include "tests/engine/cpu/golden.h"

namespace tandem::agentd {
namespace {

using Clock = std::chrono::steady_clock;
using tandem::testing::AgentProcess;
using tandem::testing::TempDir;
using namespace std::chrono_literals;

double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

const char* kToken = "s3cret-cluster-token";

std::string WriteToken(const TempDir& tmp) { return tandem::testing::WriteTokenFile(tmp / "token", kToken); }

// Streams LoadModel to the end; "" = loaded, else why not (a failed load is the RPC's status).
std::string Load(const AgentProcess& a, int rank, int world,
                 const std::string& model_dir = engine::testing::TinyModelDir()) {
  auto stub = a.Control();
  auto ctx = a.Context(60s);
  v1::LoadModelRequest req;
  req.set_model_path(model_dir);
  req.set_backend("cpu");
  req.set_rank(rank);
  req.set_world_size(world);
  req.set_threads(1);
  req.set_served_model_name("tiny");
  auto reader = stub->LoadModel(ctx.get(), req);
  v1::LoadModelEvent ev, last;
  int events = 0;
  while (reader->Read(&ev)) {
    ++events;
    last = ev;
  }
  grpc::Status st = reader->Finish();
  if (!st.ok()) return "rpc: " + st.error_message();
  if (!last.done()) return "no final event";
  std::printf("%s: loaded rank %d of %d in %.2f s (%d events, %llu bytes)\n", a.name.c_str(), rank, world,
              last.seconds(), events, static_cast<unsigned long long>(last.bytes_total()));
  return "";
}

v1::JoinGroupRequest JoinRequest(uint64_t generation, int rank, int world, const AgentProcess& head) {
  v1::JoinGroupRequest req;
  req.set_generation(generation);
  req.set_rank(rank);
  req.set_world_size(world);
  req.set_store_endpoint(head.endpoint());
  req.set_comm_host("127.0.0.1");
  req.set_timeout_ms(20000);
  req.set_collective_timeout_ms(10000);
  req.set_api_listen("127.0.0.1:0");
  req.set_kv_tokens(4096);
  req.set_max_model_len(4096);
  return req;
}

grpc::Status Join(const AgentProcess& a, const v1::JoinGroupRequest& req, v1::JoinGroupResponse* resp) {
  auto ctx = a.Context(40s);
  return a.Control()->JoinGroup(ctx.get(), req, resp);
}

v1::RankStatus GetStatus(const AgentProcess& a) {
  auto ctx = a.Context(5s);
  v1::RankStatus s;
  grpc::Status st = a.Control()->GetStatus(ctx.get(), v1::GetStatusRequest{}, &s);
  if (!st.ok()) s.set_reason("GetStatus: " + st.error_message());
  return s;
}

// Polls until `pred(status)` or the deadline; returns the seconds it took (-1: never).
template <typename Pred>
double WaitForStatus(const AgentProcess& a, Pred pred, std::chrono::milliseconds deadline, v1::RankStatus* last) {
  const auto t0 = Clock::now();
  while (Clock::now() - t0 < deadline) {
    *last = GetStatus(a);
    if (pred(*last)) return Since(t0);
    std::this_thread::sleep_for(50ms);
  }
  return -1;
}

// Two agents (head a0, worker a1) with the token; both loaded; the worker joins first
// (asynchronously: it waits in rendezvous), then the head.
class GroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    token_file_ = WriteToken(tmp_);
    for (int i = 0; i < 2; ++i) {
      agents_[i].token = kToken;
      const std::string err = agents_[i].Start("node" + std::to_string(i), tmp_ / ("a" + std::to_string(i)), token_file_);
      ASSERT_EQ(err, "");
    }
  }

  void FormGroup(uint64_t generation, uint32_t collective_timeout_ms = 10000) {
    const auto t0 = Clock::now();
    auto l1 = std::async(std::launch::async, [&] { return Load(agents_[1], 1, 2, model_dir_); });
    ASSERT_EQ(Load(agents_[0], 0, 2, model_dir_), "");
    ASSERT_EQ(l1.get(), "");
    v1::JoinGroupResponse worker_resp;
    auto worker = std::async(std::launch::async, [&] {
      v1::JoinGroupRequest req = JoinRequest(generation, 1, 2, agents_[0]);
      req.set_collective_timeout_ms(collective_timeout_ms);
      return Join(agents_[1], req, &worker_resp);
    });
    // The worker waits in the rendezvous until the head joins.
    v1::RankStatus s;
    ASSERT_GE(WaitForStatus(agents_[1], [](const v1::RankStatus& x) { return x.state() == v1::RANK_STATE_JOINING; },
                            5s, &s), 0)
        << s.ShortDebugString();
    v1::JoinGroupRequest head_req = JoinRequest(generation, 0, 2, agents_[0]);
    head_req.set_collective_timeout_ms(collective_timeout_ms);
    grpc::Status st = Join(agents_[0], head_req, &head_);
    ASSERT_TRUE(st.ok()) << st.error_message() << "\n" << agents_[0].log();
    ASSERT_EQ(worker.wait_for(20s), std::future_status::ready);
    st = worker.get();
    ASSERT_TRUE(st.ok()) << st.error_message();
    std::printf("group of generation %llu formed in %.2f s: head kv_tokens %lld transport %s api %s\n",
                static_cast<unsigned long long>(generation), Since(t0), static_cast<long long>(head_.kv_tokens()),
                head_.transport().c_str(), head_.api_endpoint().c_str());
    EXPECT_EQ(head_.transport(), "gloo/tcp");
    EXPECT_EQ(head_.kv_tokens(), 4096);
    api_port_ = std::stoi(head_.api_endpoint().substr(head_.api_endpoint().rfind(':') + 1));
    EXPECT_EQ(GetStatus(agents_[0]).state(), v1::RANK_STATE_READY);
    EXPECT_EQ(GetStatus(agents_[1]).state(), v1::RANK_STATE_READY);
  }

  void ServeAll() {
    for (auto& a : agents_) {
      auto ctx = a.Context(5s);
      v1::SetServingRequest req;
      req.set_serving(true);
      v1::SetServingResponse resp;
      grpc::Status st = a.Control()->SetServing(ctx.get(), req, &resp);
      ASSERT_TRUE(st.ok()) << a.name << ": " << st.error_message();
    }
  }

  // A Generate probe on the head for every golden prompt of model_dir_.
  void ProbeGolden() {
    auto golden = engine::testing::LoadGolden(model_dir_);
    ASSERT_TRUE(golden.ok()) << golden.status();
    for (size_t i = 0; i < golden->size(); ++i) {
      const auto& g = (*golden)[i];
      v1::GenerateRequest req;
      for (int32_t id : g.ids) req.add_prompt_ids(id);
      req.set_max_tokens(static_cast<uint32_t>(g.greedy.size()));
      req.set_timeout_ms(30000);
      v1::GenerateResponse resp;
      auto ctx = agents_[0].Context(40s);
      grpc::Status st = agents_[0].Control()->Generate(ctx.get(), req, &resp);
      ASSERT_TRUE(st.ok()) << st.error_message();
      std::vector<int32_t> got(resp.token_ids().begin(), resp.token_ids().end());
      // eos may end a generation early: what came must be a prefix of the golden continuation.
      ASSERT_FALSE(got.empty());
      ASSERT_LE(got.size(), g.greedy.size());
      EXPECT_TRUE(std::equal(got.begin(), got.end(), g.greedy.begin())) << "prompt" << i;
      std::printf("probe prompt%zu: %zu/%zu golden tokens identical in %.2f s (first %d %d %d)\n", i, got.size(),
                  g.greedy.size(), resp.seconds(), got[0], got.size() > 1 ? got[1] : -1, got.size() > 2 ? got[2] : -1);
    }
  }

  TempDir tmp_;
  std::string token_file_;
  std::string model_dir_ = engine::testing::TinyModelDir();  // what FormGroup loads
  AgentProcess agents_[2];
  v1::JoinGroupResponse head_;
  int api_port_ = 0;
};

// A hybrid model (Gated DeltaNet state per sequence) is served by the group: the join reply and
// both ranks' status report its state slots beside kv_tokens (the engine's default max_num_seqs
// of them with an explicit kv_tokens), the agent's metrics export them, and a probe gives
// transformers' greedy tokens.
TEST_F(GroupTest, HybridModelReportsStateSlotsAtJoinAndInStatus) {
  model_dir_ = engine::testing::Qwen35MoeTinyDir();
  FormGroup(1);
  const int32_t slots = engine::EngineOptions{}.max_num_seqs;
  EXPECT_EQ(head_.state_slots(), slots);
  EXPECT_EQ(GetStatus(agents_[0]).state_slots(), slots);
  // The worker reads them from the head's store (about 1 s after joining).
  v1::RankStatus s;
  EXPECT_GE(WaitForStatus(agents_[1], [&](const v1::RankStatus& x) { return x.state_slots() == slots; }, 5s, &s), 0)
      << s.ShortDebugString();
  EXPECT_EQ(s.kv_tokens(), 4096);
  httplib::Client metrics("127.0.0.1", agents_[0].metrics_port);
  auto m = metrics.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("tandem_rank_state_slots{node=\"node0\"} " + std::to_string(slots)), std::string::npos)
      << m->body;
  ProbeGolden();
}

TEST_F(GroupTest, ProbeMatchesGoldenAndHttpServesAfterSetServing) {
  FormGroup(1);
  EXPECT_EQ(head_.state_slots(), 0);  // qwen3moe keeps no per-sequence state
  ProbeGolden();
  auto golden = engine::testing::LoadGolden(model_dir_);
  ASSERT_TRUE(golden.ok()) << golden.status();
  // Generate on a worker is refused.
  {
    v1::GenerateRequest req;
    req.add_prompt_ids(1);
    v1::GenerateResponse resp;
    auto ctx = agents_[1].Context(5s);
    EXPECT_EQ(agents_[1].Control()->Generate(ctx.get(), req, &resp).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  }

  httplib::Client http("127.0.0.1", api_port_);
  http.set_read_timeout(30, 0);
  auto health = http.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 503) << "ready but not serving: /health must say no";
  ServeAll();
  EXPECT_EQ(GetStatus(agents_[0]).state(), v1::RANK_STATE_SERVING);
  EXPECT_EQ(GetStatus(agents_[1]).state(), v1::RANK_STATE_SERVING);
  health = http.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);

  const auto& g = (*golden)[0];
  nlohmann::json body = {{"model", "tiny"}, {"prompt", g.ids}, {"max_tokens", g.greedy.size()},
                         {"temperature", 0}, {"return_token_ids", true}};
  auto res = http.Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const auto j = nlohmann::json::parse(res->body);
  std::vector<int32_t> got = j["choices"][0]["token_ids"].get<std::vector<int32_t>>();
  ASSERT_FALSE(got.empty());
  EXPECT_TRUE(std::equal(got.begin(), got.end(), g.greedy.begin()));
  std::printf("HTTP /v1/completions: %zu tokens, golden prefix %s; usage %s\n", got.size(),
              std::equal(got.begin(), got.end(), g.greedy.begin()) ? "yes" : "NO", j["usage"].dump().c_str());

  // Metrics: the agent exports the rank state, the head's API the serving metrics.
  httplib::Client metrics("127.0.0.1", agents_[0].metrics_port);
  auto m = metrics.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("tandem_rank_state{node=\"node0\",state=\"serving\"} 1"), std::string::npos) << m->body;
  EXPECT_NE(m->body.find("tandem_group_generation{node=\"node0\"} 1"), std::string::npos);
  auto api_metrics = http.Get("/metrics");
  ASSERT_TRUE(api_metrics);
  EXPECT_NE(api_metrics->body.find("tandem_"), std::string::npos);

  // Watch: one event at once, with the iteration counters of both ranks moving.
  auto ctx = agents_[1].Context(5s);
  v1::WatchRequest wr;
  wr.set_interval_ms(100);
  auto reader = agents_[1].Control()->Watch(ctx.get(), wr);
  v1::RankStatus ev;
  ASSERT_TRUE(reader->Read(&ev));
  EXPECT_EQ(ev.state(), v1::RANK_STATE_SERVING);
  EXPECT_GT(ev.iterations(), 0u);
  // A worker learns the group's KV capacity from the head's store shortly after joining (about
  // 1 s later): keep reading events (every 100 ms) until it shows, within the 5 s deadline.
  while (ev.kv_tokens() == 0 && reader->Read(&ev)) {
  }
  EXPECT_EQ(ev.kv_tokens(), 4096);
  std::printf("watch (worker): %s\n", ev.ShortDebugString().c_str());
  ctx->TryCancel();

  // LeaveGroup on the head releases the worker cleanly.
  {
    auto lctx = agents_[0].Context(20s);
    v1::LeaveGroupRequest lr;
    lr.set_reason("test done");
    v1::LeaveGroupResponse lresp;
    const auto t0 = Clock::now();
    ASSERT_TRUE(agents_[0].Control()->LeaveGroup(lctx.get(), lr, &lresp).ok());
    std::printf("head left in %.2f s\n", Since(t0));
  }
  v1::RankStatus s;
  const double t = WaitForStatus(agents_[1], [](const v1::RankStatus& x) { return x.state() == v1::RANK_STATE_LOADED; },
                                 5s, &s);
  EXPECT_GE(t, 0) << s.ShortDebugString();
  std::printf("worker after the head left: %s (%s) after %.2f s\n", v1::RankState_Name(s.state()).c_str(),
              s.reason().c_str(), t);
}

TEST_F(GroupTest, WorkerKilledMidStreamFailsTheStreamFast) {
  FormGroup(1);
  ServeAll();
  httplib::Client http("127.0.0.1", api_port_);
  http.set_read_timeout(20, 0);
  nlohmann::json body = {{"model", "tiny"}, {"prompt", std::vector<int>{1, 2, 3, 4}}, {"max_tokens", 3000},
                         {"temperature", 0}, {"stream", true}, {"ignore_eos", true}, {"return_token_ids", true}};
  std::atomic<int> chunks{0};
  std::string text;
  std::atomic<bool> ended{false};
  Clock::time_point ended_at;
  std::mutex text_mu;
  std::thread client([&] {
    // A raw socket: every read of the SSE stream is counted as it arrives (Connection: close,
    // so the end of the stream is EOF); each wait is bounded.
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(api_port_));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
      const std::string payload = body.dump();
      const std::string req = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                              "Connection: close\r\nContent-Length: " + std::to_string(payload.size()) + "\r\n\r\n" + payload;
      (void)!::write(fd, req.data(), req.size());
      char buf[4096];
      for (;;) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 20000) <= 0) break;
        const ssize_t n = ::read(fd, buf, sizeof(buf));
        if (n <= 0) break;
        std::lock_guard<std::mutex> l(text_mu);
        text.append(buf, static_cast<size_t>(n));
        chunks.fetch_add(1);
      }
    }
    ::close(fd);
    ended_at = Clock::now();
    ended = true;
  });
  const auto t_wait = Clock::now();
  while (chunks.load() < 5 && Clock::now() - t_wait < 20s && !ended) std::this_thread::sleep_for(10ms);
  if (chunks.load() < 5) {
    client.join();
    FAIL() << "the stream never started: " << text << "\nhead log:\n" << agents_[0].log() << "\nworker log:\n"
           << agents_[1].log();
  }
  const auto killed_at = Clock::now();
  ::kill(agents_[1].proc.pid(), SIGKILL);
  while (!ended && Clock::now() - killed_at < 10s) std::this_thread::sleep_for(10ms);
  ASSERT_TRUE(ended.load()) << "the stream did not end within 10 s of the kill";
  client.join();
  const double stream_end = std::chrono::duration<double>(ended_at - killed_at).count();
  std::printf("stream ended %.3f s after kill -9 of the worker (%d chunks)\n", stream_end, chunks.load());
  EXPECT_LT(stream_end, 5.0);
  EXPECT_NE(text.find("error"), std::string::npos) << "the stream must end with an error event";
  EXPECT_EQ(text.find("[DONE]") != std::string::npos && text.find("error") == std::string::npos, false);

  // New requests: 503, fast.
  const auto t0 = Clock::now();
  auto res = http.Post("/v1/completions", nlohmann::json({{"model", "tiny"}, {"prompt", std::vector<int>{1, 2}},
                                                         {"max_tokens", 4}}).dump(),
                       "application/json");
  const double refuse = Since(t0);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503) << res->body;
  EXPECT_LT(refuse, 1.0);
  auto health = http.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 503);
  v1::RankStatus s;
  const double t = WaitForStatus(agents_[0], [](const v1::RankStatus& x) { return x.state() == v1::RANK_STATE_FAILED; },
                                 3s, &s);
  EXPECT_GE(t, 0) << s.ShortDebugString();
  std::printf("new request refused with %d in %.3f s; head state %s: %s\n", res->status, refuse,
              v1::RankState_Name(s.state()).c_str(), s.reason().c_str());
}

TEST_F(GroupTest, WorkerNoticesHeadKilled) {
  FormGroup(1);
  ServeAll();
  const auto t0 = Clock::now();
  ::kill(agents_[0].proc.pid(), SIGKILL);
  v1::RankStatus s;
  const double t = WaitForStatus(
      agents_[1], [](const v1::RankStatus& x) { return x.state() == v1::RANK_STATE_FAILED || x.state() == v1::RANK_STATE_LOADED; },
      8s, &s);
  ASSERT_GE(t, 0) << s.ShortDebugString();
  std::printf("worker left the group %.2f s after kill -9 of the head: %s: %s\n", Since(t0),
              v1::RankState_Name(s.state()).c_str(), s.reason().c_str());
  EXPECT_LT(t, 5.0);
  EXPECT_NE(s.reason().find("head lost"), std::string::npos) << s.reason();
}

TEST_F(GroupTest, StaleGenerationRankAbortsItself) {
  FormGroup(1);
  // The controller moved on: the head's store now says generation 2.
  {
    auto ctx = agents_[0].Context(5s);
    v1::StoreSetRequest req;
    req.set_key("group/generation");
    req.set_value("2");
    v1::StoreSetResponse resp;
    ASSERT_TRUE(agents_[0].Control()->StoreSet(ctx.get(), req, &resp).ok());
  }
  v1::RankStatus s;
  const double t = WaitForStatus(agents_[1], [](const v1::RankStatus& x) { return x.state() == v1::RANK_STATE_FAILED; },
                                 5s, &s);
  ASSERT_GE(t, 0) << s.ShortDebugString();
  EXPECT_NE(s.reason().find("stale generation"), std::string::npos) << s.reason();
  std::printf("worker aborted itself %.2f s after the store moved to generation 2: %s\n", t, s.reason().c_str());
  // The head, in generation 1 too, does the same.
  EXPECT_GE(WaitForStatus(agents_[0], [](const v1::RankStatus& x) { return x.state() == v1::RANK_STATE_FAILED; }, 5s, &s),
            0);
  // LeaveGroup afterwards is quick and leaves the weights loaded for the next generation.
  auto ctx = agents_[1].Context(15s);
  v1::LeaveGroupResponse lr;
  const auto t0 = Clock::now();
  ASSERT_TRUE(agents_[1].Control()->LeaveGroup(ctx.get(), v1::LeaveGroupRequest{}, &lr).ok());
  EXPECT_LT(Since(t0), 3.0);
  EXPECT_EQ(GetStatus(agents_[1]).state(), v1::RANK_STATE_LOADED);
}

TEST_F(GroupTest, IdleGroupOutlivesTheCollectiveDeadlineAndNoticesADeadWorker) {
  // Collective deadline 1.5 s; the group then sits idle for 4 s: the head's heartbeats keep
  // the workers' wait for the next command alive.
  FormGroup(1, 1500);
  ServeAll();
  std::this_thread::sleep_for(4s);
  EXPECT_EQ(GetStatus(agents_[0]).state(), v1::RANK_STATE_SERVING) << GetStatus(agents_[0]).reason();
  EXPECT_EQ(GetStatus(agents_[1]).state(), v1::RANK_STATE_SERVING) << GetStatus(agents_[1]).reason();
  v1::GenerateRequest req;
  req.add_prompt_ids(1);
  req.set_max_tokens(4);
  v1::GenerateResponse resp;
  auto ctx = agents_[0].Context(20s);
  ASSERT_TRUE(agents_[0].Control()->Generate(ctx.get(), req, &resp).ok());
  EXPECT_EQ(resp.token_ids_size(), 4);
  // A worker dying while the group is idle is noticed by the next heartbeat.
  const auto t0 = Clock::now();
  ::kill(agents_[1].proc.pid(), SIGKILL);
  v1::RankStatus s;
  const double t = WaitForStatus(agents_[0], [](const v1::RankStatus& x) { return x.state() == v1::RANK_STATE_FAILED; },
                                 5s, &s);
  ASSERT_GE(t, 0) << s.ShortDebugString();
  std::printf("idle head noticed the dead worker %.2f s after kill -9: %s\n", Since(t0), s.reason().c_str());
  httplib::Client http("127.0.0.1", api_port_);
  auto health = http.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 503);
}

TEST_F(GroupTest, FrozenWorkerIsLostByItsSilentHeartbeat) {
  // A stopped worker keeps its sockets open: Gloo (like NCCL between local GPUs) would wait for
  // the 30 s collective deadline. The head's heartbeat watch (3 s) fails the group instead.
  FormGroup(1, 30000);
  ServeAll();
  const auto t0 = Clock::now();
  ::kill(agents_[1].proc.pid(), SIGSTOP);
  v1::RankStatus s;
  const double t = WaitForStatus(agents_[0], [](const v1::RankStatus& x) { return x.state() == v1::RANK_STATE_FAILED; },
                                 8s, &s);
  ::kill(agents_[1].proc.pid(), SIGKILL);  // a stopped process would not take the fixture's SIGTERM
  ASSERT_GE(t, 0) << s.ShortDebugString();
  std::printf("head failed the group %.2f s after SIGSTOP of the worker: %s\n", Since(t0), s.reason().c_str());
  EXPECT_NE(s.reason().find("rank 1 lost: no heartbeat"), std::string::npos) << s.reason();
  EXPECT_LT(Since(t0), 5.0);
}

TEST(AgentAuthTest, WrongOrMissingTokenIsRejected) {
  TempDir tmp;
  AgentProcess a;
  ASSERT_EQ(a.Start("authnode", tmp / "a", WriteToken(tmp)), "");
  auto stub = a.Control();
  auto call = [&](const std::string& auth) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 5s);
    if (!auth.empty()) ctx.AddMetadata("authorization", auth);
    v1::RankStatus s;
    return stub->GetStatus(&ctx, v1::GetStatusRequest{}, &s).error_code();
  };
  EXPECT_EQ(call(""), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(call("Bearer wrong"), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(call(std::string("Bearer ") + kToken + "x"), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(call(kToken), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(call(std::string("Bearer ") + kToken), grpc::StatusCode::OK);
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 5s);
    v1::StoreGetRequest req;
    req.set_key("group/generation");
    v1::StoreGetResponse resp;
    EXPECT_EQ(stub->StoreGet(&ctx, req, &resp).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 5s);
    v1::NodeFacts facts;
    EXPECT_EQ(a.Agent()->GetFacts(&ctx, v1::GetFactsRequest{}, &facts).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  const std::string log = a.log();
  EXPECT_NE(log.find("rejected AgentControl.GetStatus from"), std::string::npos) << log;
  EXPECT_EQ(log.find(kToken), std::string::npos) << "the token must never be logged";

  // Token files the agent refuses to start with (issue 12: a 1-character token with mode 0644
  // was accepted): empty, too short, readable by others.
  struct BadToken {
    const char* name;
    const char* text;
    mode_t mode;
    const char* says;
  };
  for (const BadToken& bad : {BadToken{"empty", "  \n", 0600, "is empty"},
                              BadToken{"one-char", "x\n", 0644, "chmod 600"},
                              BadToken{"short", "x\n", 0600, "at least 16"},
                              BadToken{"world-readable", "a-long-enough-cluster-token\n", 0644, "chmod 600"}}) {
    const std::string path = tmp / (std::string("token-") + bad.name);
    std::ofstream(path) << bad.text;
    ::chmod(path.c_str(), bad.mode);
    AgentProcess b;
    const std::string err = b.Start(bad.name, tmp / bad.name, path);
    EXPECT_NE(err, "") << bad.name;
    auto status = b.proc.Wait(5s);
    ASSERT_TRUE(status.has_value()) << bad.name;
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 2) << bad.name;
    EXPECT_NE(b.log().find(bad.says), std::string::npos) << bad.name << ": " << b.log();
    EXPECT_EQ(b.log().find("a-long-enough"), std::string::npos) << "the token must never be logged";
    std::printf("token file %s: %s", bad.name, b.log().c_str());
  }
}

TEST(AgentRestartTest, ReportsThePersistedAssignment) {
  TempDir tmp;
  AgentProcess a;
  a.token = kToken;
  const std::string token = WriteToken(tmp);
  ASSERT_EQ(a.Start("solo", tmp / "a", token), "");
  ASSERT_EQ(Load(a, 0, 1), "");
  v1::JoinGroupRequest req = JoinRequest(7, 0, 1, a);
  (*req.mutable_comm_env()->mutable_env())["GLOO_SOCKET_IFNAME"] = "lo";
  v1::JoinGroupResponse resp;
  grpc::Status st = Join(a, req, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(resp.transport(), "local");
  EXPECT_TRUE(std::filesystem::exists(tmp / "a/state/assignment.json"));
  std::printf("assignment.json: %s", tandem::testing::SlurpFile(tmp / "a/state/assignment.json").c_str());

  ::kill(a.proc.pid(), SIGKILL);
  a.proc.Wait(5s);
  AgentProcess b;
  b.token = kToken;
  // Same state directory, fresh log files (the old stdout still holds the old ready line).
  ASSERT_EQ(b.Start("solo", tmp / "b", token, {"--state-dir", tmp / "a/state"}), "");
  v1::RankStatus s = GetStatus(b);
  std::printf("after restart: %s\n", s.ShortDebugString().c_str());
  EXPECT_EQ(s.state(), v1::RANK_STATE_IDLE);
  EXPECT_NE(s.reason().find("restarted; last assignment generation 7 rank 0"), std::string::npos) << s.reason();
  EXPECT_TRUE(s.persisted().present());
  EXPECT_EQ(s.persisted().generation(), 7u);
  EXPECT_EQ(s.persisted().model_path(), engine::testing::TinyModelDir());
  EXPECT_EQ(s.persisted().comm_env().env().at("GLOO_SOCKET_IFNAME"), "lo");
  // LeaveGroup clears it.
  auto ctx = b.Context(5s);
  v1::LeaveGroupResponse lr;
  ASSERT_TRUE(b.Control()->LeaveGroup(ctx.get(), v1::LeaveGroupRequest{}, &lr).ok());
  EXPECT_FALSE(std::filesystem::exists(tmp / "a/state/assignment.json"));
  EXPECT_FALSE(GetStatus(b).persisted().present());
}

}  // namespace
}  // namespace tandem::agentd
