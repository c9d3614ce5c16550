// An independent HTTP/1.1 request parser to check ours against: Boost.Beast's
// http::request_parser (Debian's libboost-dev, header-only; tests and fuzzing
// only, never the product).
//
//   std::string why = FramingDisagreement(bytes, limits);  // "" when they agree
//
// The property that matters for request smuggling is agreement on framing:
// whenever our parser (coordinator/http/http_parser.h) accepts a request,
// Beast accepts the same bytes as the same request (method, target, version,
// fields, body) ending at the same byte. Ours may be stricter, never looser.
//
// Thread safety: pure functions.
#ifndef SPLITSPEC_TESTS_TESTING_HTTP_REFERENCE_PARSER_H_
#define SPLITSPEC_TESTS_TESTING_HTTP_REFERENCE_PARSER_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"
#include "coordinator/http/http_message.h"
#include "coordinator/http/http_parser.h"

namespace splitspec::coordinator::http {

struct ReferenceVerdict {
  enum Kind { kIncomplete, kRequest, kError };
  Kind kind = kIncomplete;
  size_t consumed = 0;  // kRequest: bytes the first request took
  HttpRequest request;  // kRequest; headers include trailer fields (Beast keeps them)
  std::string error;    // kError: Beast's message
};

// Beast's reading of the first request of `bytes` (header and body limits as in `limits`).
ReferenceVerdict ReferenceParse(absl::string_view bytes, const HttpLimits& limits);

// "" if ParseHttpRequest refuses `bytes`, finds them incomplete, or accepts the
// same request as Beast; otherwise what differs.
std::string FramingDisagreement(absl::string_view bytes, const HttpLimits& limits);

}  // namespace splitspec::coordinator::http

#endif  // SPLITSPEC_TESTS_TESTING_HTTP_REFERENCE_PARSER_H_
