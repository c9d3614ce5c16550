#include "runtime/base/file_fingerprint.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

namespace splitspec {

absl::StatusOr<FileFingerprint> FingerprintFile(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    const std::string message = absl::StrCat("cannot open ", path, ": ", std::strerror(errno));
    return errno == ENOENT ? absl::NotFoundError(message) : absl::PermissionDeniedError(message);
  }
  constexpr uint64_t kOffset = 14695981039346656037ull;
  constexpr uint64_t kPrime = 1099511628211ull;
  FileFingerprint fingerprint{kOffset, 0};
  std::vector<unsigned char> buffer(1 << 20);
  size_t n;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), file)) > 0) {
    uint64_t h = fingerprint.fnv1a64;
    for (size_t i = 0; i < n; ++i) h = (h ^ buffer[i]) * kPrime;
    fingerprint.fnv1a64 = h;
    fingerprint.bytes += n;
  }
  const bool failed = std::ferror(file) != 0;
  std::fclose(file);
  if (failed) return absl::DataLossError(absl::StrCat("read error in ", path));
  return fingerprint;
}

}  // namespace splitspec
