// The Agent service in-process: a real gRPC server on a loopback port, a real client stub.
#include "agentd/agent_service.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <iostream>

#include "agentd/sha256.h"
#include "tests/agentd/temp_dir.h"
#include "tests/common/fake_node.h"

namespace tandem::agentd {
namespace {
using tandem::testing::FakeNodeOptions;
using tandem::testing::TempDir;
using tandem::testing::WriteFakeNode;
using tandem::testing::WriteTextFile;

class AgentServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto [sys, proc] = WriteFakeNode(tmp_ / "node", FakeNodeOptions{});
    AgentConfig cfg{"spark-a", FactsRoots{sys, proc}, tmp_ / "state"};
    metrics_ = std::make_unique<AgentMetrics>(cfg.roots, cfg.node_name);
    service_ = std::make_unique<AgentService>(cfg, metrics_.get());
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    b.RegisterService(service_.get());
    server_ = b.BuildAndStart();
    ASSERT_NE(port_, 0);
    stub_ = v1::Agent::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(port_), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override { server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1)); }

  static void SetDeadline(grpc::ClientContext* ctx, int seconds) {
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  }

  TempDir tmp_;
  std::unique_ptr<AgentMetrics> metrics_;
  std::unique_ptr<AgentService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Agent::Stub> stub_;
  int port_ = 0;
};

TEST_F(AgentServiceTest, GetFacts) {
  WriteTextFile(tmp_ / "model/config.json", "{}");
  grpc::ClientContext ctx;
  SetDeadline(&ctx, 10);
  v1::GetFactsRequest req;
  req.set_model_path(tmp_ / "model");
  v1::NodeFacts facts;
  grpc::Status st = stub_->GetFacts(&ctx, req, &facts);
  ASSERT_TRUE(st.ok()) << st.error_message();
  std::cout << "driver=" << facts.driver().version() << " kernel=" << facts.kernel().release()
            << " rdma=" << facts.rdma_size() << " netdevs=" << facts.netdevs_size() << "\n";
  EXPECT_EQ(facts.node_name(), "spark-a");
  EXPECT_EQ(facts.driver().version(), "580.95.05");
  EXPECT_EQ(facts.rdma_size(), 2);
  EXPECT_EQ(facts.rdma(0).ports(0).gids(3).ipv4(), "192.168.100.1");
  EXPECT_TRUE(facts.model().exists());
  EXPECT_TRUE(facts.model().has_config());
}

TEST_F(AgentServiceTest, HashWeightsStreamsProgressThenManifest) {
  // Enough data that hashing spans several 200 ms progress ticks on a slow machine is not
  // guaranteed, so only require at least one progress event (the final one is always sent).
  const std::string big(48u << 20, 'q');
  WriteTextFile(tmp_ / "model/model-00001-of-00002.safetensors", big);
  WriteTextFile(tmp_ / "model/model-00002-of-00002.safetensors", big);
  WriteTextFile(tmp_ / "model/config.json", "abc");
  const std::string big_sha = Sha256Hex(big);

  for (int round = 0; round < 2; ++round) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, 60);
    v1::HashWeightsRequest req;
    req.set_model_path(tmp_ / "model");
    req.set_threads(2);
    auto reader = stub_->HashWeights(&ctx, req);
    v1::HashWeightsEvent ev;
    int progress_events = 0, manifests = 0;
    v1::WeightsManifest manifest;
    v1::HashProgress last;
    while (reader->Read(&ev)) {
      if (ev.has_progress()) {
        EXPECT_EQ(manifests, 0) << "progress after the manifest";
        ++progress_events;
        last = ev.progress();
      } else if (ev.has_manifest()) {
        ++manifests;
        manifest = ev.manifest();
      }
    }
    grpc::Status st = reader->Finish();
    ASSERT_TRUE(st.ok()) << st.error_message();
    std::cout << "round " << round << ": " << progress_events << " progress events, last "
              << last.bytes_done() << "/" << last.bytes_total() << " bytes, " << manifest.seconds() << " s, "
              << manifest.hashed_bytes_per_second() / 1e6 << " MB/s\n";
    EXPECT_GE(progress_events, 1);
    EXPECT_EQ(manifests, 1);
    EXPECT_EQ(last.bytes_done(), last.bytes_total());
    EXPECT_EQ(last.files_done(), 3u);
    ASSERT_EQ(manifest.files_size(), 3);
    EXPECT_EQ(manifest.error(), "");
    EXPECT_EQ(manifest.files(0).path(), "config.json");
    EXPECT_EQ(manifest.files(0).sha256(), Sha256Hex("abc"));
    EXPECT_EQ(manifest.files(1).sha256(), big_sha);
    EXPECT_EQ(manifest.files(2).sha256(), big_sha);
    for (const auto& f : manifest.files()) EXPECT_EQ(f.cached(), round == 1) << f.path();
  }
  const std::string text = metrics_->Render();
  EXPECT_NE(text.find("tandem_hash_files_done 3"), std::string::npos) << text;
}

TEST_F(AgentServiceTest, HashWeightsMissingFolderEndsWithAnErrorManifest) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, 10);
  v1::HashWeightsRequest req;
  req.set_model_path(tmp_ / "no-such-model");
  auto reader = stub_->HashWeights(&ctx, req);
  v1::HashWeightsEvent ev;
  std::vector<v1::HashWeightsEvent> events;
  while (reader->Read(&ev)) events.push_back(ev);
  ASSERT_TRUE(reader->Finish().ok());
  ASSERT_EQ(events.size(), 1u);
  ASSERT_TRUE(events[0].has_manifest());
  std::cout << "error: " << events[0].manifest().error() << "\n";
  EXPECT_NE(events[0].manifest().error().find("does not exist"), std::string::npos);
}

TEST_F(AgentServiceTest, HashWeightsEmptyPathIsInvalid) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, 10);
  auto reader = stub_->HashWeights(&ctx, v1::HashWeightsRequest{});
  v1::HashWeightsEvent ev;
  while (reader->Read(&ev)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(AgentServiceTest, MetricsRenderNodeInfoFromFakeTree) {
  const std::string text = metrics_->Render();
  std::cout << text.substr(0, text.find("tandem_memory_total_bytes")) << "\n";
  EXPECT_NE(text.find("tandem_node_info{"), std::string::npos);
  EXPECT_NE(text.find("driver=\"580.95.05\""), std::string::npos);
  EXPECT_NE(text.find("kernel=\"6.11.0-1016-nvidia\""), std::string::npos);
  EXPECT_NE(text.find("node=\"spark-a\""), std::string::npos);
  EXPECT_NE(text.find("tandem_memory_total_bytes 137438953472"), std::string::npos);
}

}  // namespace
}  // namespace tandem::agentd
