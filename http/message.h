// HTTP/1.1 messages as plain values: a framed request (what the parser produces) and a response
// (what handlers return), plus the pure function that renders a response head. No I/O here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tandem::http {

using Headers = std::vector<std::pair<std::string, std::string>>;

// ASCII case-insensitive equality (header names, Connection tokens).
bool EqualsIgnoreCase(std::string_view a, std::string_view b);
// The value of the first header named `name` (case-insensitive), or nullopt.
std::optional<std::string_view> FindHeader(const Headers& headers, std::string_view name);

struct Request {
  std::string method;   // as sent: "GET", "POST" (methods are case-sensitive)
  std::string target;   // the request-target: "/v1/completions?x=1"
  std::string path;     // target up to '?'
  std::string query;    // after '?' ("" when none)
  int version_minor = 1;  // HTTP/1.<minor>: 0 or 1
  Headers headers;      // names as sent, values without surrounding whitespace
  std::string body;     // de-chunked
  bool keep_alive = true;  // the client allows another request on this connection
  bool expect_continue = false;  // "Expect: 100-continue"

  std::optional<std::string_view> Header(std::string_view name) const { return FindHeader(headers, name); }
};

struct Response {
  int status = 200;
  Headers headers;  // extra headers; Content-Length / Connection / Transfer-Encoding are added
  std::string content_type = "application/json";
  std::string body;
};

// "OK", "Not Found", ... ("Unknown" for codes without a phrase here).
std::string_view ReasonPhrase(int status);

// The status line and headers of a response, ending in the empty line. `content_length`
// nullopt means a streamed body: chunked for HTTP/1.1, close-delimited for HTTP/1.0.
// `keep_alive` false adds "Connection: close".
std::string ResponseHead(int status, const Headers& headers, std::string_view content_type,
                         std::optional<size_t> content_length, bool chunked, bool keep_alive);

// A whole response with a fixed body, ready to write.
std::string SerializeResponse(const Response& response, bool keep_alive);

// One chunk of a chunked body ("<hex size>\r\n<data>\r\n"); empty data is not allowed here
// (it would end the body): use kLastChunk.
std::string Chunk(std::string_view data);
inline constexpr std::string_view kLastChunk = "0\r\n\r\n";

}  // namespace tandem::http
