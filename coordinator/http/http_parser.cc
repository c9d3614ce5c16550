#include "coordinator/http/http_parser.h"

#include <algorithm>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace splitspec::coordinator::http {
namespace {

// RFC 9110 tchar.
bool IsTokenChar(char c) {
  if (absl::ascii_isalnum(static_cast<unsigned char>(c))) return true;
  switch (c) {
    case '!':
    case '#':
    case '$':
    case '%':
    case '&':
    case '\'':
    case '*':
    case '+':
    case '-':
    case '.':
    case '^':
    case '_':
    case '`':
    case '|':
    case '~':
      return true;
    default:
      return false;
  }
}

bool IsToken(absl::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!IsTokenChar(c)) return false;
  }
  return true;
}

// Field values: visible characters, obs-text, SP and HTAB; no other controls.
bool IsFieldValue(absl::string_view s) {
  for (char c : s) {
    const unsigned char u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\t') || u == 0x7f) return false;
  }
  return true;
}

bool IsTargetChar(char c) {
  const unsigned char u = static_cast<unsigned char>(c);
  return u > 0x20 && u < 0x7f;
}

HttpParseResult Error(int status, std::string reason) {
  HttpParseResult result;
  result.kind = HttpParseResult::kError;
  result.error_status = status;
  result.error_reason = std::move(reason);
  return result;
}

// Parses "METHOD SP target SP HTTP/1.x" into `request`; an error result on failure.
std::optional<HttpParseResult> ParseRequestLine(absl::string_view line, HttpRequest* request) {
  const std::vector<absl::string_view> parts = absl::StrSplit(line, ' ');
  if (parts.size() != 3) {
    return Error(400, "malformed request line (expected 'METHOD /path HTTP/1.1')");
  }
  if (!IsToken(parts[0]))
    return Error(400, absl::StrCat("malformed method '", absl::CEscape(parts[0]), "'"));
  const absl::string_view target = parts[1];
  if (target.empty() || target[0] != '/') {
    return Error(400, "request target must be an absolute path starting with '/'");
  }
  for (char c : target) {
    if (!IsTargetChar(c)) return Error(400, "request target contains a control character or space");
  }
  const absl::string_view version = parts[2];
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || !absl::ascii_isdigit(version[5]) ||
      version[6] != '.' || !absl::ascii_isdigit(version[7])) {
    return Error(400, absl::StrCat("malformed HTTP version '", absl::CEscape(version), "'"));
  }
  if (version[5] != '1' || (version[7] != '0' && version[7] != '1')) {
    return Error(505,
                 absl::StrCat("HTTP version ", version.substr(5), " is not supported (use 1.1)"));
  }
  request->method = std::string(parts[0]);
  request->target = std::string(target);
  request->path = std::string(target.substr(0, target.find('?')));
  request->version_minor = version[7] - '0';
  return std::nullopt;
}

std::optional<HttpParseResult> ParseHeaderLine(absl::string_view line, HttpRequest* request) {
  if (line[0] == ' ' || line[0] == '\t')
    return Error(400, "obsolete header line folding is not accepted");
  const size_t colon = line.find(':');
  if (colon == absl::string_view::npos) {
    return Error(
        400, absl::StrCat("header line without ':' ('", absl::CEscape(line.substr(0, 40)), "')"));
  }
  const absl::string_view name = line.substr(0, colon);
  if (!IsToken(name))
    return Error(400, absl::StrCat("malformed header name '", absl::CEscape(name), "'"));
  const absl::string_view value = absl::StripAsciiWhitespace(line.substr(colon + 1));
  if (!IsFieldValue(value))
    return Error(400, absl::StrCat("header ", name, " has a control character in its value"));
  request->headers.emplace_back(std::string(name), std::string(value));
  return std::nullopt;
}

// How the headers frame the body: a length (Content-Length, or none: 0) or
// the chunked coding; an error result for anything else.
std::optional<HttpParseResult> BodyFraming(const HttpRequest& request, const HttpLimits& limits,
                                           size_t* length, bool* chunked) {
  *length = 0;
  *chunked = false;
  bool seen = false;
  for (const auto& [name, value] : request.headers) {
    if (absl::EqualsIgnoreCase(name, "Transfer-Encoding")) {
      if (request.FindHeader("Content-Length") != nullptr) {
        return Error(400, "Content-Length and Transfer-Encoding together are ambiguous");
      }
      if (request.version_minor == 0) return Error(400, "Transfer-Encoding in an HTTP/1.0 request");
      if (*chunked || !absl::EqualsIgnoreCase(value, "chunked")) {
        return Error(501,
                     absl::StrCat("Transfer-Encoding '", absl::CEscape(value),
                                  "' is not supported (only 'chunked'); or send Content-Length"));
      }
      *chunked = true;
      continue;
    }
    if (!absl::EqualsIgnoreCase(name, "Content-Length")) continue;
    uint64_t parsed = 0;
    const bool digits = !value.empty() && std::all_of(value.begin(), value.end(), [](char c) {
      return absl::ascii_isdigit(c);
    });
    if (!digits || !absl::SimpleAtoi(value, &parsed)) {
      return Error(400, absl::StrCat("malformed Content-Length '", absl::CEscape(value), "'"));
    }
    if (seen && parsed != *length) return Error(400, "conflicting Content-Length headers");
    if (parsed > limits.max_body_bytes) {
      return Error(413, absl::StrCat("body of ", parsed, " bytes exceeds the limit of ",
                                     limits.max_body_bytes));
    }
    *length = static_cast<size_t>(parsed);
    seen = true;
  }
  return std::nullopt;
}

constexpr size_t kMaxChunkLine = 1024;  // chunk size, extensions and CRLF

// Decodes a chunked body (RFC 9112 §7.1) from the start of `data` into
// *body; *consumed: the bytes it took, trailer section included. nullopt
// with *consumed == 0: incomplete. Chunk extensions and trailers are read and
// ignored.
std::optional<HttpParseResult> DecodeChunked(absl::string_view data, const HttpLimits& limits,
                                             std::string* body, size_t* consumed) {
  *consumed = 0;
  size_t pos = 0;
  while (true) {
    const size_t line_end = data.find("\r\n", pos);
    if (line_end == absl::string_view::npos) {
      if (data.size() - pos > kMaxChunkLine) return Error(400, "chunk size line too long");
      return std::nullopt;
    }
    if (line_end - pos > kMaxChunkLine) return Error(400, "chunk size line too long");
    absl::string_view size_text = data.substr(pos, line_end - pos);
    size_text = size_text.substr(0, size_text.find(';'));  // chunk extensions
    size_text = absl::StripTrailingAsciiWhitespace(size_text);
    uint64_t size = 0;
    if (size_text.empty() || size_text.size() > 15 ||
        !std::all_of(size_text.begin(), size_text.end(),
                     [](char c) { return absl::ascii_isxdigit(c); }) ||
        !absl::SimpleHexAtoi(size_text, &size)) {
      return Error(
          400, absl::StrCat("malformed chunk size '", absl::CEscape(size_text.substr(0, 40)), "'"));
    }
    pos = line_end + 2;
    if (size == 0) break;
    if (body->size() + size > limits.max_body_bytes) {
      return Error(
          413, absl::StrCat("chunked body exceeds the limit of ", limits.max_body_bytes, " bytes"));
    }
    if (data.size() - pos < size + 2) return std::nullopt;
    if (data.substr(pos + size, 2) != "\r\n") return Error(400, "chunk data not followed by CRLF");
    body->append(data.data() + pos, size);
    pos += size + 2;
  }
  // The trailer section: field lines up to an empty line.
  while (true) {
    const size_t line_end = data.find("\r\n", pos);
    if (line_end == absl::string_view::npos) {
      if (data.size() - pos > limits.max_header_bytes)
        return Error(431, "trailer section too large");
      return std::nullopt;
    }
    if (line_end - pos > limits.max_header_bytes) return Error(431, "trailer section too large");
    const bool last = line_end == pos;
    pos = line_end + 2;
    if (last) break;
  }
  *consumed = pos;
  return std::nullopt;
}

}  // namespace

HttpParseResult ParseHttpRequest(absl::string_view buffer, const HttpLimits& limits) {
  const size_t head_end = buffer.find("\r\n\r\n");
  if (head_end == absl::string_view::npos) {
    if (buffer.size() > limits.max_header_bytes) {
      return Error(431, absl::StrCat("header section exceeds the limit of ",
                                     limits.max_header_bytes, " bytes"));
    }
    return HttpParseResult{};
  }
  const size_t head_size = head_end + 4;
  if (head_size > limits.max_header_bytes) {
    return Error(431, absl::StrCat("header section of ", head_size, " bytes exceeds the limit of ",
                                   limits.max_header_bytes));
  }
  HttpParseResult result;
  HttpRequest& request = result.request;
  const std::vector<absl::string_view> lines = absl::StrSplit(buffer.substr(0, head_end), "\r\n");
  if (auto error = ParseRequestLine(lines[0], &request)) return *std::move(error);
  if (lines.size() - 1 > limits.max_headers) {
    return Error(431, absl::StrCat(lines.size() - 1, " header fields exceed the limit of ",
                                   limits.max_headers));
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].empty()) return Error(400, "empty header line");
    if (auto error = ParseHeaderLine(lines[i], &request)) return *std::move(error);
  }
  if (request.version_minor == 1 && request.FindHeader("Host") == nullptr) {
    return Error(400, "HTTP/1.1 request without a Host header");
  }
  size_t body_length = 0;
  bool chunked = false;
  if (auto error = BodyFraming(request, limits, &body_length, &chunked)) return *std::move(error);
  if (chunked) {
    size_t consumed = 0;
    if (auto error = DecodeChunked(buffer.substr(head_size), limits, &request.body, &consumed)) {
      return *std::move(error);
    }
    if (consumed == 0) {
      // The server buffers at most header + body limit bytes of a request: an
      // encoding bigger than that (tiny chunks, long extensions) cannot finish.
      if (buffer.size() >= limits.max_header_bytes + limits.max_body_bytes) {
        return Error(413, absl::StrCat("chunked request exceeds ",
                                       limits.max_header_bytes + limits.max_body_bytes,
                                       " bytes on the wire"));
      }
      return HttpParseResult{};
    }
    result.kind = HttpParseResult::kRequest;
    result.consumed = head_size + consumed;
    return result;
  }
  if (buffer.size() - head_size < body_length) return HttpParseResult{};
  request.body = std::string(buffer.substr(head_size, body_length));
  result.kind = HttpParseResult::kRequest;
  result.consumed = head_size + body_length;
  return result;
}

}  // namespace splitspec::coordinator::http
