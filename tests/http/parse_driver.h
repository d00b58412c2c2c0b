// Drives a RequestParser over an input cut into pieces, as reads from a socket would deliver it:
// the parser test checks that every cut gives the same result, and the fuzz target uses the
// same driver as its oracle (whole input vs. the same input cut at fuzzer-chosen points).
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "http/request_parser.h"

namespace tandem::http::testing {

struct ParseOutcome {
  std::vector<Request> requests;     // every complete request, in order
  std::optional<ParseError> error;   // the first error (parsing stops there)
  bool partial = false;              // a request was started but not finished
};

// `cuts`: ascending offsets into `input` where one read ends and the next begins.
inline ParseOutcome ParsePieces(std::string_view input, const std::vector<size_t>& cuts,
                                const ParserLimits& limits = {}) {
  ParseOutcome out;
  RequestParser parser(limits);
  size_t begin = 0;
  for (size_t k = 0; k <= cuts.size(); ++k) {
    const size_t end = k < cuts.size() ? std::min(cuts[k], input.size()) : input.size();
    if (end < begin) continue;
    std::string_view piece = input.substr(begin, end - begin);
    begin = end;
    while (true) {
      piece.remove_prefix(parser.Feed(piece));
      if (parser.phase() == RequestParser::Phase::kDone) {
        out.requests.push_back(parser.TakeRequest());
        parser.Reset();
        continue;
      }
      if (parser.phase() == RequestParser::Phase::kError) {
        out.error = parser.error();
        return out;
      }
      break;  // the parser took the whole piece and wants more
    }
  }
  out.partial = parser.started();
  return out;
}

inline bool SameRequest(const Request& a, const Request& b) {
  return a.method == b.method && a.target == b.target && a.path == b.path && a.query == b.query &&
         a.version_minor == b.version_minor && a.headers == b.headers && a.body == b.body &&
         a.keep_alive == b.keep_alive && a.expect_continue == b.expect_continue;
}

inline bool SameOutcome(const ParseOutcome& a, const ParseOutcome& b) {
  if (a.requests.size() != b.requests.size() || a.partial != b.partial || a.error.has_value() != b.error.has_value()) {
    return false;
  }
  for (size_t i = 0; i < a.requests.size(); ++i) {
    if (!SameRequest(a.requests[i], b.requests[i])) return false;
  }
  return !a.error || (a.error->status == b.error->status && a.error->message == b.error->message);
}

}  // namespace tandem::http::testing
