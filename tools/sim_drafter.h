// The simulated drafter of `splitspec bench spec` (and only of it): a draft device
// with a chosen acceptance rate and cost ratio, so that the protocol's overlap is
// measured without two processes fighting over one memory bus.
//
//   ASSIGN_OR_RETURN(SimDrafterParams params, ParseSimDrafterName("sim:alpha=0.8,ratio=10"));
//   SimDrafter drafter(params, reference, vocab, /*target_step=*/absl::Milliseconds(30),
//                      /*seed=*/1);
//
// `reference` is the prompt followed by the target's own greedy continuation,
// computed first (a plain greedy run of the target over the same prompt). For
// position n the drafter proposes reference[n] with probability alpha, otherwise
// another token, independently per drafted token, and spends target_step / ratio
// per drafted token by sleeping, not computing (ratio = C = T_target / T_draft).
// It looks at positions only: its drafts past a wrong token are never accepted, so
// what it proposes there does not matter. Greedy verification only: a greedy target
// accepts exactly the drafts that equal its argmax, so the acceptance rate is alpha;
// there is no q to ship for rejection or coupled verification, and such requests
// get an error status.
//
// Alternatives (DraftRequest::alternatives > 0, what the speculation cache asks for):
// per drafted position a row of that many tokens, the drafted one first, whose
// probabilities say how often each rank is the right token: rank r holds it with
// probability alpha (1 - alpha)^r, renormalized over the row (uniform at alpha 0).
// The row is sampled to match: after a wrong draft, each later rank is the right
// token with probability alpha, so it is in the row with probability
// 1 - (1 - alpha)^(rows - 1), and the other entries are wrong tokens. The cache's
// correction and bonus guesses are right as often as the row says.
//
// Never a drafter of `serve` or of the draft worker binary: it needs the answer in
// advance. spec::ParseDrafterSpec and the cluster config reject "sim:" names.
//
// Thread model: thread-compatible, like every drafter (spec/drafter.h).
#ifndef SPLITSPEC_TOOLS_SIM_DRAFTER_H_
#define SPLITSPEC_TOOLS_SIM_DRAFTER_H_

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "runtime/spec/drafter.h"

namespace splitspec::tools {

inline constexpr char kSimDrafterPrefix[] = "sim:";

struct SimDrafterParams {
  double alpha = 0.0;       // per-token acceptance probability, [0, 1]
  double cost_ratio = 1.0;  // C = T_target / T_draft, > 0 and finite
};

bool IsSimDrafterName(absl::string_view name);

// "sim:alpha=A,ratio=C" (keys in any order, each exactly once). InvalidArgument
// naming the drafter and the key at fault.
absl::StatusOr<SimDrafterParams> ParseSimDrafterName(absl::string_view name);

// The canonical name: "sim:alpha=0.8,ratio=10".
std::string SimDrafterName(const SimDrafterParams& params);

// Splits a --drafters list at commas, except that a piece of the form KEY=VALUE
// (no ':' before its '=') continues the drafter before it:
// "ngram,sim:alpha=0.8,ratio=10,self" names ngram, sim:alpha=0.8,ratio=10 and self.
// Empty pieces are skipped.
std::vector<std::string> SplitDrafterList(absl::string_view list);

class SimDrafter : public spec::Drafter {
 public:
  // REQUIRES params valid (ParseSimDrafterName), vocab_size >= 2.
  SimDrafter(SimDrafterParams params, std::vector<int32_t> reference, int vocab_size,
             absl::Duration target_step, uint64_t seed);

  absl::string_view name() const override { return name_; }
  // InvalidArgument unless `tokens` is a prefix of the reference.
  absl::Status Start(const std::string& request_id, absl::Span<const int32_t> tokens) override;
  absl::Status Truncate(const std::string& request_id, int64_t length) override;
  void Release(const std::string& request_id) override { held_.erase(request_id); }
  // Sleeps until (tokens proposed in the batch) * target_step / ratio after the call began.
  absl::Status Propose(absl::Span<spec::DraftRequest> batch) override;

  // Tokens proposed so far (alternatives not counted), and how many of them were
  // the reference token.
  int64_t proposed() const { return proposed_; }
  int64_t proposed_correct() const { return proposed_correct_; }

 private:
  // The alternatives row of one drafted position (see the header comment).
  spec::SparseDistribution Alternatives(int32_t right, bool drafted_right,
                                        const spec::DraftRequest& request);

  SimDrafterParams params_;
  std::string name_;
  std::vector<int32_t> reference_;
  int vocab_size_;
  absl::Duration per_token_;
  std::mt19937_64 rng_;
  std::bernoulli_distribution correct_;
  std::map<std::string, int64_t> held_;  // request -> tokens held
  int64_t proposed_ = 0;
  int64_t proposed_correct_ = 0;
};

}  // namespace splitspec::tools

#endif  // SPLITSPEC_TOOLS_SIM_DRAFTER_H_
