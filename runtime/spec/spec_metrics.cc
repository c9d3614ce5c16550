#include "runtime/spec/spec_metrics.h"

#include <algorithm>

#include "runtime/base/logging.h"

namespace splitspec::spec {
namespace {

double Ratio(uint64_t num, uint64_t den) { return den == 0 ? 0.0 : static_cast<double>(num) / den; }

void AddInto(std::vector<uint64_t>& into, const std::vector<uint64_t>& from) {
  if (into.size() < from.size()) into.resize(from.size(), 0);
  for (size_t i = 0; i < from.size(); ++i) into[i] += from[i];
}

}  // namespace

void SpecMetrics::RecordBlock(int drafted_tokens, int accepted_tokens, bool rejected,
                              int committed_tokens) {
  SPLITSPEC_CHECK(accepted_tokens >= 0 && accepted_tokens <= drafted_tokens &&
                  (!rejected || accepted_tokens < drafted_tokens) &&
                  committed_tokens >= accepted_tokens)
      << "drafted=" << drafted_tokens << " accepted=" << accepted_tokens << " rejected=" << rejected
      << " committed=" << committed_tokens;
  const int verified_tokens = accepted_tokens + (rejected ? 1 : 0);
  ++steps;
  drafted += drafted_tokens;
  accepted += accepted_tokens;
  verified += verified_tokens;
  committed += committed_tokens;
  if (static_cast<int>(verified_at.size()) < verified_tokens) {
    verified_at.resize(verified_tokens, 0);
    accepted_at.resize(verified_tokens, 0);
  }
  for (int i = 0; i < verified_tokens; ++i) {
    ++verified_at[i];
    if (i < accepted_tokens) ++accepted_at[i];
  }
}

void SpecMetrics::Merge(const SpecMetrics& other) {
  steps += other.steps;
  drafted += other.drafted;
  verified += other.verified;
  accepted += other.accepted;
  committed += other.committed;
  AddInto(accepted_at, other.accepted_at);
  AddInto(verified_at, other.verified_at);
}

double SpecMetrics::AcceptanceRate() const { return Ratio(accepted, verified); }
double SpecMetrics::DraftUtilization() const { return Ratio(accepted, drafted); }
double SpecMetrics::TokensPerStep() const { return Ratio(committed, steps); }

double SpecMetrics::AcceptanceRateAt(int draft_index) const {
  if (draft_index < 0 || draft_index >= static_cast<int>(verified_at.size())) return 0.0;
  return Ratio(accepted_at[draft_index], verified_at[draft_index]);
}

}  // namespace splitspec::spec
