// JSON string literals, for every place that writes JSON text by hand (the CLI's
// one-object-per-line output, the HTTP front door's JsonWriter).
#ifndef SPLITSPEC_RUNTIME_BASE_JSON_STRING_H_
#define SPLITSPEC_RUNTIME_BASE_JSON_STRING_H_

#include <string>

#include "absl/strings/string_view.h"

namespace splitspec {

// `s` as a JSON string literal, quotes included, valid JSON (RFC 8259) for
// any bytes: '"' and '\\' are escaped, control characters become \b \f \n \r
// \t or \u00XX, valid UTF-8 (RFC 3629: no overlong forms, no surrogates,
// nothing above U+10FFFF) passes through, and every byte that does not start
// a valid UTF-8 sequence becomes \ufffd (U+FFFD): invalid UTF-8 is never
// echoed raw.
std::string JsonQuote(absl::string_view s);

}  // namespace splitspec

#endif  // SPLITSPEC_RUNTIME_BASE_JSON_STRING_H_
