// The pure message pieces: header lookup, reason phrases, the response head in each framing
// (fixed length, chunked, close-delimited), whole fixed-body responses, and chunk encoding.
#include "http/message.h"

#include <gtest/gtest.h>

namespace tandem::http {
namespace {

TEST(MessageTest, HeaderNamesCompareWithoutCase) {
  EXPECT_TRUE(EqualsIgnoreCase("Content-Length", "content-LENGTH"));
  EXPECT_FALSE(EqualsIgnoreCase("Content-Length", "Content-Lengt"));
  EXPECT_FALSE(EqualsIgnoreCase("a-b", "a_b"));
  const Headers h = {{"X-One", "1"}, {"x-one", "2"}, {"Host", "t"}};
  EXPECT_EQ(FindHeader(h, "X-ONE"), "1") << "the first of repeated headers";
  EXPECT_EQ(FindHeader(h, "host"), "t");
  EXPECT_EQ(FindHeader(h, "Hos"), std::nullopt);
  Request r;
  r.headers = h;
  EXPECT_EQ(r.Header("x-one"), "1");
}

TEST(MessageTest, ReasonPhrases) {
  EXPECT_EQ(ReasonPhrase(200), "OK");
  EXPECT_EQ(ReasonPhrase(413), "Content Too Large");
  EXPECT_EQ(ReasonPhrase(429), "Too Many Requests");
  EXPECT_EQ(ReasonPhrase(503), "Service Unavailable");
  EXPECT_EQ(ReasonPhrase(299), "Unknown");
}

TEST(MessageTest, ResponseHeadInEachFraming) {
  const Headers extra = {{"X-Request-Id", "r1"}};
  EXPECT_EQ(ResponseHead(200, extra, "application/json", 5, false, true),
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 5\r\nX-Request-Id: r1\r\n\r\n");
  // A length wins over chunked: the body is already known.
  EXPECT_EQ(ResponseHead(200, {}, "text/plain", 0, true, true),
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(ResponseHead(200, {}, "text/event-stream", std::nullopt, true, true),
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n");
  // HTTP/1.0 streams end with the connection: neither a length nor chunked, and "close".
  EXPECT_EQ(ResponseHead(200, {}, "text/event-stream", std::nullopt, false, false),
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(ResponseHead(404, {}, "", 0, false, false),
            "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
}

TEST(MessageTest, SerializeResponseWritesHeadAndBody) {
  Response r;
  r.status = 429;
  r.headers = {{"Retry-After", "1"}};
  r.body = R"({"error":{}})";
  EXPECT_EQ(SerializeResponse(r, true),
            "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nContent-Length: 12\r\n"
            "Retry-After: 1\r\n\r\n{\"error\":{}}");
  Response empty;
  empty.body = "";
  EXPECT_EQ(SerializeResponse(empty, false),
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
}

// RFC 9110 8.6 and 15.3.5: a 204 has no content, so neither Content-Type nor Content-Length.
TEST(MessageTest, NoContentHasNeitherTypeNorLength) {
  Response r;
  r.status = 204;
  EXPECT_EQ(SerializeResponse(r, true), "HTTP/1.1 204 No Content\r\n\r\n");
}

TEST(MessageTest, ChunksCarryTheirSizeInHex) {
  EXPECT_EQ(Chunk("hello"), "5\r\nhello\r\n");
  const std::string alphabet = "abcdefghijklmnopqrstuvwxyz";
  EXPECT_EQ(Chunk(alphabet), "1a\r\n" + alphabet + "\r\n");
  EXPECT_EQ(Chunk(std::string(4096, 'x')).substr(0, 6), "1000\r\n");
  EXPECT_EQ(kLastChunk, "0\r\n\r\n");
}

}  // namespace
}  // namespace tandem::http
