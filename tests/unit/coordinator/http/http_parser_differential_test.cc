// The front door's HTTP parser against an independent one: Boost.Beast's
// http::request_parser (Debian's libboost-dev, used only here). The property
// that matters for request smuggling is agreement on framing: whenever our
// parser accepts a request, Beast accepts the same bytes as the same request
// (method, target, fields, body) ending at the same byte. Our parser may be
// stricter (it refuses what Beast tolerates: obs-fold, a missing Host, ...),
// never looser. Checked on a corpus of smuggling shapes and on thousands of
// seeded mutations of valid requests.
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include <boost/asio/buffer.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "coordinator/http/http_parser.h"
#include "gtest/gtest.h"

namespace splitspec::coordinator::http {
namespace {

namespace beast_http = boost::beast::http;

struct BeastVerdict {
  enum Kind { kIncomplete, kRequest, kError };
  Kind kind = kIncomplete;
  size_t consumed = 0;
  HttpRequest request;  // kRequest
  std::string error;    // kError
};

BeastVerdict BeastParse(const std::string& bytes, const HttpLimits& limits) {
  beast_http::request_parser<beast_http::string_body> parser;
  parser.eager(true);
  parser.header_limit(static_cast<uint32_t>(limits.max_header_bytes));
  parser.body_limit(limits.max_body_bytes);
  BeastVerdict verdict;
  size_t pos = 0;
  while (!parser.is_done()) {
    boost::beast::error_code ec;
    const size_t used =
        parser.put(boost::asio::const_buffer(bytes.data() + pos, bytes.size() - pos), ec);
    pos += used;
    if (ec == beast_http::error::need_more) {
      if (used == 0 || pos == bytes.size()) return verdict;  // incomplete
      continue;
    }
    if (ec) {
      verdict.kind = BeastVerdict::kError;
      verdict.error = ec.message();
      return verdict;
    }
    if (used == 0 && !parser.is_done()) return verdict;
  }
  const auto& message = parser.get();
  verdict.kind = BeastVerdict::kRequest;
  verdict.consumed = pos;
  verdict.request.method = std::string(message.method_string());
  verdict.request.target = std::string(message.target());
  verdict.request.version_minor = message.version() % 10;
  for (const auto& field : message) {
    verdict.request.headers.emplace_back(std::string(field.name_string()),
                                         std::string(field.value()));
  }
  verdict.request.body = message.body();
  return verdict;
}

// Our verdict on `bytes` is never looser than Beast's and, when both accept,
// they read the same request with the same end. Returns "" or what differs.
std::string Disagreement(const std::string& bytes, const HttpLimits& limits) {
  const HttpParseResult ours = ParseHttpRequest(bytes, limits);
  if (ours.kind != HttpParseResult::kRequest) return "";
  const BeastVerdict beast = BeastParse(bytes, limits);
  if (beast.kind != BeastVerdict::kRequest) {
    return absl::StrCat("we accept what Beast ", beast.kind == BeastVerdict::kError
                                                     ? "refuses (" + beast.error + ")"
                                                     : "finds incomplete");
  }
  if (beast.consumed != ours.consumed) {
    return absl::StrCat("request ends at byte ", ours.consumed, " for us, ", beast.consumed,
                        " for Beast");
  }
  if (beast.request.method != ours.request.method) return "methods differ";
  if (beast.request.target != ours.request.target) return "targets differ";
  if (beast.request.version_minor != ours.request.version_minor) return "versions differ";
  // Beast appends trailer fields to the header fields; we drop them.
  const HttpHeaders& beast_fields = beast.request.headers;
  if (beast_fields.size() < ours.request.headers.size() ||
      !std::equal(ours.request.headers.begin(), ours.request.headers.end(), beast_fields.begin())) {
    return "header fields differ";
  }
  if (beast.request.body != ours.request.body) return "bodies differ";
  return "";
}

const HttpLimits kLimits = {.max_header_bytes = 4096, .max_headers = 64, .max_body_bytes = 1 << 16};

const char kTe[] = "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";

// Valid requests, the seeds of the mutations below; each must be accepted by both.
std::vector<std::string> ValidRequests() {
  return {
      "GET / HTTP/1.1\r\nHost: h\r\n\r\n",
      "GET /v1/models?x=1 HTTP/1.1\r\nHost: localhost\r\nX-Test:  padded \t\r\n\r\n",
      "GET / HTTP/1.0\r\n\r\n",
      "POST /v1/completions HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\n{\"a\":\"bc\"}X",
      "POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n",
      absl::StrCat(kTe, "5\r\nhello\r\n0\r\n\r\n"),
      absl::StrCat(kTe, "5;a=b\r\nhello\r\n6 ; q=\"x;y\"\r\n world\r\n0\r\nT: v\r\n\r\n"),
      absl::StrCat(kTe, "00005\r\nhello\r\n000\r\n\r\n"),
      absl::StrCat(kTe, "A\r\n0123456789\r\n0\r\n\r\n"),
      "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nhiGET /b HTTP/1.1\r\nHost: h\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: h\r\nX-Obs: caf\xc3\xa9\r\nX-Empty:\r\n\r\n",
  };
}

TEST(HttpParserDifferentialTest, ValidRequestsReadTheSameInBothParsers) {
  for (const std::string& bytes : ValidRequests()) {
    const HttpParseResult ours = ParseHttpRequest(bytes, kLimits);
    ASSERT_EQ(ours.kind, HttpParseResult::kRequest) << absl::CEscape(bytes) << ours.error_reason;
    const BeastVerdict beast = BeastParse(bytes, kLimits);
    ASSERT_EQ(beast.kind, BeastVerdict::kRequest) << absl::CEscape(bytes) << beast.error;
    EXPECT_EQ(Disagreement(bytes, kLimits), "") << absl::CEscape(bytes);
  }
}

// Request-smuggling shapes. Each is refused by us; `beast_refuses` records
// what the reference does, so a change on either side shows up here.
struct SmugglingCase {
  std::string bytes;
  bool beast_refuses;
};

TEST(HttpParserDifferentialTest, SmugglingShapesAreRefused) {
  const std::vector<SmugglingCase> cases = {
      // Content-Length together with Transfer-Encoding (CL.TE / TE.CL)
      {"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n"
       "0\r\n\r\nX",
       true},
      // Transfer-Encoding with a bare CR, a vertical tab, a form feed
      {"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\r\n\r\n0\r\n\r\n", true},
      {"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: \vchunked\r\n\r\n0\r\n\r\n", true},
      {"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\f\r\n\r\n0\r\n\r\n", true},
      // obs-fold
      {"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: x\r\n chunked\r\n\r\n0\r\n\r\n", false},
      // duplicate Content-Length, equal and not
      {"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nA", false},
      {"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nAB", true},
      {"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1, 1\r\n\r\nA", false},
      // invalid chunk sizes
      {absl::StrCat(kTe, "-5\r\nhello\r\n0\r\n\r\n"), true},
      {absl::StrCat(kTe, "0x5\r\nhello\r\n0\r\n\r\n"), true},
      {absl::StrCat(kTe, " 5\r\nhello\r\n0\r\n\r\n"), true},
      {absl::StrCat(kTe, "fffffffffffffffff1\r\nhello\r\n0\r\n\r\n"), true},
      // invalid chunk extensions
      {absl::StrCat(kTe, "5;\r\nhello\r\n0\r\n\r\n"), true},
      {absl::StrCat(kTe, "5;a=\"open\r\nhello\r\n0\r\n\r\n"), false},
      {absl::StrCat(kTe, "5;a\x01\r\nhello\r\n0\r\n\r\n"), true},
      {absl::StrCat(kTe, "5 junk\r\nhello\r\n0\r\n\r\n"), true},
      // bare LF in the head and in chunked framing
      {"GET / HTTP/1.1\nHost: h\n\n", true},
      {"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\n\r\n", true},
      {absl::StrCat(kTe, "5\nhello\r\n0\r\n\r\n"), true},
      {absl::StrCat(kTe, "5\r\nhello\n0\r\n\r\n"), true},
      {absl::StrCat(kTe, "5\r\nhello\r\n0\n\n"), false},
      // two Host fields; Transfer-Encoding in HTTP/1.0
      {"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", false},
      {"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", false},
  };
  for (const SmugglingCase& c : cases) {
    const HttpParseResult ours = ParseHttpRequest(c.bytes, kLimits);
    EXPECT_EQ(ours.kind, HttpParseResult::kError) << absl::CEscape(c.bytes);
    const BeastVerdict beast = BeastParse(c.bytes, kLimits);
    EXPECT_EQ(beast.kind == BeastVerdict::kError, c.beast_refuses)
        << absl::CEscape(c.bytes) << " Beast: " << beast.error;
  }
}

// Seeded mutations of the valid requests (bytes inserted, replaced, deleted,
// from an alphabet of framing characters): whatever we accept, Beast reads
// the same way.
TEST(HttpParserDifferentialTest, MutatedRequestsNeverFrameDifferently) {
  const std::string alphabet = std::string("\r\n \t;=\":,0159aAfF-+\"\\\v\f\x80") + '\0';
  std::mt19937 rng(20261127);
  const std::vector<std::string> seeds = ValidRequests();
  int accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string bytes = seeds[rng() % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits && !bytes.empty(); ++e) {
      const size_t pos = rng() % bytes.size();
      const char c = alphabet[rng() % alphabet.size()];
      switch (rng() % 3) {
        case 0:
          bytes.insert(bytes.begin() + static_cast<std::ptrdiff_t>(pos), c);
          break;
        case 1:
          bytes[pos] = c;
          break;
        default:
          bytes.erase(pos, 1);
          break;
      }
    }
    const std::string disagreement = Disagreement(bytes, kLimits);
    ASSERT_EQ(disagreement, "") << absl::CEscape(bytes);
    if (ParseHttpRequest(bytes, kLimits).kind == HttpParseResult::kRequest) ++accepted;
  }
  // The check is only as good as the accepted mutations it compared.
  EXPECT_GT(accepted, 2000);
}

}  // namespace
}  // namespace splitspec::coordinator::http
