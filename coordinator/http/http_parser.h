// HTTP/1.1 request parsing (RFC 9112) with limits, for the front door.
//
//   HttpParseResult r = ParseHttpRequest(buffer, limits);
//   switch (r.kind) {
//     case HttpParseResult::kIncomplete: read more bytes, call again with the whole buffer
//     case HttpParseResult::kRequest:    handle r.request; erase r.consumed bytes (pipelining:
//                                        the rest of the buffer is the next request)
//     case HttpParseResult::kError:      answer r.error_status with r.error_reason, close
//   }
//
// Accepted: origin-form targets ("/path?query"), HTTP/1.0 and HTTP/1.1, CRLF
// line ends, bodies framed by Content-Length (none means an empty body) or,
// in HTTP/1.1, by "Transfer-Encoding: chunked" (request.body is the decoded
// body; chunk extensions and trailer fields are ignored).
// Refused (kError, the reason names the part at fault):
//   400  a malformed request line, header line, header name or value, or
//        Content-Length or chunk; obsolete line folding; an HTTP/1.1 request
//        without Host; Content-Length together with Transfer-Encoding;
//        Transfer-Encoding in HTTP/1.0
//   413  Content-Length, or the decoded chunked body, above limits.max_body_bytes;
//        an unfinished chunked request of max_header_bytes + max_body_bytes or more
//   431  a header section above limits.max_header_bytes or with more than
//        limits.max_headers fields
//   501  a Transfer-Encoding other than "chunked"
//   505  an HTTP version other than 1.0 / 1.1
//
// Thread safety: a pure function.
#ifndef SPLITSPEC_COORDINATOR_HTTP_HTTP_PARSER_H_
#define SPLITSPEC_COORDINATOR_HTTP_HTTP_PARSER_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"
#include "coordinator/http/http_message.h"

namespace splitspec::coordinator::http {

struct HttpLimits {
  size_t max_header_bytes = 16 * 1024;      // request line + headers + blank line
  size_t max_headers = 100;                 // header fields
  size_t max_body_bytes = 8 * 1024 * 1024;  // Content-Length, or the decoded chunked body
};

struct HttpParseResult {
  enum Kind { kIncomplete, kRequest, kError };
  Kind kind = kIncomplete;
  HttpRequest request;   // kRequest
  size_t consumed = 0;   // kRequest: bytes of `buffer` this request took
  int error_status = 0;  // kError
  std::string error_reason;
};

// Parses the first request of `buffer`.
HttpParseResult ParseHttpRequest(absl::string_view buffer, const HttpLimits& limits);

}  // namespace splitspec::coordinator::http

#endif  // SPLITSPEC_COORDINATOR_HTTP_HTTP_PARSER_H_
