// Incremental HTTP/1.1 request framing (RFC 9112): request line, header fields, and a body framed
// by Content-Length or chunked transfer coding. Pure: bytes in, a Request or an error out, no
// I/O, so any split of the input into reads gives the same result (tested at every byte
// boundary, and fuzzed). Everything that grows with the input is bounded by ParserLimits, and
// a body larger than the limit is refused from its Content-Length before a byte of it is read.
//
// Strict where leniency enables request smuggling: header lines end in CRLF (a bare LF is an
// error), no whitespace between a field name and its colon, no obs-fold continuation lines, a
// request with both Content-Length and Transfer-Encoding is refused, as are differing
// Content-Length values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "http/message.h"

namespace tandem::http {

struct ParserLimits {
  size_t max_header_bytes = 16 * 1024;  // request line + header fields (and a chunked body's trailers)
  size_t max_headers = 100;             // header fields
  size_t max_body_bytes = 4 << 20;      // after de-chunking
};

// Why a request was refused, as the status to answer it with: 400 malformed, 413 body too large,
// 431 head too large, 501 transfer coding not supported, 505 not HTTP/1.x.
struct ParseError {
  int status = 0;
  std::string message;
};

class RequestParser {
 public:
  enum class Phase {
    kHead,   // reading the request line and header fields
    kBody,   // the head is complete (request() has it); reading the body
    kDone,   // one whole request: TakeRequest(), then Reset() for the next
    kError,  // error() says why; the connection cannot be reused
  };

  explicit RequestParser(ParserLimits limits = {}) : limits_(limits) {}

  // Consumes a prefix of `data` and returns its length. Stops at the end of one request, so in
  // kDone the rest of `data` belongs to the next request (pipelining); in kError it stops at the
  // offending byte.
  size_t Feed(std::string_view data);

  Phase phase() const { return phase_; }
  // Some byte of this request (a leading empty line included) has been consumed.
  bool started() const { return consumed_ > 0; }
  const ParseError& error() const { return error_; }
  // The head fields are valid from kBody on; the body from kDone on.
  const Request& request() const { return request_; }
  // From kBody on: the body size the head declared (Content-Length), or nullopt for a chunked
  // body, whose size is known only at its end.
  std::optional<uint64_t> content_length() const { return content_length_; }
  // Moves the request out (kDone).
  Request TakeRequest() { return std::move(request_); }
  // Ready for the next request on the same connection.
  void Reset();

  const ParserLimits& limits() const { return limits_; }

 private:
  enum class BodyState { kLength, kChunkSize, kChunkData, kChunkDataEnd, kTrailers };

  size_t FeedHead(std::string_view data);
  size_t FeedBody(std::string_view data);
  // Parses head_ into request_ and chooses the body framing; false on error (set).
  bool ParseHead();
  bool ParseRequestLine(std::string_view line);
  bool ParseChunkSize(std::string_view line);
  bool Fail(int status, std::string message);

  ParserLimits limits_;
  Phase phase_ = Phase::kHead;
  ParseError error_;
  Request request_;
  size_t consumed_ = 0;
  std::string head_;     // request line + fields, up to and including the empty line
  std::string line_;     // a chunk-size line or trailer line in progress
  size_t trailer_bytes_ = 0;
  BodyState body_state_ = BodyState::kLength;
  std::optional<uint64_t> content_length_;
  uint64_t remaining_ = 0;  // bytes left of the Content-Length body or of the current chunk
};

}  // namespace tandem::http
