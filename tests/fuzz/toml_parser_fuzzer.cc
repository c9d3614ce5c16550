// Fuzz target: the TOML parser (runtime/config/toml_parser.h) and the cluster
// config read from its tables (ParseClusterConfig, which touches no files).
// The input is a config file's text.
// Properties, beyond "no crash, no memory error": an error names the source
// and a line of the text ("fuzz.toml:LINE: ...", 1 <= LINE <= lines); a parsed
// table can be walked, and each value and table says a line of the text.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "runtime/config/cluster_config.h"
#include "runtime/config/toml_parser.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using splitspec::config::TomlTable;
using splitspec::config::TomlValue;

int g_lines = 0;  // lines of the current input (1 + its newlines)

size_t CountValues(const TomlValue& value) {
  FUZZ_CHECK(value.line >= 1 && value.line <= g_lines, "a value on a line the text lacks");
  size_t n = 1;
  for (const TomlValue& element : value.elements) n += CountValues(element);
  return n;
}

size_t Walk(const TomlTable& table, int depth) {
  FUZZ_CHECK(depth < 10000, "tables nest without end");
  FUZZ_CHECK(table.line >= 0 && table.line <= g_lines, "a table on a line the text lacks");
  size_t n = 0;
  for (const std::string& key : table.Keys()) FUZZ_CHECK(table.Has(key), "Keys() lists a stranger");
  for (const auto& [key, value] : table.values) n += CountValues(value);
  for (const auto& [name, sub] : table.tables) n += Walk(*sub, depth + 1);
  for (const auto& [name, array] : table.table_arrays) {
    for (const auto& sub : array) n += Walk(*sub, depth + 1);
  }
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  g_lines = 1 + static_cast<int>(std::count(text.begin(), text.end(), '\n'));
  const auto table = splitspec::config::ParseToml(text, "fuzz.toml");
  if (table.ok()) {
    Walk(*table, 0);
  } else {
    absl::string_view message = table.status().message();
    FUZZ_CHECK(absl::ConsumePrefix(&message, "fuzz.toml:"),
               "a TOML error that does not name its source");
    int line = 0;
    FUZZ_CHECK(absl::SimpleAtoi(message.substr(0, message.find(':')), &line),
               "a TOML error without a line");
    FUZZ_CHECK(line >= 1 && line <= g_lines, "a TOML error on a line the text lacks");
  }
  const auto config = splitspec::config::ParseClusterConfig(text, "fuzz.toml", "/fuzz");
  if (!config.ok()) {
    FUZZ_CHECK(!config.status().message().empty(), "a config error without a message");
  }
  return 0;
}
