#include "controller/cert_authority.h"

#include <arpa/inet.h>

#include <ctime>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "rpc/openssl_util.h"

namespace tandem::controller {
namespace {

using rpc::AsnTimeToUnix;
using rpc::BioPtr;
using rpc::KeyPtr;
using rpc::OpenSslError;
using rpc::X509Ptr;
using NamePtr = std::unique_ptr<X509_NAME, rpc::OpenSslDeleter<X509_NAME_free>>;
using BignumPtr = std::unique_ptr<BIGNUM, rpc::OpenSslDeleter<BN_free>>;
using GeneralNamesPtr = std::unique_ptr<GENERAL_NAMES, rpc::OpenSslDeleter<GENERAL_NAMES_free>>;

// Certificates are backdated a little so that a node whose clock is a few minutes behind the
// machine that ran `tandemctl certs` does not reject them as "not yet valid".
constexpr long kBackdateSeconds = 5 * 60;
constexpr int64_t kSecondsPerDay = 86400;

absl::Status CryptoError(const std::string& what) {
  std::string detail = OpenSslError();
  return absl::InternalError(detail.empty() ? what : absl::StrCat(what, ": ", detail));
}

absl::StatusOr<KeyPtr> NewP256Key() {
  KeyPtr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  if (!key) return CryptoError("cannot generate an ECDSA P-256 key");
  return key;
}

absl::StatusOr<NamePtr> SubjectName(const std::string& common_name) {
  NamePtr name(X509_NAME_new());
  const auto* o = reinterpret_cast<const unsigned char*>("tandem");
  const auto* cn = reinterpret_cast<const unsigned char*>(common_name.c_str());
  if (!name || X509_NAME_add_entry_by_txt(name.get(), "O", MBSTRING_UTF8, o, -1, -1, 0) != 1 ||
      X509_NAME_add_entry_by_txt(name.get(), "CN", MBSTRING_UTF8, cn, -1, -1, 0) != 1) {
    return CryptoError(absl::StrCat("cannot make the subject name CN=", common_name));
  }
  return name;
}

// Adds one extension given in OpenSSL's config syntax. Only fixed strings from this file reach
// here; operator input (SANs) goes through AddSubjectAltNames, which cannot be misparsed.
absl::Status AddExtension(X509* cert, X509V3_CTX* ctx, int nid, const char* value) {
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, ctx, nid, value);
  if (!ext) return CryptoError(absl::StrCat("cannot make the extension ", OBJ_nid2sn(nid), "=", value));
  int ok = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  if (ok != 1) return CryptoError(absl::StrCat("cannot add the extension ", OBJ_nid2sn(nid)));
  return absl::OkStatus();
}

// A DNS name as certificates carry it: letters, digits, '-', '_' and dots, optionally "*." first.
bool IsDnsName(const std::string& name) {
  std::string rest = absl::StartsWith(name, "*.") ? name.substr(2) : name;
  if (rest.empty() || rest.size() > 253 || rest.front() == '.' || rest.back() == '.') return false;
  for (char c : rest) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
              c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

absl::Status AddSubjectAltNames(X509* cert, const std::vector<std::string>& entries) {
  GeneralNamesPtr names(sk_GENERAL_NAME_new_null());
  for (const std::string& entry : entries) {
    GENERAL_NAME* g = GENERAL_NAME_new();
    if (absl::StartsWith(entry, "DNS:") && IsDnsName(entry.substr(4))) {
      ASN1_IA5STRING* s = ASN1_IA5STRING_new();
      ASN1_STRING_set(s, entry.data() + 4, static_cast<int>(entry.size() - 4));
      GENERAL_NAME_set0_value(g, GEN_DNS, s);
    } else if (absl::StartsWith(entry, "IP:")) {
      // a2i_IPADDRESS takes IPv4 and IPv6 text and returns the 4 or 16 address bytes.
      ASN1_OCTET_STRING* ip = a2i_IPADDRESS(entry.c_str() + 3);
      if (!ip) {
        GENERAL_NAME_free(g);
        ERR_clear_error();
        return absl::InvalidArgumentError(absl::StrCat("subjectAltName \"", entry, "\": not an IPv4 or IPv6 address"));
      }
      GENERAL_NAME_set0_value(g, GEN_IPADD, ip);
    } else {
      GENERAL_NAME_free(g);
      return absl::InvalidArgumentError(absl::StrCat(
          "subjectAltName \"", entry, "\": expected DNS:NAME (letters, digits, '-', '_', '.') or IP:ADDRESS"));
    }
    sk_GENERAL_NAME_push(names.get(), g);
  }
  if (sk_GENERAL_NAME_num(names.get()) == 0) return absl::OkStatus();
  if (X509_add1_ext_i2d(cert, NID_subject_alt_name, names.get(), 0, X509V3_ADD_DEFAULT) != 1) {
    return CryptoError("cannot add the subjectAltName extension");
  }
  return absl::OkStatus();
}

// The parts every certificate shares: v3, a random serial, validity, subject, issuer, key.
absl::StatusOr<X509Ptr> NewCertificate(const std::string& common_name, const X509_NAME* issuer, EVP_PKEY* key,
                                       int days) {
  X509Ptr cert(X509_new());
  BignumPtr serial(BN_new());
  // 159 random bits: positive and at most 20 bytes DER, as RFC 5280 section 4.1.2.2 asks.
  if (!cert || !serial || BN_rand(serial.get(), 159, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      !BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())) ||
      X509_set_version(cert.get(), X509_VERSION_3) != 1 ||
      !X509_gmtime_adj(X509_getm_notBefore(cert.get()), -kBackdateSeconds) ||
      !X509_time_adj_ex(X509_getm_notAfter(cert.get()), days, 0, nullptr) ||
      X509_set_pubkey(cert.get(), key) != 1) {
    return CryptoError("cannot fill in a certificate");
  }
  ASSIGN_OR_RETURN(NamePtr subject, SubjectName(common_name));
  if (X509_set_subject_name(cert.get(), subject.get()) != 1 ||
      X509_set_issuer_name(cert.get(), issuer ? issuer : subject.get()) != 1) {
    return CryptoError("cannot set the certificate's names");
  }
  return cert;
}

absl::StatusOr<std::string> BioText(BIO* bio) {
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  if (n <= 0 || !data) return CryptoError("cannot encode PEM");
  return std::string(data, static_cast<size_t>(n));
}

absl::StatusOr<PemPair> EncodePem(X509* cert, EVP_PKEY* key) {
  BioPtr cert_bio(BIO_new(BIO_s_mem()));
  BioPtr key_bio(BIO_new(BIO_s_mem()));
  if (!cert_bio || !key_bio || PEM_write_bio_X509(cert_bio.get(), cert) != 1 ||
      PEM_write_bio_PrivateKey(key_bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return CryptoError("cannot encode PEM");
  }
  PemPair pem;
  ASSIGN_OR_RETURN(pem.cert_pem, BioText(cert_bio.get()));
  ASSIGN_OR_RETURN(pem.key_pem, BioText(key_bio.get()));
  return pem;
}

absl::Status CheckDays(int days) {
  // 100 years keeps notAfter within what every TLS stack parses (GeneralizedTime past 2049 is
  // fine, but a typo like 3650000 is not what anyone meant).
  if (days < 1 || days > 36500) return absl::InvalidArgumentError(absl::StrCat("days must be 1..36500, got ", days));
  return absl::OkStatus();
}

}  // namespace

void CertAuthority::Free::operator()(X509* cert) const { X509_free(cert); }
void CertAuthority::Free::operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }

absl::StatusOr<CertAuthority> CertAuthority::Create(const std::string& common_name, int days) {
  RETURN_IF_ERROR(CheckDays(days));
  ASSIGN_OR_RETURN(KeyPtr key, NewP256Key());
  ASSIGN_OR_RETURN(X509Ptr cert, NewCertificate(common_name, nullptr, key.get(), days));
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert.get(), cert.get(), nullptr, nullptr, 0);
  // pathlen 0: this CA signs leaves only, never another CA.
  for (auto [nid, value] : {std::pair<int, const char*>{NID_basic_constraints, "critical,CA:TRUE,pathlen:0"},
                            {NID_key_usage, "critical,keyCertSign,cRLSign"},
                            {NID_subject_key_identifier, "hash"}}) {
    RETURN_IF_ERROR(AddExtension(cert.get(), &ctx, nid, value));
  }
  if (X509_sign(cert.get(), key.get(), EVP_sha256()) <= 0) return CryptoError("cannot self-sign the CA");
  return CertAuthority(cert.release(), key.release());
}

absl::StatusOr<CertAuthority> CertAuthority::FromPem(const PemPair& pem) {
  ERR_clear_error();
  BioPtr cert_bio = rpc::MemBio(pem.cert_pem);
  BioPtr key_bio = rpc::MemBio(pem.key_pem);
  X509Ptr cert(PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr));
  if (!cert) return absl::InvalidArgumentError("the CA certificate is not PEM: " + OpenSslError());
  KeyPtr key(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  if (!key) return absl::InvalidArgumentError("the CA key is not an unencrypted PEM private key: " + OpenSslError());
  if ((X509_get_extension_flags(cert.get()) & EXFLAG_CA) == 0 ||
      (X509_get_key_usage(cert.get()) & KU_KEY_CERT_SIGN) == 0) {
    return absl::InvalidArgumentError("the CA certificate is not a CA (no basicConstraints CA:TRUE with keyCertSign)");
  }
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError("the CA key does not belong to the CA certificate");
  }
  if (X509_cmp_current_time(X509_get0_notAfter(cert.get())) <= 0) {
    return absl::FailedPreconditionError("the CA certificate has expired");
  }
  return CertAuthority(cert.release(), key.release());
}

absl::StatusOr<PemPair> CertAuthority::Issue(const LeafRequest& request) const {
  RETURN_IF_ERROR(CheckDays(request.days));
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  if (now + request.days * kSecondsPerDay > not_after_unix()) {
    return absl::FailedPreconditionError(absl::StrCat("the CA expires before a certificate of ", request.days,
                                                      " days would (", (not_after_unix() - now) / kSecondsPerDay,
                                                      " days left): ask for fewer days or make a new CA"));
  }
  ASSIGN_OR_RETURN(KeyPtr key, NewP256Key());
  ASSIGN_OR_RETURN(X509Ptr cert,
                   NewCertificate(request.common_name, X509_get_subject_name(cert_.get()), key.get(), request.days));
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert_.get(), cert.get(), nullptr, nullptr, 0);
  // ECDSA keys only sign in a TLS 1.2/1.3 handshake (ECDHE does the key exchange), hence
  // digitalSignature alone.
  const char* eku = request.usage == LeafUsage::kServerAndClient ? "serverAuth,clientAuth" : "clientAuth";
  for (auto [nid, value] : {std::pair<int, const char*>{NID_basic_constraints, "critical,CA:FALSE"},
                            {NID_key_usage, "critical,digitalSignature"},
                            {NID_ext_key_usage, eku},
                            {NID_subject_key_identifier, "hash"},
                            {NID_authority_key_identifier, "keyid:always"}}) {
    RETURN_IF_ERROR(AddExtension(cert.get(), &ctx, nid, value));
  }
  RETURN_IF_ERROR(AddSubjectAltNames(cert.get(), request.subject_alt_names));
  if (X509_sign(cert.get(), key_.get(), EVP_sha256()) <= 0) {
    return CryptoError(absl::StrCat("cannot sign the certificate of ", request.common_name));
  }
  return EncodePem(cert.get(), key.get());
}

absl::StatusOr<PemPair> CertAuthority::ToPem() const { return EncodePem(cert_.get(), key_.get()); }

int64_t CertAuthority::not_after_unix() const { return AsnTimeToUnix(X509_get0_notAfter(cert_.get())); }

std::string SanEntryForHost(const std::string& host) {
  if (absl::StartsWith(host, "DNS:") || absl::StartsWith(host, "IP:")) return host;
  std::string h = host;
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  unsigned char buf[16];
  if (inet_pton(AF_INET, h.c_str(), buf) == 1 || inet_pton(AF_INET6, h.c_str(), buf) == 1) return "IP:" + h;
  return "DNS:" + h;
}

}  // namespace tandem::controller
