// Fuzz target: the front door's HTTP/1.1 request parser (coordinator/http/http_parser.h).
//
// The input is a byte stream as a connection would receive it. The first byte
// picks the size of the pieces it is fed in (1 to 64 bytes); the rest is the
// stream. Properties, beyond "no crash, no memory error":
//   - fed in pieces, the parser reaches the same verdicts as fed the whole
//     stream at once (same requests, same ends, same error statuses in kind);
//   - each request it accepts ends where ParseHttpRequest says, and pipelined
//     requests are parsed one after another after TakeRequest;
//   - its work is linear: bytes_examined() <= 2 * bytes taken;
//   - whatever it accepts, Boost.Beast's parser reads as the same request
//     ending at the same byte (tests/testing/http_reference_parser.h): no
//     framing a second parser could read differently.
// Small limits so that the 413 / 431 paths are reached.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "coordinator/http/http_parser.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/testing/http_reference_parser.h"

namespace {

using splitspec::coordinator::http::HttpLimits;
using splitspec::coordinator::http::HttpParseResult;
using splitspec::coordinator::http::HttpRequest;
using splitspec::coordinator::http::HttpRequestParser;

constexpr HttpLimits kLimits = {.max_header_bytes = 512, .max_headers = 16, .max_body_bytes = 4096};

struct Verdict {
  HttpRequestParser::Status status;
  std::vector<HttpRequest> requests;
  std::vector<size_t> ends;  // stream offset where each request ended
};

bool SameRequest(const HttpRequest& a, const HttpRequest& b) {
  return a.method == b.method && a.target == b.target && a.path == b.path &&
         a.version_minor == b.version_minor && a.headers == b.headers && a.body == b.body;
}

// Feeds `stream` in pieces of `piece` bytes, taking each request as it completes.
Verdict FeedInPieces(absl::string_view stream, size_t piece) {
  HttpRequestParser parser(kLimits);
  Verdict verdict;
  size_t pos = 0;    // bytes of `stream` taken
  size_t given = 0;  // bytes of `stream` offered (the current piece ends there)
  while (true) {
    if (pos == given) {
      if (given == stream.size()) break;
      given = std::min(stream.size(), given + piece);
    }
    pos += parser.Feed(stream.substr(pos, given - pos));
    FUZZ_CHECK(parser.bytes_examined() <= 2 * pos, "parser work is not linear");
    if (parser.status() == HttpRequestParser::kRequest) {
      verdict.requests.push_back(parser.TakeRequest());
      verdict.ends.push_back(pos);
      continue;
    }
    if (parser.status() == HttpRequestParser::kError) break;
  }
  verdict.status = parser.status();
  return verdict;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t piece = 1 + data[0] % 64;
  const absl::string_view stream(reinterpret_cast<const char*>(data) + 1, size - 1);

  const Verdict whole = FeedInPieces(stream, stream.size() + 1);
  const Verdict pieces = FeedInPieces(stream, piece);
  FUZZ_CHECK(whole.status == pieces.status, "verdict depends on how the bytes were split");
  FUZZ_CHECK(whole.requests.size() == pieces.requests.size(), "request count depends on split");
  for (size_t i = 0; i < whole.requests.size(); ++i) {
    FUZZ_CHECK(whole.ends[i] == pieces.ends[i], "request end depends on split");
    FUZZ_CHECK(SameRequest(whole.requests[i], pieces.requests[i]), "request depends on split");
  }

  // ParseHttpRequest reads the first request of the stream the same way.
  const HttpParseResult first = ParseHttpRequest(stream, kLimits);
  if (!whole.requests.empty()) {
    FUZZ_CHECK(first.kind == HttpParseResult::kRequest, "ParseHttpRequest disagrees");
    FUZZ_CHECK(first.consumed == whole.ends[0], "ParseHttpRequest ends elsewhere");
    FUZZ_CHECK(SameRequest(first.request, whole.requests[0]), "ParseHttpRequest reads otherwise");
    FUZZ_CHECK(first.request.body.size() <= kLimits.max_body_bytes, "body over the limit");
    const std::string disagreement =
        splitspec::coordinator::http::FramingDisagreement(stream, kLimits);
    FUZZ_CHECK(disagreement.empty(), disagreement.c_str());
  } else if (first.kind == HttpParseResult::kError) {
    FUZZ_CHECK(first.error_status >= 400 && first.error_status <= 505, "odd error status");
    FUZZ_CHECK(!first.error_reason.empty(), "error without a reason");
  }
  return 0;
}
