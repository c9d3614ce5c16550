#include "tests/integration/child_process.h"

#include <stdlib.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace splitspec::testing {

std::string MakeTempDir(const std::string& prefix) {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = absl::StrCat(base ? base : "/tmp", "/", prefix, "-XXXXXX");
  char* made = mkdtemp(pattern.data());
  return made ? std::string(made) : std::string();
}

}  // namespace splitspec::testing
