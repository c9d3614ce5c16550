// The speculation policy (issue 27): one rule decides, per block, whether and how
// to speculate, from estimates that every measurement feeds.
//
// The rule (rates in units of plain decoding; the pipeline model of analytic_model.h):
//   1. Optimism: alpha+ = the posterior mean (A + 1) / (V + 2) of the decayed evidence
//      over drafted positions plus kConfidenceZ standard errors; likewise h+ (cache
//      hits), p+ (an ask gets a proposal) and a_c+ per confidence class c. Position i
//      of a block survives with a_i = a_c+ of its class in choices.proposal, else alpha+.
//      An unmeasured draft cost is its prior (decode bytes ratio), other ones are free.
//   2. R(off) = 1; R(m, k) for m in {sequential, overlapped, cached}, k in [min_k, max_k]
//      (min_k while the draft cost is unknown; <= the proposal's length) = PipelineSpeedup
//      at the alpha whose block accepts E(k) = sum_{i<=k} a_1...a_i, with h+, C = T(0) /
//      draft seconds per token, the batch's slope, the block overhead o, the per-step time
//      both sides pay and, drafting beside the verification, the interference. Before a
//      proposal, an ask answered empty (1 - p+) costs a plain step plus o:
//      R = (p+ (1 + E) + 1 - p+) / (p+ (1 + E) / R(m, k) + (1 - p+) (1 + o)).
//      A drafter lacking n context tokens takes them in first (c = n x its seconds per
//      token, in plain steps), repaid over the H tokens left: R <- H / (H / R + c).
//   3. Choose the largest R; the previous mode wins unless beaten by kMargin;
//      off wins unless beaten, by kMargin if speculation is off now.
//   4. Off: off_tokens = the fewest plain tokens (<= kMaxOffTokens) after which the evidence,
//      aged by kForget per token (each adding to n, using up H), makes rule 3 speculate;
//      shadow = a block costs <= kMargin of a plain step and full acceptance would win.
// Consequences: a proposal is cut where its next positions' survival no longer
// pays, and not sent (off: the target decides the next token, the next proposal
// is priced again) when its first positions are unlikely, while rule 4's window
// follows the request's blocks as sent; a request's first block is tried (no
// evidence: alpha+ is high); a failing drafter is retried once its evidence has
// aged (tens of tokens per failed try: probes and back-off); a drafter whose
// cost loses even at alpha = 1 is not (probe = false), nor a model drafter whose
// catch-up the request's remaining tokens cannot repay; a cache whose hits do not
// pay for its interference is not used; cheap drafters keep scoring acceptance
// while off (shadow blocks) and turn speculation back on as soon as the text turns
// copyable.
//
// Use (any engine; the draft worker's is draft_worker/draft_engine_policy.cc):
//   SpecEstimates e;                 // fed by every measurement: Record*()
//   SpecAction a = ChooseSpecAction(e, {.min_k = 1, .max_k = 8}, previous_mode);
//   // a.mode kOff: decode a.off_tokens alone (shadow-draft a.shadow_k if a.shadow);
//   // else draft a.k and run the block as a.mode; then RecordBlock(...) etc.
#ifndef SPLITSPEC_RUNTIME_SPEC_SPEC_POLICY_H_
#define SPLITSPEC_RUNTIME_SPEC_SPEC_POLICY_H_

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "runtime/spec/analytic_model.h"

namespace splitspec::spec {

// UCB width in standard errors: one is optimistic enough that an untried or
// long-unused option is tried again, and shrinks as evidence accumulates.
inline constexpr double kConfidenceZ = 1.0;
// Hysteresis: the measured pipeline model predicts speedups within 0.92-1.07
// (`bench spec --sim-grid`), so a predicted gain below 4% does not justify a switch.
inline constexpr double kMargin = 0.04;
// Evidence forgetting per token: acceptance drifts within a request (a summary
// reaching its quoted passage) over tens of tokens; older evidence says little.
inline constexpr double kForget = 0.995;
// Weight of a new cost sample (draft time, block overhead, interference): costs
// are noisy per block on shared cores but stable over ten blocks.
inline constexpr double kCostWeight = 0.1;
// The longest off window: a verdict made under one load is re-asked this often.
inline constexpr int kMaxOffTokens = 256;
// Confidence classes a drafter may report per drafted position: four separate
// the lookup drafter's measured acceptance (13% to 90%, LookupConfidenceClass);
// more would only spread the evidence thinner.
inline constexpr int kConfidenceClasses = 4;

enum class SpecMode { kOff, kSequential, kOverlapped, kCached };
const char* SpecModeName(SpecMode mode);

// The policy's inputs. Plain values, so any engine (the draft worker's, a
// target's local drafter) can keep and feed them; the Record* methods are the
// only writers in this project. Times are in seconds; 0 means unmeasured.
struct SpecEstimates {
  // Acceptance evidence (no prior): decayed accepted draft tokens and verified
  // draft positions (a position left empty past a shorter proposal counts as
  // rejected; an ask answered with no proposal at all counts in `asks` only).
  double accepted = 0.0;
  double verified = 0.0;
  // The same per confidence class (only positions whose block reported classes).
  std::array<double, kConfidenceClasses> class_accepted{};
  std::array<double, kConfidenceClasses> class_verified{};
  double draft_seconds_per_token = 0.0;
  // A draft token's cost in plain target steps until draft_seconds_per_token is
  // measured (Drafter::decode_bytes_ratio: a fresh worker's first blocks are
  // chosen at it, not at a free draft); 0: none.
  double draft_cost_prior = 0.0;
  // The target's T(fed) line: T = target_step_seconds * (1 + target_slope * (fed - 1)).
  double target_step_seconds = 0.0;
  double target_slope = 0.0;
  // Per-block time on the critical path outside the target's step and drafting.
  double block_overhead_seconds = 0.0;
  // Per-step time outside the target's forward that a plain token pays too (the
  // serving loop: sampling, events, streaming). A block pays it once per step as
  // a plain token does, so it is no cost of speculation: R(off) pays it as well.
  double step_overhead_seconds = 0.0;
  // Cache lookups' decayed hit evidence.
  double cache_hits = 0.0;
  double cache_lookups = 0.0;
  // Asks for a block the drafter answered with a proposal, of those made (decayed
  // by kForget per ask and per plain token): a model-free drafter proposes nothing
  // where the text has no match, and such an ask is no rejection of a drafted
  // position (rule 1's p+).
  double proposals = 0.0;
  double asks = 0.0;
  // Relative slowdown of the target's step while the draft works beside it.
  double interference = 0.0;
  // Requests batched in the target's steps (each verified draft token costs all of them).
  int target_batch = 1;
  // Catch-up (rule 2): the drafter's seconds to take in one context token it does
  // not hold (a model drafter's prefill; ~0 for a model-free one; 0: unmeasured,
  // free), the request's tokens it does not hold, and the tokens the request may
  // still generate (its max_tokens left), over which taking them in is repaid.
  double catch_up_seconds_per_token = 0.0;
  int catch_up_tokens = 0;
  int horizon_tokens = std::numeric_limits<int>::max();

  // A verified block (or a shadow block scored against the target's own tokens):
  // the first `accepted` drafts accepted; `rejected`: the position after them was
  // rejected or left undrafted. Ages the evidence by kForget per position.
  // `classes`: the block's DraftRequest.confidence, if any: its verified drafted
  // positions also count for their classes (entries out of range are ignored).
  void RecordBlock(int accepted, bool rejected, absl::Span<const int8_t> classes = {});
  // Tokens the target decided alone: age the acceptance evidence, and the
  // costs only blocks measure (overhead, interference), so a verdict taken
  // under a passing load is re-tried once they have faded.
  void RecordPlainTokens(int tokens);
  void RecordDraftSeconds(double seconds_per_token);
  void RecordCatchUpSeconds(double seconds_per_token);
  void RecordTargetLine(double step_seconds, double slope);
  void RecordBlockOverhead(double seconds);
  void RecordInterference(double relative_slowdown);
  void RecordCacheLookup(bool hit);
  // An ask for a block (k > 0) came back with a proposal (`proposed`) or empty.
  void RecordAsk(bool proposed);

  double AlphaMean() const;
  double AlphaUpper() const;  // rule 1
  // a_c+ of rule 1; a class out of range: AlphaUpper().
  double ClassUpper(int confidence_class) const;
  double CacheHitUpper() const;
  // p+ of rule 1: the upper confidence bound of proposals / asks; 1 while no ask
  // went unanswered (a model drafter always proposes).
  double ProposalUpper() const;
  std::string DebugString() const;
};

// What the caller can run. Sequential is always possible.
struct SpecChoices {
  int min_k = 1;  // >= 1
  int max_k = 8;  // >= min_k, <= kPlanMaxK
  bool allow_off = true;
  bool overlapped = false;  // two blocks in flight
  bool cached = false;      // the speculation cache
  // The confidence classes of the block the drafter proposed, to be cut (empty:
  // none, or not proposed yet). Borrowed.
  absl::Span<const int8_t> proposal;
};

struct SpecAction {
  SpecMode mode = SpecMode::kOff;
  int k = 0;           // draft tokens per block; 0 when off
  double rate = 1.0;   // predicted tokens per plain step, at the optimistic estimates
  // Off only: plain tokens before the rule is asked again; whether it is then
  // expected to speculate (false: even full acceptance loses); whether a shadow
  // block of shadow_k tokens is cheap enough to score acceptance meanwhile.
  int off_tokens = 0;
  bool probe = false;
  bool shadow = false;
  int shadow_k = 0;
};

// The predicted rate of one action at acceptance `alpha` (rule 2).
double PredictedRate(const SpecEstimates& e, SpecMode mode, int k, double alpha);

// The rule. Pure; thread-safe. REQUIRES 1 <= choices.min_k <= choices.max_k <= kPlanMaxK.
SpecAction ChooseSpecAction(const SpecEstimates& e, const SpecChoices& choices, SpecMode previous);

// The same rule inside one batched verification step (item 2 of issue 27): the
// target keeps, of the blocks its requests have ready, the draft positions whose
// expected tokens pay for what they add to the step. With `deciding` requests in
// the step (each commits at least one token) and the target's line T(fed) =
// T0 (1 + slope (fed - 1)), a draft position that survives (it and every draft
// before it in its block accepted) with probability s adds s tokens and T0 slope
// seconds, so it raises the step's tokens per second while
//   s (1 + slope (fed - 1)) > tokens * slope,
// tokens and fed counting what is already kept. Positions are taken in
// decreasing s until none pays: s = a_0 ... a_j for a block's j-th draft, a_i
// the block's own per-position estimate (its drafter's class bound a_c+, sent
// with the block) where it has one, else alpha+, its request's acceptance bound
// as in rule 1; s falls along a block, so a block is always cut to a prefix. At
// one request and a small slope nothing is cut; as the batch grows the bar nears
// 1 and speculation shrinks toward off by itself.
// Cutting a block is exact: its prefix is a draft like any other.
struct VerifyCandidate {
  double accepted = 0.0;  // the request's accepted draft tokens so far
  double verified = 0.0;  // its verified draft positions (accepted + rejections)
  int drafted = 0;        // draft tokens in the block it has ready
  // The block's a_i, one per draft (DraftBlock.acceptance); entries past its end
  // are alpha+. Borrowed; empty: unknown.
  absl::Span<const float> acceptance = {};
};
// The draft tokens to verify of each candidate, in order. REQUIRES deciding >= 1.
std::vector<int> ChooseVerifiedDrafts(absl::Span<const VerifyCandidate> candidates, int deciding,
                                      double slope);

// Trees (issue 30): the same rule picks the shape of a draft tree
// (runtime/spec/draft_tree.h) for a block. Inputs: the per-rank acceptance
// a_r = P(the drafter's r-th candidate at a reached node is the target's token),
// r = 1, 2, ... (Sequoia's positional acceptance: it depends on the rank only;
// measured on verified trees by RankAcceptance below), and the estimates' costs as
// PredictedRate charges them (the target's T(fed) line with the batch's slope s,
// the draft's cost ratio C, the block overhead o).
//   1. A node's value is the probability that it is accepted, the product of a_r
//      over its path; a tree's expected accepted length E is the sum of its values.
//      Values fall along a path and (a made non-increasing: a drafter ranks its own
//      candidates, an estimate out of order is noise) along siblings, so taking nodes
//      in decreasing value (a node's next sibling and first child becoming candidates
//      once it is taken) gives, at every size n, the tree of largest E (Sequoia's
//      argument; EAGLE-2 expands by the same value). This runs once per depth limit.
//   2. R(tree) = (1 + E) / (1 + s n + depth / C + o): the sequential pipeline model
//      of analytic_model.h with the tree's n nodes fed with the previous token (n + 1
//      tokens) and one draft forward per depth level (a model drafter batches a
//      level; model-free drafters cost ~0). A chain of k nodes is the pipeline model's
//      sequential block, R = PredictedRate(e, kSequential, k, a_1); every chain
//      within the limits is a candidate, so the chain always can win.
//      Pipelined (choices.pipelined: the draft worker drafts the next block past the
//      tree along its first path while the tree is verified, draft_worker/
//      draft_engine.h), the overlapped model of analytic_model.h with P = the value
//      of the first path's deepest node (the whole first path is accepted, so the
//      queued block is the continuation): the bonus is forfeited then, and only a
//      miss (1 - P) pays the refill (drafting and the round trip o):
//        R = (1 + E - P) / (V + (1 - P) (depth / C + o)), V = 1 + s n,
//      in units of the step slowed by the interference of drafting beside it (as
//      PredictedRate charges an overlapped chain); when the drafting does not fit in
//      V it is not hidden and R is the sequential one. A tree's root is fed in every
//      case (refed when p is pending), so unlike a chain's the continuation saves no
//      fed token: pipelining pays only where the refill (d + o) costs more than the
//      forfeited bonus, and R is the better of the two (TreeShape::pipelined says
//      which). Without pipelining the tree pays o and the drafting on every block,
//      which is what it loses against an overlapped chain (PredictedRate(e,
//      kOverlapped, k, a_1)); the caller compares R with the chain action's rate, so o
//      must be measured (an unmeasured o is free).
//   3. Choose the largest R (the fewer nodes among ties).
// Unmeasured costs count as free (rule 1 of the policy); a steep line keeps trees
// small, a dominant first rank gives a chain, a likely second rank branches.
struct TreeShape {
  std::vector<int32_t> parents;  // [nodes] depth-first order (draft_tree.h)
  std::vector<int32_t> ranks;    // [nodes] 1 = the drafter's first candidate at its parent
  // [depth] the most children of a node at depth d (d = 0: the root).
  std::vector<int> branching;
  double expected_accepted = 0.0;  // E under the estimates
  double rate = 1.0;               // R, predicted tokens per plain step
  bool pipelined = false;          // R assumes a block drafted past the first path

  int nodes() const { return static_cast<int>(parents.size()); }
  int depth() const { return static_cast<int>(branching.size()); }
  bool IsChain() const;
};

struct TreeShapeChoices {
  int max_nodes = 16;  // >= 1
  int max_depth = 8;   // >= 1
  bool pipelined = false;  // a block is drafted past the tree (rule 2)
};

// The per-rank acceptance evidence of verified trees, the rule's a_r: at each node
// a verification reached with m children, ranks 1..m were offered and at most one
// was accepted (the target's token, or the sibling recursive rejection sampling
// kept). Decayed by kForget per reached node, like the chain's evidence.
struct RankAcceptance {
  std::vector<double> accepted;  // [ranks] decayed acceptances of rank r at index r - 1
  std::vector<double> offered;   // [ranks] decayed nodes reached with at least r children

  // One reached node with `children` candidates; accepted_rank in [1, children], or 0
  // when none was accepted. Ignored when children < 1 or accepted_rank is out of range.
  void Record(int children, int accepted_rank);
  // Every reached node of a verified tree (parents [n] as in draft_tree.h) with its
  // children, from the root down the accepted path (accepted_nodes of tree_verify.h).
  void RecordTree(absl::Span<const int32_t> parents, absl::Span<const int32_t> accepted_nodes);
  // a_r for r = 1.. up to the most offered rank, and at least `min_ranks` entries: the
  // upper confidence bound of rule 1 of the policy (an untried rank gets the bound of no
  // evidence, which is optimistic, so trees get tried); empty if neither.
  std::vector<double> Upper(int min_ranks = 0) const;
};

// The expected accepted length of a tree (rule 1): parents [n] as in draft_tree.h,
// ranks [n] (>= 1; a rank beyond rank_acceptance has acceptance 0).
double ExpectedAcceptedNodes(absl::Span<const double> rank_acceptance,
                             absl::Span<const int32_t> parents, absl::Span<const int32_t> ranks);

// The rule. rank_acceptance empty: {AlphaUpper()} (a chain drafter's rank 1).
// Pure; thread-safe. REQUIRES choices.max_nodes >= 1, choices.max_depth >= 1.
TreeShape ChooseTreeShape(const SpecEstimates& e, absl::Span<const double> rank_acceptance,
                          const TreeShapeChoices& choices);

// Trees priced by the drafter's classes (the tree cut): once a drafter has proposed a tree
// and reported a confidence class per node (DraftRequest.confidence), the tree is
// cut to the sub-tree that pays, as rule 1 prices a chain proposal by its classes.
// A node's acceptance given its parent's: its parent's first child, a_c+ of its class
// (ClassUpper), the same term the chain rule uses; a later sibling of rank r, a_r of
// the per-rank evidence (second candidates are a property of the drafter's ranking, not
// of the match), at most what the siblings before it leave (1 - their acceptances: at
// most one sibling is accepted). Values (products along the path) fall along a path, so
// nodes taken in decreasing value (depth-first index among ties) always form a
// sub-tree; every such prefix within the limits, and every prefix of the first path
// (a chain is a tree), is priced by rule 2's R (sequential, or pipelined where
// allowed), and the largest R wins (fewer nodes among ties). So depth follows
// confidence (a long match runs as deep as its classes pay, a contested 1-token match
// adds less than it costs) and the caller, comparing R with the chain the first path
// gives under rule 1, never runs a tree priced below that chain.
struct TreeCut {
  std::vector<int32_t> kept;  // indices of the proposal's nodes kept, ascending
  double expected_accepted = 0.0;
  double rate = 0.0;        // R of the kept sub-tree (0: nothing kept)
  bool pipelined = false;   // R assumes a block drafted past the first path
  bool chain = false;       // the kept nodes are a prefix of the first path
};

// parents [n] (draft_tree.h, a node's siblings ranked by index), classes [n] or empty
// (then every first child counts a_1). rank_acceptance as ChooseTreeShape's. Depths
// beyond choices.max_depth and nodes beyond choices.max_nodes are never kept.
// Pure; thread-safe.
TreeCut CutTreeProposal(const SpecEstimates& e, absl::Span<const double> rank_acceptance,
                        absl::Span<const int32_t> parents, absl::Span<const int8_t> classes,
                        const TreeShapeChoices& choices);

}  // namespace splitspec::spec

#endif  // SPLITSPEC_RUNTIME_SPEC_SPEC_POLICY_H_
