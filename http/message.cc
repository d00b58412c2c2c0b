#include "http/message.h"

#include <cstdio>

namespace tandem::http {

namespace {
char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }
}  // namespace

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (Lower(a[i]) != Lower(b[i])) return false;
  }
  return true;
}

std::optional<std::string_view> FindHeader(const Headers& headers, std::string_view name) {
  for (const auto& [k, v] : headers) {
    if (EqualsIgnoreCase(k, name)) return std::string_view(v);
  }
  return std::nullopt;
}

std::string_view ReasonPhrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

std::string ResponseHead(int status, const Headers& headers, std::string_view content_type,
                         std::optional<size_t> content_length, bool chunked, bool keep_alive) {
  std::string h;
  h.reserve(160);
  h += "HTTP/1.1 ";
  h += std::to_string(status);
  h += ' ';
  h += ReasonPhrase(status);
  h += "\r\n";
  if (!content_type.empty()) {
    h += "Content-Type: ";
    h += content_type;
    h += "\r\n";
  }
  if (content_length) {
    h += "Content-Length: ";
    h += std::to_string(*content_length);
    h += "\r\n";
  } else if (chunked) {
    h += "Transfer-Encoding: chunked\r\n";
  }
  if (!keep_alive) h += "Connection: close\r\n";
  for (const auto& [k, v] : headers) {
    h += k;
    h += ": ";
    h += v;
    h += "\r\n";
  }
  h += "\r\n";
  return h;
}

std::string SerializeResponse(const Response& r, bool keep_alive) {
  // A 204 has no content, so it names neither a type nor a length (RFC 9110 8.6).
  const bool no_content = r.body.empty() && r.status == 204;
  std::string out = ResponseHead(r.status, r.headers, no_content ? "" : r.content_type,
                                 no_content ? std::nullopt : std::optional<size_t>(r.body.size()), false, keep_alive);
  out += r.body;
  return out;
}

std::string Chunk(std::string_view data) {
  char size[24];
  const int n = std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
  std::string out;
  out.reserve(static_cast<size_t>(n) + data.size() + 2);
  out.append(size, static_cast<size_t>(n));
  out.append(data);
  out += "\r\n";
  return out;
}

}  // namespace tandem::http
