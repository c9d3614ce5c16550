#include "runtime/net/fault_injecting_channel.h"

#include <algorithm>

namespace splitspec::net {

FaultInjectingChannel::FaultInjectingChannel(std::unique_ptr<Channel> inner, FaultOptions options)
    : inner_(std::move(inner)), options_(options), rng_(options.seed) {}

absl::Status FaultInjectingChannel::SendBytes(absl::string_view peer, std::string bytes) {
  return inner_->SendBytes(peer, std::move(bytes));
}

bool FaultInjectingChannel::PopDue(absl::Time now, RawFrame* out) {
  for (size_t i = 0; i < held_.size(); ++i) {
    if (held_[i].release_at <= now) {
      *out = std::move(held_[i].frame);
      held_.erase(held_.begin() + static_cast<long>(i));
      return true;
    }
  }
  return false;
}

bool FaultInjectingChannel::Readable() {
  const absl::Time now = absl::Now();
  for (const HeldFrame& h : held_) {
    if (h.release_at <= now) return true;
  }
  return inner_->Readable();
}

absl::Time FaultInjectingChannel::NextRelease() const {
  absl::Time next = absl::InfiniteFuture();
  for (const HeldFrame& h : held_) next = std::min(next, h.release_at);
  return next;
}

bool FaultInjectingChannel::Admit(RawFrame frame, absl::Time now, RawFrame* out) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  if (unit(rng_) < options_.drop_probability) {
    ++fault_counters_.dropped;
    return false;
  }
  if (unit(rng_) < options_.delay_probability) {
    ++fault_counters_.delayed;
    const double fraction = unit(rng_);
    held_.push_back({std::move(frame), now + options_.max_delay * fraction, false});
    return false;
  }
  if (unit(rng_) < options_.reorder_probability) {
    ++fault_counters_.reordered;
    // Held until the next frame is delivered, or max_delay at most.
    held_.push_back({std::move(frame), now + options_.max_delay, true});
    return false;
  }
  // This frame goes out now; frames held "until next" become due right away,
  // so they arrive after it: a reorder.
  for (HeldFrame& h : held_) {
    if (h.until_next) {
      h.until_next = false;
      h.release_at = now;
    }
  }
  *out = std::move(frame);
  return true;
}

absl::StatusOr<RawFrame> FaultInjectingChannel::ReceiveBytes(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    const absl::Time now = absl::Now();
    RawFrame out;
    if (PopDue(now, &out)) return out;
    // Wait for new traffic, but not past the next held frame's release time.
    absl::Time wake = std::min(deadline, NextRelease());
    absl::StatusOr<RawFrame> raw = inner_->ReceiveBytes(std::max(wake - now, absl::ZeroDuration()));
    if (raw.ok()) {
      if (Admit(*std::move(raw), absl::Now(), &out)) return out;
      continue;
    }
    if (!absl::IsDeadlineExceeded(raw.status())) return raw.status();
    if (absl::Now() >= deadline) {
      // A reordered frame with no successor in time is released rather than lost.
      for (size_t i = 0; i < held_.size(); ++i) {
        if (held_[i].until_next) {
          out = std::move(held_[i].frame);
          held_.erase(held_.begin() + static_cast<long>(i));
          return out;
        }
      }
      return raw.status();
    }
  }
}

}  // namespace splitspec::net
