// Real mutual-TLS handshakes with the files `tandemctl certs` writes: an Agent service on
// 127.0.0.1 (port 0) serving with a node certificate and requiring a verified client
// certificate. The controller's and another node's certificates get through; no certificate,
// another CA's certificate, or a name the server certificate does not carry do not.
#include <unistd.h>

#include <filesystem>
#include <memory>

#include <grpcpp/grpcpp.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <gtest/gtest.h>

#include "controller/cluster_certs.h"
#include "tandem/v1/agent.grpc.pb.h"
#include "tests/common/test_util.h"

namespace tandem::controller {
namespace {

using tandem::testing::ReadTextFile;

// Answers GetFacts with the commonName of the client certificate it was called with.
class PeerEchoAgent final : public v1::Agent::Service {
  grpc::Status GetFacts(grpc::ServerContext* context, const v1::GetFactsRequest*, v1::NodeFacts* facts) override {
    std::vector<grpc::string_ref> cn = context->auth_context()->FindPropertyValues("x509_common_name");
    facts->set_node_name(cn.empty() ? "" : std::string(cn[0].data(), cn[0].size()));
    return grpc::Status::OK;
  }
};

struct Identity {
  std::string cert, key;
};

class CertsHandshake : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/tandem-handshake-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = new std::string(tmpl);
    constexpr char kYaml[] =
        "model: {path: /m}\nnodes:\n  - {name: spark1, agent: '127.0.0.1:9301'}\n"
        "  - {name: spark2, agent: '127.0.0.1:9302'}\n";
    for (const std::string dir : {"main", "other"}) {
      absl::StatusOr<ClusterSpec> spec = ParseClusterSpec(kYaml, "cluster.yaml");
      ASSERT_TRUE(spec.ok()) << spec.status();
      ClusterCertOptions o;
      o.out_dir = *root_ + "/" + dir;
      absl::StatusOr<ClusterCertResult> r = WriteClusterCertificates(*spec, o);
      ASSERT_TRUE(r.ok()) << r.status();
    }
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*root_);
    delete root_;
  }

  void SetUp() override { StartServer(Id("main", "spark1")); }
  void TearDown() override { StopServer(); }

  void StartServer(const Identity& identity) {
    grpc::SslServerCredentialsOptions tls(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    tls.pem_root_certs = Ca("main");
    tls.pem_key_cert_pairs.push_back({identity.key, identity.cert});
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::SslServerCredentials(tls), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_TRUE(server_ && port_ > 0);
  }
  void StopServer() {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    server_.reset();
  }

  static std::string Ca(const std::string& dir) { return ReadTextFile(*root_ + "/" + dir + "/ca.pem"); }
  static Identity Id(const std::string& dir, const std::string& name) {
    return {ReadTextFile(*root_ + "/" + dir + "/" + name + ".pem"), ReadTextFile(*root_ + "/" + dir + "/" + name + ".key")};
  }

  // One GetFacts call with a 5 s deadline; returns the server's view of the client's CN, or the
  // error. `target_name` overrides the name checked against the server certificate.
  grpc::Status Call(const std::string& ca, const Identity& client, std::string* peer_cn,
                    const std::string& target_name = "") {
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs = ca;
    tls.pem_cert_chain = client.cert;
    tls.pem_private_key = client.key;
    grpc::ChannelArguments args;
    if (!target_name.empty()) args.SetSslTargetNameOverride(target_name);
    auto channel = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port_), grpc::SslCredentials(tls), args);
    auto stub = v1::Agent::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::NodeFacts facts;
    grpc::Status st = stub->GetFacts(&ctx, v1::GetFactsRequest(), &facts);
    *peer_cn = facts.node_name();
    std::printf("  -> %s%s\n", st.ok() ? "OK, server saw CN=" : "refused: ",
                st.ok() ? peer_cn->c_str() : st.error_message().c_str());
    return st;
  }

  static std::string* root_;
  PeerEchoAgent service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};
std::string* CertsHandshake::root_ = nullptr;

TEST_F(CertsHandshake, ControllerCertificateGetsThrough) {
  std::string cn;
  grpc::Status st = Call(Ca("main"), Id("main", "controller"), &cn);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(cn, "tandemctl");
}

TEST_F(CertsHandshake, AnotherNodeCertificateGetsThroughAsAClient) {
  // An agent dialing the head agent's rendezvous store presents its own node certificate.
  std::string cn;
  grpc::Status st = Call(Ca("main"), Id("main", "spark2"), &cn);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(cn, "spark2");
}

TEST_F(CertsHandshake, NodeNameFromTheCertificateIsAccepted) {
  std::string cn;
  EXPECT_TRUE(Call(Ca("main"), Id("main", "controller"), &cn, "spark1").ok());
  EXPECT_TRUE(Call(Ca("main"), Id("main", "controller"), &cn, "localhost").ok());
  EXPECT_FALSE(Call(Ca("main"), Id("main", "controller"), &cn, "spark2").ok());
}

TEST_F(CertsHandshake, ClientWithoutCertificateIsRefused) {
  std::string cn;
  grpc::Status st = Call(Ca("main"), Identity{}, &cn);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(CertsHandshake, ClientCertificateOfAnotherCaIsRefused) {
  std::string cn;
  // The client trusts the server's CA but presents a certificate of another cluster.
  grpc::Status st = Call(Ca("main"), Id("other", "controller"), &cn);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(CertsHandshake, ServerOfAnotherCaIsRefusedByTheClient) {
  std::string cn;
  // The server would accept this client; the client does not trust the server's CA.
  grpc::Status st = Call(Ca("other"), Id("main", "controller"), &cn);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(CertsHandshake, ControllerCertificateCannotServe) {
  // controller.pem has clientAuth only: a client refuses it as a server's certificate even
  // though it is signed by the right CA and carries no name to mismatch (target "tandemctl").
  StopServer();
  StartServer(Id("main", "controller"));
  std::string cn;
  grpc::Status st = Call(Ca("main"), Id("main", "spark2"), &cn, "tandemctl");
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE);
}

}  // namespace
}  // namespace tandem::controller
