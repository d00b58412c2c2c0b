#include "rpc/openssl_util.h"

#include <ctime>

#include <openssl/err.h>

namespace tandem::rpc {

BioPtr MemBio(const std::string& text) { return BioPtr(BIO_new_mem_buf(text.data(), static_cast<int>(text.size()))); }

std::string OpenSslError() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  return buf;
}

int64_t AsnTimeToUnix(const ASN1_TIME* t) {
  struct tm tm {};
  if (ASN1_TIME_to_tm(t, &tm) != 1) return 0;
  return static_cast<int64_t>(timegm(&tm));
}

}  // namespace tandem::rpc
