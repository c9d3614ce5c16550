// The front door's HTTP/1.1 request parser: valid, incomplete, pipelined,
// malformed and oversized requests.
#include "coordinator/http/http_parser.h"

#include "gtest/gtest.h"

namespace splitspec::coordinator::http {
namespace {

HttpParseResult Parse(const std::string& bytes, HttpLimits limits = {}) {
  return ParseHttpRequest(bytes, limits);
}

TEST(HttpParserTest, ParsesGetWithQueryAndHeaders) {
  const std::string bytes =
      "GET /v1/models?x=1 HTTP/1.1\r\nHost: localhost\r\nX-Test:  padded \r\n\r\n";
  const HttpParseResult r = Parse(bytes + "GET /next");
  ASSERT_EQ(r.kind, HttpParseResult::kRequest) << r.error_reason;
  EXPECT_EQ(r.request.method, "GET");
  EXPECT_EQ(r.request.target, "/v1/models?x=1");
  EXPECT_EQ(r.request.path, "/v1/models");
  EXPECT_EQ(r.request.version_minor, 1);
  ASSERT_NE(r.request.FindHeader("x-test"), nullptr);
  EXPECT_EQ(*r.request.FindHeader("x-test"), "padded");
  EXPECT_EQ(r.request.body, "");
  EXPECT_EQ(r.consumed, bytes.size());
  EXPECT_TRUE(r.request.KeepAlive());
}

TEST(HttpParserTest, ParsesPostBodyByContentLength) {
  const std::string bytes =
      "POST /v1/completions HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\n{\"a\":\"bc\"}X";
  const HttpParseResult r = Parse(bytes);
  ASSERT_EQ(r.kind, HttpParseResult::kRequest) << r.error_reason;
  EXPECT_EQ(r.request.body, "{\"a\":\"bc\"}X");
  EXPECT_EQ(r.consumed, bytes.size());
}

TEST(HttpParserTest, WaitsForTheWholeHeaderAndBody) {
  EXPECT_EQ(Parse("GET / HTTP/1.1\r\nHost: h\r\n").kind, HttpParseResult::kIncomplete);
  EXPECT_EQ(Parse("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nabc").kind,
            HttpParseResult::kIncomplete);
}

TEST(HttpParserTest, PipelinedRequestsAreParsedOneAtATime) {
  const std::string first = "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nhi";
  const std::string second = "GET /b HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n";
  const std::string both = first + second;
  const HttpParseResult r1 = Parse(both);
  ASSERT_EQ(r1.kind, HttpParseResult::kRequest);
  EXPECT_EQ(r1.request.path, "/a");
  EXPECT_EQ(r1.request.body, "hi");
  EXPECT_EQ(r1.consumed, first.size());
  const HttpParseResult r2 = Parse(both.substr(r1.consumed));
  ASSERT_EQ(r2.kind, HttpParseResult::kRequest);
  EXPECT_EQ(r2.request.path, "/b");
  EXPECT_FALSE(r2.request.KeepAlive());
}

TEST(HttpParserTest, KeepAliveFollowsVersionAndConnectionHeader) {
  EXPECT_FALSE(Parse("GET / HTTP/1.0\r\n\r\n").request.KeepAlive());
  EXPECT_TRUE(Parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").request.KeepAlive());
  EXPECT_FALSE(
      Parse("GET / HTTP/1.1\r\nHost: h\r\nConnection: foo, close\r\n\r\n").request.KeepAlive());
}

void ExpectError(const std::string& bytes, int status, const std::string& reason_part,
                 HttpLimits limits = {}) {
  const HttpParseResult r = Parse(bytes, limits);
  ASSERT_EQ(r.kind, HttpParseResult::kError) << bytes;
  EXPECT_EQ(r.error_status, status) << r.error_reason;
  EXPECT_NE(r.error_reason.find(reason_part), std::string::npos) << r.error_reason;
}

TEST(HttpParserTest, MalformedRequestLinesAreRefusedWithAReason) {
  ExpectError("GET /\r\n\r\n", 400, "malformed request line");
  ExpectError("GET  / HTTP/1.1\r\nHost: h\r\n\r\n", 400, "malformed request line");
  ExpectError("G(T / HTTP/1.1\r\nHost: h\r\n\r\n", 400, "malformed method");
  ExpectError("GET http://x/ HTTP/1.1\r\nHost: h\r\n\r\n", 400, "absolute path");
  ExpectError("GET / HTTX/1.1\r\nHost: h\r\n\r\n", 400, "malformed HTTP version");
  ExpectError("GET / HTTP/2.0\r\nHost: h\r\n\r\n", 505, "HTTP version 2.0 is not supported");
}

TEST(HttpParserTest, MalformedHeadersAreRefusedWithAReason) {
  ExpectError("GET / HTTP/1.1\r\nHost h\r\n\r\n", 400, "header line without ':'");
  ExpectError("GET / HTTP/1.1\r\nHost : h\r\n\r\n", 400, "malformed header name 'Host '");
  ExpectError("GET / HTTP/1.1\r\nHost: h\r\n folded\r\n\r\n", 400, "obsolete header line folding");
  ExpectError("GET / HTTP/1.1\r\nHost: a\x01z\r\n\r\n", 400, "control character");
  ExpectError("GET / HTTP/1.1\r\n\r\n", 400, "without a Host header");
  ExpectError("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1x\r\n\r\n", 400,
              "malformed Content-Length '1x'");
  ExpectError("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n", 400,
              "malformed Content-Length");
  ExpectError("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400,
              "conflicting Content-Length");
  ExpectError(
      "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 400,
      "ambiguous");
  ExpectError("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n", 501,
              "only 'chunked'");
}

TEST(HttpParserTest, OversizedRequestsAreRefused) {
  HttpLimits limits;
  limits.max_header_bytes = 64;
  limits.max_body_bytes = 10;
  limits.max_headers = 2;
  ExpectError("GET / HTTP/1.1\r\nHost: h\r\nX-Long: " + std::string(100, 'a'), 431,
              "exceeds the limit of 64", limits);
  ExpectError("GET / HTTP/1.1\r\nHost: h\r\nX-Long: " + std::string(40, 'a') + "\r\n\r\n", 431,
              "exceeds the limit", limits);
  ExpectError("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\n", 413,
              "body of 11 bytes exceeds the limit of 10", limits);
  ExpectError("GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\n\r\n", 431,
              "3 header fields exceed the limit of 2", limits);
}

// HTTP/1.1 requires servers to accept chunked request bodies (RFC 9112 §6.1).
TEST(HttpParserTest, DecodesAChunkedBody) {
  const std::string bytes =
      "POST /v1/completions HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: Chunked\r\n\r\n"
      "5\r\n{\"a\":\r\n6;ext=1\r\n\"bc\"}X\r\n0\r\nTrailer-Field: x\r\n\r\n";
  const HttpParseResult r = Parse(bytes + "GET /next");
  ASSERT_EQ(r.kind, HttpParseResult::kRequest) << r.error_reason;
  EXPECT_EQ(r.request.body, "{\"a\":\"bc\"}X");
  EXPECT_EQ(r.consumed, bytes.size());
  // Every prefix is incomplete, not an error.
  for (size_t n = bytes.find("\r\n\r\n") + 4; n < bytes.size(); ++n) {
    EXPECT_EQ(Parse(bytes.substr(0, n)).kind, HttpParseResult::kIncomplete) << n;
  }
}

TEST(HttpParserTest, RefusesMalformedOrOversizedChunks) {
  const std::string head = "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";
  ExpectError(head + "zz\r\n", 400, "malformed chunk size 'zz'");
  ExpectError(head + "3\r\nabcX\r\n", 400, "not followed by CRLF");
  HttpLimits limits;
  limits.max_body_bytes = 10;
  ExpectError(head + "6\r\nabcdef\r\n6\r\n", 413, "chunked body exceeds the limit of 10", limits);
  ExpectError("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400, "HTTP/1.0");
  limits.max_header_bytes = 100;
  ExpectError(head + "1;" + std::string(50, 'x') + "\r\na\r\n1;" + std::string(50, 'x') + "\r\n",
              413, "chunked request exceeds 110 bytes on the wire", limits);
}

}  // namespace
}  // namespace splitspec::coordinator::http
