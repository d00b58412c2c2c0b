// RequestParser, table-driven: what each input frames into (requests or the status of the error),
// and that every way of cutting the input into reads gives the same result: whole, cut once at
// every byte boundary, and one byte per read.
#include "http/request_parser.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/http/parse_driver.h"

namespace tandem::http {
namespace {

using testing::ParseOutcome;
using testing::ParsePieces;
using testing::SameOutcome;

struct Case {
  const char* name;
  std::string input;
  int error_status;        // 0: no error expected
  size_t requests;         // complete requests expected (before the error, if any)
  std::string last_body;   // body of the last complete request
};

ParserLimits SmallLimits() {
  ParserLimits l;
  l.max_header_bytes = 256;
  l.max_headers = 8;
  l.max_body_bytes = 64;
  return l;
}

std::string Get(const std::string& extra = "") { return "GET /health HTTP/1.1\r\nHost: x\r\n" + extra + "\r\n"; }
std::string Post(const std::string& body, const std::string& extra = "") {
  return "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" +
         extra + "\r\n" + body;
}
std::string Chunked(const std::string& chunks) {
  return "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks;
}

const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = {
      // Well-formed.
      {"get", Get(), 0, 1, ""},
      {"post_body", Post("{\"a\":1}"), 0, 1, "{\"a\":1}"},
      {"post_empty_body", Post(""), 0, 1, ""},
      {"leading_empty_lines", "\r\n\r\n" + Get(), 0, 1, ""},
      {"pipelined", Get() + Post("abc") + Get() + Post("xyz"), 0, 4, "xyz"},
      {"chunked", Chunked("3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\n\r\n"), 0, 1, "abcde"},
      {"chunked_upper_hex_and_trailers", Chunked("A\r\n0123456789\r\n0\r\nX-T: 1\r\n\r\n"), 0, 1, "0123456789"},
      {"chunked_leading_zeros", Chunked("0003\r\nabc\r\n000\r\n\r\n"), 0, 1, "abc"},
      {"chunked_then_get", Chunked("1\r\nz\r\n0\r\n\r\n") + Get(), 0, 2, ""},
      {"http10_no_host", "GET / HTTP/1.0\r\n\r\n", 0, 1, ""},
      {"duplicate_equal_lengths", Post("ab", "Content-Length: 2\r\n"), 0, 1, "ab"},
      {"list_equal_lengths", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2, 2\r\n\r\nab", 0, 1, "ab"},
      {"header_value_ows_and_obs_text", Get("X-A: \t v\xc3\xa9 \t\r\n"), 0, 1, ""},
      {"body_at_limit", Post(std::string(64, 'b')), 0, 1, std::string(64, 'b')},
      {"headers_at_count_limit", Get("A: 1\r\nB: 1\r\nC: 1\r\nD: 1\r\nE: 1\r\nF: 1\r\nG: 1\r\n"), 0, 1, ""},
      {"options_star", "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", 0, 1, ""},
      {"http_1_2_as_1_1", "GET / HTTP/1.2\r\nHost: x\r\n\r\n", 0, 1, ""},
      {"incomplete_head", "GET / HTTP/1.1\r\nHost: x\r\n", 0, 0, ""},
      {"incomplete_body", Post("abcdef").substr(0, Post("abcdef").size() - 2), 0, 0, ""},

      // Malformed: 400.
      {"bare_lf", "GET / HTTP/1.1\nHost: x\n\n", 400, 0, ""},
      {"bare_lf_in_header", "GET / HTTP/1.1\r\nHost: x\nA: b\r\n\r\n", 400, 0, ""},
      {"bare_cr_in_value", "GET / HTTP/1.1\r\nHost: x\rA: b\r\n\r\n", 400, 0, ""},
      {"missing_host", "GET / HTTP/1.1\r\n\r\n", 400, 0, ""},
      {"two_hosts", Get("Host: y\r\n"), 400, 0, ""},
      {"obs_fold", Get("A: b\r\n c\r\n"), 400, 0, ""},
      {"space_before_colon", Get("A : b\r\n"), 400, 0, ""},
      {"no_colon", Get("Abc\r\n"), 400, 0, ""},
      {"nul_in_value", Get(std::string("A: b\0c\r\n", 8)), 400, 0, ""},
      {"bad_method", "G(T / HTTP/1.1\r\nHost: x\r\n\r\n", 400, 0, ""},
      {"absolute_target", "GET http://x/ HTTP/1.1\r\nHost: x\r\n\r\n", 400, 0, ""},
      {"extra_space", "GET  / HTTP/1.1\r\nHost: x\r\n\r\n", 400, 0, ""},
      {"bad_version", "GET / HTTP/1.1x\r\nHost: x\r\n\r\n", 400, 0, ""},
      {"lowercase_version", "GET / http/1.1\r\nHost: x\r\n\r\n", 400, 0, ""},
      {"length_and_chunked", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400, 0, ""},
      {"differing_lengths", Post("ab", "Content-Length: 3\r\n"), 400, 0, ""},
      {"negative_length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 400, 0, ""},
      {"empty_length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length:\r\n\r\n", 400, 0, ""},
      {"plus_length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +2\r\n\r\nab", 400, 0, ""},
      {"chunked_not_last", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", 400, 0, ""},
      {"te_in_http10", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, 0, ""},
      {"bad_chunk_size", Chunked("xyz\r\nabc\r\n0\r\n\r\n"), 400, 0, ""},
      {"chunk_longer_than_size", Chunked("2\r\nabc\r\n0\r\n\r\n"), 400, 0, ""},
      {"chunk_size_bare_lf", Chunked("3\nabc\r\n0\r\n\r\n"), 400, 0, ""},
      {"chunk_size_garbage_after", Chunked("3 x\r\nabc\r\n0\r\n\r\n"), 400, 0, ""},
      {"bad_trailer", Chunked("0\r\nno colon\r\n\r\n"), 400, 0, ""},
      {"error_after_good_request", Get() + "BAD\r\n\r\n", 400, 1, ""},

      // Too large: 413 from the declared length, before the body is read; 431 for the head.
      {"length_over_limit", Post(std::string(65, 'b')), 413, 0, ""},
      {"huge_length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n", 413, 0, ""},
      {"chunked_over_limit", Chunked("40\r\n" + std::string(64, 'a') + "\r\n1\r\nb\r\n0\r\n\r\n"), 413, 0, ""},
      {"huge_chunk", Chunked("fffffffffffffffffffff\r\n"), 413, 0, ""},
      {"head_over_limit", Get("X: " + std::string(300, 'a') + "\r\n"), 431, 0, ""},
      {"too_many_headers", Get("A: 1\r\nB: 1\r\nC: 1\r\nD: 1\r\nE: 1\r\nF: 1\r\nG: 1\r\nH: 1\r\n"), 431, 0, ""},
      {"endless_leading_lines", std::string(300, '\n'), 431, 0, ""},
      {"trailers_over_limit", Chunked("0\r\n" + std::string(40, 'T') + ": " + std::string(220, 'v') + "\r\n\r\n"), 431, 0, ""},

      // Not supported: 501 / 505.
      {"gzip_coding", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501, 0, ""},
      {"http2", "GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505, 0, ""},
  };
  return cases;
}

void ExpectCase(const Case& c, const ParseOutcome& got, const std::string& how) {
  EXPECT_EQ(got.requests.size(), c.requests) << c.name << " " << how;
  if (c.error_status == 0) {
    EXPECT_FALSE(got.error) << c.name << " " << how << ": " << got.error->status << " " << got.error->message;
  } else {
    ASSERT_TRUE(got.error) << c.name << " " << how;
    EXPECT_EQ(got.error->status, c.error_status) << c.name << " " << how << ": " << got.error->message;
    EXPECT_FALSE(got.error->message.empty());
  }
  if (!got.requests.empty()) {
    EXPECT_EQ(got.requests.back().body, c.last_body) << c.name << " " << how;
  }
}

TEST(RequestParserTest, EveryCaseWhole) {
  for (const Case& c : Cases()) {
    const ParseOutcome got = ParsePieces(c.input, {}, SmallLimits());
    ExpectCase(c, got, "whole");
    if (got.error) std::cout << c.name << " -> " << got.error->status << " " << got.error->message << "\n";
  }
}

TEST(RequestParserTest, EveryCaseCutAtEveryByteBoundary) {
  size_t runs = 0;
  for (const Case& c : Cases()) {
    const ParseOutcome whole = ParsePieces(c.input, {}, SmallLimits());
    for (size_t cut = 0; cut <= c.input.size(); ++cut) {
      const ParseOutcome got = ParsePieces(c.input, {cut}, SmallLimits());
      EXPECT_TRUE(SameOutcome(whole, got)) << c.name << " cut at " << cut;
      ++runs;
    }
    std::vector<size_t> every(c.input.size());
    for (size_t i = 0; i < every.size(); ++i) every[i] = i;
    const ParseOutcome bytewise = ParsePieces(c.input, every, SmallLimits());
    EXPECT_TRUE(SameOutcome(whole, bytewise)) << c.name << " one byte per read";
    ExpectCase(c, bytewise, "one byte per read");
  }
  std::cout << Cases().size() << " cases, " << runs << " single-cut runs\n";
}

TEST(RequestParserTest, RequestFields) {
  const std::string in =
      "POST /v1/chat/completions?a=1&b=2 HTTP/1.1\r\nHost: api\r\ncontent-type:application/json\r\n"
      "Expect: 100-continue\r\nContent-Length: 2\r\n\r\n{}";
  ParseOutcome got = ParsePieces(in, {});
  ASSERT_EQ(got.requests.size(), 1u);
  const Request& r = got.requests[0];
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.target, "/v1/chat/completions?a=1&b=2");
  EXPECT_EQ(r.path, "/v1/chat/completions");
  EXPECT_EQ(r.query, "a=1&b=2");
  EXPECT_EQ(r.version_minor, 1);
  EXPECT_TRUE(r.keep_alive);
  EXPECT_TRUE(r.expect_continue);
  EXPECT_EQ(r.Header("Content-Type").value_or(""), "application/json");  // names match case-insensitively
  EXPECT_FALSE(r.Header("X-None"));
  EXPECT_EQ(r.body, "{}");
}

TEST(RequestParserTest, KeepAliveRules) {
  struct KA {
    std::string in;
    bool keep_alive;
  };
  const KA cases[] = {
      {"GET / HTTP/1.1\r\nHost: x\r\n\r\n", true},
      {"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", false},
      {"GET / HTTP/1.1\r\nHost: x\r\nConnection: Keep-Alive, CLOSE\r\n\r\n", false},
      {"GET / HTTP/1.0\r\n\r\n", false},
      {"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", true},
      {"GET / HTTP/1.0\r\nConnection: keep-alive\r\nConnection: close\r\n\r\n", false},
  };
  for (const KA& c : cases) {
    ParseOutcome got = ParsePieces(c.in, {});
    ASSERT_EQ(got.requests.size(), 1u) << c.in;
    EXPECT_EQ(got.requests[0].keep_alive, c.keep_alive) << c.in;
  }
}

// A too-large body is refused from its Content-Length: the parser stops at the end of the head
// and has read none of the body (the server answers 413 without receiving it).
TEST(RequestParserTest, OversizedBodyIsRefusedBeforeItsFirstByte) {
  ParserLimits l;
  l.max_body_bytes = 4 << 20;
  const std::string head = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 65011712\r\n\r\n";
  RequestParser p(l);
  const std::string in = head + std::string(1000, 'x');
  EXPECT_EQ(p.Feed(in), head.size());
  ASSERT_EQ(p.phase(), RequestParser::Phase::kError);
  EXPECT_EQ(p.error().status, 413);
  std::cout << p.error().message << "\n";
}

TEST(RequestParserTest, HeadIsVisibleBeforeTheBody) {
  RequestParser p;
  const std::string head = "POST /x HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n";
  EXPECT_EQ(p.Feed(head), head.size());
  ASSERT_EQ(p.phase(), RequestParser::Phase::kBody);
  EXPECT_TRUE(p.request().expect_continue);
  EXPECT_EQ(p.content_length().value_or(0), 5u);
  EXPECT_EQ(p.Feed("hel"), 3u);
  EXPECT_EQ(p.phase(), RequestParser::Phase::kBody);
  EXPECT_EQ(p.Feed("loGET"), 2u);  // stops at the end of this request
  EXPECT_EQ(p.phase(), RequestParser::Phase::kDone);
  EXPECT_EQ(p.TakeRequest().body, "hello");
  p.Reset();
  EXPECT_FALSE(p.started());
  EXPECT_EQ(p.phase(), RequestParser::Phase::kHead);
}

TEST(RequestParserTest, ResetAfterErrorParsesAgain) {
  RequestParser p;
  p.Feed("BAD\r\n\r\n");
  ASSERT_EQ(p.phase(), RequestParser::Phase::kError);
  p.Reset();
  const std::string get = Get();
  EXPECT_EQ(p.Feed(get), get.size());
  EXPECT_EQ(p.phase(), RequestParser::Phase::kDone);
}

}  // namespace
}  // namespace tandem::http
