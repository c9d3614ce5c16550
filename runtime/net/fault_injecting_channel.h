// A Channel wrapper that drops, delays and reorders incoming frames, for tests
// of protocol robustness (docs/protocol.md invariants must hold under it).
//
//   FaultOptions faults{.drop_probability = 0.1, .delay_probability = 0.2,
//                       .max_delay = absl::Milliseconds(20), .reorder_probability = 0.1,
//                       .seed = 7};
//   auto channel = std::make_unique<FaultInjectingChannel>(std::move(inner), faults);
//
// Faults apply on the receive side, so one wrapper models a lossy link into
// its owner. Sends pass through unchanged. Deterministic for a given seed and
// arrival order. Thread-compatible, like every Channel.
#ifndef SPLITSPEC_RUNTIME_NET_FAULT_INJECTING_CHANNEL_H_
#define SPLITSPEC_RUNTIME_NET_FAULT_INJECTING_CHANNEL_H_

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "runtime/net/channel.h"

namespace splitspec::net {

struct FaultOptions {
  double drop_probability = 0.0;   // frame vanishes
  double delay_probability = 0.0;  // frame is held for up to max_delay
  absl::Duration max_delay = absl::Milliseconds(10);
  double reorder_probability =
      0.0;  // frame is held until the next one is delivered (max_delay at most)
  uint64_t seed = 1;
};

struct FaultCounters {
  uint64_t dropped = 0;
  uint64_t delayed = 0;
  uint64_t reordered = 0;
};

class FaultInjectingChannel final : public Channel {
 public:
  FaultInjectingChannel(std::unique_ptr<Channel> inner, FaultOptions options);

  absl::Status SendBytes(absl::string_view peer, std::string bytes) override;
  absl::StatusOr<RawFrame> ReceiveBytes(absl::Duration timeout) override;
  std::string endpoint() const override { return inner_->endpoint(); }
  // Readable if a held frame is due or the inner channel has input. Not a ZeroMQ
  // socket for polling purposes: held frames must be noticed too.
  bool Readable() override;

  const FaultCounters& fault_counters() const { return fault_counters_; }

 private:
  struct HeldFrame {
    RawFrame frame;
    absl::Time release_at;
    bool until_next = false;  // reorder: released once the next frame is delivered
  };
  // Returns a held frame that is due, if any.
  bool PopDue(absl::Time now, RawFrame* out);
  // Pulls one frame from `inner_` and applies faults; true if it is deliverable now.
  bool Admit(RawFrame frame, absl::Time now, RawFrame* out);
  absl::Time NextRelease() const;

  std::unique_ptr<Channel> inner_;
  FaultOptions options_;
  std::mt19937_64 rng_;
  std::vector<HeldFrame> held_;
  FaultCounters fault_counters_;
};

}  // namespace splitspec::net

#endif  // SPLITSPEC_RUNTIME_NET_FAULT_INJECTING_CHANNEL_H_
