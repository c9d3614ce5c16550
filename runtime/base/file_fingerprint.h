// Content fingerprint of a file: 64-bit FNV-1a over every byte, plus its size.
// Used to tell whether two workers serve the same model file. Reads the file
// once, sequentially (about 0.1 s for a 100 MB model).
#ifndef SPLITSPEC_RUNTIME_BASE_FILE_FINGERPRINT_H_
#define SPLITSPEC_RUNTIME_BASE_FILE_FINGERPRINT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace splitspec {

struct FileFingerprint {
  uint64_t fnv1a64 = 0;
  uint64_t bytes = 0;
};

// Errors: NotFound / PermissionDenied / DataLoss naming `path`.
absl::StatusOr<FileFingerprint> FingerprintFile(const std::string& path);

}  // namespace splitspec

#endif  // SPLITSPEC_RUNTIME_BASE_FILE_FINGERPRINT_H_
