// `tandemctl certs` on disk: the files, their modes, the chain, reuse of the CA, refusals.
#include "controller/cluster_certs.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "common/status.h"
#include "controller/certs_command.h"
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
    char tmpl[] = "/tmp/tandem-certs-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
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

TEST(CertsCommand, ParsesSanFlags) {
  std::map<std::string, std::vector<std::string>> sans;
  ASSERT_TRUE(ParseSanFlag("a=10.0.0.5,a.lan,b=DNS:b.lan", &sans).ok());
  ASSERT_TRUE(ParseSanFlag("a=fd00::1", &sans).ok());
  EXPECT_EQ(sans["a"], (Strings{"10.0.0.5", "a.lan", "fd00::1"}));
  EXPECT_EQ(sans["b"], (Strings{"DNS:b.lan"}));
  EXPECT_FALSE(ParseSanFlag("10.0.0.5", &sans).ok());
  EXPECT_FALSE(ParseSanFlag("a=", &sans).ok());
  EXPECT_FALSE(ParseSanFlag("=x", &sans).ok());
  EXPECT_FALSE(ParseSanFlag("a=x,,y", &sans).ok());
}

TEST_F(ClusterCerts, CommandExitCodes) {
  std::string yaml = root_ + "/cluster.yaml";
  std::ofstream(yaml) << kTwoNodes;
  EXPECT_EQ(RunCertsCommand({"-f", yaml, "--out", out_, "--days", "90", "--san", "spark1=10.9.9.9"}), 0);
  EXPECT_GT(tandem::testing::SecondsLeft(File("spark1.pem")), 90 * 86400 - 60);
  EXPECT_LE(tandem::testing::SecondsLeft(File("spark1.pem")), 90 * 86400);
  EXPECT_EQ(SubjectAltNames(File("spark1.pem")).back(), "IP:10.9.9.9");
  EXPECT_EQ(RunCertsCommand({"-f", yaml, "--out", out_}), 1);              // files exist
  EXPECT_EQ(RunCertsCommand({"-f", yaml, "--out=" + out_, "--force"}), 0);  // replaced
  EXPECT_EQ(RunCertsCommand({"-f", yaml}), 2);                             // no --out
  EXPECT_EQ(RunCertsCommand({"-f", yaml, "--out", out_, "--days", "0"}), 2);
  EXPECT_EQ(RunCertsCommand({"-f", yaml, "--out", out_, "--bogus"}), 2);
  EXPECT_EQ(RunCertsCommand({"-f", yaml, "--out", out_, "--force", "--san", "nope=1.2.3.4"}), 2);
  EXPECT_EQ(RunCertsCommand({"-f", root_ + "/missing.yaml", "--out", out_}), 2);
  EXPECT_EQ(RunCertsCommand({"--help"}), 0);
}

}  // namespace
}  // namespace tandem::controller
