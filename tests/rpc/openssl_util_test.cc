// rpc/openssl_util.cc over real OpenSSL objects: the owning pointers free what they hold, a
// certificate's PEM survives the trip through a memory BIO, a failing call's error comes back as
// OpenSSL's text with the queue left empty, and certificate times read as the Unix seconds they
// name.
#include "rpc/openssl_util.h"

#include <gtest/gtest.h>

#include <openssl/asn1.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <string>

namespace tandem::rpc {
namespace {

// Counts the frees of objects of one OpenSSL class through its ex_data: OpenSSL calls the free
// callback of every registered index when it frees an object, with what the object holds there.
void CountFree(void* /*parent*/, void* ptr, CRYPTO_EX_DATA* /*ad*/, int /*idx*/, long /*argl*/, void* /*argp*/) {
  if (ptr != nullptr) ++*static_cast<int*>(ptr);
}

TEST(OpenSslUtil, OwningPointersFreeWhatTheyHold) {
  const int x509_index = CRYPTO_get_ex_new_index(CRYPTO_EX_INDEX_X509, 0, nullptr, nullptr, nullptr, CountFree);
  const int key_index = CRYPTO_get_ex_new_index(CRYPTO_EX_INDEX_EVP_PKEY, 0, nullptr, nullptr, nullptr, CountFree);
  const int bio_index = CRYPTO_get_ex_new_index(CRYPTO_EX_INDEX_BIO, 0, nullptr, nullptr, nullptr, CountFree);
  ASSERT_GE(x509_index, 0);
  ASSERT_GE(key_index, 0);
  ASSERT_GE(bio_index, 0);
  int x509_freed = 0, keys_freed = 0, bios_freed = 0;
  {
    X509Ptr cert(X509_new());
    KeyPtr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
    const std::string text = "bytes";
    BioPtr bio = MemBio(text);
    ASSERT_TRUE(cert && key && bio);
    ASSERT_EQ(X509_set_ex_data(cert.get(), x509_index, &x509_freed), 1);
    ASSERT_EQ(EVP_PKEY_set_ex_data(key.get(), key_index, &keys_freed), 1);
    ASSERT_EQ(BIO_set_ex_data(bio.get(), bio_index, &bios_freed), 1);
    EXPECT_EQ(x509_freed + keys_freed + bios_freed, 0);
  }
  EXPECT_EQ(x509_freed, 1);
  EXPECT_EQ(keys_freed, 1);
  EXPECT_EQ(bios_freed, 1);
  // A shared reference: the pointer's free drops one count, the object lives until the last.
  X509* shared = X509_new();
  ASSERT_EQ(X509_set_ex_data(shared, x509_index, &x509_freed), 1);
  ASSERT_EQ(X509_up_ref(shared), 1);
  { X509Ptr owner(shared); }
  EXPECT_EQ(x509_freed, 1);
  X509_free(shared);
  EXPECT_EQ(x509_freed, 2);
}

// A self-signed P-256 certificate valid from `not_before` to `not_after` (Unix seconds).
X509Ptr SelfSigned(const std::string& cn, int64_t not_before, int64_t not_after) {
  KeyPtr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  X509Ptr cert(X509_new());
  if (!key || !cert) return nullptr;
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), 7);
  ASN1_TIME_set(X509_getm_notBefore(cert.get()), static_cast<time_t>(not_before));
  ASN1_TIME_set(X509_getm_notAfter(cert.get()), static_cast<time_t>(not_after));
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509_set_issuer_name(cert.get(), name);
  X509_set_pubkey(cert.get(), key.get());
  if (X509_sign(cert.get(), key.get(), EVP_sha256()) <= 0) return nullptr;
  return cert;
}

TEST(OpenSslUtil, MemoryBioRoundTripsACertificate) {
  X509Ptr cert = SelfSigned("node1", 1700000000, 1800000000);
  ASSERT_TRUE(cert) << OpenSslError();
  BioPtr out(BIO_new(BIO_s_mem()));
  ASSERT_EQ(PEM_write_bio_X509(out.get(), cert.get()), 1);
  char* data = nullptr;
  const long n = BIO_get_mem_data(out.get(), &data);
  const std::string pem(data, static_cast<size_t>(n));
  ASSERT_EQ(pem.rfind("-----BEGIN CERTIFICATE-----\n", 0), 0u) << pem;

  BioPtr in = MemBio(pem);
  X509Ptr back(PEM_read_bio_X509(in.get(), nullptr, nullptr, nullptr));
  ASSERT_TRUE(back) << OpenSslError();
  EXPECT_EQ(X509_cmp(cert.get(), back.get()), 0);
  EXPECT_EQ(AsnTimeToUnix(X509_get0_notAfter(back.get())), 1800000000);
  // The BIO reads `text` in place, and only reads.
  const std::string text = "abc";
  BioPtr ro = MemBio(text);
  char buf[8] = {};
  EXPECT_EQ(BIO_read(ro.get(), buf, sizeof(buf)), 3);
  EXPECT_EQ(std::string(buf), "abc");
  EXPECT_LE(BIO_write(ro.get(), "x", 1), 0);
  ERR_clear_error();
}

TEST(OpenSslUtil, ErrorTextComesFromTheQueueAndEmptiesIt) {
  ERR_clear_error();
  EXPECT_EQ(OpenSslError(), "");
  const std::string junk = "not a certificate";
  BioPtr in = MemBio(junk);
  EXPECT_EQ(PEM_read_bio_X509(in.get(), nullptr, nullptr, nullptr), nullptr);
  const std::string e = OpenSslError();
  std::printf("PEM_read_bio_X509 on junk: %s\n", e.c_str());
  EXPECT_NE(e.find("PEM routines"), std::string::npos) << e;
  EXPECT_NE(e.find("no start line"), std::string::npos) << e;
  EXPECT_EQ(ERR_peek_error(), 0u) << "the queue is cleared";
  EXPECT_EQ(OpenSslError(), "");
  // Two queued errors: the first raised (the deepest cause) is the one reported, and both go.
  ERR_raise(ERR_LIB_PEM, PEM_R_NO_START_LINE);
  ERR_raise(ERR_LIB_X509, X509_R_CERT_ALREADY_IN_HASH_TABLE);
  const std::string first = OpenSslError();
  std::printf("two queued errors: %s\n", first.c_str());
  EXPECT_NE(first.find("no start line"), std::string::npos) << first;
  EXPECT_EQ(ERR_peek_error(), 0u);
}

TEST(OpenSslUtil, AsnTimesAreUnixSeconds) {
  struct Case {
    const char* asn;  // UTCTime (YYMMDDhhmmssZ) or GeneralizedTime (YYYYMMDDhhmmssZ)
    int64_t unix_seconds;
  };
  for (const Case& c : {Case{"700101000000Z", 0}, Case{"991231235959Z", 946684799},
                        Case{"20300101000000Z", 1893456000}, Case{"99991231235959Z", 253402300799}}) {
    ASN1_TIME* t = ASN1_TIME_new();
    ASSERT_EQ(ASN1_TIME_set_string(t, c.asn), 1) << c.asn;
    EXPECT_EQ(AsnTimeToUnix(t), c.unix_seconds) << c.asn;
    ASN1_TIME_free(t);
  }
  ASN1_TIME* t = ASN1_TIME_set(nullptr, 1800000000);
  EXPECT_EQ(AsnTimeToUnix(t), 1800000000);
  // Not a time at all: 0, as for a certificate whose dates cannot be read.
  ASSERT_EQ(ASN1_STRING_set(t, "yesterday", -1), 1);
  EXPECT_EQ(AsnTimeToUnix(t), 0);
  ASN1_TIME_free(t);
  ERR_clear_error();
}

}  // namespace
}  // namespace tandem::rpc
