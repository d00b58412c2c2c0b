// agentd/fabric_check.h: the figures (median, p99, bus bandwidth), the timed loops over Gloo with
// ranks as threads on loopback, a transport that corrupts the sum, and whole checks of two "agents"
// (two FabricCheck objects, rank 1 reaching rank 0's store directly): their figures, the store
// left empty, a rank that never joins, refusals and a second check at once; and the RPC: what
// ControlService puts on the wire for a check that failed and for one it refused.
#include "agentd/fabric_check.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "agentd/auth.h"
#include "agentd/control_service.h"
#include "agentd/engine_host.h"
#include "engine/comm/rank_threads.h"
#include "tests/common/null_comm.h"

namespace tandem::agentd {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

TEST(FabricFiguresTest, MedianAndNearestRankP99) {
  TimeSummary odd = SummarizeTimes({5, 1, 3, 2, 4});
  EXPECT_EQ(odd.median, 3);
  EXPECT_EQ(odd.p99, 5);
  EXPECT_EQ(odd.min, 1);
  EXPECT_EQ(odd.max, 5);
  EXPECT_EQ(SummarizeTimes({4, 1, 2, 3}).median, 2.5);
  std::vector<double> many;
  for (int i = 200; i >= 1; --i) many.push_back(i);
  EXPECT_EQ(SummarizeTimes(many).p99, 198);  // ceil(0.99 x 200) = 198th smallest
  EXPECT_EQ(SummarizeTimes(many).median, 100.5);
  EXPECT_EQ(SummarizeTimes({}).median, 0);
}

TEST(FabricFiguresTest, BusBandwidthIsNcclsAllReduceFactor) {
  EXPECT_DOUBLE_EQ(AllReduceBusBandwidth(10, 2), 10);  // 2(n-1)/n = 1
  EXPECT_DOUBLE_EQ(AllReduceBusBandwidth(10, 4), 15);  // 6/4
  EXPECT_DOUBLE_EQ(AllReduceBusBandwidth(10, 1), 0);   // nothing crosses a link
}

TEST(FabricFiguresTest, LoopsTakeTheRequestsNonZeroFieldsWithinLimits) {
  v1::CheckFabricRequest req;
  absl::StatusOr<CollectiveLoops> d = LoopsOf(req);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->small_bytes, 4096u);
  EXPECT_EQ(d->small_iters, 200);
  EXPECT_EQ(d->small_warmup, 20);
  EXPECT_EQ(d->large_bytes, size_t{64} << 20);
  EXPECT_EQ(d->large_iters, 10);
  EXPECT_EQ(d->large_warmup, 2);
  req.set_large_bytes(1 << 20);
  req.set_small_iters(7);
  absl::StatusOr<CollectiveLoops> o = LoopsOf(req);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->large_bytes, size_t{1} << 20);
  EXPECT_EQ(o->small_iters, 7);
  EXPECT_EQ(o->small_bytes, 4096u);
  req.set_small_bytes(6);
  EXPECT_TRUE(absl::IsInvalidArgument(LoopsOf(req).status()));
}

TEST(FabricFiguresTest, OnlyAnIdleRankMayRunACheck) {
  v1::RankStatus s;
  s.set_state(v1::RANK_STATE_IDLE);
  EXPECT_EQ(FabricCheckBusyReason(s), "");
  s.set_state(v1::RANK_STATE_SERVING);
  s.set_model_path("/m/qwen");
  EXPECT_EQ(FabricCheckBusyReason(s), "this rank is serving (/m/qwen)");
  s.set_state(v1::RANK_STATE_FAILED);
  EXPECT_NE(FabricCheckBusyReason(s), "");
}

CollectiveLoops QuickLoops() {
  CollectiveLoops l;
  l.small_iters = 20;
  l.small_warmup = 2;
  l.large_bytes = 1 << 20;
  l.large_iters = 3;
  l.large_warmup = 1;
  return l;
}

TEST(MeasureCollectivesTest, GlooRanksAsThreadsReportTheirFigures) {
  for (int world : {2, 3}) {
    std::vector<v1::CheckFabricResponse> out(world);
    absl::Status st = engine::RunRanksAsThreads(world, [&](engine::Comm& comm) {
      return MeasureCollectives(comm, QuickLoops(), &out[comm.rank()]);
    });
    ASSERT_TRUE(st.ok()) << st;
    for (const auto& r : out) {
      EXPECT_EQ(r.transport(), "gloo/tcp");
      EXPECT_EQ(r.small_bytes(), 4096u);
      EXPECT_EQ(r.small_iters(), 20u);
      EXPECT_GT(r.small_median_us(), 0);
      EXPECT_GE(r.small_p99_us(), r.small_median_us());
      EXPECT_LE(r.small_min_us(), r.small_median_us());
      EXPECT_EQ(r.large_bytes(), 1u << 20);
      EXPECT_EQ(r.large_iters(), 3u);
      EXPECT_GT(r.large_algbw_gbps(), 0);
      EXPECT_DOUBLE_EQ(r.large_algbw_gbps(), (1 << 20) / r.large_median_seconds() / 1e9);
      EXPECT_DOUBLE_EQ(r.large_busbw_gbps(), r.large_algbw_gbps() * 2.0 * (world - 1) / world);
    }
    std::printf("world %d rank 0: small median %.1f us p99 %.1f us, large busbw %.3f GB/s\n", world,
                out[0].small_median_us(), out[0].small_p99_us(), out[0].large_busbw_gbps());
  }
}

TEST(MeasureCollectivesTest, ALoopBudgetCutsEveryRanksIterationsAlike) {
  CollectiveLoops l = QuickLoops();
  l.loop_budget = std::chrono::milliseconds(0);  // no room: no warm-up, one timed iteration
  std::vector<v1::CheckFabricResponse> out(2);
  absl::Status st = engine::RunRanksAsThreads(2, [&](engine::Comm& comm) {
    return MeasureCollectives(comm, l, &out[comm.rank()]);
  });
  ASSERT_TRUE(st.ok()) << st;
  for (const auto& r : out) {
    EXPECT_EQ(r.small_iters(), 1u);
    EXPECT_EQ(r.large_iters(), 1u);
    EXPECT_EQ(r.small_median_us(), r.small_p99_us());
    EXPECT_GT(r.large_busbw_gbps(), 0);
  }
}

TEST(MeasureCollectivesTest, AWrongSumIsDataLossNotAFigure) {
  tandem::testing::NullComm comm(0, 2);  // claims two ranks but sums nothing
  v1::CheckFabricResponse out;
  absl::Status st = MeasureCollectives(comm, QuickLoops(), &out);
  EXPECT_TRUE(absl::IsDataLoss(st)) << st;
  EXPECT_NE(st.message().find("element 0 of 1024 is 1, expected 3"), std::string::npos) << st;
  EXPECT_EQ(out.small_iters(), 0u);
}

// Rank > 0 reaches the head's store directly instead of over gRPC.
class DirectStore final : public engine::Store {
 public:
  explicit DirectStore(engine::Store& base) : base_(base) {}
  absl::Status Set(const std::string& k, const std::string& v) override { return base_.Set(k, v); }
  absl::StatusOr<std::string> Get(const std::string& k, std::chrono::milliseconds t) override {
    return base_.Get(k, t);
  }
  std::string Describe() const override { return "the head's store (direct)"; }

 private:
  engine::Store& base_;
};

class FabricCheckTest : public ::testing::Test {
 protected:
  FabricCheckOptions Options(RendezvousStore* own) {
    FabricCheckOptions o;
    o.local_store = own;
    o.remote_store = [this](const std::string&) { return std::make_unique<DirectStore>(head_store_); };
    o.busy = [this] { return busy_; };
    return o;
  }
  static v1::CheckFabricRequest Request(uint64_t id, int rank, uint32_t timeout_ms = 20000) {
    v1::CheckFabricRequest r;
    r.set_check_id(id);
    r.set_rank(rank);
    r.set_world_size(2);
    r.set_store_endpoint("head:1");
    r.set_comm_host("127.0.0.1");
    r.set_backend("cpu");
    r.set_timeout_ms(timeout_ms);
    r.set_small_iters(20);
    r.set_small_warmup(2);
    r.set_large_bytes(1 << 20);
    r.set_large_iters(3);
    r.set_large_warmup(1);
    (*r.mutable_comm_env()->mutable_env())["GLOO_SOCKET_IFNAME"] = "lo";
    return r;
  }

  RendezvousStore head_store_;
  RendezvousStore worker_store_;  // rank 1's own store: unused by the check
  std::string busy_;
};

TEST_F(FabricCheckTest, TwoAgentsMeasureAndLeaveTheStoreEmpty) {
  FabricCheck head(Options(&head_store_));
  FabricCheck worker(Options(&worker_store_));
  // The worker first, as `up` calls them; either order works.
  auto w = std::async(std::launch::async, [&] { return worker.Run(Request(11, 1)); });
  absl::StatusOr<v1::CheckFabricResponse> h = head.Run(Request(11, 0));
  absl::StatusOr<v1::CheckFabricResponse> wr = w.get();
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_TRUE(wr.ok()) << wr.status();
  EXPECT_EQ(h->rank(), 0);
  EXPECT_EQ(wr->rank(), 1);
  for (const auto* r : {&*h, &*wr}) {
    EXPECT_EQ(r->transport(), "gloo/tcp");
    EXPECT_EQ(r->device(), "");
    EXPECT_GT(r->small_median_us(), 0);
    EXPECT_GT(r->large_busbw_gbps(), 0);
    EXPECT_GT(r->connect_seconds(), 0);
    EXPECT_GE(r->seconds(), r->connect_seconds());
  }
  EXPECT_EQ(head_store_.size(), 0u);  // rank 0 dropped the check's keys
  EXPECT_EQ(worker_store_.size(), 0u);
}

TEST_F(FabricCheckTest, ARankThatNeverJoinsIsNamedAtTheDeadline) {
  FabricCheck head(Options(&head_store_));
  const auto t0 = Clock::now();
  absl::StatusOr<v1::CheckFabricResponse> h = head.Run(Request(12, 0, /*timeout_ms=*/300));
  const auto took = Clock::now() - t0;
  ASSERT_FALSE(h.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(h.status())) << h.status();
  EXPECT_TRUE(IsFabricCheckFailure(h.status()));
  EXPECT_NE(h.status().message().find("rank 1 of 2 did not join the fabric check within 0.3 s"), std::string::npos)
      << h.status();
  EXPECT_GE(took, 300ms);
  EXPECT_LT(took, 5s);
  EXPECT_EQ(head_store_.size(), 0u);
}

TEST_F(FabricCheckTest, RefusalsRunNothingAndAreNotFailures) {
  FabricCheck head(Options(&head_store_));
  busy_ = "this rank is serving (/m)";
  absl::StatusOr<v1::CheckFabricResponse> busy = head.Run(Request(13, 0));
  EXPECT_TRUE(absl::IsFailedPrecondition(busy.status())) << busy.status();
  EXPECT_NE(busy.status().message().find("this rank is serving (/m): run `tandemctl down` first"), std::string::npos);
  EXPECT_FALSE(IsFabricCheckFailure(busy.status()));
  busy_.clear();

  v1::CheckFabricRequest env = Request(13, 0);
  (*env.mutable_comm_env()->mutable_env())["LD_PRELOAD"] = "/x.so";
  EXPECT_TRUE(absl::IsInvalidArgument(head.Run(env).status()));
  v1::CheckFabricRequest one = Request(13, 0);
  one.set_world_size(1);
  EXPECT_TRUE(absl::IsInvalidArgument(head.Run(one).status()));
  v1::CheckFabricRequest no_id = Request(0, 0);
  EXPECT_TRUE(absl::IsInvalidArgument(head.Run(no_id).status()));
  v1::CheckFabricRequest no_store = Request(13, 1);
  no_store.clear_store_endpoint();
  EXPECT_TRUE(absl::IsInvalidArgument(head.Run(no_store).status()));
  EXPECT_EQ(head_store_.size(), 0u);
}

TEST_F(FabricCheckTest, ASecondCheckOnTheSameAgentIsUnavailableWhileOneRuns) {
  FabricCheck head(Options(&head_store_));
  FabricCheck worker(Options(&worker_store_));
  auto first = std::async(std::launch::async, [&] { return head.Run(Request(14, 0)); });
  // Rank 0 is inside its check once its presence key is in the store.
  const auto until = Clock::now() + 10s;
  while (!head_store_.TryGet("fabric/14/here/0").has_value() && Clock::now() < until) std::this_thread::sleep_for(1ms);
  absl::StatusOr<v1::CheckFabricResponse> second = head.Run(Request(15, 0));
  EXPECT_TRUE(absl::IsUnavailable(second.status())) << second.status();
  EXPECT_FALSE(IsFabricCheckFailure(second.status()));
  // The first still completes once its peer comes.
  absl::StatusOr<v1::CheckFabricResponse> w = worker.Run(Request(14, 1));
  EXPECT_TRUE(w.ok()) << w.status();
  EXPECT_TRUE(first.get().ok());
}

// AgentControl.CheckFabric over gRPC on loopback: a failed check carries CHECK_FAILED details (the
// controller words it "the agent answered ..."), a refusal REFUSED, and an idle EngineHost is no
// reason to refuse.
TEST(CheckFabricRpcTest, AFailedCheckAndARefusalCarryTheirOutcome) {
  RendezvousStore store;
  EngineHostOptions ho;
  ho.node_name = "unit";
  ho.local_store = &store;
  EngineHost host(ho);
  FabricCheckOptions fo;
  fo.local_store = &store;
  fo.busy = [&host] { return FabricCheckBusyReason(host.Status()); };
  FabricCheck fabric(fo);
  TokenAuth auth("t0k-t0k-t0k-t0k!");
  ControlService service(&host, &store, &auth, &fabric);
  grpc::ServerBuilder b;
  int port = 0;
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  b.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  ASSERT_GT(port, 0);
  auto stub = v1::AgentControl::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  auto call = [&](const v1::CheckFabricRequest& req) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 30s);
    ctx.AddMetadata("authorization", "Bearer t0k-t0k-t0k-t0k!");
    v1::CheckFabricResponse resp;
    return stub->CheckFabric(&ctx, req, &resp);
  };
  v1::CheckFabricRequest req;
  req.set_check_id(21);
  req.set_world_size(2);
  req.set_timeout_ms(200);
  const grpc::Status failed = call(req);
  EXPECT_EQ(failed.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << failed.error_message();
  v1::ControlError e;
  ASSERT_TRUE(e.ParseFromString(failed.error_details()));
  EXPECT_EQ(e.outcome(), v1::ControlError::CHECK_FAILED);
  EXPECT_NE(e.message().find("rank 1 of 2 did not join"), std::string::npos) << e.message();

  req.set_world_size(1);
  const grpc::Status refused = call(req);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  ASSERT_TRUE(e.ParseFromString(refused.error_details()));
  EXPECT_EQ(e.outcome(), v1::ControlError::REFUSED);
  server->Shutdown(std::chrono::system_clock::now() + 1s);
  host.Shutdown();
}

}  // namespace
}  // namespace tandem::agentd
