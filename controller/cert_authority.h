// A small certificate authority for one cluster's mutual TLS (`tandemctl certs`): an ECDSA P-256
// CA that signs one certificate per node (server for the controller, client of the head agent's
// rendezvous store) and one client certificate for tandemctl. Pure crypto on PEM strings, no
// files: cluster_certs.h decides which files exist and with which modes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

typedef struct evp_pkey_st EVP_PKEY;
typedef struct x509_st X509;

namespace tandem::controller {

// A certificate and its private key, PEM (the key unencrypted PKCS#8).
struct PemPair {
  std::string cert_pem;
  std::string key_pem;
};

// What a leaf certificate may be used for (extendedKeyUsage).
enum class LeafUsage {
  kServerAndClient,  // a node: serves the controller, dials the head's store
  kClientOnly,       // the controller: only ever dials
};

struct LeafRequest {
  std::string common_name;
  // subjectAltName entries, each "DNS:name" or "IP:address" (IPv4 or IPv6, no brackets).
  std::vector<std::string> subject_alt_names;
  LeafUsage usage = LeafUsage::kServerAndClient;
  int days = 365;
};

class CertAuthority {
 public:
  // A new self-signed CA (CA:TRUE, pathlen 0, keyCertSign + cRLSign) valid for `days`.
  static absl::StatusOr<CertAuthority> Create(const std::string& common_name, int days);
  // An existing CA. InvalidArgument when the PEM does not parse, the certificate is not a CA,
  // or the key is not its key; FailedPrecondition when it has expired.
  static absl::StatusOr<CertAuthority> FromPem(const PemPair& pem);

  // A fresh key pair and a certificate for it signed by this CA. InvalidArgument for a
  // malformed SAN entry; FailedPrecondition when the CA expires before the leaf would.
  absl::StatusOr<PemPair> Issue(const LeafRequest& request) const;

  absl::StatusOr<PemPair> ToPem() const;
  int64_t not_after_unix() const;  // the CA's expiry, seconds since the epoch

 private:
  struct Free {  // OpenSSL's free functions, defined in the .cc so this header needs no OpenSSL
    void operator()(X509* cert) const;
    void operator()(EVP_PKEY* key) const;
  };
  CertAuthority(X509* cert, EVP_PKEY* key) : cert_(cert), key_(key) {}
  std::unique_ptr<X509, Free> cert_;
  std::unique_ptr<EVP_PKEY, Free> key_;
};

// The subjectAltName entry for a host as it appears in an address: "IP:10.0.0.1", "IP:::1"
// (brackets removed), "DNS:spark1". An entry that already starts with "DNS:" or "IP:" is kept.
std::string SanEntryForHost(const std::string& host);

}  // namespace tandem::controller
