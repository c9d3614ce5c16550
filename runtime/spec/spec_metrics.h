// Counters of speculative decoding (docs/protocol.md "Verification rules"), per request or
// aggregated over many with Merge.
//
//   SpecMetrics metrics;
//   metrics.RecordBlock(/*drafted=*/block.size(), outcome.accepted, outcome.rejected,
//                       outcome.committed.size());
//   double rate = metrics.AcceptanceRate();
//
// Definitions:
//   drafted   = draft tokens received in verified blocks (a tree block, DraftBlock.parents:
//               the path positions its verification walked, accepted + 1 if rejected,
//               not its nodes; the other branches are counted nowhere);
//   verified  = accepted + 1 for each block that stopped at a rejection (the
//               rejected token); the discarded tail after it is not counted;
//   acceptance rate   = accepted / verified   (estimates alpha of the analytic model);
//   draft utilization = accepted / drafted;
//   tokens per step   = committed / steps (one step = one verified block);
//   per position: accepted_at[i] / verified_at[i] for draft index i.
// Ratios are 0 when their denominator is 0.
// Thread-compatible: guard a shared instance externally, or keep one per thread and Merge.
#ifndef SPLITSPEC_RUNTIME_SPEC_SPEC_METRICS_H_
#define SPLITSPEC_RUNTIME_SPEC_SPEC_METRICS_H_

#include <cstdint>
#include <vector>

namespace splitspec::spec {

struct SpecMetrics {
  uint64_t steps = 0;
  uint64_t drafted = 0;
  uint64_t verified = 0;
  uint64_t accepted = 0;
  uint64_t committed = 0;             // tokens committed: accepted + corrections + bonus tokens
  std::vector<uint64_t> accepted_at;  // [max k seen] accepted draft tokens per draft index
  std::vector<uint64_t> verified_at;  // [max k seen] verified draft tokens per draft index

  // One verified block. REQUIRES 0 <= accepted <= drafted, accepted < drafted if
  // rejected, committed >= accepted.
  void RecordBlock(int drafted_tokens, int accepted_tokens, bool rejected, int committed_tokens);

  // Adds `other`'s counters to these.
  void Merge(const SpecMetrics& other);

  double AcceptanceRate() const;
  double DraftUtilization() const;
  double TokensPerStep() const;
  double AcceptanceRateAt(int draft_index) const;
};

}  // namespace splitspec::spec

#endif  // SPLITSPEC_RUNTIME_SPEC_SPEC_METRICS_H_
