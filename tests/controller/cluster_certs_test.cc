// `tandemctl certs` on disk: the files, their modes, the chain, reuse of the CA, refusals; and
// real mutual-TLS handshakes with those files.
#include "controller/cluster_certs.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>

#include <grpcpp/grpcpp.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <gtest/gtest.h>

#include "common/status.h"
#include "tandem/v1/agent.grpc.pb.h"
#include "tests/common/test_util.h"
#include "tests/controller/cert_test_util.h"

namespace tandem::controller {
namespace {

using tandem::testing::ExtendedKeyUsages;
using tandem::testing::ReadTextFile;
using tandem::testing::SubjectAltNames;
using tandem::testing::TlsRole;
using tandem::testing::VerifyLeaf;
using Strings = std::vector<std::string>;

constexpr char kTwoNodes[] = R"(cluster: pair
model: {path: /m}
nodes:
  - {name: spark1, agent: "10.0.0.1:9300"}
  - {name: spark2, agent: "[::1]:9300"}
  - {name: spark3, agent: "spark3.lan:9300"}
)";

class ClusterCerts : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = tandem::testing::MakeTempDir("tandem-certs");
    out_ = root_ + "/tls";
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  ClusterSpec Spec(const std::string& yaml = kTwoNodes) {
    absl::StatusOr<ClusterSpec> spec = ParseClusterSpec(yaml, "cluster.yaml");
    EXPECT_TRUE(spec.ok()) << spec.status();
    return *spec;
  }
  absl::StatusOr<ClusterCertResult> Write(bool force = false, int days = 365) {
    ClusterCertOptions o;
    o.out_dir = out_;
    o.force = force;
    o.days = days;
    return WriteClusterCertificates(Spec(), o);
  }
  std::string File(const std::string& name) { return ReadTextFile(out_ + "/" + name); }
  static unsigned Mode(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return 0;
    return st.st_mode & 07777;
  }

  std::string root_, out_;
};

TEST_F(ClusterCerts, WritesEveryFileWithOwnerOnlyKeysAndAVerifyingChain) {
  mode_t old_umask = ::umask(0);  // the modes must not depend on the umask (0 would give 0666)
  absl::StatusOr<ClusterCertResult> r = Write();
  ::umask(old_umask);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->ca_reused);
  EXPECT_EQ(Mode(out_), 0700u);
  for (const std::string name : {"ca", "spark1", "spark2", "spark3", "controller"}) {
    std::printf("  %-10s .pem %04o  .key %04o\n", name.c_str(), Mode(out_ + "/" + name + ".pem"),
                Mode(out_ + "/" + name + ".key"));
    EXPECT_EQ(Mode(out_ + "/" + name + ".key"), 0600u) << name;
    EXPECT_EQ(Mode(out_ + "/" + name + ".pem"), 0644u) << name;
  }
  std::string ca = File("ca.pem");
  for (const std::string name : {"spark1", "spark2", "spark3"}) {
    EXPECT_EQ(VerifyLeaf(ca, File(name + ".pem"), TlsRole::kServer), "") << name;
    EXPECT_EQ(VerifyLeaf(ca, File(name + ".pem"), TlsRole::kClient), "") << name;
    EXPECT_EQ(ExtendedKeyUsages(File(name + ".pem")), (Strings{"serverAuth", "clientAuth"}));
  }
  EXPECT_EQ(VerifyLeaf(ca, File("controller.pem"), TlsRole::kClient), "");
  EXPECT_NE(VerifyLeaf(ca, File("controller.pem"), TlsRole::kServer), "");
  EXPECT_EQ(SubjectAltNames(File("spark1.pem")),
            (Strings{"DNS:spark1", "IP:10.0.0.1", "DNS:localhost", "IP:127.0.0.1", "IP:::1"}));
  // "[::1]:9300": the host is an IPv6 literal, so an IP SAN (deduplicated with the loopback one).
  EXPECT_EQ(SubjectAltNames(File("spark2.pem")), (Strings{"DNS:spark2", "IP:::1", "DNS:localhost", "IP:127.0.0.1"}));
  EXPECT_EQ(SubjectAltNames(File("spark3.pem")),
            (Strings{"DNS:spark3", "DNS:spark3.lan", "DNS:localhost", "IP:127.0.0.1", "IP:::1"}));
}

TEST_F(ClusterCerts, ExtraSansAndUnknownNodes) {
  ClusterCertOptions o;
  o.out_dir = out_;
  o.extra_sans["spark1"] = {"192.168.1.7", "spark1.example.com", "IP:fd00::7"};
  absl::StatusOr<ClusterCertResult> r = WriteClusterCertificates(Spec(), o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(SubjectAltNames(File("spark1.pem")),
            (Strings{"DNS:spark1", "IP:10.0.0.1", "DNS:localhost", "IP:127.0.0.1", "IP:::1", "IP:192.168.1.7",
                     "DNS:spark1.example.com", "IP:fd00::7"}));

  o.out_dir = root_ + "/other";
  o.extra_sans = {{"spark9", {"x"}}};
  r = WriteClusterCertificates(Spec(), o);
  ASSERT_FALSE(r.ok());
  std::printf("  %s\n", StatusText(r.status()).c_str());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  o.extra_sans = {{"spark1", {"bad name!"}}};
  r = WriteClusterCertificates(Spec(), o);
  ASSERT_FALSE(r.ok());
  std::printf("  %s\n", StatusText(r.status()).c_str());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(std::filesystem::exists(o.out_dir + "/ca.pem")) << "a refused run wrote files";
}

TEST_F(ClusterCerts, RefusesToOverwriteLeavesAndReusesTheCa) {
  ASSERT_TRUE(Write().ok());
  std::string ca_before = File("ca.pem"), leaf_before = File("spark1.pem");

  absl::StatusOr<ClusterCertResult> again = Write();
  ASSERT_FALSE(again.ok());
  std::printf("  second run: %s\n", StatusText(again.status()).c_str());
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(File("spark1.pem"), leaf_before);

  // Leaves moved away (or a new node): the CA on disk is reused, new leaves chain to it.
  for (const std::string name : {"spark1", "spark2", "spark3", "controller"}) {
    std::filesystem::remove(out_ + "/" + name + ".pem");
    std::filesystem::remove(out_ + "/" + name + ".key");
  }
  absl::StatusOr<ClusterCertResult> reused = Write();
  ASSERT_TRUE(reused.ok()) << reused.status();
  EXPECT_TRUE(reused->ca_reused);
  EXPECT_EQ(File("ca.pem"), ca_before);
  EXPECT_NE(File("spark1.pem"), leaf_before);
  EXPECT_EQ(VerifyLeaf(ca_before, File("spark1.pem"), TlsRole::kServer), "");
}

TEST_F(ClusterCerts, ForceMakesANewCaAndOldLeavesStopVerifying) {
  ASSERT_TRUE(Write().ok());
  std::string old_ca = File("ca.pem"), old_leaf = File("spark1.pem");
  absl::StatusOr<ClusterCertResult> r = Write(/*force=*/true);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->ca_reused);
  std::string new_ca = File("ca.pem");
  EXPECT_NE(new_ca, old_ca);
  EXPECT_EQ(VerifyLeaf(new_ca, File("spark1.pem"), TlsRole::kServer), "");
  EXPECT_NE(VerifyLeaf(new_ca, old_leaf, TlsRole::kServer), "");
  EXPECT_EQ(Mode(out_ + "/ca.key"), 0600u);
  EXPECT_EQ(Mode(out_ + "/spark1.key"), 0600u);
  EXPECT_EQ(Mode(out_ + "/spark1.pem"), 0644u);
  // No temporary files left behind by the replace path.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(out_)) {
    ++files;
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
  }
  EXPECT_EQ(files, 10);
}

TEST_F(ClusterCerts, RefusesAHalfCaAndAReadableCaKey) {
  ASSERT_TRUE(Write().ok());
  for (const std::string name : {"spark1", "spark2", "spark3", "controller"}) {
    std::filesystem::remove(out_ + "/" + name + ".pem");
    std::filesystem::remove(out_ + "/" + name + ".key");
  }
  ASSERT_EQ(::chmod((out_ + "/ca.key").c_str(), 0644), 0);
  absl::StatusOr<ClusterCertResult> r = Write();
  ASSERT_FALSE(r.ok());
  std::printf("  readable key: %s\n", StatusText(r.status()).c_str());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);

  std::filesystem::remove(out_ + "/ca.key");
  r = Write();
  ASSERT_FALSE(r.ok());
  std::printf("  ca.pem alone: %s\n", StatusText(r.status()).c_str());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(std::filesystem::exists(out_ + "/spark1.pem"));
}

TEST_F(ClusterCerts, RefusesNodeNamesThatCollideWithTheCaOrController) {
  ClusterCertOptions o;
  o.out_dir = out_;
  absl::StatusOr<ClusterCertResult> r =
      WriteClusterCertificates(Spec("model: {path: /m}\nnodes:\n  - {name: ca, agent: 'h:1'}\n"), o);
  ASSERT_FALSE(r.ok());
  std::printf("  %s\n", StatusText(r.status()).c_str());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

// Real mutual-TLS handshakes with these files: an Agent service on 127.0.0.1 (port 0) serving
// with a node certificate and requiring a verified client certificate. The controller's and
// another node's certificates get through; no certificate, another CA's certificate, or a name
// the server certificate does not carry do not.

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
    root_ = new std::string(tandem::testing::MakeTempDir("tandem-handshake"));
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
