// HTTP/1.1 request parsing (RFC 9112) with limits, for the front door: an
// incremental parser that lives on the connection and reads each byte once.
//
//   HttpRequestParser parser(limits);            // one per connection
//   size_t taken = parser.Feed(bytes_just_read);  // the bytes after those fed before
//   switch (parser.status()) {
//     case HttpRequestParser::kIncomplete: read more bytes, Feed them
//     case HttpRequestParser::kRequest:    handle parser.TakeRequest(); bytes_just_read past
//                                          `taken` start the next request (pipelining)
//     case HttpRequestParser::kError:      answer error_status() with error_reason(), close
//   }
//
// The parsed head, the body so far and the chunk decoder's state are kept
// between Feed calls, so a request that arrives in N pieces costs time linear
// in its size, not in N times its size (bytes_examined() counts the work).
//
// Accepted: origin-form targets ("/path?query"), HTTP/1.0 and HTTP/1.1, CRLF
// line ends, bodies framed by Content-Length (none means an empty body) or,
// in HTTP/1.1, by "Transfer-Encoding: chunked" (request.body is the decoded
// body; chunk extensions and trailer fields are checked against RFC 9112's
// grammar, then dropped). Header values are trimmed of spaces and tabs only.
// Refused (kError, the reason names the part at fault):
//   400  a malformed request line, header line, header name or value, or
//        Content-Length; a bare CR or a bare LF (not part of CRLF) anywhere in
//        the head, a chunk-size line or the trailer section; a control
//        character (other than HTAB) in a header value; obsolete line folding;
//        an HTTP/1.1 request without Host, or with two Host fields; more than
//        one Content-Length field; Content-Length together with
//        Transfer-Encoding; Transfer-Encoding in HTTP/1.0; a Connection value
//        that is not a token list; Content-Length, Transfer-Encoding or Host in
//        the trailer section; a chunk size that is not hexadecimal; a chunk
//        extension outside
//          chunk-ext = *( BWS ";" BWS ext-name [ BWS "=" BWS ext-val ] )
//          ext-name = token, ext-val = token / quoted-string;
//        chunk data not followed by CRLF; a chunk-size line over 1024 bytes
//   413  Content-Length, or the decoded chunked body, above limits.max_body_bytes;
//        a chunked request of more than max_header_bytes + max_body_bytes on the wire
//   431  a header (or trailer) section above limits.max_header_bytes, or more than
//        limits.max_headers fields
//   501  a Transfer-Encoding other than one "chunked"
//   505  an HTTP version other than 1.0 / 1.1
// After kError the parser takes no more bytes.
//
// Thread safety: one thread at a time per parser (the server's I/O thread).
#ifndef SPLITSPEC_COORDINATOR_HTTP_HTTP_PARSER_H_
#define SPLITSPEC_COORDINATOR_HTTP_HTTP_PARSER_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "coordinator/http/http_message.h"

namespace splitspec::coordinator::http {

struct HttpLimits {
  size_t max_header_bytes = 16 * 1024;      // request line + headers + blank line
  size_t max_headers = 100;                 // header fields
  size_t max_body_bytes = 8 * 1024 * 1024;  // Content-Length, or the decoded chunked body
};

// The longest chunk-size line (size, extensions, CRLF) accepted.
inline constexpr size_t kMaxChunkLineBytes = 1024;

class HttpRequestParser {
 public:
  enum Status { kIncomplete, kRequest, kError };

  explicit HttpRequestParser(const HttpLimits& limits);

  // Parses `data`, the bytes that follow those fed before. Stops after the
  // last byte of a request (status() kRequest: the rest of `data` belongs to
  // the next request; feed it again after TakeRequest) or at the byte at
  // fault (kError). Returns how many bytes of `data` it took. With status()
  // kRequest or kError it takes nothing.
  size_t Feed(absl::string_view data);

  Status status() const { return status_; }
  // True while a request has begun (a byte of it was taken) and is not finished.
  bool InRequest() const { return status_ == kIncomplete && request_bytes_ > 0; }

  // The request, and the parser reset for the next one.
  // REQUIRES: status() == kRequest.
  HttpRequest TakeRequest();

  int error_status() const { return error_status_; }                 // kError
  const std::string& error_reason() const { return error_reason_; }  // kError

  // Every byte the parser has looked at or copied since it was made, each time
  // it did (a scan for the end of a line, a check of the line, a copy of body
  // bytes): a deterministic measure of its work, for tests and metrics.
  uint64_t bytes_examined() const { return bytes_examined_; }

 private:
  enum class Phase {
    kRequestLine,
    kHeaderLine,
    kBody,           // Content-Length bytes
    kChunkSizeLine,  // chunk size [extensions] CRLF
    kChunkData,
    kChunkDataCr,  // the CR after chunk data
    kChunkDataLf,  // the LF after chunk data
    kTrailerLine,
    kDone,
  };

  // Appends bytes of `data` to line_ up to and including an LF. Returns the
  // bytes taken; *complete when line_ now ends with LF.
  size_t TakeLine(absl::string_view data, bool* complete);
  // line_ without its CRLF, or an error (bare LF / bare CR) naming `where`.
  bool LineContent(absl::string_view where, absl::string_view* content);
  void OnLine();  // a complete line_ in a line phase
  void OnRequestLine(absl::string_view line);
  void OnHeaderLine(absl::string_view line);
  void OnHeadEnd();
  void OnChunkSizeLine(absl::string_view line);
  void OnTrailerLine(absl::string_view line);
  void Fail(int status, std::string reason);

  const HttpLimits limits_;
  Status status_ = kIncomplete;
  Phase phase_ = Phase::kRequestLine;
  HttpRequest request_;
  std::string line_;          // the line being read, up to and including its LF
  size_t request_bytes_ = 0;  // bytes of this request taken so far
  size_t head_bytes_ = 0;     // of the head, up to the end of line_
  size_t trailer_bytes_ = 0;  // of the trailer section, up to the end of line_
  // kBody: Content-Length bytes still to come; kChunkData: bytes of the chunk still to come.
  uint64_t body_remaining_ = 0;
  bool chunked_ = false;
  int error_status_ = 0;
  std::string error_reason_;
  uint64_t bytes_examined_ = 0;
};

// The outcome of parsing the first request of a whole buffer.
struct HttpParseResult {
  enum Kind { kIncomplete, kRequest, kError };
  Kind kind = kIncomplete;
  HttpRequest request;   // kRequest
  size_t consumed = 0;   // kRequest: bytes of `buffer` this request took
  int error_status = 0;  // kError
  std::string error_reason;
};

// The first request of `buffer`, through one HttpRequestParser fed the whole
// buffer at once (tests, fuzzing and the differential check use it; the
// server feeds a parser per connection as bytes arrive).
HttpParseResult ParseHttpRequest(absl::string_view buffer, const HttpLimits& limits);

}  // namespace splitspec::coordinator::http

#endif  // SPLITSPEC_COORDINATOR_HTTP_HTTP_PARSER_H_
