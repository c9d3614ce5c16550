// The three verification rules of a request (docs/protocol.md), their names on the
// command line ("greedy", "rejection", "coupled") and their kernel codes.
#ifndef SPLITSPEC_RUNTIME_SPEC_VERIFY_MODE_H_
#define SPLITSPEC_RUNTIME_SPEC_VERIFY_MODE_H_

#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "kernels/cpu/verify_types.h"

namespace splitspec::spec {

enum class VerifyMode : int32_t {
  kGreedy = kernels::kVerifyGreedy,        // accept iff token == argmax p
  kRejection = kernels::kVerifyRejection,  // lossless rejection sampling with q
  kCoupled = kernels::kVerifyCoupled,      // shared Gumbel noise; drafter-invariant output
};

// "greedy" | "rejection" | "coupled"; InvalidArgument naming `name` otherwise.
absl::StatusOr<VerifyMode> ParseVerifyMode(absl::string_view name);
absl::string_view VerifyModeName(VerifyMode mode);

}  // namespace splitspec::spec

#endif  // SPLITSPEC_RUNTIME_SPEC_VERIFY_MODE_H_
