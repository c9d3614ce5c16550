// The front door's HTTP parser against an independent one: Boost.Beast's
// http::request_parser (tests/testing/http_reference_parser.h). The property
// that matters for request smuggling is agreement on framing: whenever our
// parser accepts a request, Beast accepts the same bytes as the same request
// (method, target, fields, body) ending at the same byte. Our parser may be
// stricter (it refuses what Beast tolerates: obs-fold, a missing Host, ...),
// never looser. Checked on a corpus of smuggling shapes and on thousands of
// seeded mutations of valid requests (the HTTP fuzz target checks the same
// property on what libFuzzer makes).
#include <random>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "coordinator/http/http_parser.h"
#include "gtest/gtest.h"
#include "tests/testing/http_reference_parser.h"

namespace splitspec::coordinator::http {
namespace {

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
      "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nhiGET /b HTTP/1.1\r\nHost: "
      "h\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: h\r\nX-Obs: caf\xc3\xa9\r\nX-Empty:\r\n\r\n",
  };
}

TEST(HttpParserDifferentialTest, ValidRequestsReadTheSameInBothParsers) {
  for (const std::string& bytes : ValidRequests()) {
    const HttpParseResult ours = ParseHttpRequest(bytes, kLimits);
    ASSERT_EQ(ours.kind, HttpParseResult::kRequest) << absl::CEscape(bytes) << ours.error_reason;
    const ReferenceVerdict beast = ReferenceParse(bytes, kLimits);
    ASSERT_EQ(beast.kind, ReferenceVerdict::kRequest) << absl::CEscape(bytes) << beast.error;
    EXPECT_EQ(FramingDisagreement(bytes, kLimits), "") << absl::CEscape(bytes);
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
    const ReferenceVerdict beast = ReferenceParse(c.bytes, kLimits);
    EXPECT_EQ(beast.kind == ReferenceVerdict::kError, c.beast_refuses)
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
    const std::string disagreement = FramingDisagreement(bytes, kLimits);
    ASSERT_EQ(disagreement, "") << absl::CEscape(bytes);
    if (ParseHttpRequest(bytes, kLimits).kind == HttpParseResult::kRequest) ++accepted;
  }
  // The check is only as good as the accepted mutations it compared.
  EXPECT_GT(accepted, 2000);
}

}  // namespace
}  // namespace splitspec::coordinator::http
