#include "tests/testing/http_reference_parser.h"

#include <algorithm>
#include <map>
#include <vector>

#include <boost/asio/buffer.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace splitspec::coordinator::http {

namespace beast_http = boost::beast::http;

ReferenceVerdict ReferenceParse(absl::string_view bytes, const HttpLimits& limits) {
  beast_http::request_parser<beast_http::string_body> parser;
  parser.eager(true);
  parser.header_limit(static_cast<uint32_t>(limits.max_header_bytes));
  parser.body_limit(limits.max_body_bytes);
  ReferenceVerdict verdict;
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
      verdict.kind = ReferenceVerdict::kError;
      verdict.error = ec.message();
      return verdict;
    }
    if (used == 0 && !parser.is_done()) return verdict;
  }
  const auto& message = parser.get();
  verdict.kind = ReferenceVerdict::kRequest;
  verdict.consumed = pos;
  verdict.request.method = std::string(message.method_string());
  verdict.request.target = std::string(message.target());
  verdict.request.version_minor = static_cast<int>(message.version() % 10);
  for (const auto& field : message) {
    verdict.request.headers.emplace_back(std::string(field.name_string()),
                                         std::string(field.value()));
  }
  verdict.request.body = message.body();
  return verdict;
}

std::string FramingDisagreement(absl::string_view bytes, const HttpLimits& limits) {
  const HttpParseResult ours = ParseHttpRequest(bytes, limits);
  if (ours.kind != HttpParseResult::kRequest) return "";
  const ReferenceVerdict beast = ReferenceParse(bytes, limits);
  if (beast.kind != ReferenceVerdict::kRequest) {
    return absl::StrCat("we accept what Beast ", beast.kind == ReferenceVerdict::kError
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
  // Beast groups fields of one name together (in their order) and adds the
  // trailer fields, which we check and drop: compare the values of each name,
  // ours a prefix of Beast's.
  const auto by_name = [](const HttpHeaders& fields) {
    std::map<std::string, std::vector<std::string>> values;
    for (const auto& [name, value] : fields) values[absl::AsciiStrToLower(name)].push_back(value);
    return values;
  };
  const auto ours_by_name = by_name(ours.request.headers);
  const auto beast_by_name = by_name(beast.request.headers);
  for (const auto& [name, values] : ours_by_name) {
    const auto it = beast_by_name.find(name);
    if (it == beast_by_name.end() || it->second.size() < values.size() ||
        !std::equal(values.begin(), values.end(), it->second.begin())) {
      return absl::StrCat("values of header field '", name, "' differ");
    }
  }
  if (beast.request.body != ours.request.body) return "bodies differ";
  return "";
}

}  // namespace splitspec::coordinator::http
