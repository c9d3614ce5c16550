#include "tools/restart_policy.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"

namespace splitspec::tools {

absl::Status RestartPolicy::Validate() const {
  if (initial_backoff <= absl::ZeroDuration() || max_backoff < initial_backoff) {
    return absl::InvalidArgumentError(absl::StrCat(
        "restart back-off: initial ", absl::FormatDuration(initial_backoff), " and max ",
        absl::FormatDuration(max_backoff), " must satisfy 0 < initial <= max"));
  }
  if (max_restarts < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-restarts must be >= 0, got ", max_restarts));
  }
  if (window <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--restart-window-s must be positive, got ", absl::FormatDuration(window)));
  }
  return absl::OkStatus();
}

absl::StatusOr<absl::Duration> RestartTracker::OnDeath(absl::Time now) {
  while (!recent_restarts_.empty() && now - recent_restarts_.front() >= policy_.window)
    recent_restarts_.pop_front();
  if (static_cast<int>(recent_restarts_.size()) >= policy_.max_restarts) {
    return absl::ResourceExhaustedError(
        policy_.max_restarts == 0
            ? std::string("restarts are off (--max-restarts 0)")
            : absl::StrCat("died ", recent_restarts_.size() + 1, " times within ",
                           absl::FormatDuration(policy_.window), " (restarted ",
                           recent_restarts_.size(), " times; the limit is ", policy_.max_restarts,
                           ", --max-restarts)"));
  }
  absl::Duration delay = policy_.initial_backoff;
  for (size_t i = 0; i < recent_restarts_.size() && delay < policy_.max_backoff; ++i) delay *= 2;
  recent_restarts_.push_back(now);
  ++total_restarts_;
  return std::min(delay, policy_.max_backoff);
}

}  // namespace splitspec::tools
