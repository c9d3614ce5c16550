// A strict parser for the subset of TOML (v1.0) that splitspec's cluster
// config uses. No dependency beyond Abseil.
//
//   ASSIGN_OR_RETURN(TomlTable root, ParseToml(text, "deploy/cluster.toml"));
//   const TomlValue* port = root.FindValue("port");          // nullptr if absent
//   const TomlTable* coordinator = root.FindTable("coordinator");
//   for (const auto& group : root.FindTableArray("target_group")) ...
//
// Supported:
//   - comments: `#` to the end of the line (outside strings)
//   - tables `[name]`, `[a.b]` (dotted headers; a segment that names an array
//     of tables refers to its last element, as in TOML), arrays of tables
//     `[[name]]`
//   - `key = value` with bare keys (A-Z a-z 0-9 _ -) or quoted keys
//   - values: basic strings "..." (escapes \" \\ \b \t \n \f \r \uXXXX
//     \UXXXXXXXX), literal strings '...', decimal integers (optional sign,
//     `_` between digits), decimal floats (fraction and/or exponent, inf, nan),
//     booleans, arrays (may span lines, trailing comma allowed, elements of any
//     supported type; nested arrays allowed)
// Refused with an error (not silently misread): dotted keys `a.b = 1`, inline
// tables `{...}`, multi-line strings, hex/octal/binary integers, dates,
// duplicate keys, a table defined twice, a key that is both a value and a
// table, control characters in strings.
//
// Errors: InvalidArgument "SOURCE:LINE: what" (lines count from 1). The
// parser never reads past the input, whatever its bytes (tests feed it random
// byte strings).
#ifndef SPLITSPEC_RUNTIME_CONFIG_TOML_PARSER_H_
#define SPLITSPEC_RUNTIME_CONFIG_TOML_PARSER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace splitspec::config {

struct TomlValue {
  enum class Kind { kString, kInteger, kFloat, kBoolean, kArray };
  Kind kind = Kind::kString;
  int line = 0;  // where the value starts (1-based)
  std::string string_value;
  int64_t integer_value = 0;
  double float_value = 0;
  bool boolean_value = false;
  std::vector<TomlValue> elements;  // kArray
};

// "string", "integer", "float", "boolean", "array": for messages.
const char* TomlKindName(TomlValue::Kind kind);

class TomlTable {
 public:
  // Where the table's header is (0 for the root table).
  int line = 0;
  // Key/value pairs of this table, by key.
  std::map<std::string, TomlValue> values;
  // Sub-tables `[this.name]` and arrays of tables `[[this.name]]`, by name.
  std::map<std::string, std::unique_ptr<TomlTable>> tables;
  std::map<std::string, std::vector<std::unique_ptr<TomlTable>>> table_arrays;

  const TomlValue* FindValue(const std::string& key) const;
  const TomlTable* FindTable(const std::string& name) const;
  // Empty when absent.
  const std::vector<std::unique_ptr<TomlTable>>& FindTableArray(const std::string& name) const;
  // Every key of this table (values, tables, arrays of tables), sorted.
  std::vector<std::string> Keys() const;
  bool Has(const std::string& key) const;
};

// Parses `text`; `source` (usually the file path) prefixes every error.
absl::StatusOr<TomlTable> ParseToml(absl::string_view text, const std::string& source);

}  // namespace splitspec::config

#endif  // SPLITSPEC_RUNTIME_CONFIG_TOML_PARSER_H_
