// Small pieces of OpenSSL's C API in C++ shape, shared by the TLS credentials (rpc/tls.cc) and
// the cluster CA (controller/cert_authority.cc): owning pointers, a memory BIO, the error queue
// as text, certificate times as Unix seconds.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/x509.h>

namespace tandem::rpc {

template <auto FreeFn>
struct OpenSslDeleter {
  template <typename T>
  void operator()(T* p) const { FreeFn(p); }
};
using X509Ptr = std::unique_ptr<X509, OpenSslDeleter<X509_free>>;
using KeyPtr = std::unique_ptr<EVP_PKEY, OpenSslDeleter<EVP_PKEY_free>>;
using BioPtr = std::unique_ptr<BIO, OpenSslDeleter<BIO_free>>;

// A read-only BIO over `text` (which must outlive it).
BioPtr MemBio(const std::string& text);

// The first error the failing call queued (the deepest cause: callers up the stack queue theirs
// after it), and the queue cleared ("" when it was empty).
std::string OpenSslError();

// An ASN1_TIME (a certificate's notBefore/notAfter) as Unix seconds; 0 when it cannot be read.
int64_t AsnTimeToUnix(const ASN1_TIME* t);

}  // namespace tandem::rpc
