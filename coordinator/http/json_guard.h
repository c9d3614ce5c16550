// A strict, linear-time JSON check that runs before any JSON parser sees a
// request body, and the UTF-8 decoding rule every JSON string we write obeys.
//
//   RETURN_IF_ERROR(CheckJsonText(body, JsonLimits{.max_depth = 64}));
//   ... now hand `body` to protobuf's JsonStringToMessage ...
//
// Why a pre-check: protobuf's JSON parser takes time superlinear in the
// nesting depth (a 60 KB body of nested arrays held the I/O thread for 86 s),
// and it accepts a trailing comma ("[1,]", "{"a":1,}"). CheckJsonText reads
// each byte once, keeps an explicit stack bounded by max_depth (no recursion),
// and accepts exactly RFC 8259 JSON: one value, surrounded by optional
// whitespace; strings of valid UTF-8 (no overlongs, surrogates or code points
// above U+10FFFF) with no raw control characters and only the standard
// escapes; numbers in the RFC's grammar; the literals true, false, null.
// A body that passes is what the parser was built for, at a depth it handles
// in microseconds.
//
// Errors (InvalidArgument): "malformed JSON body: <what> at byte N" or
// "JSON body nests deeper than the limit of 64 at byte N". The message never
// quotes the body, so it is always valid UTF-8.
//
// Thread safety: pure functions.
#ifndef SPLITSPEC_COORDINATOR_HTTP_JSON_GUARD_H_
#define SPLITSPEC_COORDINATOR_HTTP_JSON_GUARD_H_

#include <cstddef>
#include <initializer_list>
#include <optional>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "runtime/base/utf8.h"

namespace splitspec::coordinator::http {

struct JsonLimits {
  int max_depth = 64;  // arrays and objects open at once
};

absl::Status CheckJsonText(absl::string_view json, const JsonLimits& limits = {});

// The text of the value at `path` (object member names, outermost first) in
// `json`, exactly as written, or nullopt when a member on the way is absent or
// not inside an object. Why: a parser into protobuf's Struct forgets the order
// of an object's members, and a JSON Schema's property order is the order the
// grammar generates them in (structured outputs). REQUIRES: CheckJsonText(json)
// passed. Member names are compared as written (unescaped names only); the
// last of repeated names wins, as in the parser.
std::optional<absl::string_view> RawJsonValue(absl::string_view json,
                                              std::initializer_list<absl::string_view> path);

// The length (1 to 4) of the well-formed UTF-8 sequence that starts at
// text[pos], or 0 when the bytes there are not one (a stray continuation
// byte, a truncated, overlong or surrogate sequence, above U+10FFFF): the
// check the guard applies, which is runtime/base/utf8.h's, the project's one
// UTF-8 validator. REQUIRES: pos < text.size().
inline size_t Utf8SequenceLength(absl::string_view text, size_t pos) {
  return ValidUtf8Length(std::string_view(text.data(), text.size()), pos);
}

}  // namespace splitspec::coordinator::http

#endif  // SPLITSPEC_COORDINATOR_HTTP_JSON_GUARD_H_
