// The front door's HTTP/1.1 request parser: valid, incomplete, pipelined,
// malformed and oversized requests; strict line ends, header trimming and
// chunk extensions (request smuggling); incremental feeding at linear cost.
#include "coordinator/http/http_parser.h"

#include "absl/strings/str_cat.h"
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
              "more than one Content-Length header");
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

const std::string kChunkedHead = "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";

// RFC 9110 OWS is spaces and tabs: nothing else is trimmed, so a vertical tab
// or form feed next to "chunked" is a control character, not padding.
TEST(HttpParserTest, HeaderValuesAreTrimmedOfSpacesAndTabsOnly) {
  const HttpParseResult r = Parse("GET / HTTP/1.1\r\nHost: h\r\nX-A: \t v  w\t \r\n\r\n");
  ASSERT_EQ(r.kind, HttpParseResult::kRequest) << r.error_reason;
  EXPECT_EQ(*r.request.FindHeader("X-A"), "v  w");
  ExpectError("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: \vchunked\r\n\r\n", 400,
              "header Transfer-Encoding has a control character in its value");
  ExpectError("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\f\r\n\r\n", 400,
              "header Transfer-Encoding has a control character in its value");
  ExpectError("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: \v5\r\n\r\nhello", 400,
              "header Content-Length has a control character in its value");
}

TEST(HttpParserTest, BareCrInTheHeadIsRefused) {
  // The CVE-2025-22871 shape: "chunked<CR>" must not read as "chunked".
  ExpectError("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\r\n\r\n0\r\n\r\n", 400,
              "bare CR (a CR not followed by LF) in the header section");
  ExpectError("GET / HTTP/1.1\r\nHost: h\rX-A: b\r\n\r\n", 400, "bare CR");
  ExpectError("GET / HTTP/1.1\r\r\nHost: h\r\n\r\n", 400,
              "bare CR (a CR not followed by LF) in the request line");
}

TEST(HttpParserTest, BareLfInTheHeadIsRefused) {
  ExpectError("GET / HTTP/1.1\nHost: h\r\n\r\n", 400,
              "bare LF (a line end without CR) in the request line");
  ExpectError("GET / HTTP/1.1\r\nHost: h\nX-A: b\r\n\r\n", 400,
              "bare LF (a line end without CR) in the header section");
  ExpectError("GET / HTTP/1.1\r\nHost: h\r\n\n", 400, "bare LF");
}

TEST(HttpParserTest, BareCrOrLfInChunkedFramingIsRefused) {
  ExpectError(kChunkedHead + "5\nhello\r\n0\r\n\r\n", 400,
              "bare LF (a line end without CR) in a chunk size line");
  ExpectError(kChunkedHead + "5\r\nhello\n0\r\n\r\n", 400, "chunk data not followed by CRLF");
  ExpectError(kChunkedHead + "5\r\nhello\r0\r\n\r\n", 400, "chunk data not followed by CRLF");
  ExpectError(kChunkedHead + "0\n\r\n", 400,
              "bare LF (a line end without CR) in a chunk size line");
  ExpectError(kChunkedHead + "0\r\n\n", 400,
              "bare LF (a line end without CR) in the trailer section");
  ExpectError(kChunkedHead + "5\r;a=b\r\nhello\r\n0\r\n\r\n", 400,
              "bare CR (a CR not followed by LF) in a chunk size line");
  ExpectError(kChunkedHead + "0\r\nX: a\rb\r\n\r\n", 400,
              "bare CR (a CR not followed by LF) in the trailer section");
}

// chunk-ext = *( BWS ";" BWS ext-name [ BWS "=" BWS ext-val ] ), token / quoted-string.
TEST(HttpParserTest, ChunkExtensionsFollowTheGrammar) {
  for (const std::string ext : {";a", ";a=b", " ; a = b", "\t;a\t=\tb", ";a;b=c;d",
                                ";a=\"quoted \\\" pair\"", ";a=\"\"", ";a=\"\x80\""}) {
    const HttpParseResult r = Parse(kChunkedHead + "5" + ext + "\r\nhello\r\n0" + ext + "\r\n\r\n");
    ASSERT_EQ(r.kind, HttpParseResult::kRequest) << ext << ": " << r.error_reason;
    EXPECT_EQ(r.request.body, "hello") << ext;
  }
  for (const std::string ext : {";", "; =x", ";a=", ";=b", ";a=\"open", ";a=b c", "junk", " ",
                                ";a ", ";a=b;", ";a@=b", ";a=\"\x01\"", ";a=b=c", ",a"}) {
    ExpectError(kChunkedHead + "5" + ext + "\r\nhello\r\n0\r\n\r\n", 400,
                "malformed chunk extension");
  }
}

TEST(HttpParserTest, MalformedChunkSizesAreRefused) {
  ExpectError(kChunkedHead + " 5\r\nhello\r\n0\r\n\r\n", 400, "malformed chunk size ' 5'");
  ExpectError(kChunkedHead + "-1\r\n", 400, "malformed chunk size '-1'");
  ExpectError(kChunkedHead + "\r\n", 400, "malformed chunk size ''");
  ExpectError(kChunkedHead + "0x5\r\nhello\r\n0\r\n\r\n", 400, "malformed chunk extension 'x5'");
  ExpectError(kChunkedHead + "5 \r\nhello\r\n0\r\n\r\n", 400, "malformed chunk extension ' '");
  ExpectError(kChunkedHead + "fffffffffffffffffffff\r\n", 413, "chunked body exceeds the limit");
  ExpectError(kChunkedHead + "1;" + std::string(kMaxChunkLineBytes, 'a') + "\r\n", 400,
              "chunk size line longer than 1024 bytes");
  ExpectError(kChunkedHead + "0\r\nBad Name: x\r\n\r\n", 400, "malformed trailer field");
  ExpectError(kChunkedHead + "0\r\n folded\r\n\r\n", 400, "obsolete line folding in the trailer");
}

// The framing headers read one way only (RFC 9112 §6.3): anything a second
// parser could read differently is refused.
TEST(HttpParserTest, AmbiguousFramingIsRefused) {
  ExpectError("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
              400, "more than one Content-Length header");
  ExpectError("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5, 5\r\n\r\nhello", 400,
              "malformed Content-Length '5, 5'");
  ExpectError("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: +5\r\n\r\nhello", 400,
              "malformed Content-Length '+5'");
  ExpectError(
      "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", 400,
      "Content-Length and Transfer-Encoding together are ambiguous");
  ExpectError(
      "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: "
      "chunked\r\n\r\n",
      501, "only 'chunked'");
  ExpectError("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", 501,
              "only 'chunked'");
  ExpectError("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, "more than one Host header");
  ExpectError("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding : chunked\r\n\r\n", 400,
              "malformed header name");
}

// Found by the HTTP fuzz target against Boost.Beast (tests/fuzz/corpus/http_parser/
// regress-*): a Connection value that is not a token list (read for keep-alive),
// and framing fields in the trailer section, which Beast refuses and we accepted.
TEST(HttpParserTest, ConnectionMustBeATokenList) {
  ExpectError(
      "GET / HTTP/1.0\r\nConnection: keep\x96"
      "alive\r\n\r\n",
      400, "malformed Connection header 'keep\\226alive'");
  ExpectError("GET / HTTP/1.1\r\nHost: h\r\nConnection: a b\r\n\r\n", 400,
              "malformed Connection header");
  const HttpParseResult r = Parse("GET / HTTP/1.1\r\nHost: h\r\nConnection: , x ,close\r\n\r\n");
  ASSERT_EQ(r.kind, HttpParseResult::kRequest) << r.error_reason;
  EXPECT_FALSE(r.request.KeepAlive());
}

TEST(HttpParserTest, FramingFieldsInTheTrailerAreRefused) {
  ExpectError(kChunkedHead + "0\r\nTransfer-Encoding: chunked\r\n\r\n", 400,
              "Transfer-Encoding in the trailer section");
  ExpectError(kChunkedHead + "0\r\ncontent-length: 5\r\n\r\n", 400,
              "Content-Length in the trailer section");
  ExpectError(kChunkedHead + "0\r\nHost: other\r\n\r\n", 400, "Host in the trailer section");
  ExpectError(kChunkedHead + "0\r\nConnection: a b\r\n\r\n", 400, "malformed Connection trailer");
}

// Feeds `bytes` in pieces of `piece` bytes, as reads from a socket would.
struct Fed {
  HttpRequestParser::Status status;
  HttpRequest request;
  size_t taken = 0;
  uint64_t examined = 0;
  std::string error_reason;
};
Fed FeedInPieces(const std::string& bytes, size_t piece, HttpLimits limits = {}) {
  HttpRequestParser parser(limits);
  Fed fed;
  for (size_t pos = 0; pos < bytes.size() && parser.status() == HttpRequestParser::kIncomplete;
       pos += piece) {
    fed.taken += parser.Feed(absl::string_view(bytes).substr(pos, piece));
  }
  fed.status = parser.status();
  fed.examined = parser.bytes_examined();
  fed.error_reason = parser.error_reason();
  if (fed.status == HttpRequestParser::kRequest) fed.request = parser.TakeRequest();
  return fed;
}

TEST(HttpParserTest, FeedingByteByByteGivesTheWholeBufferResult) {
  const std::vector<std::string> requests = {
      "GET /a?b HTTP/1.1\r\nHost: h\r\nX-A:  v \r\n\r\n",
      "POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello",
      kChunkedHead + "3;x=\"y\"\r\nabc\r\n2\r\nde\r\n0\r\nT: v\r\n\r\n",
      kChunkedHead + "3\r\nabc\n",
      "GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\r\n\r\n",
  };
  for (const std::string& bytes : requests) {
    const HttpParseResult whole = Parse(bytes + "GET /next");
    const Fed fed = FeedInPieces(bytes + "GET /next", 1);
    ASSERT_EQ(static_cast<int>(fed.status), static_cast<int>(whole.kind)) << bytes;
    if (whole.kind == HttpParseResult::kRequest) {
      EXPECT_EQ(fed.taken, whole.consumed) << bytes;
      EXPECT_EQ(fed.request.target, whole.request.target);
      EXPECT_EQ(fed.request.headers, whole.request.headers);
      EXPECT_EQ(fed.request.body, whole.request.body);
    } else {
      EXPECT_EQ(fed.error_reason, whole.error_reason);
    }
  }
}

TEST(HttpParserTest, ParserResetsForThePipelinedNextRequest) {
  const std::string first = kChunkedHead + "2\r\nhi\r\n0\r\n\r\n";
  const std::string second = "GET /b HTTP/1.1\r\nHost: h\r\n\r\n";
  const std::string both = first + second;
  HttpRequestParser parser(HttpLimits{});
  const size_t taken = parser.Feed(both);
  ASSERT_EQ(parser.status(), HttpRequestParser::kRequest) << parser.error_reason();
  EXPECT_EQ(taken, first.size());
  EXPECT_EQ(parser.Feed(both.substr(taken)), 0u);  // nothing more until the request is taken
  EXPECT_EQ(parser.TakeRequest().body, "hi");
  EXPECT_FALSE(parser.InRequest());
  EXPECT_EQ(parser.Feed(absl::string_view(both).substr(taken, 5)), 5u);
  EXPECT_TRUE(parser.InRequest());
  EXPECT_EQ(parser.Feed(absl::string_view(both).substr(taken + 5)), second.size() - 5);
  ASSERT_EQ(parser.status(), HttpRequestParser::kRequest);
  const HttpRequest next = parser.TakeRequest();
  EXPECT_EQ(next.path, "/b");
  EXPECT_EQ(next.body, "");
}

// The work for a request that arrives in 512-byte pieces is linear in its
// size: each byte is scanned at most twice (once for the line end, once when
// its line is checked) or copied once; re-parsing the buffer after each piece
// (what the parser did before) would examine ~size^2 / 1024 bytes here.
TEST(HttpParserTest, BodyInSmallPiecesCostsLinearWork) {
  const std::string body(1 << 20, 'x');
  std::string chunked = kChunkedHead;
  for (size_t pos = 0; pos < body.size(); pos += 1000) {
    const std::string chunk = body.substr(pos, 1000);
    absl::StrAppend(&chunked, absl::Hex(chunk.size()), ";n=v\r\n", chunk, "\r\n");
  }
  chunked += "0\r\n\r\n";
  const std::string by_length =
      absl::StrCat("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: ", body.size(), "\r\n\r\n", body);
  for (const std::string& bytes : {chunked, by_length}) {
    const Fed fed = FeedInPieces(bytes, 512);
    ASSERT_EQ(fed.status, HttpRequestParser::kRequest) << fed.error_reason;
    EXPECT_EQ(fed.request.body, body);
    EXPECT_EQ(fed.taken, bytes.size());
    EXPECT_LE(fed.examined, 2 * bytes.size());
    EXPECT_GE(fed.examined, bytes.size());
  }
}

}  // namespace
}  // namespace splitspec::coordinator::http
