#include "rpc/tls.h"

#include <memory>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include "common/secret_file.h"
#include "common/status.h"
#include "rpc/openssl_util.h"

namespace tandem::rpc {
namespace {

struct StoreFree { void operator()(X509_STORE* s) const { X509_STORE_free(s); } };
struct StoreCtxFree { void operator()(X509_STORE_CTX* c) const { X509_STORE_CTX_free(c); } };

// What a PEM read failed with ("no PEM data" when OpenSSL queued nothing).
std::string PemError() {
  const std::string e = OpenSslError();
  return e.empty() ? "no PEM data" : e;
}

absl::StatusOr<std::string> ReadPublicFile(const std::string& path, const std::string& what) {
  SecretFileRules rules;  // a certificate is public: only "readable, not empty" applies
  rules.owner_only = false;
  rules.min_bytes = 1;
  return ReadSecretFile(path, what, rules);
}

}  // namespace

absl::StatusOr<std::optional<TlsMaterial>> LoadTls(const TlsFiles& files, const std::string& what) {
  if (!files.any()) return std::optional<TlsMaterial>();
  if (files.ca.empty() || files.cert.empty() || files.key.empty()) {
    return absl::InvalidArgumentError(what + ": TLS needs all three of the CA, the certificate and its key");
  }
  TlsMaterial m;
  ASSIGN_OR_RETURN(m.ca_pem, ReadPublicFile(files.ca, "the TLS CA file"));
  ASSIGN_OR_RETURN(m.cert_pem, ReadPublicFile(files.cert, "the TLS certificate file"));
  SecretFileRules key_rules;
  key_rules.min_bytes = 1;
  key_rules.strip_trailing_whitespace = false;
  ASSIGN_OR_RETURN(m.key_pem, ReadSecretFile(files.key, "the TLS key file", key_rules));

  ERR_clear_error();
  X509Ptr cert(PEM_read_bio_X509(MemBio(m.cert_pem).get(), nullptr, nullptr, nullptr));
  if (!cert) return absl::InvalidArgumentError("the TLS certificate file " + files.cert + " holds no PEM certificate: " + PemError());
  KeyPtr key(PEM_read_bio_PrivateKey(MemBio(m.key_pem).get(), nullptr, nullptr, nullptr));
  if (!key) return absl::InvalidArgumentError("the TLS key file " + files.key + " holds no PEM private key: " + PemError());
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError("the TLS key " + files.key + " does not belong to the certificate " + files.cert);
  }

  // The CA file may hold several certificates (a rotation overlap); all of them are trusted.
  std::unique_ptr<X509_STORE, StoreFree> store(X509_STORE_new());
  {
    auto bio = MemBio(m.ca_pem);
    int n = 0;
    while (X509* ca = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
      X509_STORE_add_cert(store.get(), ca);
      X509_free(ca);
      ++n;
    }
    ERR_clear_error();
    if (n == 0) return absl::InvalidArgumentError("the TLS CA file " + files.ca + " holds no PEM certificate");
  }
  // Intermediate certificates after the leaf in the certificate file.
  STACK_OF(X509)* chain = sk_X509_new_null();
  {
    auto bio = MemBio(m.cert_pem);
    X509* first = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr);
    X509_free(first);
    while (X509* extra = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) sk_X509_push(chain, extra);
    ERR_clear_error();
  }
  std::unique_ptr<X509_STORE_CTX, StoreCtxFree> ctx(X509_STORE_CTX_new());
  X509_STORE_CTX_init(ctx.get(), store.get(), cert.get(), chain);
  const int verified = X509_verify_cert(ctx.get());
  const int verify_error = X509_STORE_CTX_get_error(ctx.get());
  sk_X509_pop_free(chain, X509_free);
  ERR_clear_error();
  if (verified != 1) {
    return absl::InvalidArgumentError("the TLS certificate " + files.cert + " does not verify against the CA " +
                                      files.ca + ": " + X509_verify_cert_error_string(verify_error));
  }

  char name[256] = {0};
  X509_NAME_oneline(X509_get_subject_name(cert.get()), name, sizeof(name) - 1);
  m.subject = name;
  m.not_after_unix = AsnTimeToUnix(X509_get0_notAfter(cert.get()));
  return std::optional<TlsMaterial>(std::move(m));
}

std::shared_ptr<grpc::ServerCredentials> ServerCredentials(const std::optional<TlsMaterial>& tls) {
  if (!tls) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions opts(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  opts.pem_root_certs = tls->ca_pem;
  opts.pem_key_cert_pairs.push_back({tls->key_pem, tls->cert_pem});
  return grpc::SslServerCredentials(opts);
}

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(const std::optional<TlsMaterial>& tls) {
  if (!tls) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions opts;
  opts.pem_root_certs = tls->ca_pem;
  opts.pem_private_key = tls->key_pem;
  opts.pem_cert_chain = tls->cert_pem;
  return grpc::SslCredentials(opts);
}

}  // namespace tandem::rpc
