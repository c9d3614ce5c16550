#include "runtime/spec/verify_mode.h"

#include "absl/strings/str_cat.h"

namespace splitspec::spec {

absl::StatusOr<VerifyMode> ParseVerifyMode(absl::string_view name) {
  if (name == "greedy") return VerifyMode::kGreedy;
  if (name == "rejection") return VerifyMode::kRejection;
  if (name == "coupled") return VerifyMode::kCoupled;
  return absl::InvalidArgumentError(
      absl::StrCat("verify mode must be greedy, rejection or coupled, got '", name, "'"));
}

absl::string_view VerifyModeName(VerifyMode mode) {
  switch (mode) {
    case VerifyMode::kGreedy:
      return "greedy";
    case VerifyMode::kRejection:
      return "rejection";
    case VerifyMode::kCoupled:
      return "coupled";
  }
  return "unknown";
}

}  // namespace splitspec::spec
