#include "http/request_parser.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace tandem::http {
namespace {

// RFC 9110 token characters (method, field names, transfer codings).
bool IsTchar(unsigned char c) {
  if (c >= '0' && c <= '9') return true;
  if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return true;
  return std::strchr("!#$%&'*+-.^_`|~", c) != nullptr && c != 0;
}

bool IsToken(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return IsTchar(static_cast<unsigned char>(c)); });
}

// Field values: visible ASCII, obs-text (>= 0x80), space and tab. No CR, LF, NUL or other CTLs.
bool IsFieldValue(std::string_view s) {
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c < 0x20 && c != '\t') return false;
    if (c == 0x7f) return false;
  }
  return true;
}

std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Splits a comma-separated field value into its trimmed, non-empty elements.
std::vector<std::string_view> ListElements(std::string_view v) {
  std::vector<std::string_view> out;
  while (true) {
    const size_t comma = v.find(',');
    std::string_view e = TrimOws(v.substr(0, comma));
    if (!e.empty()) out.push_back(e);
    if (comma == std::string_view::npos) break;
    v.remove_prefix(comma + 1);
  }
  return out;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The bytes of `data` from `from` up to and including the next LF, or all the rest when there is
// none (then the line continues in the next read).
struct LinePiece {
  size_t size;
  bool ends_line;
};
LinePiece NextLinePiece(std::string_view data, size_t from) {
  const void* nl = std::memchr(data.data() + from, '\n', data.size() - from);
  if (nl == nullptr) return {data.size() - from, false};
  return {static_cast<size_t>(static_cast<const char*>(nl) - data.data()) + 1 - from, true};
}

// A collected line (LF included) ends in CRLF, as RFC 9112 requires of every line.
bool EndsInCrlf(const std::string& line) { return line.size() >= 2 && line[line.size() - 2] == '\r'; }

// A chunk-size or trailer line longer than this is malformed (sizes are at most 16 hex digits;
// extensions are ignored and have no business being long).
constexpr size_t kMaxChunkLine = 1024;

}  // namespace

bool RequestParser::Fail(int status, std::string message) {
  phase_ = Phase::kError;
  error_.status = status;
  error_.message = std::move(message);
  return false;
}

void RequestParser::Reset() {
  phase_ = Phase::kHead;
  error_ = {};
  request_ = {};
  consumed_ = 0;
  head_.clear();
  line_.clear();
  trailer_bytes_ = 0;
  content_length_.reset();
  body_state_ = BodyState::kLength;
  remaining_ = 0;
}

size_t RequestParser::Feed(std::string_view data) {
  size_t used = 0;
  while (used < data.size() && (phase_ == Phase::kHead || phase_ == Phase::kBody)) {
    const std::string_view rest = data.substr(used);
    used += phase_ == Phase::kHead ? FeedHead(rest) : FeedBody(rest);
  }
  consumed_ += used;
  return used;
}

size_t RequestParser::FeedHead(std::string_view data) {
  size_t i = 0;
  // Empty lines before the request line are ignored (RFC 9112 2.2: some clients send a CRLF
  // after a POST body); they count against the head limit.
  while (head_.empty() && i < data.size() && (data[i] == '\r' || data[i] == '\n')) {
    ++i;
    if (consumed_ + i > limits_.max_header_bytes) {
      Fail(431, "more than " + std::to_string(limits_.max_header_bytes) + " bytes before the request line");
      return i;
    }
  }
  while (i < data.size()) {
    const LinePiece piece = NextLinePiece(data, i);
    if (head_.size() + piece.size > limits_.max_header_bytes) {
      Fail(431, "the request line and header fields exceed " + std::to_string(limits_.max_header_bytes) + " bytes");
      return i;
    }
    head_.append(data.substr(i, piece.size));
    i += piece.size;
    if (!piece.ends_line) break;
    if (!EndsInCrlf(head_)) {
      Fail(400, "a header line ends in a bare LF (CRLF is required)");
      return i;
    }
    if (head_.size() >= 4 && head_.compare(head_.size() - 4, 4, "\r\n\r\n") == 0) {
      if (ParseHead()) phase_ = (body_state_ == BodyState::kLength && remaining_ == 0) ? Phase::kDone : Phase::kBody;
      return i;
    }
  }
  return i;
}

bool RequestParser::ParseRequestLine(std::string_view line) {
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    return Fail(400, "malformed request line (want METHOD SP TARGET SP HTTP/1.1)");
  }
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!IsToken(method)) return Fail(400, "malformed method in the request line");
  if (target.empty()) return Fail(400, "empty request target");
  for (char ch : target) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c <= 0x20 || c >= 0x7f) return Fail(400, "the request target has a control, space or non-ASCII byte");
  }
  if (target != "*" && target[0] != '/') return Fail(400, "the request target must be a path (origin-form)");
  if (version.size() != 8 || version.compare(0, 5, "HTTP/") != 0 || version[6] != '.' || version[5] < '0' ||
      version[5] > '9' || version[7] < '0' || version[7] > '9') {
    return Fail(400, "malformed HTTP version in the request line");
  }
  if (version[5] != '1') return Fail(505, "only HTTP/1.0 and HTTP/1.1 are supported");
  request_.method.assign(method);
  request_.target.assign(target);
  const size_t q = target.find('?');
  request_.path.assign(target.substr(0, q));
  if (q != std::string_view::npos) request_.query.assign(target.substr(q + 1));
  // A higher 1.x minor version is answered as 1.1 (RFC 9110 6.2).
  request_.version_minor = version[7] == '0' ? 0 : 1;
  request_.keep_alive = request_.version_minor >= 1;
  return true;
}

bool RequestParser::ParseHead() {
  std::string_view head(head_);
  head.remove_suffix(2);  // the empty line's CRLF; every line below ends in CRLF
  size_t eol = head.find("\r\n");
  if (!ParseRequestLine(head.substr(0, eol))) return false;
  head.remove_prefix(eol + 2);

  bool have_length = false, chunked = false, have_te = false, saw_close = false, saw_keep_alive = false;
  uint64_t length = 0;
  int hosts = 0;
  while (!head.empty()) {
    eol = head.find("\r\n");
    const std::string_view line = head.substr(0, eol);
    head.remove_prefix(eol + 2);
    if (line.empty() || line[0] == ' ' || line[0] == '\t') {
      return Fail(400, "header continuation lines (obs-fold) are not accepted");
    }
    if (request_.headers.size() >= limits_.max_headers) {
      return Fail(431, "more than " + std::to_string(limits_.max_headers) + " header fields");
    }
    if (line.find('\r') != std::string_view::npos) return Fail(400, "a bare CR in a header line");
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) return Fail(400, "a header line without a colon");
    const std::string_view name = line.substr(0, colon);
    if (!IsToken(name)) return Fail(400, "malformed header field name (no whitespace before the colon)");
    const std::string_view value = TrimOws(line.substr(colon + 1));
    if (!IsFieldValue(value)) return Fail(400, "a control character in the value of " + std::string(name));
    request_.headers.emplace_back(std::string(name), std::string(value));

    if (EqualsIgnoreCase(name, "content-length")) {
      // "5" or "5, 5" (a proxy merging duplicates); every value must be the same number.
      const std::vector<std::string_view> values = ListElements(value);
      if (values.empty()) return Fail(400, "empty Content-Length");
      for (std::string_view e : values) {
        if (!std::all_of(e.begin(), e.end(), [](char c) { return c >= '0' && c <= '9'; })) {
          return Fail(400, "malformed Content-Length");
        }
        while (e.size() > 1 && e[0] == '0') e.remove_prefix(1);
        if (e.size() > 18) return Fail(413, "the body is larger than " + std::to_string(limits_.max_body_bytes) + " bytes");
        const uint64_t n = std::stoull(std::string(e));
        if (have_length && n != length) return Fail(400, "differing Content-Length values");
        have_length = true;
        length = n;
      }
    } else if (EqualsIgnoreCase(name, "transfer-encoding")) {
      for (std::string_view e : ListElements(value)) {
        // chunked must be the last coding and the only one we can undo.
        if (chunked) return Fail(400, "chunked is not the last transfer coding");
        if (!EqualsIgnoreCase(e, "chunked")) return Fail(501, "transfer coding '" + std::string(e) + "' is not supported");
        chunked = true;
      }
      have_te = true;
    } else if (EqualsIgnoreCase(name, "connection")) {
      for (std::string_view e : ListElements(value)) {
        saw_close |= EqualsIgnoreCase(e, "close");
        saw_keep_alive |= EqualsIgnoreCase(e, "keep-alive");
      }
    } else if (EqualsIgnoreCase(name, "host")) {
      ++hosts;
    } else if (EqualsIgnoreCase(name, "expect")) {
      request_.expect_continue = EqualsIgnoreCase(value, "100-continue");
    }
  }
  // HTTP/1.1 keeps the connection unless told "close"; HTTP/1.0 closes unless told
  // "keep-alive"; "close" wins when both are sent.
  if (saw_keep_alive) request_.keep_alive = true;
  if (saw_close) request_.keep_alive = false;
  if (request_.version_minor >= 1 && hosts != 1) return Fail(400, hosts == 0 ? "missing Host header" : "more than one Host header");
  if (have_te && have_length) return Fail(400, "both Transfer-Encoding and Content-Length (ambiguous framing)");
  if (have_te && !chunked) return Fail(400, "empty Transfer-Encoding");
  if (have_te && request_.version_minor == 0) return Fail(400, "Transfer-Encoding in an HTTP/1.0 request");
  if (have_length && length > limits_.max_body_bytes) {
    return Fail(413, "the body (" + std::to_string(length) + " bytes) is larger than " +
                         std::to_string(limits_.max_body_bytes) + " bytes");
  }
  if (chunked) {
    body_state_ = BodyState::kChunkSize;
  } else {
    body_state_ = BodyState::kLength;
    remaining_ = length;
    content_length_ = length;
    request_.body.reserve(length);
  }
  head_.clear();
  head_.shrink_to_fit();
  return true;
}

bool RequestParser::ParseChunkSize(std::string_view line) {
  size_t i = 0;
  uint64_t size = 0;
  while (i < line.size() && HexValue(line[i]) >= 0) {
    // Past 2^56 the chunk cannot fit any limit; stop before the value could overflow.
    if (size >> 56) return Fail(413, "a chunk is larger than " + std::to_string(limits_.max_body_bytes) + " bytes");
    size = size * 16 + static_cast<uint64_t>(HexValue(line[i]));
    ++i;
  }
  if (i == 0) return Fail(400, "malformed chunk size");
  // Extensions (";name=value") are allowed and ignored; anything else after the size is not.
  std::string_view rest = TrimOws(line.substr(i));
  if (!rest.empty() && (rest[0] != ';' || !IsFieldValue(rest))) return Fail(400, "malformed chunk size line");
  if (request_.body.size() + size > limits_.max_body_bytes) {
    return Fail(413, "the chunked body is larger than " + std::to_string(limits_.max_body_bytes) + " bytes");
  }
  remaining_ = size;
  body_state_ = size == 0 ? BodyState::kTrailers : BodyState::kChunkData;
  return true;
}

size_t RequestParser::FeedBody(std::string_view data) {
  size_t i = 0;
  while (i < data.size() && phase_ == Phase::kBody) {
    switch (body_state_) {
      case BodyState::kLength:
      case BodyState::kChunkData: {
        const size_t take = static_cast<size_t>(std::min<uint64_t>(remaining_, data.size() - i));
        request_.body.append(data.substr(i, take));
        i += take;
        remaining_ -= take;
        if (remaining_ == 0) {
          if (body_state_ == BodyState::kLength) {
            phase_ = Phase::kDone;
          } else {
            body_state_ = BodyState::kChunkDataEnd;
          }
        }
        break;
      }
      case BodyState::kChunkDataEnd:
      case BodyState::kChunkSize:
      case BodyState::kTrailers: {
        // Line-oriented states: collect one line up to LF.
        const LinePiece piece = NextLinePiece(data, i);
        const size_t limit = body_state_ == BodyState::kTrailers ? limits_.max_header_bytes : kMaxChunkLine;
        if (line_.size() + piece.size > limit + 2 ||
            (body_state_ == BodyState::kTrailers &&
             trailer_bytes_ + line_.size() + piece.size > limits_.max_header_bytes)) {
          Fail(body_state_ == BodyState::kTrailers ? 431 : 400,
               body_state_ == BodyState::kTrailers ? "the chunked body's trailer fields are too large"
                                                   : "a chunk size line is too long");
          return i;
        }
        line_.append(data.substr(i, piece.size));
        i += piece.size;
        if (!piece.ends_line) break;
        if (!EndsInCrlf(line_)) {
          Fail(400, "a line of the chunked body ends in a bare LF (CRLF is required)");
          return i;
        }
        const std::string_view line = std::string_view(line_).substr(0, line_.size() - 2);
        if (body_state_ == BodyState::kChunkDataEnd) {
          if (!line.empty()) {
            Fail(400, "chunk data is longer than its size");
            return i;
          }
          body_state_ = BodyState::kChunkSize;
        } else if (body_state_ == BodyState::kChunkSize) {
          if (!ParseChunkSize(line)) return i;
        } else if (line.empty()) {
          phase_ = Phase::kDone;  // the empty line after the trailers ends the message
        } else {
          // Trailer fields are read (to find the end) and dropped: no handler needs them.
          if (line[0] == ' ' || line[0] == '\t' || line.find(':') == std::string_view::npos ||
              !IsToken(line.substr(0, line.find(':'))) || !IsFieldValue(line)) {
            Fail(400, "malformed trailer field");
            return i;
          }
          trailer_bytes_ += line_.size();
        }
        line_.clear();
        break;
      }
    }
  }
  return i;
}

}  // namespace tandem::http
