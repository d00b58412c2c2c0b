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

// `tandemctl certs ARGS...` as main runs it: the command's flags, parsed, then the command.
int RunCertsCommand(const Strings& args) {
  CertsCommandOptions options;
  auto app = cli::NewApp("certs", "test", [] { return std::string("test"); });
  AddCertsFlags(app.get(), &options);
  if (std::optional<int> rc = cli::Parse(*app, args)) return *rc;
  return RunCerts(options);
}

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

TEST(CertsCommand, ExitCodes) {
  const std::string root = tandem::testing::MakeTempDir("tandem-certs-command"), out = root + "/tls",
                    yaml = root + "/cluster.yaml";
  std::ofstream(yaml) << "model: {path: /m}\nnodes:\n  - {name: spark1, agent: '10.0.0.1:9300'}\n";
  auto file = [&](const std::string& name) { return ReadTextFile(out + "/" + name); };
  EXPECT_EQ(RunCertsCommand({"-f", yaml, "--out", out, "--days", "90", "--san", "spark1=10.9.9.9"}), 0);
  EXPECT_GT(tandem::testing::SecondsLeft(file("spark1.pem")), 90 * 86400 - 60);
  EXPECT_LE(tandem::testing::SecondsLeft(file("spark1.pem")), 90 * 86400);
  EXPECT_EQ(SubjectAltNames(file("spark1.pem")).back(), "IP:10.9.9.9");
  EXPECT_EQ(RunCertsCommand({"-f", yaml, "--out", out}), 1);              // files exist
  EXPECT_EQ(RunCertsCommand({"-f", yaml, "--out=" + out, "--force"}), 0);  // replaced
  EXPECT_EQ(RunCertsCommand({"-f", yaml}), 2);                             // no --out
  EXPECT_EQ(RunCertsCommand({"-f", yaml, "--out", out, "--days", "0"}), 2);
  EXPECT_EQ(RunCertsCommand({"-f", yaml, "--out", out, "--bogus"}), 2);
  EXPECT_EQ(RunCertsCommand({"-f", yaml, "--out", out, "--force", "--san", "nope=1.2.3.4"}), 2);
  EXPECT_EQ(RunCertsCommand({"-f", yaml, "--out", out, "--force", "--san", "1.2.3.4"}), 2);  // no NODE=
  EXPECT_EQ(RunCertsCommand({"-f", root + "/missing.yaml", "--out", out}), 2);
  EXPECT_EQ(RunCertsCommand({"--help"}), 0);
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace tandem::controller
