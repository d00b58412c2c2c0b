#include "tests/controller/cert_test_util.h"

#include <arpa/inet.h>

#include <memory>

#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

namespace tandem::testing {
namespace {

struct CertFree {
  void operator()(X509* c) const { X509_free(c); }
};
using CertPtr = std::unique_ptr<X509, CertFree>;

CertPtr Parse(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  CertPtr cert(PEM_read_bio_X509(bio, nullptr, nullptr, nullptr));
  BIO_free(bio);
  return cert;
}

}  // namespace

std::string VerifyLeaf(const std::string& ca_pem, const std::string& leaf_pem, TlsRole role) {
  CertPtr ca = Parse(ca_pem), leaf = Parse(leaf_pem);
  if (!ca || !leaf) return "PEM does not parse";
  X509_STORE* store = X509_STORE_new();
  X509_STORE_add_cert(store, ca.get());
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  X509_STORE_CTX_init(ctx, store, leaf.get(), nullptr);
  X509_STORE_CTX_set_purpose(ctx, role == TlsRole::kServer ? X509_PURPOSE_SSL_SERVER : X509_PURPOSE_SSL_CLIENT);
  std::string error;
  if (X509_verify_cert(ctx) != 1) error = X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx));
  X509_STORE_CTX_free(ctx);
  X509_STORE_free(store);
  return error;
}

std::vector<std::string> SubjectAltNames(const std::string& cert_pem) {
  std::vector<std::string> out;
  CertPtr cert = Parse(cert_pem);
  if (!cert) return out;
  auto* names = static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert.get(), NID_subject_alt_name, nullptr, nullptr));
  for (int i = 0; names && i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* g = sk_GENERAL_NAME_value(names, i);
    if (g->type == GEN_DNS) {
      const ASN1_IA5STRING* s = g->d.dNSName;
      out.push_back("DNS:" + std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)), ASN1_STRING_length(s)));
    } else if (g->type == GEN_IPADD) {
      const ASN1_OCTET_STRING* ip = g->d.iPAddress;
      char text[INET6_ADDRSTRLEN] = {};
      int family = ASN1_STRING_length(ip) == 4 ? AF_INET : AF_INET6;
      inet_ntop(family, ASN1_STRING_get0_data(ip), text, sizeof(text));
      out.push_back(std::string("IP:") + text);
    } else {
      out.push_back("other");
    }
  }
  GENERAL_NAMES_free(names);
  return out;
}

std::vector<std::string> ExtendedKeyUsages(const std::string& cert_pem) {
  std::vector<std::string> out;
  CertPtr cert = Parse(cert_pem);
  if (!cert) return out;
  auto* eku = static_cast<EXTENDED_KEY_USAGE*>(X509_get_ext_d2i(cert.get(), NID_ext_key_usage, nullptr, nullptr));
  for (int i = 0; eku && i < sk_ASN1_OBJECT_num(eku); ++i) {
    out.push_back(OBJ_nid2sn(OBJ_obj2nid(sk_ASN1_OBJECT_value(eku, i))));
  }
  EXTENDED_KEY_USAGE_free(eku);
  return out;
}

std::string CommonName(const std::string& cert_pem) {
  CertPtr cert = Parse(cert_pem);
  if (!cert) return "";
  char buf[256] = {};
  X509_NAME_get_text_by_NID(X509_get_subject_name(cert.get()), NID_commonName, buf, sizeof(buf));
  return buf;
}

int64_t SecondsLeft(const std::string& cert_pem) {
  CertPtr cert = Parse(cert_pem);
  if (!cert) return -1;
  int days = 0, seconds = 0;
  ASN1_TIME_diff(&days, &seconds, nullptr, X509_get0_notAfter(cert.get()));
  return int64_t{days} * 86400 + seconds;
}

}  // namespace tandem::testing
