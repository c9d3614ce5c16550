#include "coordinator/http/http_parser.h"

#include <algorithm>
#include <cstring>
#include <vector>

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

// RFC 9110 field-value: visible characters, obs-text, SP and HTAB; no other
// controls (CR, LF, NUL, VT, FF, DEL ...).
bool IsFieldValue(absl::string_view s) {
  for (char c : s) {
    const unsigned char u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\t') || u == 0x7f) return false;
  }
  return true;
}

bool IsBlank(char c) { return c == ' ' || c == '\t'; }  // RFC 9110 OWS / BWS

// Trims RFC 9110 OWS (spaces and tabs, nothing else) from both ends.
absl::string_view TrimBlanks(absl::string_view s) {
  while (!s.empty() && IsBlank(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsBlank(s.back())) s.remove_suffix(1);
  return s;
}

// RFC 9110 #token (Connection): tokens separated by commas and blanks; empty
// elements are allowed.
bool IsTokenList(absl::string_view s) {
  for (absl::string_view element : absl::StrSplit(s, ',')) {
    element = TrimBlanks(element);
    if (!element.empty() && !IsToken(element)) return false;
  }
  return true;
}

bool IsTargetChar(char c) {
  const unsigned char u = static_cast<unsigned char>(c);
  return u > 0x20 && u < 0x7f;
}

// RFC 9110 quoted-string at the start of `s` (which starts with DQUOTE):
// its length, or 0 if it is malformed or unterminated.
size_t QuotedStringLength(absl::string_view s) {
  for (size_t i = 1; i < s.size(); ++i) {
    const unsigned char u = static_cast<unsigned char>(s[i]);
    if (u == '"') return i + 1;
    if (u == '\\') {
      // quoted-pair = "\" ( HTAB / SP / VCHAR / obs-text )
      if (++i == s.size()) return 0;
      const unsigned char escaped = static_cast<unsigned char>(s[i]);
      if (escaped != '\t' && (escaped < 0x20 || escaped == 0x7f)) return 0;
      continue;
    }
    // qdtext = HTAB / SP / %x21 / %x23-5B / %x5D-7E / obs-text
    if (u != '\t' && (u < 0x20 || u == 0x7f)) return 0;
  }
  return 0;
}

// True if `s` (what follows the chunk size, CRLF excluded) matches RFC 9112's
//   chunk-ext = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] )
// with chunk-ext-name = token and chunk-ext-val = token / quoted-string.
bool IsChunkExtensions(absl::string_view s) {
  size_t pos = 0;
  const auto skip_blanks = [&] {
    while (pos < s.size() && IsBlank(s[pos])) ++pos;
  };
  const auto token = [&] {
    const size_t start = pos;
    while (pos < s.size() && IsTokenChar(s[pos])) ++pos;
    return pos > start;
  };
  while (pos < s.size()) {
    skip_blanks();
    if (pos == s.size() || s[pos] != ';') return false;  // blanks must lead to ';'
    ++pos;
    skip_blanks();
    if (!token()) return false;
    const size_t after_name = pos;
    skip_blanks();
    if (pos < s.size() && s[pos] == '=') {
      ++pos;
      skip_blanks();
      if (pos < s.size() && s[pos] == '"') {
        const size_t length = QuotedStringLength(s.substr(pos));
        if (length == 0) return false;
        pos += length;
      } else if (!token()) {
        return false;
      }
    } else {
      pos = after_name;  // the blanks belong before the next ';'
    }
  }
  return true;
}

}  // namespace

HttpRequestParser::HttpRequestParser(const HttpLimits& limits) : limits_(limits) {}

void HttpRequestParser::Fail(int status, std::string reason) {
  status_ = kError;
  error_status_ = status;
  error_reason_ = std::move(reason);
}

HttpRequest HttpRequestParser::TakeRequest() {
  HttpRequest request = std::move(request_);
  request_ = HttpRequest{};
  status_ = kIncomplete;
  phase_ = Phase::kRequestLine;
  line_.clear();
  request_bytes_ = head_bytes_ = trailer_bytes_ = 0;
  body_remaining_ = 0;
  chunked_ = false;
  return request;
}

size_t HttpRequestParser::TakeLine(absl::string_view data, bool* complete) {
  // Never take more than one byte past the phase's limit: the line is refused then.
  size_t allowance = data.size();
  switch (phase_) {
    case Phase::kRequestLine:
    case Phase::kHeaderLine:
      allowance = limits_.max_header_bytes - std::min(head_bytes_, limits_.max_header_bytes) + 1;
      break;
    case Phase::kChunkSizeLine:
      allowance = kMaxChunkLineBytes - std::min(line_.size(), kMaxChunkLineBytes) + 1;
      break;
    case Phase::kTrailerLine:
      allowance = limits_.max_header_bytes - std::min(trailer_bytes_, limits_.max_header_bytes) + 1;
      break;
    default:
      break;
  }
  const size_t scan = std::min(data.size(), allowance);
  const void* lf = std::memchr(data.data(), '\n', scan);
  const size_t n = lf == nullptr ? scan : static_cast<const char*>(lf) - data.data() + 1;
  bytes_examined_ += n;
  line_.append(data.data(), n);
  *complete = lf != nullptr;
  return n;
}

bool HttpRequestParser::LineContent(absl::string_view where, absl::string_view* content) {
  if (line_.size() < 2 || line_[line_.size() - 2] != '\r') {
    Fail(400, absl::StrCat("bare LF (a line end without CR) in ", where));
    return false;
  }
  *content = absl::string_view(line_).substr(0, line_.size() - 2);
  bytes_examined_ += content->size();
  if (content->find('\r') != absl::string_view::npos) {
    Fail(400, absl::StrCat("bare CR (a CR not followed by LF) in ", where));
    return false;
  }
  return true;
}

size_t HttpRequestParser::Feed(absl::string_view data) {
  size_t taken = 0;
  while (status_ == kIncomplete && taken < data.size()) {
    const absl::string_view rest = data.substr(taken);
    size_t n = 0;
    switch (phase_) {
      case Phase::kRequestLine:
      case Phase::kHeaderLine:
      case Phase::kChunkSizeLine:
      case Phase::kTrailerLine: {
        bool complete = false;
        n = TakeLine(rest, &complete);
        if (phase_ == Phase::kRequestLine || phase_ == Phase::kHeaderLine) {
          head_bytes_ += n;
          if (head_bytes_ > limits_.max_header_bytes) {
            Fail(431, absl::StrCat("header section exceeds the limit of ", limits_.max_header_bytes,
                                   " bytes"));
            break;
          }
        } else if (phase_ == Phase::kTrailerLine) {
          trailer_bytes_ += n;
          if (trailer_bytes_ > limits_.max_header_bytes) {
            Fail(431, absl::StrCat("trailer section exceeds the limit of ",
                                   limits_.max_header_bytes, " bytes"));
            break;
          }
        } else if (line_.size() > kMaxChunkLineBytes) {
          Fail(400, absl::StrCat("chunk size line longer than ", kMaxChunkLineBytes, " bytes"));
          break;
        }
        if (complete) {
          OnLine();
          line_.clear();
        }
        break;
      }
      case Phase::kBody:
      case Phase::kChunkData: {
        n = static_cast<size_t>(std::min<uint64_t>(body_remaining_, rest.size()));
        request_.body.append(rest.data(), n);
        bytes_examined_ += n;
        body_remaining_ -= n;
        if (body_remaining_ == 0) {
          if (phase_ == Phase::kBody) {
            status_ = kRequest;
            phase_ = Phase::kDone;
          } else {
            phase_ = Phase::kChunkDataCr;
          }
        }
        break;
      }
      case Phase::kChunkDataCr:
      case Phase::kChunkDataLf:
        n = 1;
        ++bytes_examined_;
        if (rest[0] != (phase_ == Phase::kChunkDataCr ? '\r' : '\n')) {
          Fail(400, "chunk data not followed by CRLF");
          break;
        }
        phase_ = phase_ == Phase::kChunkDataCr ? Phase::kChunkDataLf : Phase::kChunkSizeLine;
        break;
      case Phase::kDone:
        return taken;
    }
    taken += n;
    request_bytes_ += n;
    // A chunked encoding may be far larger than what it decodes to (tiny
    // chunks, long extensions): the request as sent is capped too.
    if (status_ != kError && chunked_ &&
        request_bytes_ > limits_.max_header_bytes + limits_.max_body_bytes) {
      Fail(413,
           absl::StrCat("chunked request exceeds ",
                        limits_.max_header_bytes + limits_.max_body_bytes, " bytes on the wire"));
    }
  }
  return taken;
}

void HttpRequestParser::OnLine() {
  absl::string_view line;
  switch (phase_) {
    case Phase::kRequestLine:
      if (LineContent("the request line", &line)) OnRequestLine(line);
      return;
    case Phase::kHeaderLine:
      if (LineContent("the header section", &line)) OnHeaderLine(line);
      return;
    case Phase::kChunkSizeLine:
      if (LineContent("a chunk size line", &line)) OnChunkSizeLine(line);
      return;
    case Phase::kTrailerLine:
      if (LineContent("the trailer section", &line)) OnTrailerLine(line);
      return;
    default:
      return;
  }
}

// "METHOD SP target SP HTTP/1.x".
void HttpRequestParser::OnRequestLine(absl::string_view line) {
  const std::vector<absl::string_view> parts = absl::StrSplit(line, ' ');
  if (parts.size() != 3) {
    return Fail(400, "malformed request line (expected 'METHOD /path HTTP/1.1')");
  }
  if (!IsToken(parts[0]))
    return Fail(400, absl::StrCat("malformed method '", absl::CEscape(parts[0]), "'"));
  const absl::string_view target = parts[1];
  if (target.empty() || target[0] != '/') {
    return Fail(400, "request target must be an absolute path starting with '/'");
  }
  for (char c : target) {
    if (!IsTargetChar(c)) return Fail(400, "request target contains a control character or space");
  }
  const absl::string_view version = parts[2];
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || !absl::ascii_isdigit(version[5]) ||
      version[6] != '.' || !absl::ascii_isdigit(version[7])) {
    return Fail(400, absl::StrCat("malformed HTTP version '", absl::CEscape(version), "'"));
  }
  if (version[5] != '1' || (version[7] != '0' && version[7] != '1')) {
    return Fail(505,
                absl::StrCat("HTTP version ", version.substr(5), " is not supported (use 1.1)"));
  }
  request_.method = std::string(parts[0]);
  request_.target = std::string(target);
  request_.path = std::string(target.substr(0, target.find('?')));
  request_.version_minor = version[7] - '0';
  phase_ = Phase::kHeaderLine;
}

void HttpRequestParser::OnHeaderLine(absl::string_view line) {
  if (line.empty()) return OnHeadEnd();
  if (request_.headers.size() + 1 > limits_.max_headers) {
    return Fail(431, absl::StrCat(request_.headers.size() + 1,
                                  " header fields exceed the limit of ", limits_.max_headers));
  }
  if (IsBlank(line[0])) return Fail(400, "obsolete header line folding is not accepted");
  const size_t colon = line.find(':');
  if (colon == absl::string_view::npos) {
    return Fail(
        400, absl::StrCat("header line without ':' ('", absl::CEscape(line.substr(0, 40)), "')"));
  }
  const absl::string_view name = line.substr(0, colon);
  if (!IsToken(name))
    return Fail(400, absl::StrCat("malformed header name '", absl::CEscape(name), "'"));
  const absl::string_view value = TrimBlanks(line.substr(colon + 1));
  if (!IsFieldValue(value))
    return Fail(400, absl::StrCat("header ", name, " has a control character in its value"));
  request_.headers.emplace_back(std::string(name), std::string(value));
}

// How the headers frame the body: a length (Content-Length, or none: 0) or
// the chunked coding (RFC 9112 §6.3); anything ambiguous is refused.
void HttpRequestParser::OnHeadEnd() {
  int hosts = 0;
  int content_lengths = 0;
  int transfer_encodings = 0;
  uint64_t length = 0;
  for (const auto& [name, value] : request_.headers) {
    if (absl::EqualsIgnoreCase(name, "Host")) {
      ++hosts;
    } else if (absl::EqualsIgnoreCase(name, "Connection")) {
      // Read for keep-alive / close: a value that is not a token list could be
      // read otherwise by a proxy in front (whether the connection persists).
      if (!IsTokenList(value)) {
        return Fail(400, absl::StrCat("malformed Connection header '", absl::CEscape(value), "'"));
      }
    } else if (absl::EqualsIgnoreCase(name, "Transfer-Encoding")) {
      ++transfer_encodings;
      if (transfer_encodings > 1 || !absl::EqualsIgnoreCase(value, "chunked")) {
        return Fail(501,
                    absl::StrCat("Transfer-Encoding '", absl::CEscape(value),
                                 "' is not supported (only 'chunked'); or send Content-Length"));
      }
    } else if (absl::EqualsIgnoreCase(name, "Content-Length")) {
      // One field only: RFC 9110 §8.6 lets a recipient refuse repeats, and a
      // second value (equal or not) is how a smuggled request hides.
      if (++content_lengths > 1) return Fail(400, "more than one Content-Length header");
      const bool digits = !value.empty() && std::all_of(value.begin(), value.end(), [](char c) {
        return absl::ascii_isdigit(static_cast<unsigned char>(c));
      });
      if (!digits || !absl::SimpleAtoi(value, &length)) {
        return Fail(400, absl::StrCat("malformed Content-Length '", absl::CEscape(value), "'"));
      }
    }
  }
  if (hosts > 1) return Fail(400, "more than one Host header");
  if (request_.version_minor == 1 && hosts == 0) {
    return Fail(400, "HTTP/1.1 request without a Host header");
  }
  if (transfer_encodings > 0) {
    if (content_lengths > 0) {
      return Fail(400, "Content-Length and Transfer-Encoding together are ambiguous");
    }
    if (request_.version_minor == 0) return Fail(400, "Transfer-Encoding in an HTTP/1.0 request");
    chunked_ = true;
    phase_ = Phase::kChunkSizeLine;
    return;
  }
  if (length > limits_.max_body_bytes) {
    return Fail(413, absl::StrCat("body of ", length, " bytes exceeds the limit of ",
                                  limits_.max_body_bytes));
  }
  body_remaining_ = length;
  if (length == 0) {
    status_ = kRequest;
    phase_ = Phase::kDone;
  } else {
    phase_ = Phase::kBody;
  }
}

// chunk = chunk-size [ chunk-ext ] CRLF chunk-data CRLF; last-chunk = 1*("0") [ chunk-ext ] CRLF.
void HttpRequestParser::OnChunkSizeLine(absl::string_view line) {
  size_t digits = 0;
  uint64_t size = 0;
  const uint64_t room = limits_.max_body_bytes - request_.body.size();
  while (digits < line.size() && absl::ascii_isxdigit(static_cast<unsigned char>(line[digits]))) {
    const char c = absl::ascii_tolower(static_cast<unsigned char>(line[digits]));
    size = size * 16 + static_cast<uint64_t>(c <= '9' ? c - '0' : c - 'a' + 10);
    ++digits;
    if (size > room) {
      return Fail(413, absl::StrCat("chunked body exceeds the limit of ", limits_.max_body_bytes,
                                    " bytes"));
    }
  }
  if (digits == 0) {
    return Fail(400,
                absl::StrCat("malformed chunk size '", absl::CEscape(line.substr(0, 40)), "'"));
  }
  if (!IsChunkExtensions(line.substr(digits))) {
    return Fail(400, absl::StrCat("malformed chunk extension '",
                                  absl::CEscape(line.substr(digits, 40)), "'"));
  }
  if (size == 0) {
    phase_ = Phase::kTrailerLine;
    return;
  }
  body_remaining_ = size;
  phase_ = Phase::kChunkData;
}

// trailer-section = *( field-line CRLF ), then CRLF. Fields are checked like
// header fields and dropped (none changes how the request is handled).
void HttpRequestParser::OnTrailerLine(absl::string_view line) {
  if (line.empty()) {
    status_ = kRequest;
    phase_ = Phase::kDone;
    return;
  }
  if (IsBlank(line[0])) return Fail(400, "obsolete line folding in the trailer section");
  const size_t colon = line.find(':');
  const absl::string_view value =
      colon == absl::string_view::npos ? "" : TrimBlanks(line.substr(colon + 1));
  if (colon == absl::string_view::npos || !IsToken(line.substr(0, colon)) || !IsFieldValue(value)) {
    return Fail(400,
                absl::StrCat("malformed trailer field '", absl::CEscape(line.substr(0, 40)), "'"));
  }
  // Framing and routing are decided by the header section (RFC 9110 §6.5.1);
  // the same field in the trailer is how a second parser could be misled.
  const absl::string_view name = line.substr(0, colon);
  for (const absl::string_view framing : {"Content-Length", "Transfer-Encoding", "Host"}) {
    if (absl::EqualsIgnoreCase(name, framing)) {
      return Fail(400, absl::StrCat(framing, " in the trailer section"));
    }
  }
  if (absl::EqualsIgnoreCase(name, "Connection") && !IsTokenList(value)) {
    return Fail(400, absl::StrCat("malformed Connection trailer '", absl::CEscape(value), "'"));
  }
}

HttpParseResult ParseHttpRequest(absl::string_view buffer, const HttpLimits& limits) {
  HttpRequestParser parser(limits);
  const size_t taken = parser.Feed(buffer);
  HttpParseResult result;
  switch (parser.status()) {
    case HttpRequestParser::kIncomplete:
      break;
    case HttpRequestParser::kError:
      result.kind = HttpParseResult::kError;
      result.error_status = parser.error_status();
      result.error_reason = parser.error_reason();
      break;
    case HttpRequestParser::kRequest:
      result.kind = HttpParseResult::kRequest;
      result.consumed = taken;
      result.request = parser.TakeRequest();
      break;
  }
  return result;
}

}  // namespace splitspec::coordinator::http
