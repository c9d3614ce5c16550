#include "coordinator/http/http_message.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace splitspec::coordinator::http {
namespace {

// True if the comma-separated `list` holds `token` (case-insensitive).
bool ListHasToken(absl::string_view list, absl::string_view token) {
  for (absl::string_view item : absl::StrSplit(list, ',')) {
    if (absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(item), token)) return true;
  }
  return false;
}

void AppendHeaders(const HttpHeaders& headers, std::string* out) {
  for (const auto& [name, value] : headers) absl::StrAppend(out, name, ": ", value, "\r\n");
}

}  // namespace

bool EqualsIgnoreCase(absl::string_view a, absl::string_view b) {
  return absl::EqualsIgnoreCase(a, b);
}

const std::string* HttpRequest::FindHeader(absl::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (absl::EqualsIgnoreCase(key, name)) return &value;
  }
  return nullptr;
}

bool HttpRequest::KeepAlive() const {
  const std::string* connection = FindHeader("Connection");
  if (version_minor == 0) return connection != nullptr && ListHasToken(*connection, "keep-alive");
  return connection == nullptr || !ListHasToken(*connection, "close");
}

HttpResponse HttpResponse::Json(int status, std::string body) {
  return HttpResponse{status, {{"Content-Type", "application/json"}}, std::move(body)};
}

HttpResponse HttpResponse::Text(int status, std::string body, std::string content_type) {
  return HttpResponse{status, {{"Content-Type", std::move(content_type)}}, std::move(body)};
}

absl::string_view StatusReason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 411:
      return "Length Required";
    case 413:
      return "Content Too Large";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Unknown";
  }
}

std::string SerializeResponseHead(const HttpResponse& response, bool keep_alive) {
  std::string out =
      absl::StrCat("HTTP/1.1 ", response.status, " ", StatusReason(response.status), "\r\n");
  AppendHeaders(response.headers, &out);
  absl::StrAppend(&out, "Content-Length: ", response.body.size(), "\r\n");
  absl::StrAppend(&out, "Connection: ", keep_alive ? "keep-alive" : "close", "\r\n\r\n");
  return out;
}

std::string SerializeStreamHead(const HttpResponse& response, bool chunked, bool keep_alive) {
  std::string out =
      absl::StrCat("HTTP/1.1 ", response.status, " ", StatusReason(response.status), "\r\n");
  AppendHeaders(response.headers, &out);
  if (chunked) out += "Transfer-Encoding: chunked\r\n";
  absl::StrAppend(&out, "Connection: ", keep_alive && chunked ? "keep-alive" : "close", "\r\n\r\n");
  return out;
}

std::string EncodeChunk(absl::string_view data) {
  if (data.empty()) return "";
  return absl::StrCat(absl::Hex(data.size()), "\r\n", data, "\r\n");
}

std::string LastChunk() { return "0\r\n\r\n"; }

}  // namespace splitspec::coordinator::http
