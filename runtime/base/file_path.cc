#include "runtime/base/file_path.h"

namespace splitspec {

std::string BaseName(absl::string_view path) {
  const size_t slash = path.find_last_of('/');
  return std::string(slash == absl::string_view::npos ? path : path.substr(slash + 1));
}

}  // namespace splitspec
