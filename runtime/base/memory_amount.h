// MemoryAmount: a memory size as a user writes it on a command line or in a
// config, either a number of bytes or a percentage of what is available.
//
//   ASSIGN_OR_RETURN(MemoryAmount amount, ParseMemoryAmount("256MiB"));
//   uint64_t bytes = amount.Resolve(/*available=*/free_bytes);   // 268435456
//
// Accepted forms (case-insensitive suffixes, no space or one space before them):
//   "1048576"            bytes
//   "512KiB" "256MiB" "2GiB" "1TiB"   powers of 1024 (also "K", "M", "G", "T",
//                        "KB", "MB", "GB", "TB": splitspec reads them as powers of
//                        1024 too, as memory is sized; "1.5GiB" may have a fraction)
//   "40%"                a percentage in (0, 100] of the available amount
// Refused (InvalidArgument naming the text): empty, negative, zero, a percentage
// outside (0, 100], an unknown suffix, more than 2^62 bytes.
#ifndef SPLITSPEC_RUNTIME_BASE_MEMORY_AMOUNT_H_
#define SPLITSPEC_RUNTIME_BASE_MEMORY_AMOUNT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace splitspec {

struct MemoryAmount {
  uint64_t bytes = 0;    // when percent is 0
  double percent = 0.0;  // (0, 100]: a share of what is available

  bool is_percent() const { return percent > 0.0; }
  // The bytes this amount stands for when `available` bytes are available.
  uint64_t Resolve(uint64_t available) const;
  // "268435456 bytes (256 MiB)" or "40% of the available memory".
  std::string ToString() const;
  bool operator==(const MemoryAmount&) const = default;
};

absl::StatusOr<MemoryAmount> ParseMemoryAmount(absl::string_view text);

// "256.0 MiB", "1.50 GiB", "512 bytes": bytes in the largest binary unit that
// keeps the number >= 1, for logs and status lines.
std::string FormatBytes(uint64_t bytes);

}  // namespace splitspec

#endif  // SPLITSPEC_RUNTIME_BASE_MEMORY_AMOUNT_H_
