// What a test wants to know of a PEM certificate, through OpenSSL (independent of the code that
// made it): does it chain to a CA for a purpose, which SANs and extended key usages it has.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tandem::testing {

enum class TlsRole { kServer, kClient };

// "" when `leaf_pem` verifies against the CA(s) in `ca_pem` for `role` (X509_verify_cert with
// the SSL server/client purpose, which checks extendedKeyUsage); OpenSSL's reason otherwise.
std::string VerifyLeaf(const std::string& ca_pem, const std::string& leaf_pem, TlsRole role);

// subjectAltName entries as "DNS:x" / "IP:a.b.c.d" / "IP:::1" (IPv6 in compressed text form).
std::vector<std::string> SubjectAltNames(const std::string& cert_pem);
// extendedKeyUsage short names ("serverAuth", "clientAuth").
std::vector<std::string> ExtendedKeyUsages(const std::string& cert_pem);
// The subject's commonName.
std::string CommonName(const std::string& cert_pem);
// Seconds from now until notAfter.
int64_t SecondsLeft(const std::string& cert_pem);

}  // namespace tandem::testing
