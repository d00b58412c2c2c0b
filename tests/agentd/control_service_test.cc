// agentd/control_service.h: what LoadModel, JoinGroup, SetServing and Generate put on the wire
// when they do not succeed: the code and message as the gRPC status, and a ControlError in its
// details telling a refusal from a load, join or probe that ran and failed. Auth refusals carry
// no details.
#include "agentd/control_service.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "agentd/auth.h"
#include "agentd/engine_host.h"
#include "agentd/model_roots.h"
#include "agentd/rendezvous_store.h"
#include "tests/agentd/tiny_rank.h"
#include "tests/common/test_util.h"

namespace tandem::agentd {
namespace {

using namespace std::chrono_literals;
using tandem::testing::TempDir;

class ControlServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(tmp_ / "models/broken");
    std::ofstream(tmp_ / "models/broken/config.json") << "{ not json";
    auto roots = ModelRoots::Create({tmp_ / "models", testing::CanonicalTestdataDir()});
    ASSERT_TRUE(roots.ok()) << roots.status();
    roots_ = std::make_unique<ModelRoots>(std::move(*roots));
    EngineHostOptions o;
    o.node_name = "unit";
    o.local_store = &store_;
    o.model_roots = roots_.get();
    host_ = std::make_unique<EngineHost>(o);
    service_ = std::make_unique<ControlService>(host_.get(), &store_, &auth_);
    grpc::ServerBuilder b;
    int port = 0;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    b.RegisterService(service_.get());
    server_ = b.BuildAndStart();
    ASSERT_GT(port, 0);
    stub_ = v1::AgentControl::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    server_->Shutdown(std::chrono::system_clock::now() + 1s);
    host_->Shutdown();
  }
  void Prepare(grpc::ClientContext* ctx, const std::string& token = "t0k-t0k-t0k-t0k!") {
    ctx->set_deadline(std::chrono::system_clock::now() + 30s);
    ctx->AddMetadata("authorization", "Bearer " + token);
  }
  // Streams LoadModel of `path`; the status, and whether a final (done) event came.
  grpc::Status Load(const std::string& path, bool* final_event) {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    v1::LoadModelRequest req;
    req.set_model_path(path);
    auto reader = stub_->LoadModel(&ctx, req);
    v1::LoadModelEvent ev;
    *final_event = false;
    while (reader->Read(&ev)) *final_event = *final_event || ev.done();
    return reader->Finish();
  }
  static v1::ControlError Details(const grpc::Status& st) {
    v1::ControlError e;
    EXPECT_TRUE(e.ParseFromString(st.error_details())) << st.error_message();
    return e;
  }

  TempDir tmp_;
  RendezvousStore store_;
  TokenAuth auth_{"t0k-t0k-t0k-t0k!"};
  std::unique_ptr<ModelRoots> roots_;
  std::unique_ptr<EngineHost> host_;
  std::unique_ptr<ControlService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::AgentControl::Stub> stub_;
};

TEST_F(ControlServiceTest, AFailedLoadIsTheStatusWithFailedDetails) {
  bool final_event = true;
  const grpc::Status st = Load(tmp_ / "models/broken", &final_event);
  ASSERT_FALSE(st.ok());
  EXPECT_FALSE(final_event) << "a failed load has no final event";
  const v1::ControlError e = Details(st);
  EXPECT_EQ(e.outcome(), v1::ControlError::FAILED);
  EXPECT_EQ(e.code(), static_cast<int>(st.error_code()));
  EXPECT_EQ(e.message(), st.error_message());
  v1::RankStatus s;
  grpc::ClientContext ctx;
  Prepare(&ctx);
  ASSERT_TRUE(stub_->GetStatus(&ctx, v1::GetStatusRequest{}, &s).ok());
  EXPECT_EQ(s.state(), v1::RANK_STATE_FAILED);
  EXPECT_EQ(s.reason(), "load failed: " + st.error_message());
}

TEST_F(ControlServiceTest, RefusalsCarryRefusedDetails) {
  bool final_event = true;
  const grpc::Status outside = Load("/etc", &final_event);
  EXPECT_EQ(outside.error_code(), grpc::StatusCode::PERMISSION_DENIED) << outside.error_message();
  EXPECT_EQ(Details(outside).outcome(), v1::ControlError::REFUSED);
  EXPECT_FALSE(final_event);

  grpc::ClientContext ctx;
  Prepare(&ctx);
  v1::JoinGroupResponse resp;
  const grpc::Status join = stub_->JoinGroup(&ctx, v1::JoinGroupRequest{}, &resp);
  EXPECT_EQ(join.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << join.error_message();
  EXPECT_EQ(Details(join).outcome(), v1::ControlError::REFUSED);
  EXPECT_EQ(join.error_message(), "no model is loaded: LoadModel first");
}

// The probe's own errors are its answer: a refusal (no group here) and a probe the engine took
// and did not finish in its time (DEADLINE_EXCEEDED with PROBE_FAILED details, which the
// controller shows as the agent's answer, not as "no answer within N s"). The gate refuses the
// same way.
TEST_F(ControlServiceTest, TheProbeAndTheGateAnswerWithDetails) {
  v1::GenerateRequest g;
  g.add_prompt_ids(1);
  g.set_max_tokens(4000);
  g.set_timeout_ms(1);
  v1::GenerateResponse resp;
  {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    const grpc::Status refused = stub_->Generate(&ctx, g, &resp);
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << refused.error_message();
    EXPECT_EQ(Details(refused).outcome(), v1::ControlError::REFUSED);
  }
  {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    v1::SetServingRequest serve;
    serve.set_serving(true);
    v1::SetServingResponse served;
    const grpc::Status refused = stub_->SetServing(&ctx, serve, &served);
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << refused.error_message();
    EXPECT_EQ(Details(refused).outcome(), v1::ControlError::REFUSED);
  }
  // A group of one on the tiny model; 4000 tokens do not fit in the probe's 1 ms.
  ASSERT_TRUE(host_->LoadModel(TinyLoad(0, 1), nullptr).ok());
  auto joined = host_->JoinGroup(SoloJoin(1));
  ASSERT_TRUE(joined.ok()) << joined.status();
  grpc::ClientContext ctx;
  Prepare(&ctx);
  const grpc::Status late = stub_->Generate(&ctx, g, &resp);
  EXPECT_EQ(late.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << late.error_message();
  EXPECT_EQ(late.error_message(), "the probe did not finish within 1 ms");
  EXPECT_EQ(Details(late).outcome(), v1::ControlError::PROBE_FAILED);
  EXPECT_TRUE(host_->LeaveGroup(true, "").ok());
}

TEST_F(ControlServiceTest, AWrongTokenHasNoDetails) {
  grpc::ClientContext ctx;
  Prepare(&ctx, "wrong-token-wrong");
  v1::JoinGroupResponse resp;
  const grpc::Status st = stub_->JoinGroup(&ctx, v1::JoinGroupRequest{}, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(st.error_details(), "");
}

}  // namespace
}  // namespace tandem::agentd
