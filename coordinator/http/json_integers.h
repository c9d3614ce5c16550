// The integer literals of a JSON object's own members, as written, so that an
// integer field is read from its text exactly instead of through a double.
//
//   RETURN_IF_ERROR(CheckJsonText(body));            // first: the text is strict JSON
//   const JsonMemberIntegers integers = JsonMemberIntegers::Index(body);
//   if (std::optional<absl::string_view> seed = integers.Find("seed")) ... *seed ==
//   "9007199254740993"
//
// Why: the request parser reads the body through protobuf's JSON parser,
// whose google.protobuf.Value holds every number as a double, exact only up to
// 2^53: `"seed": 9007199254740993` (2^53 + 1, a valid OpenAI int64 seed) came
// out as 9007199254740992. Rather than replace that parser, one linear pass
// over the (already checked) text keeps each top-level member's integer
// literal. Elements of arrays (token ids) need no text: their fields are
// int32, and a double is exact for every integer up to 2^53.
//
// An integer literal is an optional '-' and digits: no fraction, no exponent
// (1.0 and 1e3 are numbers, not literals; the parser reads those through the
// double as before).
//
// Thread safety: a value; Index is a pure function.
#ifndef SPLITSPEC_COORDINATOR_HTTP_JSON_INTEGERS_H_
#define SPLITSPEC_COORDINATOR_HTTP_JSON_INTEGERS_H_

#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"

namespace splitspec::coordinator::http {

class JsonMemberIntegers {
 public:
  // The integer literals of the members of `json`'s top-level object (none if
  // the text is not an object). Member names are decoded (escapes, \uXXXX),
  // as the JSON parser decodes them. REQUIRES: CheckJsonText(json) passed;
  // `json` outlives the result (the literals are views into it).
  static JsonMemberIntegers Index(absl::string_view json);

  // The literal of member `name` when its value is an integer literal;
  // nullopt when the member is absent or its value is something else. A name
  // given twice keeps its last value (protobuf's JSON parser, which the
  // request parser uses, refuses a repeated name outright).
  std::optional<absl::string_view> Find(const std::string& name) const;

 private:
  // Member name -> its integer literal, or nullopt for another kind of value.
  absl::flat_hash_map<std::string, std::optional<absl::string_view>> members_;
};

}  // namespace splitspec::coordinator::http

#endif  // SPLITSPEC_COORDINATOR_HTTP_JSON_INTEGERS_H_
