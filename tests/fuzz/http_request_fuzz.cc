// Fuzz target: HTTP/1.1 request framing (http/request_parser), the first code that reads bytes
// from any client. The parser must never crash, must respect its limits, and must frame the same
// way however the bytes are cut into reads: the input is parsed whole and again cut every
// `stride` bytes (the first input byte picks the stride), and both outcomes must match.
#include <cstdint>
#include <string_view>
#include <vector>

#include "tests/http/parse_driver.h"

namespace {

bool ValidError(int status) {
  return status == 400 || status == 413 || status == 431 || status == 501 || status == 505;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t stride = 1 + data[0] % 16;
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  tandem::http::ParserLimits limits;
  limits.max_header_bytes = 1024;  // small, so that the fuzzer reaches every limit
  limits.max_headers = 16;
  limits.max_body_bytes = 4096;

  using tandem::http::testing::ParsePieces;
  const auto whole = ParsePieces(input, {}, limits);
  std::vector<size_t> cuts;
  for (size_t at = stride; at < input.size(); at += stride) cuts.push_back(at);
  const auto pieces = ParsePieces(input, cuts, limits);
  if (!tandem::http::testing::SameOutcome(whole, pieces)) __builtin_trap();

  if (whole.error && (!ValidError(whole.error->status) || whole.error->message.empty())) __builtin_trap();
  for (const auto& r : whole.requests) {
    if (r.body.size() > limits.max_body_bytes || r.headers.size() > limits.max_headers) __builtin_trap();
    if (r.method.empty() || r.path.empty() || (r.path[0] != '/' && r.path != "*")) __builtin_trap();
    if (r.version_minor != 0 && r.version_minor != 1) __builtin_trap();
  }
  return 0;
}
