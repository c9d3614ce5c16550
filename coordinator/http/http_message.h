// HTTP/1.1 messages as the front door sees them: a parsed request and a
// response to serialize. Plain data; no sockets.
//
//   HttpResponse response = HttpResponse::Json(200, R"({"ok":true})");
//   response.headers.push_back({"Retry-After", "1"});
//   std::string bytes = SerializeResponseHead(response, /*keep_alive=*/true) + response.body;
//
// Thread safety: plain values.
#ifndef SPLITSPEC_COORDINATOR_HTTP_HTTP_MESSAGE_H_
#define SPLITSPEC_COORDINATOR_HTTP_HTTP_MESSAGE_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace splitspec::coordinator::http {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;     // "GET", "POST", ... (case as sent; methods are case-sensitive)
  std::string target;     // request-target as sent, e.g. "/v1/models?x=1"
  std::string path;       // target without the query string
  int version_minor = 1;  // HTTP/1.<minor>; only 1.0 and 1.1 are accepted
  HttpHeaders headers;    // names as sent, values trimmed of surrounding blanks
  std::string body;

  // The first header named `name` (ASCII case-insensitive), or nullptr.
  const std::string* FindHeader(absl::string_view name) const;
  // HTTP/1.1 keeps the connection open unless "Connection: close"; HTTP/1.0
  // closes it unless "Connection: keep-alive".
  bool KeepAlive() const;
};

struct HttpResponse {
  int status = 200;
  HttpHeaders headers;  // Content-Length, Connection and Date are added on serialization
  std::string body;

  static HttpResponse Json(int status, std::string body);
  static HttpResponse Text(int status, std::string body,
                           std::string content_type = "text/plain; charset=utf-8");
};

// "OK", "Bad Request", ...; "Unknown" for codes the server never sends.
absl::string_view StatusReason(int status);

// Status line and headers of a response with a body of body.size() bytes,
// ending with the blank line.
std::string SerializeResponseHead(const HttpResponse& response, bool keep_alive);

// Status line and headers of a streamed response (Transfer-Encoding: chunked
// when `chunked`, else the body runs until the connection closes); the
// response's body is ignored.
std::string SerializeStreamHead(const HttpResponse& response, bool chunked, bool keep_alive);

// One chunk of chunked transfer coding ("<hex size>\r\n<data>\r\n"); an empty
// `data` gives nothing (an empty chunk would end the body).
std::string EncodeChunk(absl::string_view data);
// The last chunk that ends a chunked body: "0\r\n\r\n".
std::string LastChunk();

// ASCII case-insensitive equality (header names, tokens).
bool EqualsIgnoreCase(absl::string_view a, absl::string_view b);

}  // namespace splitspec::coordinator::http

#endif  // SPLITSPEC_COORDINATOR_HTTP_HTTP_MESSAGE_H_
