#include "runtime/base/json_string.h"

#include <cstdio>

#include "runtime/base/utf8.h"

namespace splitspec {
namespace {

void AppendEscaped(unsigned char c, std::string* out) {
  switch (c) {
    case '"':
      *out += "\\\"";
      return;
    case '\\':
      *out += "\\\\";
      return;
    case '\b':
      *out += "\\b";
      return;
    case '\f':
      *out += "\\f";
      return;
    case '\n':
      *out += "\\n";
      return;
    case '\r':
      *out += "\\r";
      return;
    case '\t':
      *out += "\\t";
      return;
    default:
      break;
  }
  if (c < 0x20) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "\\u%04x", c);
    *out += buf;
  } else {
    out->push_back(static_cast<char>(c));
  }
}

}  // namespace

std::string JsonQuote(absl::string_view s) {
  std::string out = "\"";
  out.reserve(s.size() + 2);
  for (size_t i = 0; i < s.size();) {
    const size_t n = ValidUtf8Length(std::string_view(s.data(), s.size()), i);
    if (n == 0) {
      out += "\\ufffd";
      ++i;
    } else if (n == 1) {
      AppendEscaped(static_cast<unsigned char>(s[i]), &out);
      ++i;
    } else {
      out.append(s.data() + i, n);
      i += n;
    }
  }
  out.push_back('"');
  return out;
}

}  // namespace splitspec
