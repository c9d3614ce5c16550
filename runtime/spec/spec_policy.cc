#include "runtime/spec/spec_policy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>
#include <utility>

#include "absl/strings/str_cat.h"

namespace splitspec::spec {
namespace {

// The cost ratio of a draft whose cost is unmeasured: free (rule 1's optimism).
constexpr double kFreeDraftRatio = 1e6;

// The posterior mean of a rate with evidence `successes` of `trials` and a
// uniform prior, plus kConfidenceZ standard errors, at most 1.
double UpperBound(double successes, double trials) {
  const double n = trials + 2.0;
  const double mean = (successes + 1.0) / n;
  return std::min(1.0, mean + kConfidenceZ * std::sqrt(mean * (1.0 - mean) / n));
}

bool Usable(double x) { return x > 0.0 && std::isfinite(x); }

// A draft token's cost in plain target steps: measured, else the prior; 0 if
// unknown (free: rule 1's optimism).
double DraftCostInSteps(const SpecEstimates& e) {
  if (Usable(e.draft_seconds_per_token))
    return Usable(e.target_step_seconds) ? e.draft_seconds_per_token / e.target_step_seconds : 0.0;
  return Usable(e.draft_cost_prior) ? e.draft_cost_prior : 0.0;
}

void Blend(double& average, double sample) {
  average = average > 0.0 ? (1.0 - kCostWeight) * average + kCostWeight * sample : sample;
}

// The acceptance at which the pipeline model's geometric block (k drafts, the
// i-th surviving with probability alpha^i) accepts `expected` drafts on average.
double EquivalentAlpha(double expected, int k) {
  if (!(expected > 0.0)) return 0.0;
  if (expected >= k) return 1.0;
  double low = 0.0, high = 1.0;
  for (int i = 0; i < 50; ++i) {
    const double mid = 0.5 * (low + high);
    double sum = 0.0, power = 1.0;
    for (int j = 0; j < k; ++j) sum += (power *= mid);
    (sum < expected ? low : high) = mid;
  }
  return 0.5 * (low + high);
}

// An empty block's time in plain tokens' (defined with ChargeCosts below).
double EmptyBlockCost(const SpecEstimates& e);

// Rule 2's rate of an ask for a block whose proposal (if any) accepts `expected`
// drafts at rate `rate`: with chance 1 - p it gets none and costs an empty block.
double AskRate(const SpecEstimates& e, double rate, double expected, double p) {
  if (!(p < 1.0) || !(rate > 0.0)) return rate;
  p = std::max(0.0, p);
  return (p * (1.0 + expected) + 1.0 - p) /
         (p * (1.0 + expected) / rate + (1.0 - p) * EmptyBlockCost(e));
}

// Rule 2's catch-up: `rate` once the drafter has taken in the tokens it lacks,
// paid for over the request's horizon (defined with ChargeCosts below).
double AfterCatchUp(const SpecEstimates& e, double rate);

// Rule 1's acceptance of each position of the block rule 2 prices: the
// proposal's classes' bounds, else alpha+; `max_k` entries at most.
std::vector<double> PositionAcceptance(const SpecEstimates& e, const SpecChoices& c) {
  if (c.proposal.empty()) return std::vector<double>(c.max_k, e.AlphaUpper());
  std::vector<double> a;
  for (size_t i = 0; i < c.proposal.size() && static_cast<int>(i) < c.max_k; ++i)
    a.push_back(e.ClassUpper(c.proposal[i]));
  return a;
}

// The best speculative action for blocks whose positions are accepted (given
// the ones before) with probabilities `position_alpha` (rate 0 if none is allowed).
// Before a proposal (c.proposal empty) an ask gets one with chance p+ (rule 2).
SpecAction BestSpeculative(const SpecEstimates& e, const SpecChoices& c, SpecMode previous,
                           absl::Span<const double> position_alpha) {
  const double proposal_chance = c.proposal.empty() ? e.ProposalUpper() : 1.0;
  SpecAction best;
  best.rate = 0.0;
  double best_score = 0.0;
  for (SpecMode mode : {SpecMode::kSequential, SpecMode::kCached, SpecMode::kOverlapped}) {
    if ((mode == SpecMode::kCached && !c.cached) || (mode == SpecMode::kOverlapped && !c.overlapped))
      continue;
    // An unknown draft cost is free (rule 1), but only the cheapest block
    // measures it: a model as slow as the target must not draft max_k first.
    const int max_k = std::min<int>(
        Usable(e.draft_seconds_per_token) || Usable(e.draft_cost_prior) ? c.max_k : c.min_k,
        position_alpha.size());
    double expected = 0.0, survival = 1.0;  // accepted drafts of the block's first k positions
    for (int k = 1; k <= max_k; ++k) {
      expected += (survival *= std::clamp(position_alpha[k - 1], 0.0, 1.0));
      if (k < std::min(c.min_k, max_k)) continue;
      const double rate = AfterCatchUp(
          e, AskRate(e, PredictedRate(e, mode, k, EquivalentAlpha(expected, k)), expected,
                     proposal_chance));
      const double score = rate * (mode == previous ? 1.0 + kMargin : 1.0);
      if (score > best_score * (1.0 + 1e-12)) {
        best.mode = mode;
        best.k = k;
        best.rate = rate;
        best_score = score;
      }
    }
  }
  return best;
}

// Whether rule 3, coming from off, speculates with these estimates.
bool Speculates(const SpecEstimates& e, const SpecChoices& c) {
  return BestSpeculative(e, c, SpecMode::kOff, PositionAcceptance(e, c)).rate > 1.0 + kMargin;
}

// The estimates after `tokens` more plain tokens: the evidence aged, and (rule 4)
// tokens the drafter does not take in while off, out of the request's horizon.
SpecEstimates Aged(SpecEstimates e, int tokens) {
  e.RecordPlainTokens(tokens);
  e.catch_up_tokens += tokens;
  if (e.horizon_tokens != std::numeric_limits<int>::max())
    e.horizon_tokens = std::max(0, e.horizon_tokens - tokens);
  return e;
}

}  // namespace

const char* SpecModeName(SpecMode mode) {
  switch (mode) {
    case SpecMode::kOff:
      return "off";
    case SpecMode::kSequential:
      return "sequential";
    case SpecMode::kOverlapped:
      return "overlapped";
    case SpecMode::kCached:
      return "cached";
  }
  return "unknown";
}

void SpecEstimates::RecordBlock(int accepted_tokens, bool rejected,
                                absl::Span<const int8_t> classes) {
  const int positions = std::max(0, accepted_tokens) + (rejected ? 1 : 0);
  if (positions == 0) return;
  const double keep = std::pow(kForget, positions);
  accepted = keep * accepted + std::max(0, accepted_tokens);
  verified = keep * verified + positions;
  if (classes.empty()) return;
  for (int k = 0; k < kConfidenceClasses; ++k) {
    class_accepted[k] *= keep;
    class_verified[k] *= keep;
  }
  // A position the drafter left empty has no class: only drafted positions count.
  for (int i = 0; i < std::min<int>(positions, classes.size()); ++i) {
    const int k = classes[i];
    if (k < 0 || k >= kConfidenceClasses) continue;
    class_verified[k] += 1.0;
    if (i < accepted_tokens) class_accepted[k] += 1.0;
  }
}

void SpecEstimates::RecordPlainTokens(int tokens) {
  if (tokens <= 0) return;
  const double keep = std::pow(kForget, tokens);
  accepted *= keep;
  verified *= keep;
  for (int k = 0; k < kConfidenceClasses; ++k) {
    class_accepted[k] *= keep;
    class_verified[k] *= keep;
  }
  // Costs measured on blocks are only re-measured by blocks: a verdict taken
  // under a passing load (a spike in overhead or interference) must fade like
  // acceptance evidence, or speculation would stay off for good (rule 4 then
  // ends the window where the faded costs would let a block be tried).
  block_overhead_seconds *= keep;
  interference *= keep;
  proposals *= keep;
  asks *= keep;
}

void SpecEstimates::RecordDraftSeconds(double seconds_per_token) {
  if (Usable(seconds_per_token)) Blend(draft_seconds_per_token, seconds_per_token);
}

void SpecEstimates::RecordCatchUpSeconds(double seconds_per_token) {
  if (Usable(seconds_per_token)) Blend(catch_up_seconds_per_token, seconds_per_token);
}

void SpecEstimates::RecordTargetLine(double step_seconds, double slope) {
  if (!Usable(step_seconds) || !(slope >= 0.0) || !std::isfinite(slope)) return;
  target_step_seconds = step_seconds;  // the target's own fit, already averaged
  target_slope = slope;
}

void SpecEstimates::RecordBlockOverhead(double seconds) {
  if (!(seconds >= 0.0) || !std::isfinite(seconds)) return;
  block_overhead_seconds = block_overhead_seconds > 0.0
                               ? (1.0 - kCostWeight) * block_overhead_seconds + kCostWeight * seconds
                               : seconds;
}

void SpecEstimates::RecordInterference(double relative_slowdown) {
  if (!std::isfinite(relative_slowdown)) return;
  const double sample = std::max(0.0, relative_slowdown);
  interference = interference > 0.0 ? (1.0 - kCostWeight) * interference + kCostWeight * sample
                                     : sample;
}

void SpecEstimates::RecordCacheLookup(bool hit) {
  cache_hits = kForget * cache_hits + (hit ? 1.0 : 0.0);
  cache_lookups = kForget * cache_lookups + 1.0;
}

void SpecEstimates::RecordAsk(bool proposed) {
  proposals = kForget * proposals + (proposed ? 1.0 : 0.0);
  asks = kForget * asks + 1.0;
}

double SpecEstimates::ProposalUpper() const {
  return asks - proposals > 0.0 ? UpperBound(proposals, asks) : 1.0;
}

double SpecEstimates::AlphaMean() const { return (accepted + 1.0) / (verified + 2.0); }
double SpecEstimates::AlphaUpper() const { return UpperBound(accepted, verified); }
double SpecEstimates::ClassUpper(int confidence_class) const {
  if (confidence_class < 0 || confidence_class >= kConfidenceClasses) return AlphaUpper();
  return UpperBound(class_accepted[confidence_class], class_verified[confidence_class]);
}
double SpecEstimates::CacheHitUpper() const { return UpperBound(cache_hits, cache_lookups); }

namespace {
std::string ClassBounds(const SpecEstimates& e) {
  std::string bounds;
  for (int k = 0; k < kConfidenceClasses; ++k)
    absl::StrAppend(&bounds, k > 0 ? "/" : "", e.ClassUpper(k));
  return bounds;
}
}  // namespace

std::string SpecEstimates::DebugString() const {
  return absl::StrCat("alpha=", AlphaMean(), " alpha+=", AlphaUpper(), " evidence=", verified,
                      " draft_s=", draft_seconds_per_token, " prior=", draft_cost_prior,
                      " t0=", target_step_seconds, " slope=", target_slope,
                      " overhead_s=", block_overhead_seconds,
                      " step_overhead_s=", step_overhead_seconds, " class+=", ClassBounds(*this),
                      " hit+=", CacheHitUpper(), " proposal+=", ProposalUpper(),
                      " interference=", interference, " batch=", target_batch,
                      " catch_up_s=", catch_up_seconds_per_token, " catch_up_n=", catch_up_tokens,
                      " horizon=", horizon_tokens);
}

namespace {

// The costs a block is charged in units of the batch's plain step: the slope of
// the target's line charged to this request's drafts, the draft's cost ratio C and
// the block overhead o; and the loop's time per step that plain tokens pay too.
struct ChargedCosts {
  double slope = 0.0;
  double cost_ratio = kFreeDraftRatio;
  double overhead = 0.0;
  double shared = 0.0;
  double plain_step_seconds = 0.0;  // the batch's plain step with the loop's share: R's unit
};

ChargedCosts ChargeCosts(const SpecEstimates& e) {
  // The batch's plain step, and the slope charged to this request's drafts: each
  // costs target_step_seconds * slope more for every request of the batch.
  const int batch = std::max(1, e.target_batch);
  const double slope = std::max(0.0, e.target_slope);
  const double batch_step = e.target_step_seconds * (1.0 + slope * (batch - 1));
  ChargedCosts c;
  c.slope = batch * slope / (1.0 + slope * (batch - 1));
  // T(batch) / draft seconds per token = (1 + slope (batch - 1)) / the draft's
  // cost in plain steps.
  const double draft_steps = DraftCostInSteps(e);
  c.cost_ratio = draft_steps > 0.0 ? (1.0 + slope * (batch - 1)) / draft_steps : kFreeDraftRatio;
  c.overhead = Usable(batch_step) ? e.block_overhead_seconds / batch_step : 0.0;
  // The loop's time per step, paid by a plain token and by a block alike: a
  // block's share of it is overhead, and off's rate is 1 / (1 + shared).
  c.shared = Usable(batch_step) ? std::max(0.0, e.step_overhead_seconds) / batch_step : 0.0;
  c.plain_step_seconds = batch_step * (1.0 + c.shared);
  return c;
}

double AfterCatchUp(const SpecEstimates& e, double rate) {
  if (e.catch_up_tokens <= 0 || !Usable(e.catch_up_seconds_per_token) || !(rate > 0.0))
    return rate;
  const double plain_step = ChargeCosts(e).plain_step_seconds;
  if (!Usable(plain_step)) return rate;
  const double steps = e.catch_up_tokens * e.catch_up_seconds_per_token / plain_step;
  const double horizon = std::max(0, e.horizon_tokens);
  return horizon / (horizon / rate + steps);
}

double EmptyBlockCost(const SpecEstimates& e) {
  // A plain token costs 1 + shared (in the batch's steps); an empty block adds
  // the block's overhead (a round trip to a remote drafter) to it.
  const ChargedCosts c = ChargeCosts(e);
  return 1.0 + c.overhead / (1.0 + c.shared);
}

}  // namespace

double PredictedRate(const SpecEstimates& e, SpecMode mode, int k, double alpha) {
  if (mode == SpecMode::kOff || k < 1) return 1.0;
  const ChargedCosts charged = ChargeCosts(e);
  const double charged_slope = charged.slope;
  const double cost_ratio = charged.cost_ratio;
  const double overhead = charged.overhead;
  const double shared = charged.shared;
  // Drafting beside the verification slows it by (1 + interference): in units
  // of the slowed step the draft and the overhead shrink by that factor.
  const bool beside = mode != SpecMode::kSequential;
  const double slow = beside ? 1.0 + std::max(0.0, e.interference) : 1.0;
  PipelineModelInputs in;
  in.alpha = std::clamp(alpha, 0.0, 1.0);
  in.cost_ratio = cost_ratio * slow;
  in.k = k;
  in.verify_slope = charged_slope;
  in.cache_hit_rate = e.CacheHitUpper();
  in.result_wait = mode == SpecMode::kCached ? 0.5 / in.cost_ratio : 0.0;
  in.block_overhead = (overhead + shared) / slow;
  const PipelineMode pipeline = mode == SpecMode::kSequential   ? PipelineMode::kSequential
                                : mode == SpecMode::kOverlapped ? PipelineMode::kOverlapped
                                                                : PipelineMode::kOverlappedCache;
  return PipelineSpeedup(in, pipeline) / slow * (1.0 + shared);
}

SpecAction ChooseSpecAction(const SpecEstimates& e, const SpecChoices& c, SpecMode previous) {
  SpecAction best = BestSpeculative(e, c, previous, PositionAcceptance(e, c));
  // Off is the yardstick: turning speculation on needs the margin; staying on
  // needs a predicted gain (the optimism of alpha+ is the benefit of the doubt).
  if (!c.allow_off || best.rate > (previous == SpecMode::kOff ? 1.0 + kMargin : 1.0)) return best;

  SpecAction off;
  off.shadow_k = best.k;
  // Rule 4: the window ends where aged evidence would turn speculation on.
  // Aging raises alpha+ while catch-up and the shrinking horizon lower R, so
  // speculation may pay after some tokens and no longer after more: the first
  // doubling that speculates, then bisection below it.
  int low = 0, high = 1;  // !Speculates at low (or low = 0)
  while (high <= kMaxOffTokens && !Speculates(Aged(e, high), c)) {
    low = high;
    high *= 2;
  }
  off.probe = high <= kMaxOffTokens;
  if (!off.probe) {
    off.off_tokens = kMaxOffTokens;
  } else {
    while (high - low > 1) {  // Speculates at high
      const int mid = (low + high) / 2;
      (Speculates(Aged(e, mid), c) ? high : low) = mid;
    }
    off.off_tokens = high;
  }
  // A shadow block is an acceptance sample: worth its cost only if acceptance
  // can still change the verdict (full acceptance would win).
  const std::vector<double> full(c.max_k, 1.0);
  const bool winnable = BestSpeculative(e, c, SpecMode::kOff, full).rate > 1.0 + kMargin;
  off.shadow = off.shadow_k > 0 && winnable && off.shadow_k * DraftCostInSteps(e) <= kMargin;
  return off;
}

std::vector<int> ChooseVerifiedDrafts(absl::Span<const VerifyCandidate> candidates, int deciding,
                                      double slope) {
  std::vector<int> kept(candidates.size(), 0);
  if (!(slope > 0.0) || !std::isfinite(slope)) {
    for (size_t i = 0; i < candidates.size(); ++i) kept[i] = std::max(0, candidates[i].drafted);
    return kept;  // extra positions are free: verify everything
  }
  // (survival of the next position, candidate): a block's next position is
  // offered only once the one before it is kept, so every cut is a prefix.
  std::priority_queue<std::pair<double, size_t>> next;
  std::vector<double> alpha(candidates.size());
  // a_j of candidate i's j-th draft: the block's own estimate, else alpha+.
  auto position_alpha = [&](size_t i, int j) {
    const absl::Span<const float> a = candidates[i].acceptance;
    if (j >= static_cast<int>(a.size()) || !std::isfinite(a[j])) return alpha[i];
    return std::clamp(static_cast<double>(a[j]), 0.0, 1.0);
  };
  for (size_t i = 0; i < candidates.size(); ++i) {
    alpha[i] = UpperBound(candidates[i].accepted, candidates[i].verified);
    if (candidates[i].drafted > 0) next.push({position_alpha(i, 0), i});
  }
  double tokens = std::max(1, deciding);
  double fed = std::max(1, deciding);
  while (!next.empty()) {
    const auto [survival, i] = next.top();
    next.pop();
    if (survival * (1.0 + slope * (fed - 1.0)) <= tokens * slope) break;  // nothing later pays
    ++kept[i];
    tokens += survival;
    fed += 1.0;
    if (kept[i] < candidates[i].drafted) next.push({survival * position_alpha(i, kept[i]), i});
  }
  return kept;
}

// ---------------------------------------------------------------------------
// Trees.

namespace {

// A node of a tree being grown: its parent (-1: the root), rank among its
// siblings, depth and value (the probability it is accepted).
struct GrowNode {
  int32_t parent = -1;
  int32_t rank = 1;
  int depth = 1;
  double value = 0.0;
};

// Rule 1 with a depth limit: the first `max_nodes` nodes in decreasing value
// (fewer if the values reach 0). `a` is non-increasing, in [0, 1], not empty.
std::vector<GrowNode> GrowByValue(const std::vector<double>& a, int max_nodes, int max_depth) {
  struct Candidate {
    double value;
    int32_t parent;
    int32_t rank;
    int depth;
    bool operator<(const Candidate& o) const { return value < o.value; }  // max-heap
  };
  std::vector<GrowNode> nodes;
  std::priority_queue<Candidate> candidates;
  candidates.push({a[0], -1, 1, 1});
  while (static_cast<int>(nodes.size()) < max_nodes && !candidates.empty()) {
    const Candidate c = candidates.top();
    candidates.pop();
    if (!(c.value > 0.0)) break;  // nothing left adds expected tokens
    const int32_t index = static_cast<int32_t>(nodes.size());
    nodes.push_back({c.parent, c.rank, c.depth, c.value});
    const double parent_value = c.parent < 0 ? 1.0 : nodes[c.parent].value;
    if (c.rank < static_cast<int32_t>(a.size()))  // the next sibling
      candidates.push({parent_value * a[c.rank], c.parent, c.rank + 1, c.depth});
    if (c.depth < max_depth) candidates.push({c.value * a[0], index, 1, c.depth + 1});
  }
  return nodes;
}

// The shape of `nodes` (a prefix of a GrowByValue result, or a chain) in
// depth-first order, children by rank.
TreeShape ToShape(const std::vector<GrowNode>& nodes) {
  std::vector<std::vector<int32_t>> children(nodes.size() + 1);  // entry v + 1: node v's
  for (size_t i = 0; i < nodes.size(); ++i)
    children[nodes[i].parent + 1].push_back(static_cast<int32_t>(i));
  for (auto& list : children) {
    std::sort(list.begin(), list.end(),
              [&](int32_t x, int32_t y) { return nodes[x].rank < nodes[y].rank; });
  }
  TreeShape shape;
  // Preorder with an explicit stack of (grown node, its index in the shape's parent).
  std::vector<std::pair<int32_t, int32_t>> stack;
  for (auto it = children[0].rbegin(); it != children[0].rend(); ++it) stack.push_back({*it, -1});
  while (!stack.empty()) {
    const auto [node, parent] = stack.back();
    stack.pop_back();
    const int32_t index = static_cast<int32_t>(shape.parents.size());
    shape.parents.push_back(parent);
    shape.ranks.push_back(nodes[node].rank);
    // A node at depth d is one of its parent's children, a node at depth d - 1.
    const int depth = nodes[node].depth;
    const int siblings = static_cast<int>(children[nodes[node].parent + 1].size());
    if (static_cast<int>(shape.branching.size()) < depth) shape.branching.resize(depth, 0);
    shape.branching[depth - 1] = std::max(shape.branching[depth - 1], siblings);
    for (auto it = children[node + 1].rbegin(); it != children[node + 1].rend(); ++it)
      stack.push_back({*it, index});
  }
  return shape;
}

// Per grown node: whether it is on the first path (rank 1 at every depth from the
// root: the path a block is drafted past while the tree is verified).
std::vector<bool> OnFirstPath(const std::vector<GrowNode>& nodes) {
  std::vector<bool> first(nodes.size(), false);
  for (size_t i = 0; i < nodes.size(); ++i) {
    first[i] = nodes[i].rank == 1 && (nodes[i].parent < 0 || first[nodes[i].parent]);
  }
  return first;
}

// Rule 2. `first_path_value`: the value of the first path's deepest node (the
// probability that the whole first path is accepted); read when pipelined.
double TreeRate(const ChargedCosts& c, double interference, bool pipelined,
                double expected_accepted, int nodes, int depth, double first_path_value) {
  // Off's time per token is 1 + shared (in plain steps), as in PredictedRate.
  const double sequential = (1.0 + expected_accepted) * (1.0 + c.shared) /
                            (1.0 + c.slope * nodes + depth / c.cost_ratio + c.overhead + c.shared);
  if (!pipelined) return sequential;
  // In units of the step slowed by the drafting beside it, as PredictedRate's
  // overlapped chain: the tree feeds n + 1 tokens (its root is refed when p is
  // pending), the next block's drafting (priced at the tree's depth) is hidden
  // when it fits in that step, else nothing is gained over the sequential block.
  const double slow = 1.0 + std::max(0.0, interference);
  const double verify = 1.0 + c.slope * nodes;
  const double draft = depth / (c.cost_ratio * slow);
  if (draft > verify) return sequential;
  const double overhead = (c.overhead + c.shared) / slow;
  const double p = std::clamp(first_path_value, 0.0, 1.0);
  const double tokens = 1.0 + expected_accepted - p;  // the first path's bonus is forfeited
  const double cost = verify + (1.0 - p) * (draft + overhead);
  return tokens / cost / slow * (1.0 + c.shared);
}

}  // namespace

void RankAcceptance::Record(int children, int accepted_rank) {
  if (children < 1 || accepted_rank < 0 || accepted_rank > children) return;
  if (static_cast<int>(offered.size()) < children) {
    offered.resize(children, 0.0);
    accepted.resize(children, 0.0);
  }
  for (size_t r = 0; r < offered.size(); ++r) {
    offered[r] *= kForget;
    accepted[r] *= kForget;
  }
  for (int r = 0; r < children; ++r) offered[r] += 1.0;
  if (accepted_rank > 0) accepted[accepted_rank - 1] += 1.0;
}

void RankAcceptance::RecordTree(absl::Span<const int32_t> parents,
                                absl::Span<const int32_t> accepted_nodes) {
  std::vector<std::vector<int32_t>> children(parents.size() + 1);  // entry v + 1: node v's
  for (size_t i = 0; i < parents.size(); ++i)
    children[parents[i] + 1].push_back(static_cast<int32_t>(i));
  int32_t node = -1;
  for (size_t d = 0;; ++d) {
    const std::vector<int32_t>& group = children[node + 1];
    if (group.empty()) return;  // a leaf: nothing was offered
    const int32_t next = d < accepted_nodes.size() ? accepted_nodes[d] : -1;
    const auto it = std::find(group.begin(), group.end(), next);
    const int rank = it == group.end() ? 0 : static_cast<int>(it - group.begin()) + 1;
    Record(static_cast<int>(group.size()), rank);
    if (rank == 0) return;
    node = next;
  }
}

std::vector<double> RankAcceptance::Upper(int min_ranks) const {
  std::vector<double> upper(std::max(offered.size(), static_cast<size_t>(std::max(0, min_ranks))));
  for (size_t r = 0; r < upper.size(); ++r) {
    upper[r] = r < offered.size() ? UpperBound(accepted[r], offered[r]) : UpperBound(0.0, 0.0);
  }
  return upper;
}

bool TreeShape::IsChain() const {
  for (size_t i = 0; i < parents.size(); ++i) {
    if (parents[i] != static_cast<int32_t>(i) - 1) return false;
  }
  return true;
}

double ExpectedAcceptedNodes(absl::Span<const double> rank_acceptance,
                             absl::Span<const int32_t> parents, absl::Span<const int32_t> ranks) {
  std::vector<double> value(parents.size());
  double total = 0.0;
  for (size_t i = 0; i < parents.size(); ++i) {
    const int32_t r = ranks[i];
    const double a = r >= 1 && r <= static_cast<int32_t>(rank_acceptance.size())
                         ? std::clamp(rank_acceptance[r - 1], 0.0, 1.0)
                         : 0.0;
    value[i] = (parents[i] < 0 ? 1.0 : value[parents[i]]) * a;
    total += value[i];
  }
  return total;
}

TreeShape ChooseTreeShape(const SpecEstimates& e, absl::Span<const double> rank_acceptance,
                          const TreeShapeChoices& choices) {
  std::vector<double> a(rank_acceptance.begin(), rank_acceptance.end());
  if (a.empty()) a.push_back(e.AlphaUpper());
  for (size_t r = 0; r < a.size(); ++r) {
    a[r] = std::clamp(std::isfinite(a[r]) ? a[r] : 0.0, 0.0, 1.0);
    if (r > 0) a[r] = std::min(a[r], a[r - 1]);
  }
  const ChargedCosts costs = ChargeCosts(e);
  const int max_nodes = std::max(1, choices.max_nodes);
  const int max_depth = std::max(1, choices.max_depth);
  // Rule 2's R: the better of the sequential block and, where allowed, the pipelined one.
  auto rate = [&](double expected, int nodes, int depth, double first_path_value) {
    const double sequential =
        TreeRate(costs, e.interference, false, expected, nodes, depth, first_path_value);
    if (!choices.pipelined) return sequential;
    return std::max(sequential, TreeRate(costs, e.interference, true, expected, nodes, depth,
                                         first_path_value));
  };

  // The best (nodes, depth limit) of rule 1's growth, and the best chain.
  double best_rate = 0.0;
  int best_nodes = 0, best_limit = 0;
  bool best_is_chain = false;
  auto consider = [&](double candidate, int nodes, int limit, bool chain) {
    const bool better = candidate > best_rate * (1.0 + 1e-12) ||
                        (candidate >= best_rate * (1.0 - 1e-12) && nodes < best_nodes);
    if (best_nodes == 0 || better) {
      best_rate = candidate;
      best_nodes = nodes;
      best_limit = limit;
      best_is_chain = chain;
    }
  };
  double chain_expected = 0.0, along = 1.0;
  for (int k = 1; k <= std::min(max_nodes, max_depth); ++k) {
    along *= a[0];
    chain_expected += along;
    consider(rate(chain_expected, k, k, along), k, k, /*chain=*/true);
  }
  for (int limit = 1; limit <= max_depth; ++limit) {
    const std::vector<GrowNode> grown = GrowByValue(a, max_nodes, limit);
    const std::vector<bool> first = OnFirstPath(grown);
    double expected = 0.0, first_path_value = 0.0;
    int depth = 0;
    for (size_t n = 0; n < grown.size(); ++n) {
      expected += grown[n].value;
      depth = std::max(depth, grown[n].depth);
      if (first[n]) first_path_value = grown[n].value;  // grown in decreasing value: deeper
      consider(rate(expected, static_cast<int>(n) + 1, depth, first_path_value),
               static_cast<int>(n) + 1, limit, /*chain=*/false);
    }
  }

  std::vector<GrowNode> nodes;
  if (best_is_chain) {
    double value = 1.0;
    for (int d = 1; d <= best_nodes; ++d) {
      value *= a[0];
      nodes.push_back({d - 2, 1, d, value});
    }
  } else {
    nodes = GrowByValue(a, best_nodes, best_limit);
  }
  TreeShape shape = ToShape(nodes);
  const std::vector<bool> first = OnFirstPath(nodes);
  double first_path_value = 0.0;
  for (size_t n = 0; n < nodes.size(); ++n) {
    shape.expected_accepted += nodes[n].value;
    if (first[n]) first_path_value = nodes[n].value;
  }
  shape.rate = rate(shape.expected_accepted, shape.nodes(), shape.depth(), first_path_value);
  shape.pipelined =
      choices.pipelined &&
      shape.rate > TreeRate(costs, e.interference, false, shape.expected_accepted, shape.nodes(),
                            shape.depth(), first_path_value);
  return shape;
}

TreeCut CutTreeProposal(const SpecEstimates& e, absl::Span<const double> rank_acceptance,
                        absl::Span<const int32_t> parents, absl::Span<const int8_t> classes,
                        const TreeShapeChoices& choices) {
  std::vector<double> a(rank_acceptance.begin(), rank_acceptance.end());
  if (a.empty()) a.push_back(e.AlphaUpper());
  for (double& x : a) x = std::clamp(std::isfinite(x) ? x : 0.0, 0.0, 1.0);
  const int n = static_cast<int>(parents.size());
  const bool classed = classes.size() == parents.size();
  // Per node: depth, rank, value; per parent (entry v + 1): acceptance its children used.
  std::vector<int> depth(n, 1), rank(n, 1);
  std::vector<double> value(n, 0.0), used(n + 1, 0.0);
  std::vector<int> children(n + 1, 0);
  for (int i = 0; i < n; ++i) {
    const int32_t parent = parents[i];
    if (parent < -1 || parent >= i) return {};  // not depth-first: nothing to price
    depth[i] = parent < 0 ? 1 : depth[parent] + 1;
    rank[i] = ++children[parent + 1];
    double accept = 0.0;
    if (rank[i] == 1) {
      accept = classed ? e.ClassUpper(classes[i]) : a[0];
    } else if (rank[i] <= static_cast<int>(a.size())) {
      accept = a[rank[i] - 1];
    }
    accept = std::clamp(std::min(accept, 1.0 - used[parent + 1]), 0.0, 1.0);
    used[parent + 1] += accept;
    value[i] = (parent < 0 ? 1.0 : value[parent]) * accept;
  }
  int first_path = 0;
  while (first_path < n && parents[first_path] == first_path - 1) ++first_path;

  const ChargedCosts costs = ChargeCosts(e);
  const int max_nodes = std::max(1, choices.max_nodes);
  const int max_depth = std::max(1, choices.max_depth);
  TreeCut best;
  auto consider = [&](const std::vector<int32_t>& kept, bool chain) {
    double expected = 0.0, first_path_value = 0.0;
    int deepest = 0;
    for (const int32_t i : kept) {
      expected += value[i];
      deepest = std::max(deepest, depth[i]);
    }
    // The first path's deepest kept node (values fall along it).
    for (int i = first_path - 1; i >= 0; --i) {
      if (std::find(kept.begin(), kept.end(), i) != kept.end()) {
        first_path_value = value[i];
        break;
      }
    }
    const int nodes = static_cast<int>(kept.size());
    const double sequential =
        TreeRate(costs, e.interference, false, expected, nodes, deepest, first_path_value);
    const double pipelined =
        choices.pipelined
            ? TreeRate(costs, e.interference, true, expected, nodes, deepest, first_path_value)
            : 0.0;
    const double rate = std::max(sequential, pipelined);
    const bool better =
        rate > best.rate * (1.0 + 1e-12) ||
        (rate >= best.rate * (1.0 - 1e-12) && nodes < static_cast<int>(best.kept.size()));
    if (best.kept.empty() || better) {
      best.kept = kept;
      std::sort(best.kept.begin(), best.kept.end());
      best.expected_accepted = expected;
      best.rate = rate;
      best.pipelined = pipelined > sequential;
      best.chain = chain;
    }
  };
  // Every prefix of the first path.
  std::vector<int32_t> kept;
  for (int i = 0; i < std::min({first_path, max_nodes, max_depth}); ++i) {
    if (!(value[i] > 0.0)) break;
    kept.push_back(i);
    consider(kept, /*chain=*/true);
  }
  // Nodes in decreasing value: each prefix is a sub-tree (a child's value is at most
  // its parent's, and a parent precedes it among ties).
  std::vector<int32_t> order(n);
  for (int i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t x, int32_t y) { return value[x] > value[y]; });
  std::vector<bool> taken(n, false);
  kept.clear();
  for (const int32_t i : order) {
    if (static_cast<int>(kept.size()) >= max_nodes || !(value[i] > 0.0)) break;
    if (depth[i] > max_depth || (parents[i] >= 0 && !taken[parents[i]])) continue;
    taken[i] = true;
    kept.push_back(i);
    bool chain = true;  // a prefix of the first path
    for (const int32_t j : kept) chain = chain && j < static_cast<int32_t>(kept.size());
    consider(kept, chain && static_cast<int>(kept.size()) <= first_path);
  }
  return best;
}

}  // namespace splitspec::spec
