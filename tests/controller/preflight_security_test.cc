// The security rows of preflight (controller/preflight_security.cc) as ComparePreflight reports
// them over hand-built facts: how each agent's SecurityFact and the head's API address are judged.
#include "controller/preflight_security.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "controller/preflight.h"
#include "tests/controller/preflight_facts.h"

namespace tandem::controller {
namespace {

using testing::kDefaultNccl;
using testing::kNow;
using testing::Observe;
using testing::Row;
using testing::SparkFacts;
using testing::Spec;

// Issue 12: "preflight passes agents that run without auth, silently".
TEST(PreflightSecurity, AgentSecurityRows) {
  struct Case {
    const char* what;
    std::function<void(v1::SecurityFact*)> edit;
    CheckStatus want;
    const char* found;
  };
  const std::vector<Case> cases = {
      {"token + mutual TLS", [](v1::SecurityFact*) {}, CheckStatus::kPass, "mutual TLS"},
      {"--insecure", [](v1::SecurityFact* s) { s->Clear(); s->set_insecure(true); s->set_listen("0.0.0.0:9300"); },
       CheckStatus::kFail, "--insecure"},
      {"no auth on loopback", [](v1::SecurityFact* s) { s->Clear(); s->set_listen("127.0.0.1:9300"); s->set_loopback_only(true); },
       CheckStatus::kFail, "no authentication"},
      {"token in clear on the network", [](v1::SecurityFact* s) { s->set_tls(false); s->set_client_cert_required(false); },
       CheckStatus::kFail, "in clear"},
      {"token on loopback without TLS", [](v1::SecurityFact* s) {
         s->set_tls(false); s->set_client_cert_required(false); s->set_loopback_only(true); s->set_listen("127.0.0.1:9300"); },
       CheckStatus::kPass, "token"},
      {"mutual TLS without token", [](v1::SecurityFact* s) { s->set_token_auth(false); }, CheckStatus::kPass, "mutual TLS"},
      {"certificate expires in 10 days", [](v1::SecurityFact* s) { s->set_tls_not_after_unix(kNow + 10 * 86400); },
       CheckStatus::kWarn, "expires in 10 days"},
      {"certificate expired", [](v1::SecurityFact* s) { s->set_tls_not_after_unix(kNow - 1); }, CheckStatus::kFail, "expired"},
  };
  for (const Case& c : cases) {
    v1::NodeFacts b = SparkFacts("spark2");
    c.edit(b.mutable_security());
    PreflightReport r = ComparePreflight(Spec(), Observe(SparkFacts("spark1"), b), kNow);
    const CheckResult& row = Row(r, kCheckAgentSecurity, "spark2");
    std::printf("%-32s %s  %s | %s\n", c.what, CheckStatusName(row.status), row.found.c_str(), row.fix.c_str());
    EXPECT_EQ(row.status, c.want) << c.what;
    EXPECT_TRUE(absl::StrContains(row.found, c.found)) << c.what << ": " << row.found;
    if (c.want == CheckStatus::kFail) {
      EXPECT_FALSE(r.ok()) << c.what;
      EXPECT_FALSE(row.fix.empty()) << c.what;
    }
    EXPECT_EQ(Row(r, kCheckAgentSecurity, "spark1").status, CheckStatus::kPass);
  }
  // An agent too old to report its security: a warning, not silence.
  v1::NodeFacts old = SparkFacts("spark2");
  old.clear_security();
  PreflightReport r = ComparePreflight(Spec(), Observe(SparkFacts("spark1"), old), kNow);
  EXPECT_EQ(Row(r, kCheckAgentSecurity, "spark2").status, CheckStatus::kWarn);
}

TEST(PreflightSecurity, ApiOnTheNetworkNeedsAKey) {
  auto api_row = [](const std::string& api) {
    PreflightReport r = ComparePreflight(Spec(kDefaultNccl, api), Observe(SparkFacts("spark1"), SparkFacts("spark2")), kNow);
    const CheckResult& row = Row(r, kCheckApiAuth, "spark1");
    std::printf("%-60s %s  %s\n", api.c_str(), CheckStatusName(row.status), row.found.c_str());
    return row.status;
  };
  EXPECT_EQ(api_row(""), CheckStatus::kPass);
  EXPECT_EQ(api_row("api:\n  listen: 127.0.0.1:8000\n"), CheckStatus::kPass);
  EXPECT_EQ(api_row("api:\n  listen: 0.0.0.0:8000\n"), CheckStatus::kFail);
  EXPECT_EQ(api_row("api:\n  listen: 0.0.0.0:8000\n  key_file: /etc/tandem/api-key\n"), CheckStatus::kWarn);
}

}  // namespace
}  // namespace tandem::controller
