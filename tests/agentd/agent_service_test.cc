// The Agent service in-process: a real gRPC server on a loopback port, a real client stub.
#include "agentd/agent_service.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>

#include "agentd/sha256.h"
#include "tests/common/fake_node.h"
#include "tests/common/loopback_server.h"
#include "tests/common/test_util.h"

namespace tandem::agentd {
namespace {
using tandem::testing::FakeNodeOptions;
using tandem::testing::LoopbackServer;
using tandem::testing::TempDir;
using tandem::testing::WriteFakeNode;
using tandem::testing::WriteTextFile;

class AgentServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto [sys, proc] = WriteFakeNode(tmp_ / "node", FakeNodeOptions{});
    AgentConfig cfg{"spark-a", FactsRoots{sys, proc}, tmp_ / "state"};
    std::filesystem::create_directories(tmp_ / "models");
    cfg.model_roots = *ModelRoots::Create({tmp_ / "models"});
    cfg.security.set_token_auth(true);
    cfg.security.add_model_roots(cfg.model_roots.roots()[0]);
    metrics_ = std::make_unique<AgentMetrics>(cfg.roots, cfg.node_name);
    service_ = std::make_unique<AgentService>(cfg, metrics_.get());
    server_ = std::make_unique<LoopbackServer>(service_.get());
    ASSERT_NE(server_->port(), 0);
    stub_ = v1::Agent::NewStub(grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  }

  static void SetDeadline(grpc::ClientContext* ctx, int seconds) {
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  }

  // One HashWeights call: every event it streamed, then its status.
  struct HashCall {
    std::vector<v1::HashWeightsEvent> events;
    grpc::Status status;
  };
  HashCall Hash(const std::string& path, bool ignore_cache = false) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, 10);
    v1::HashWeightsRequest req;
    req.set_model_path(path);
    req.set_ignore_cache(ignore_cache);
    auto reader = stub_->HashWeights(&ctx, req);
    HashCall call;
    v1::HashWeightsEvent ev;
    while (reader->Read(&ev)) call.events.push_back(ev);
    call.status = reader->Finish();
    return call;
  }

  TempDir tmp_;
  std::unique_ptr<AgentMetrics> metrics_;
  std::unique_ptr<AgentService> service_;
  std::unique_ptr<LoopbackServer> server_;
  std::unique_ptr<v1::Agent::Stub> stub_;
};

TEST_F(AgentServiceTest, GetFacts) {
  WriteTextFile(tmp_ / "models/m/config.json", "{}");
  grpc::ClientContext ctx;
  SetDeadline(&ctx, 10);
  v1::GetFactsRequest req;
  req.set_model_path(tmp_ / "models/m");
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
  EXPECT_EQ(facts.model().path(), tmp_ / "models/m");
  EXPECT_TRUE(facts.security().token_auth());
  ASSERT_EQ(facts.security().model_roots_size(), 1);
}

TEST_F(AgentServiceTest, HashWeightsStreamsProgressThenManifest) {
  // Enough data that hashing spans several 200 ms progress ticks on a slow machine is not
  // guaranteed, so only require at least one progress event (the final one is always sent).
  const std::string big(48u << 20, 'q');
  WriteTextFile(tmp_ / "models/m/model-00001-of-00002.safetensors", big);
  WriteTextFile(tmp_ / "models/m/model-00002-of-00002.safetensors", big);
  WriteTextFile(tmp_ / "models/m/config.json", "abc");
  const std::string big_sha = Sha256Hex(big);

  for (int round = 0; round < 2; ++round) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, 60);
    v1::HashWeightsRequest req;
    req.set_model_path(tmp_ / "models/m");
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

// A request that fails as a whole is the RPC's status, not an OK stream with an error inside.
TEST_F(AgentServiceTest, HashWeightsMissingFolderIsNotFound) {
  const HashCall call = Hash(tmp_ / "models/no-such-model");
  std::cout << "error: " << call.status.error_code() << " " << call.status.error_message() << "\n";
  EXPECT_EQ(call.status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(call.status.error_message().find("no-such-model"), std::string::npos) << call.status.error_message();
  EXPECT_TRUE(call.events.empty()) << "no progress and no manifest for a folder that is not there";
}

// The reproduction of issue 12: an unauthenticated HashWeights of /etc returned the sha256 of
// /etc/shadow. Now every path outside the model roots is refused before anything is read.
TEST_F(AgentServiceTest, HashWeightsOutsideTheRootsIsPermissionDenied) {
  WriteTextFile(tmp_ / "outside/secret.bin", "not a weight");
  WriteTextFile(tmp_ / "models/m/config.json", "{}");
  std::filesystem::create_symlink(tmp_ / "outside/secret.bin", tmp_ / "models/m/leak.safetensors");
  WriteTextFile(tmp_ / "models/dirlink-model/config.json", "{}");
  std::filesystem::create_directory_symlink(tmp_ / "outside", tmp_ / "models/dirlink-model/sub");
  std::filesystem::create_directory_symlink(tmp_ / "outside", tmp_ / "models/escape");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"/etc", "/etc"},
      {tmp_ / "models/../outside", "outside"},
      {tmp_ / "models/m", "leak.safetensors"},
      {tmp_ / "models/dirlink-model", "sub"},
      {tmp_ / "models/escape", "escape"},
  };
  for (const auto& [path, named] : cases) {
    const HashCall call = Hash(path);
    const grpc::Status& st = call.status;
    std::cout << path << ": " << st.error_code() << " " << st.error_message() << "\n";
    EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << path;
    EXPECT_NE(st.error_message().find(named), std::string::npos) << st.error_message();
    EXPECT_TRUE(call.events.empty()) << "nothing may be streamed for " << path;
  }
}

TEST_F(AgentServiceTest, GetFactsOutsideTheRootsReportsTheRefusal) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, 10);
  v1::GetFactsRequest req;
  req.set_model_path("/etc");
  v1::NodeFacts facts;
  ASSERT_TRUE(stub_->GetFacts(&ctx, req, &facts).ok());
  EXPECT_FALSE(facts.model().exists());
  EXPECT_EQ(facts.model().total_bytes(), 0u);
  EXPECT_NE(facts.model().error().find("PERMISSION_DENIED"), std::string::npos) << facts.model().error();
  EXPECT_NE(facts.model().error().find("/etc"), std::string::npos);
}

TEST_F(AgentServiceTest, IgnoreCacheReadsEveryByte) {
  WriteTextFile(tmp_ / "models/m/config.json", "abc");
  for (bool ignore : {false, false, true}) {
    const HashCall call = Hash(tmp_ / "models/m", ignore);
    ASSERT_TRUE(call.status.ok()) << call.status.error_message();
    ASSERT_TRUE(!call.events.empty() && call.events.back().has_manifest());
    const v1::WeightsManifest& m = call.events.back().manifest();
    ASSERT_EQ(m.files_size(), 1);
    if (ignore) {
      EXPECT_FALSE(m.files(0).cached());
    }
  }
}

TEST_F(AgentServiceTest, HashWeightsEmptyOrRelativePathIsInvalid) {
  for (const std::string path : {"", "models/m"}) {
    EXPECT_EQ(Hash(path).status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << "'" << path << "'";
  }
}

// The link test's two RPCs through gRPC with the cluster token: refused without it (they make the
// agent listen and send), and one whole transfer on loopback with it. The real /sys: lo's
// counters are read around the transfer.
TEST(AgentServiceLinkTest, TokenRequiredThenAWholeTransferOnLoopback) {
  const TokenAuth auth("link-test-token-0123456789");
  AgentConfig cfg{"spark-a", FactsRoots{}, ""};
  cfg.auth = &auth;
  AgentService service(cfg, nullptr);
  LoopbackServer server(&service);
  auto stub = v1::Agent::NewStub(grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials()));
  auto prepare = [&](grpc::ClientContext* ctx, const std::string& token) {
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    TokenAuth::AddTo(ctx, token);
  };
  v1::LinkReceiveRequest rreq;
  rreq.add_endpoints()->set_interface("lo");
  rreq.mutable_endpoints(0)->set_ipv4("127.0.0.1");
  rreq.set_token(std::string(32, 't'));
  rreq.set_streams(1);
  rreq.set_duration_ms(1000);
  {
    grpc::ClientContext ctx;
    prepare(&ctx, "");
    auto reader = stub->LinkReceive(&ctx, rreq);
    v1::LinkReceiveEvent ev;
    EXPECT_FALSE(reader->Read(&ev)) << "no listener for a caller without the token";
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
    grpc::ClientContext sctx;
    prepare(&sctx, "wrong-token");
    v1::LinkSendResponse resp;
    EXPECT_EQ(stub->LinkSend(&sctx, v1::LinkSendRequest{}, &resp).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    grpc::ClientContext ctx;
    prepare(&ctx, "link-test-token-0123456789");
    v1::LinkReceiveRequest bad = rreq;
    bad.set_streams(0);
    auto reader = stub->LinkReceive(&ctx, bad);
    v1::LinkReceiveEvent ev;
    EXPECT_FALSE(reader->Read(&ev));
    const grpc::Status st = reader->Finish();
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(st.error_message().find("streams must be 1..16"), std::string::npos) << st.error_message();
  }
  grpc::ClientContext rctx;
  prepare(&rctx, "link-test-token-0123456789");
  auto reader = stub->LinkReceive(&rctx, rreq);
  v1::LinkReceiveEvent ev;
  ASSERT_TRUE(reader->Read(&ev));
  ASSERT_TRUE(ev.has_listening());
  ASSERT_EQ(ev.listening().ports_size(), 1);
  v1::LinkSendRequest sreq;
  v1::LinkTarget* t = sreq.add_targets();
  t->set_interface("lo");
  t->set_local_ipv4("127.0.0.1");
  t->set_remote_ipv4("127.0.0.1");
  t->set_port(ev.listening().ports(0));
  sreq.set_token(rreq.token());
  sreq.set_streams(1);
  sreq.set_duration_ms(1000);
  grpc::ClientContext sctx;
  prepare(&sctx, "link-test-token-0123456789");
  v1::LinkSendResponse sent;
  const grpc::Status sst = stub->LinkSend(&sctx, sreq, &sent);
  ASSERT_TRUE(sst.ok()) << sst.error_message();
  EXPECT_EQ(sent.rdma().rfind("rdma: ", 0), 0u) << sent.rdma();
  ASSERT_TRUE(reader->Read(&ev));
  ASSERT_TRUE(ev.has_summary());
  EXPECT_TRUE(reader->Finish().ok());
  ASSERT_EQ(sent.results_size(), 1);
  EXPECT_GT(sent.results(0).bytes_sent(), 0u);
  EXPECT_EQ(ev.summary().results(0).payload_bytes(), sent.results(0).bytes_sent());
}

}  // namespace
}  // namespace tandem::agentd
