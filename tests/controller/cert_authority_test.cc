// The cluster CA: what it signs verifies against it (and only it) for the right TLS roles, with
// exactly the SANs and key usages asked for; operator-supplied SANs cannot smuggle in syntax.
#include "controller/cert_authority.h"

#include <gtest/gtest.h>

#include "common/status.h"
#include "tests/controller/cert_test_util.h"

namespace tandem::controller {
namespace {

using tandem::testing::CommonName;
using tandem::testing::SecondsLeft;
using tandem::testing::ExtendedKeyUsages;
using tandem::testing::SubjectAltNames;
using tandem::testing::TlsRole;
using tandem::testing::VerifyLeaf;
using Strings = std::vector<std::string>;

CertAuthority MakeCa(int days = 3650) {
  absl::StatusOr<CertAuthority> ca = CertAuthority::Create("test CA", days);
  EXPECT_TRUE(ca.ok()) << ca.status();
  return std::move(*ca);
}

TEST(CertAuthority, NodeLeafVerifiesForServerAndClientWithItsSans) {
  CertAuthority ca = MakeCa();
  absl::StatusOr<PemPair> ca_pem = ca.ToPem();
  ASSERT_TRUE(ca_pem.ok()) << ca_pem.status();
  absl::StatusOr<PemPair> leaf =
      ca.Issue({"spark1", {"DNS:spark1", "IP:10.0.0.1", "IP:::1"}, LeafUsage::kServerAndClient, 30});
  ASSERT_TRUE(leaf.ok()) << leaf.status();
  EXPECT_NE(leaf->key_pem.find("BEGIN PRIVATE KEY"), std::string::npos);
  EXPECT_EQ(VerifyLeaf(ca_pem->cert_pem, leaf->cert_pem, TlsRole::kServer), "");
  EXPECT_EQ(VerifyLeaf(ca_pem->cert_pem, leaf->cert_pem, TlsRole::kClient), "");
  Strings sans = SubjectAltNames(leaf->cert_pem);
  std::printf("  SANs:");
  for (const auto& s : sans) std::printf(" %s", s.c_str());
  std::printf("\n");
  EXPECT_EQ(sans, (Strings{"DNS:spark1", "IP:10.0.0.1", "IP:::1"}));
  EXPECT_EQ(ExtendedKeyUsages(leaf->cert_pem), (Strings{"serverAuth", "clientAuth"}));
  EXPECT_EQ(CommonName(leaf->cert_pem), "spark1");
  // 30 days from now (notAfter has whole seconds; this test takes less than a minute).
  EXPECT_LE(SecondsLeft(leaf->cert_pem), 30 * 86400);
  EXPECT_GT(SecondsLeft(leaf->cert_pem), 30 * 86400 - 60);
}

TEST(CertAuthority, ClientOnlyLeafIsRefusedAsAServer) {
  CertAuthority ca = MakeCa();
  absl::StatusOr<PemPair> ca_pem = ca.ToPem();
  ASSERT_TRUE(ca_pem.ok());
  absl::StatusOr<PemPair> leaf = ca.Issue({"tandemctl", {}, LeafUsage::kClientOnly, 30});
  ASSERT_TRUE(leaf.ok()) << leaf.status();
  EXPECT_EQ(ExtendedKeyUsages(leaf->cert_pem), (Strings{"clientAuth"}));
  EXPECT_EQ(VerifyLeaf(ca_pem->cert_pem, leaf->cert_pem, TlsRole::kClient), "");
  std::string as_server = VerifyLeaf(ca_pem->cert_pem, leaf->cert_pem, TlsRole::kServer);
  std::printf("  controller cert as a server: %s\n", as_server.c_str());
  EXPECT_NE(as_server, "");
}

TEST(CertAuthority, LeafOfAnotherCaDoesNotVerify) {
  CertAuthority a = MakeCa(), b = MakeCa();
  absl::StatusOr<PemPair> a_pem = a.ToPem();
  ASSERT_TRUE(a_pem.ok());
  absl::StatusOr<PemPair> leaf_b = b.Issue({"n", {"DNS:n"}, LeafUsage::kServerAndClient, 30});
  ASSERT_TRUE(leaf_b.ok());
  std::string error = VerifyLeaf(a_pem->cert_pem, leaf_b->cert_pem, TlsRole::kServer);
  std::printf("  leaf of CA b against CA a: %s\n", error.c_str());
  EXPECT_NE(error, "");
}

TEST(CertAuthority, RoundTripsThroughPemAndKeepsSigning) {
  CertAuthority ca = MakeCa();
  absl::StatusOr<PemPair> pem = ca.ToPem();
  ASSERT_TRUE(pem.ok());
  absl::StatusOr<CertAuthority> again = CertAuthority::FromPem(*pem);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->not_after_unix(), ca.not_after_unix());
  absl::StatusOr<PemPair> leaf = again->Issue({"n", {"DNS:n"}, LeafUsage::kServerAndClient, 30});
  ASSERT_TRUE(leaf.ok());
  EXPECT_EQ(VerifyLeaf(pem->cert_pem, leaf->cert_pem, TlsRole::kServer), "");
}

TEST(CertAuthority, FromPemRefusesALeafAndAForeignKey) {
  CertAuthority a = MakeCa(), b = MakeCa();
  absl::StatusOr<PemPair> a_pem = a.ToPem(), b_pem = b.ToPem();
  ASSERT_TRUE(a_pem.ok() && b_pem.ok());
  absl::StatusOr<PemPair> leaf = a.Issue({"n", {"DNS:n"}, LeafUsage::kServerAndClient, 30});
  ASSERT_TRUE(leaf.ok());

  absl::StatusOr<CertAuthority> not_ca = CertAuthority::FromPem(*leaf);
  ASSERT_FALSE(not_ca.ok());
  std::printf("  leaf as CA: %s\n", StatusText(not_ca.status()).c_str());
  EXPECT_EQ(not_ca.status().code(), absl::StatusCode::kInvalidArgument);

  absl::StatusOr<CertAuthority> mixed = CertAuthority::FromPem({a_pem->cert_pem, b_pem->key_pem});
  ASSERT_FALSE(mixed.ok());
  std::printf("  CA a with key of b: %s\n", StatusText(mixed.status()).c_str());
  EXPECT_NE(StatusText(mixed.status()).find("does not belong"), std::string::npos);

  EXPECT_FALSE(CertAuthority::FromPem({"not pem", "not pem"}).ok());
}

TEST(CertAuthority, RefusesSansThatAreNotPlainNamesOrAddresses) {
  CertAuthority ca = MakeCa();
  // Each of these would be a second entry, another SAN type or garbage if passed to OpenSSL's
  // config syntax; here each is one refused entry.
  for (const std::string bad : {"DNS:a,IP:1.2.3.4", "IP:10.0.0.300", "email:x@y", "DNS:", "DNS:a b", "DNS:*"}) {
    absl::StatusOr<PemPair> leaf = ca.Issue({"n", {bad}, LeafUsage::kServerAndClient, 30});
    ASSERT_FALSE(leaf.ok()) << bad;
    std::printf("  %-18s -> %s\n", bad.c_str(), StatusText(leaf.status()).c_str());
    EXPECT_EQ(leaf.status().code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_TRUE(ca.Issue({"n", {"DNS:*.lan", "DNS:under_score.lan"}, LeafUsage::kServerAndClient, 30}).ok());
}

TEST(CertAuthority, LeafMayNotOutliveTheCa) {
  CertAuthority ca = MakeCa(10);
  absl::StatusOr<PemPair> leaf = ca.Issue({"n", {"DNS:n"}, LeafUsage::kServerAndClient, 30});
  ASSERT_FALSE(leaf.ok());
  std::printf("  %s\n", StatusText(leaf.status()).c_str());
  EXPECT_EQ(leaf.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(ca.Issue({"n", {"DNS:n"}, LeafUsage::kServerAndClient, 9}).ok());
  EXPECT_FALSE(CertAuthority::Create("x", 0).ok());
}

TEST(CertAuthority, SanEntryForHostTellsAddressesFromNames) {
  EXPECT_EQ(SanEntryForHost("10.1.2.3"), "IP:10.1.2.3");
  EXPECT_EQ(SanEntryForHost("::1"), "IP:::1");
  EXPECT_EQ(SanEntryForHost("[fe80::1]"), "IP:fe80::1");
  EXPECT_EQ(SanEntryForHost("spark1.lan"), "DNS:spark1.lan");
  EXPECT_EQ(SanEntryForHost("IP:10.0.0.1"), "IP:10.0.0.1");
  EXPECT_EQ(SanEntryForHost("DNS:x"), "DNS:x");
}

}  // namespace
}  // namespace tandem::controller
