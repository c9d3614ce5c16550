// Whether the speculation cache pays where it runs (issue #18). Pre-drafting
// while the target verifies saves the draft's time when the result hits a
// pre-drafted branch; where draft and target share cores or a memory bus it also
// slows the verification it overlaps (measured on 2 CPU cores: a layer-skip draft
// whose pre-drafts hit 5-10% of the time made overlapped+cache 0.87-0.95x
// sequential). Both sides are measured per request:
//   cost per block = (busy - idle) x T: busy and idle are EWMAs of a block's
//     round trip over the target's own T(k) (its VerifyResult's step and slope),
//     for blocks verified while the draft pre-drafted and while it did not;
//   gain per block = the EWMA over lookups of the pre-drafted tokens a hit sends,
//     times the draft's seconds per token.
// PlanNext() says whether the next block pre-drafts: no once min_samples lookups
// found no hit at all (that cannot pay anywhere); else yes while either side is
// unmeasured or the gain covers the cost, no otherwise. Every probe_interval-th
// block (every bootstrap_interval-th until min_samples idle blocks are timed)
// goes the other way, so both sides stay measured.
//
//   CacheWorth worth({});
//   if (worth.PlanNext()) cache.Plan(...);             // per block sent
//   worth.RecordRoundTrip(pre_drafted, round_trip_s, target_verify_s);  // per result
//   worth.RecordLookup(hit ? hit_tokens * draft_s_per_token : 0.0);    // per lookup
//
// Where pre-drafting costs the target nothing (separate devices, or the bench's
// sleeping sim drafter) busy and idle agree, and the cache keeps running; the
// probes cost one block in probe_interval its pre-draft.
// Thread-compatible; one per request.
#ifndef SPLITSPEC_RUNTIME_SPEC_CACHE_WORTH_H_
#define SPLITSPEC_RUNTIME_SPEC_CACHE_WORTH_H_

#include <cstdint>

#include "absl/status/status.h"

namespace splitspec::spec {

struct CacheWorthConfig {
  int probe_interval = 16;     // once measured: one block in this many goes the other way; >= 2
  int bootstrap_interval = 3;  // until min_samples idle blocks are timed; >= 2
  int min_samples = 3;         // timed blocks per side before the cost is trusted; >= 1
  double decay = 0.8;          // EWMA weight of the past, [0, 1)

  // OK, or InvalidArgument naming the first field out of range and its value.
  absl::Status Validate() const;
};

class CacheWorth {
 public:
  // REQUIRES config.Validate().ok().
  explicit CacheWorth(CacheWorthConfig config);

  // Whether the block being sent now pre-drafts. Call once per block sent.
  bool PlanNext();
  // A block's round trip (sent -> result), and the target's own T(k) for it; both
  // > 0 and finite, else ignored.
  void RecordRoundTrip(bool pre_drafted, double round_trip_s, double target_verify_s);
  // A cache lookup: the draft seconds its hit saved (0 for a miss), >= 0.
  void RecordLookup(double saved_s);

  // False after min_samples lookups without a hit; else true while either side is
  // unmeasured, or the gain covers the cost.
  bool Worth() const;
  double CostSeconds() const;  // (busy - idle) x the last T(k); 0 while unmeasured
  double GainSeconds() const;  // 0 before the first lookup
  // Both sides timed (min_samples each) and a lookup made: the estimates are
  // worth carrying to the drafter's next request.
  bool measured() const { return Measured(); }
  int64_t blocks() const { return blocks_; }
  int64_t unplanned() const { return unplanned_; }

 private:
  bool Measured() const;

  CacheWorthConfig config_;
  double busy_ = 0, idle_ = 0, gain_ = 0;  // EWMAs
  int busy_samples_ = 0, idle_samples_ = 0, lookups_ = 0;
  double last_verify_s_ = 0;
  int64_t blocks_ = 0, unplanned_ = 0;
};

}  // namespace splitspec::spec

#endif  // SPLITSPEC_RUNTIME_SPEC_CACHE_WORTH_H_
