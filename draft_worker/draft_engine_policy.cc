// DraftEngine's choices (draft_worker/draft_engine.h): what the speculation policy
// (runtime/spec/spec_policy.h) is told about a request, what it chooses for its next
// block (mode, k, a tree or a chain), whether the request has room for another block,
// and the shadow blocks that score acceptance while speculation is off. The rest of
// the engine (requests, results, drafting, emitting blocks) is in draft_engine.cc.
#include <algorithm>
#include <cmath>

#include "draft_worker/draft_engine.h"

namespace splitspec::draft {

spec::SpecEstimates DraftEngine::Estimates(const RequestState& state) const {
  spec::SpecEstimates e = costs_;
  e.accepted = state.acceptance.accepted;
  e.verified = state.acceptance.verified;
  e.proposals = state.acceptance.proposals;
  e.asks = state.acceptance.asks;
  if (!(e.target_step_seconds > 0.0) && verify_cost_->measured()) {
    // A target that does not report its line: the round trips' fit.
    e.target_step_seconds =
        verify_cost_->MeanSeconds(0) > 0.0 ? verify_cost_->MeanSeconds(0) : verify_cost_->BaseSeconds();
    e.target_slope = verify_cost_->Slope();
  } else if (!(e.target_step_seconds > 0.0)) {
    e.target_slope = options_.prior_verify_slope;
  }
  // The requests this worker drafts for that share the target: a lower bound
  // of its batch (it may serve others too).
  e.target_batch = 0;
  for (const auto& [id, other] : requests_) {
    if (other.target_endpoint == state.target_endpoint) ++e.target_batch;
  }
  e.target_batch = std::max(1, e.target_batch);
  // Catch-up: what the drafter lacks of the context, and the tokens left to repay it.
  e.catch_up_tokens = static_cast<int>(TokensToTakeIn(state, state.context));
  e.horizon_tokens = std::max(0, state.max_length - static_cast<int>(state.context.size()));
  // The loop's time per step beyond the forward: a plain step's round trip
  // (timed in off windows and on blocks the drafter left empty) less the
  // forward the target reports for it. Zero when the target reports no line
  // (then T(0) is that round trip itself).
  const double plain_round_trip = verify_cost_->MeanSeconds(0);
  if (costs_.target_step_seconds > 0.0 && plain_round_trip > 0.0) {
    const double plain_forward =
        e.target_step_seconds * (1.0 + e.target_slope * (e.target_batch - 1));
    e.step_overhead_seconds = std::max(0.0, plain_round_trip - plain_forward);
  }
  return e;
}

spec::SpecAction DraftEngine::NextAction(const RequestState& state) const {
  if (state.action_generation == generation_) return state.action;
  state.action = ChooseAction(state);
  state.action_tree_nodes = ChooseTree(state, state.action);
  state.action_generation = generation_;
  return state.action;
}

spec::SpecChoices DraftEngine::AdaptiveChoices() const {
  spec::SpecChoices choices;
  choices.min_k = options_.min_k;
  choices.max_k = options_.max_k;
  choices.overlapped = options_.lookahead_blocks > 1 || options_.adaptive_window;
  choices.cached = options_.spec_cache;
  return choices;
}

spec::SpecAction DraftEngine::ChooseAction(const RequestState& state) const {
  const spec::SpecMode configured = options_.spec_cache ? spec::SpecMode::kCached
                                    : options_.lookahead_blocks > 1
                                        ? spec::SpecMode::kOverlapped
                                        : spec::SpecMode::kSequential;
  spec::SpecChoices choices;
  if (state.adaptive_k) {
    choices = AdaptiveChoices();
  } else {
    choices.min_k = choices.max_k = std::clamp(state.k, 1, spec::kPlanMaxK);
    choices.allow_off = false;
    if (options_.adaptive_window) {
      choices.overlapped = true;
      choices.cached = options_.spec_cache;
    } else if (configured == spec::SpecMode::kCached && options_.cache_guard) {
      choices.cached = true;
    } else {
      spec::SpecAction fixed;
      fixed.mode = configured;
      fixed.k = state.k;
      return fixed;
    }
  }
  spec::SpecAction action = spec::ChooseSpecAction(Estimates(state), choices, state.spec_mode);
  if (!state.adaptive_k) action.k = state.k;  // may exceed kPlanMaxK
  return action;
}

int DraftEngine::ChooseTree(const RequestState& state, spec::SpecAction& action) const {
  if (!options_.trees || !drafter_->ProposesTrees() || !state.target_runs_trees ||
      state.cache.has_value() || options_.max_tree_nodes < 2) {
    return 0;
  }
  // Rows that read the tokens before them (penalties, a grammar) or a second sequence
  // (guidance): the target verifies a tree's first path only (TargetEngine::RunsTree).
  if (state.params.guided() || state.params.has_context_processors() ||
      state.params.grammar.has_value()) {
    return 0;
  }
  const spec::SpecEstimates e = Estimates(state);
  // Rank 1 is the chain's acceptance (fed by chains and trees' first paths); rank 2
  // on is the trees' evidence, optimistic until tried.
  std::vector<double> ranks = state.ranks.Upper(2);
  ranks[0] = e.AlphaUpper();
  const int max_depth = state.adaptive_k ? options_.max_k : std::max(1, state.k);
  // Pipelined where chains may overlap (the next block drafted past the tree), when
  // the rule finds that pays.
  const spec::TreeShape shape = spec::ChooseTreeShape(
      e, ranks,
      {.max_nodes = options_.max_tree_nodes,
       .max_depth = max_depth,
       .pipelined = options_.lookahead_blocks > 1 || options_.adaptive_window});
  // The chain action's rate at the same estimates; off wins unless beaten by kMargin
  // (rule 3 of the policy).
  const double chain_rate =
      action.mode == spec::SpecMode::kOff
          ? 1.0 + spec::kMargin
          : spec::PredictedRate(e, action.mode, std::clamp(action.k, 1, spec::kPlanMaxK),
                                e.AlphaUpper());
  if (drafter_reports_classes_ && state.adaptive_k &&
      (action.mode != spec::SpecMode::kOff || (!shape.IsChain() && shape.rate > chain_rate))) {
    // Priced once proposed, by its nodes' classes (CutTreeByClasses): ask for all of it.
    if (action.mode == spec::SpecMode::kOff) action.mode = spec::SpecMode::kSequential;
    action.k = max_depth;
    action.off_tokens = 0;
    action.shadow = false;
    action.shadow_k = 0;
    return options_.max_tree_nodes;
  }
  if (shape.IsChain() || !(shape.rate > chain_rate)) return 0;
  action.mode = shape.pipelined ? spec::SpecMode::kOverlapped : spec::SpecMode::kSequential;
  action.k = shape.depth();
  action.rate = shape.rate;
  action.off_tokens = 0;
  action.shadow = false;
  action.shadow_k = 0;
  return shape.nodes();
}

bool DraftEngine::CutTreeByClasses(const RequestState& state, spec::DraftRequest& proposal,
                                   spec::SpecAction& action) const {
  const int n = static_cast<int>(proposal.tokens.size());
  int first_path = 0;
  while (first_path < n && proposal.parents[first_path] == first_path - 1) ++first_path;
  // The chain it could have been: its first path, priced by the chain rule.
  spec::SpecChoices choices = AdaptiveChoices();
  const std::vector<int8_t> first_classes(proposal.confidence.begin(),
                                          proposal.confidence.begin() + first_path);
  choices.proposal = first_classes;
  const spec::SpecEstimates e = Estimates(state);
  const spec::SpecAction chain = spec::ChooseSpecAction(e, choices, state.spec_mode);
  const double chain_rate =
      chain.mode == spec::SpecMode::kOff ? 1.0 + spec::kMargin : chain.rate;
  std::vector<double> ranks = state.ranks.Upper(2);
  ranks[0] = e.AlphaUpper();
  const spec::TreeCut cut = spec::CutTreeProposal(
      e, ranks, proposal.parents, proposal.confidence,
      {.max_nodes = options_.max_tree_nodes,
       .max_depth = options_.max_k,
       .pipelined = options_.lookahead_blocks > 1 || options_.adaptive_window});
  if (cut.chain || cut.kept.empty() || !(cut.rate > chain_rate)) {
    // The first path as a chain: the chain rule cuts or withholds it.
    proposal.tokens.resize(first_path);
    proposal.parents.clear();
    proposal.confidence.resize(first_path);
    if (proposal.q.size() > static_cast<size_t>(first_path)) proposal.q.resize(first_path);
    if (proposal.top.size() > static_cast<size_t>(first_path)) proposal.top.resize(first_path);
    return false;
  }
  // The kept sub-tree, renumbered (kept is ascending: depth-first order holds).
  std::vector<int32_t> index(n, -1);
  spec::DraftRequest kept;
  int depth = 0;
  std::vector<int> depths(n, 0);
  for (const int32_t i : cut.kept) {
    const int32_t parent = proposal.parents[i];
    index[i] = static_cast<int32_t>(kept.tokens.size());
    kept.tokens.push_back(proposal.tokens[i]);
    kept.parents.push_back(parent < 0 ? -1 : index[parent]);
    kept.confidence.push_back(proposal.confidence[i]);
    if (static_cast<size_t>(i) < proposal.q.size()) kept.q.push_back(proposal.q[i]);
    if (static_cast<size_t>(i) < proposal.top.size()) kept.top.push_back(proposal.top[i]);
    depths[i] = parent < 0 ? 1 : depths[parent] + 1;
    depth = std::max(depth, depths[i]);
  }
  proposal.tokens = std::move(kept.tokens);
  proposal.parents = std::move(kept.parents);
  proposal.confidence = std::move(kept.confidence);
  proposal.q = std::move(kept.q);
  proposal.top = std::move(kept.top);
  action.mode = cut.pipelined ? spec::SpecMode::kOverlapped : spec::SpecMode::kSequential;
  action.k = depth;
  action.rate = cut.rate;
  action.off_tokens = 0;
  action.shadow = false;
  action.shadow_k = 0;
  return true;
}

size_t DraftEngine::TokensToTakeIn(const RequestState& state, absl::Span<const int32_t> context) {
  if (!state.drafter_warm) return context.size();  // a model drafter prefills at its first Propose
  return static_cast<size_t>(
      context.end() -
      std::mismatch(state.held.begin(), state.held.end(), context.begin(), context.end()).second);
}

bool DraftEngine::HasRoom(const RequestState& state) const {
  if (state.blocks_in_flight >= Window(state)) return false;
  // A block in flight that is a tree: the next one is drafted past its first path
  // (the context holds it), and is the continuation iff the target accepts that
  // whole path; else the target's new epoch makes it stale (see "Trees").
  if (static_cast<int>(state.context.size()) >= state.max_length) return false;
  // Inside an off window nothing is sent, unless shadow blocks now predict a win.
  if (static_cast<int>(state.context.size()) < state.alone_until && NextK(state) == 0) return false;
  // After an empty block the target decides that position itself and starts a
  // new epoch, so any block sent before its result would be stale: wait for it.
  return state.sent.empty() || state.sent.rbegin()->second.drafted > 0;
}

bool DraftEngine::ShadowDue(const RequestState& state) const {
  if (!options_.shadow_drafts || !state.adaptive_k || !state.shadow.empty()) return false;
  if (static_cast<int>(state.context.size()) != state.committed_length ||
      state.shadow_tried_at == state.committed_length || state.committed_length >= state.max_length)
    return false;
  const spec::SpecAction action = NextAction(state);
  return action.mode == spec::SpecMode::kOff && action.shadow;
}

void DraftEngine::ScoreShadow(RequestState& state, int base, const std::vector<int32_t>& tokens) {
  if (state.shadow.empty()) return;
  const int size = static_cast<int>(state.shadow.size());
  for (int i = 0; i < static_cast<int>(tokens.size()); ++i) {
    const int index = base + i - state.shadow_start;
    if (index < 0) continue;
    const bool match = index < size && tokens[i] == state.shadow[index];
    if (!match || index + 1 == size) {
      state.acceptance.RecordBlock(match ? size : index, !match);
      ++generation_;
      state.shadow.clear();
      return;
    }
  }
}

int DraftEngine::Window(const RequestState& state) const {
  return NextAction(state).mode == spec::SpecMode::kOverlapped
             ? std::max(2, options_.lookahead_blocks)
             : 1;
}

bool DraftEngine::CacheActive(const RequestState& state) const {
  return state.cache.has_value() && state.spec_mode == spec::SpecMode::kCached;
}

}  // namespace splitspec::draft
