// `tandemctl certs` as an operator runs it: the --san flag and the exit codes.
#include "controller/certs_command.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include <gtest/gtest.h>

#include "tests/common/test_util.h"
#include "tests/controller/cert_test_util.h"

namespace tandem::controller {
namespace {

using tandem::testing::ReadTextFile;
using tandem::testing::SubjectAltNames;
using Strings = std::vector<std::string>;

constexpr char kNodes[] = R"(cluster: pair
model: {path: /m}
nodes:
  - {name: spark1, agent: "10.0.0.1:9300"}
  - {name: spark2, agent: "[::1]:9300"}
)";

class CertsCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tandem-certs-command-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    out_ = root_ + "/tls";
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  std::string File(const std::string& name) { return ReadTextFile(out_ + "/" + name); }

  std::string root_, out_;
};

TEST(CertsCommandFlags, ParsesSanFlags) {
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

TEST_F(CertsCommand, ExitCodes) {
  std::string yaml = root_ + "/cluster.yaml";
  std::ofstream(yaml) << kNodes;
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
