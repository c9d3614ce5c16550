// Path helpers that need no filesystem access.
#ifndef SPLITSPEC_RUNTIME_BASE_FILE_PATH_H_
#define SPLITSPEC_RUNTIME_BASE_FILE_PATH_H_

#include <string>

#include "absl/strings/string_view.h"

namespace splitspec {

// The last component of `path`: what follows its last '/', or all of it
// ("models/a.gguf" -> "a.gguf", "a" -> "a", "dir/" -> "").
std::string BaseName(absl::string_view path);

}  // namespace splitspec

#endif  // SPLITSPEC_RUNTIME_BASE_FILE_PATH_H_
