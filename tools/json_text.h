// JSON text for the CLI's one-object-per-line output.
#ifndef SPLITSPEC_TOOLS_JSON_TEXT_H_
#define SPLITSPEC_TOOLS_JSON_TEXT_H_

#include <string>

namespace splitspec::tools {

// A JSON string literal (with quotes) of `s`; bytes that are not valid UTF-8
// become U+FFFD, control characters are escaped.
std::string JsonQuote(const std::string& s);

}  // namespace splitspec::tools

#endif  // SPLITSPEC_TOOLS_JSON_TEXT_H_
