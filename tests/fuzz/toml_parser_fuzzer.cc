// Fuzz target: the TOML parser (runtime/config/toml_parser.h) and the cluster
// config read from its tables (ParseClusterConfig, which touches no files).
// The input is a config file's text.
// Properties, beyond "no crash, no memory error": an error names the source
// ("fuzz.toml:LINE: ..."); a parsed table can be walked.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

#include "absl/strings/match.h"
#include "runtime/config/cluster_config.h"
#include "runtime/config/toml_parser.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using splitspec::config::TomlTable;
using splitspec::config::TomlValue;

size_t CountValues(const TomlValue& value) {
  size_t n = 1;
  for (const TomlValue& element : value.elements) n += CountValues(element);
  return n;
}

size_t Walk(const TomlTable& table, int depth) {
  FUZZ_CHECK(depth < 10000, "tables nest without end");
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
  const auto table = splitspec::config::ParseToml(text, "fuzz.toml");
  if (table.ok()) {
    Walk(*table, 0);
  } else {
    FUZZ_CHECK(absl::StartsWith(table.status().message(), "fuzz.toml:"),
               "a TOML error that does not name its source");
  }
  const auto config = splitspec::config::ParseClusterConfig(text, "fuzz.toml", "/fuzz");
  if (!config.ok()) {
    FUZZ_CHECK(!config.status().message().empty(), "a config error without a message");
  }
  return 0;
}
