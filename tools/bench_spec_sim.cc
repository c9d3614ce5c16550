// `splitspec bench spec --sim-grid | --drafters 'sim:alpha=A,ratio=C[,sim:...]'
//                       [--model PATH] [--max-tokens N] [--k K] [--rounds N] [--json]
//                       [--trace-dir DIR]`
//
// The protocol's overlap measured with a simulated draft device (tools/sim_drafter.h),
// beside the pipeline model's prediction (runtime/spec/analytic_model.h), in one run.
// Greedy verification only: the sim drafter's acceptance rate is alpha only there.
//
//  1. A target-only run of the chat prompt gives the reference (the target's greedy
//     continuation, which the sim drafters propose).
//  2. The model's time inputs, measured on the pipeline (CalibratePipeline): five
//     rounds of a target-only run and a sequential sim:alpha=0.8,ratio=10 run give
//     the prompt's step t_prefill, the verify slope s = (verify step of k + 1 tokens /
//     decode step - 1) / k, and the block overhead o (trips and turnaround per block,
//     in target steps). Bare forwards are timed too and printed for comparison.
//  3. Per drafter, --rounds (5) rounds of: target-only, then sequential (lookahead 1),
//     overlapped (lookahead 2) and overlapped+cache (lookahead 1 with the draft
//     worker's speculation cache, draft_worker/draft_engine.h), so load from other
//     processes hits them alike. The round's T_step = (wall - t_prefill) / tokens of
//     its target-only run; the sim drafter sleeps T_step / C per token (pre-drafting
//     for the cache included); speedup = tok/s over that run's tok/s. Every output
//     must equal the reference token for token.
//  4. Predicted = RunSpeedupWithPrefill(PipelineSpeedup(a, C, k, s, h, o), tokens,
//     t_prefill / T_step), a = the acceptance the run's sim drafter delivered
//     (accepted / verified: 64 tokens draw it within about +-0.05 of alpha, which
//     would otherwise move the prediction by as much as the pipeline's timing does;
//     predicted_at_nominal_alpha uses alpha), h = the run's cache hit rate (overlapped+cache
//     only): full hits per block, as the model counts them (a partial hit, which
//     still drafts the rest of its block, is a miss there, and so is a block the
//     cache guard left unplanned, draft_worker/draft_engine.h). Rows give the medians
//     over the rounds; cache_hit_rate is over all rounds' lookups.
// The sim drafter reports alternatives whose probabilities are calibrated to alpha
// (tools/sim_drafter.h), so the cache's guesses are as good as the row says.
// With --json one object per (drafter, configuration):
//   {"drafter":"sim:alpha=0.8,ratio=10","configuration":"overlapped+cache","speedup":1.9,
//    "predicted":2.0,"cache_hit_rate":0.61,"k":4,"acceptance":0.79,"tokens_per_step":3.1,
//    "model_tokens_per_step":2.95,"cache_partial_hit_rate":0.05,"verify_slope":0.14,
//    "block_overhead":0.07,"predicted_at_nominal_alpha":2.05}
// (null: no number; cache_hit_rate is a number only for the configuration with a cache).
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/base/logging.h"
#include "runtime/base/status_macros.h"
#include "runtime/base/trace.h"
#include "runtime/cli/cli_args.h"
#include "runtime/model/transformer.h"
#include "runtime/spec/analytic_model.h"
#include "runtime/tokenizer/chat_template.h"
#include "runtime/tokenizer/tokenizer_gguf.h"
#include "tools/bench_spec.h"
#include "tools/bench_tokens.h"
#include "tools/commands.h"
#include "tools/default_paths.h"
#include "tools/median.h"
#include "tools/run_breakdown.h"
#include "tools/sim_drafter.h"

namespace splitspec::tools {
namespace {

constexpr char kSimPrompt[] = "Write a short story about a robot who learns to paint.";
constexpr int kSimRounds = 5;  // default rounds per drafter (--rounds); rows give the medians

struct SimBenchFlags {
  std::string model;
  int max_tokens = 128;
  int k = 4;
  bool json = false;
  std::string trace_dir;  // a Chrome trace per speculative run there, if set
  int rounds = kSimRounds;
  std::vector<SimDrafterParams> drafters;
};

std::vector<SimDrafterParams> SimGrid() {
  std::vector<SimDrafterParams> grid;
  for (double alpha : {0.6, 0.8, 0.9}) {
    for (double ratio : {5.0, 10.0, 20.0}) grid.push_back({alpha, ratio});
  }
  return grid;
}

absl::StatusOr<SimBenchFlags> ParseSimFlags(const CommandArgs& argv) {
  ASSIGN_OR_RETURN(CliArgs args, CliArgs::Parse(argv, BenchSpecFlagTable()));
  SimBenchFlags f;
  f.model = args.GetString("model", DefaultModelPath());
  ASSIGN_OR_RETURN(int max_tokens, args.GetInt<int>("max-tokens", f.max_tokens));
  ASSIGN_OR_RETURN(int k, args.GetInt<int>("k", f.k));
  if (max_tokens < 8 || max_tokens > 2048)
    return absl::InvalidArgumentError("--max-tokens must be in [8, 2048]");
  if (k < 1 || k > 16) return absl::InvalidArgumentError("--k must be in [1, 16]");
  f.max_tokens = static_cast<int>(max_tokens);
  f.k = static_cast<int>(k);
  f.json = args.Has("json");
  f.trace_dir = args.GetString("trace-dir", "");
  ASSIGN_OR_RETURN(int rounds, args.GetInt<int>("rounds", kSimRounds));
  if (rounds < 1 || rounds > 100) return absl::InvalidArgumentError("--rounds must be in [1, 100]");
  f.rounds = static_cast<int>(rounds);
  if (args.Has("sim-grid")) f.drafters = SimGrid();
  for (const std::string& name : SplitDrafterList(args.GetString("drafters", ""))) {
    if (!IsSimDrafterName(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "drafter '", name,
          "': a run with sim drafters (or --sim-grid) takes sim:alpha=A,ratio=C drafters only"));
    }
    ASSIGN_OR_RETURN(SimDrafterParams params, ParseSimDrafterName(name));
    f.drafters.push_back(params);
  }
  if (f.drafters.empty())
    return absl::InvalidArgumentError("no sim drafters: give --sim-grid or --drafters 'sim:..'");
  return f;
}

struct TargetTimings {
  double prefill_s = 0;  // the prompt's forward
  double step_s = 0;     // one token after the prompt
  double block_s = 0;    // k + 1 tokens after the prompt (a sequential verification)
};

// Medians of interleaved forwards on a fresh cache, each truncated back to the prompt.
absl::StatusOr<TargetTimings> TimeTargetForwards(model::Transformer& target,
                                                 const std::vector<int32_t>& prompt, int k) {
  constexpr int kRepeats = 9;
  const std::vector<int32_t> block = BenchTokens(k + 1, target.config().vocab_size, 3);
  std::unique_ptr<model::KvCache> cache = target.NewCache(static_cast<int>(prompt.size()) + k + 1);
  model::ForwardOutput out;
  std::vector<double> prefill, step, verify;
  for (int rep = -1; rep < kRepeats; ++rep) {  // one warm-up round
    absl::Time start = absl::Now();
    RETURN_IF_ERROR(target.Forward({{cache.get(), prompt, model::LogitsMode::kLast}}, &out));
    if (rep >= 0) prefill.push_back(absl::ToDoubleSeconds(absl::Now() - start));
    for (int tokens : {1, k + 1}) {
      start = absl::Now();
      RETURN_IF_ERROR(target.Forward(
          {{cache.get(), absl::MakeConstSpan(block.data(), tokens), model::LogitsMode::kAll}},
          &out));
      if (rep >= 0)
        (tokens == 1 ? step : verify).push_back(absl::ToDoubleSeconds(absl::Now() - start));
      RETURN_IF_ERROR(cache->Truncate(static_cast<int>(prompt.size())));
    }
    RETURN_IF_ERROR(cache->Truncate(0));
  }
  return TargetTimings{Median(prefill), Median(step), Median(verify)};
}

struct SimRow {
  std::string drafter, configuration;
  double speedup = -1, predicted = -1;  // < 0: unavailable; predicted at the delivered alpha
  double predicted_nominal = -1;        // the same at the drafter's nominal alpha
  double acceptance = -1;
  double tokens_per_step = -1, model_tokens_per_step = -1;  // measured; the model's
  double cache_hit_rate = -1;          // full hits per block; < 0: no cache here
  double cache_partial_hit_rate = -1;  // partial hits per block; < 0: no cache here
  RunBreakdown breakdown;              // where the time went (table mode prints it)
};

constexpr const char* kConfigurations[] = {"sequential", "overlapped", "overlapped+cache"};
constexpr int kConfigurationCount = 3;
constexpr spec::PipelineMode kModes[kConfigurationCount] = {spec::PipelineMode::kSequential,
                                                            spec::PipelineMode::kOverlapped,
                                                            spec::PipelineMode::kOverlappedCache};

std::string JsonNumber(double x) { return x < 0 ? "null" : absl::StrFormat("%.4f", x); }

// verify_slope and block_overhead: the calibrated model inputs every prediction used.
void PrintRowJson(const SimRow& r, int k, double verify_slope, double block_overhead) {
  std::printf(
      "{\"drafter\":\"%s\",\"configuration\":\"%s\",\"speedup\":%s,\"predicted\":%s,"
      "\"cache_hit_rate\":%s,\"k\":%d,\"acceptance\":%s,\"tokens_per_step\":%s,"
      "\"model_tokens_per_step\":%s,\"cache_partial_hit_rate\":%s,\"verify_slope\":%s,"
      "\"block_overhead\":%s,\"predicted_at_nominal_alpha\":%s}\n",
      r.drafter.c_str(), r.configuration.c_str(), JsonNumber(r.speedup).c_str(),
      JsonNumber(r.predicted).c_str(), JsonNumber(r.cache_hit_rate).c_str(), k,
      JsonNumber(r.acceptance).c_str(), JsonNumber(r.tokens_per_step).c_str(),
      JsonNumber(r.model_tokens_per_step).c_str(), JsonNumber(r.cache_partial_hit_rate).c_str(),
      JsonNumber(verify_slope).c_str(), JsonNumber(block_overhead).c_str(),
      JsonNumber(r.predicted_nominal).c_str());
}

void PrintRowTable(const SimRow& r) {
  const std::string hits = r.cache_hit_rate < 0 ? "-"
                                                : absl::StrFormat("%.3f + %.3f", r.cache_hit_rate,
                                                                  r.cache_partial_hit_rate);
  std::printf(
      "| %-22s | %-16s | %6.2fx | %8.2fx | %9.2f | %10.2fx | %6.3f | %4.2f / %4.2f | %-13s |\n",
      r.drafter.c_str(), r.configuration.c_str(), r.speedup, r.predicted, r.speedup / r.predicted,
      r.predicted_nominal, r.acceptance, r.tokens_per_step, r.model_tokens_per_step, hits.c_str());
}

struct SimContext {
  model::Transformer* target = nullptr;
  std::vector<int32_t> prompt;
  std::vector<int32_t> reference;  // prompt + the target's greedy continuation
  // The model's inputs, measured on the pipeline (CalibratePipeline):
  double prefill_s = 0;       // the prompt's target step
  double verify_slope = 0;    // s: a (k + 1)-token verify step over a 1-token step
  double block_overhead = 0;  // o, in target steps
};

absl::StatusOr<SpecRunResult> RunChecked(const SimContext& c, spec::Drafter* drafter, int lookahead,
                                         int k, int max_tokens, bool spec_cache = false) {
  ASSIGN_OR_RETURN(SpecRunResult run, RunSpecGeneration(c.target, drafter, lookahead, k, c.prompt,
                                                        max_tokens, {}, spec_cache));
  const std::vector<int32_t> expected(c.reference.begin() + c.prompt.size(), c.reference.end());
  if (run.output != expected) {
    return absl::InternalError(absl::StrCat(
        drafter == nullptr ? "target-only" : std::string(drafter->name()), " lookahead ", lookahead,
        spec_cache ? " with the cache" : "", ": output differs from the target's greedy output (",
        run.output.size(), " vs ", expected.size(), " tokens)"));
  }
  return run;
}

// The target step of a target-only run: its decode time per token, prefill excluded.
double TargetStepSeconds(const SimContext& c, const SpecRunResult& alone) {
  return std::max(alone.wall_s - c.prefill_s, 0.5 * alone.wall_s) / alone.tokens;
}

// Per configuration (kConfigurations): speedups and predictions per round.
struct Samples {
  std::vector<double> speedup, predicted, predicted_nominal;
  int64_t accepted = 0, verified = 0, tokens = 0, steps = 0;
  spec::PipelineModelInputs model;       // the last round's inputs (alpha aside)
  spec::SpeculationCacheCounters cache;  // over the rounds (overlapped+cache only)
  RunBreakdown breakdown;                // where the time went, over the rounds
};

// Full hits per cached-schedule block: the model's h (a partial hit counts as a
// miss there, and so does a block the cache guard left unplanned, which is
// drafted after its predecessor's result like a miss).
double FullHitRate(const spec::SpeculationCacheCounters& c) {
  const uint64_t blocks = c.lookups + c.unplanned_blocks;
  return blocks > 0 ? static_cast<double>(c.hits) / static_cast<double>(blocks) : 0.0;
}

// The target-only runs of a drafter's rounds: their traces, and the T_step each
// round's sim drafters were given.
struct TargetOnlyTimes {
  RunBreakdown breakdown;
  RunBreakdown::Sum step;
};

// One round: a target-only run, then the drafter sequential, overlapped and
// overlapped+cache, its T_target the step of that target-only run (so C holds
// while load from other processes changes the target's speed).
absl::Status MeasureRound(const SimContext& c, const SimBenchFlags& f,
                          const SimDrafterParams& params, uint64_t seed,
                          Samples samples[kConfigurationCount], TargetOnlyTimes* target_only) {
  ASSIGN_OR_RETURN(SpecRunResult alone, RunChecked(c, nullptr, 1, f.k, f.max_tokens));
  target_only->breakdown.Merge(BreakdownFromTrace(Tracer::Global().Events()));
  const double step_s = TargetStepSeconds(c, alone);
  target_only->step.Add(step_s);
  for (int i = 0; i < kConfigurationCount; ++i) {
    const spec::PipelineMode mode = kModes[i];
    const bool cache = mode == spec::PipelineMode::kOverlappedCache;
    const int lookahead = mode == spec::PipelineMode::kOverlapped ? 2 : 1;
    SimDrafter drafter(params, c.reference, c.target->config().vocab_size, absl::Seconds(step_s),
                       seed + 1 + i);
    ASSIGN_OR_RETURN(SpecRunResult run,
                     RunChecked(c, &drafter, lookahead, f.k, f.max_tokens, cache));
    // The model at the acceptance this run's sim drafter delivered (64 tokens draw
    // it within about +-0.05 of alpha), and at the nominal alpha.
    const double delivered =
        run.stats.verified() > 0
            ? static_cast<double>(run.stats.accepted()) / static_cast<double>(run.stats.verified())
            : params.alpha;
    spec::PipelineModelInputs in{.alpha = delivered,
                                 .cost_ratio = params.cost_ratio,
                                 .k = f.k,
                                 .verify_slope = c.verify_slope,
                                 .cache_hit_rate = cache ? FullHitRate(run.cache) : 0.0,
                                 .result_wait = cache ? 0.5 / params.cost_ratio : 0.0,
                                 .block_overhead = c.block_overhead};
    Samples& s = samples[i];
    s.breakdown.Merge(BreakdownFromTrace(Tracer::Global().Events()));
    if (!f.trace_dir.empty()) {
      RETURN_IF_ERROR(Tracer::Global().WriteChromeJson(
          absl::StrFormat("%s/sim-a%g-c%g-%s-%d.json", f.trace_dir, params.alpha, params.cost_ratio,
                          kConfigurations[i], seed)));
    }
    s.cache.Merge(run.cache);
    s.speedup.push_back(run.tokens_per_s / alone.tokens_per_s);
    s.predicted.push_back(spec::RunSpeedupWithPrefill(spec::PipelineSpeedup(in, mode), run.tokens,
                                                      c.prefill_s / step_s));
    in.alpha = params.alpha;
    s.predicted_nominal.push_back(spec::RunSpeedupWithPrefill(spec::PipelineSpeedup(in, mode),
                                                              run.tokens, c.prefill_s / step_s));
    s.model = in;
    s.tokens += run.tokens;
    s.steps += static_cast<int64_t>(run.stats.steps());
    s.accepted += static_cast<int64_t>(run.stats.accepted());
    s.verified += static_cast<int64_t>(run.stats.verified());
  }
  return absl::OkStatus();
}

// One drafter's rows: medians over --rounds rounds.
absl::StatusOr<std::vector<SimRow>> MeasureDrafter(const SimContext& c, const SimBenchFlags& f,
                                                   const SimDrafterParams& params, uint64_t seed,
                                                   TargetOnlyTimes* target_only) {
  const std::string name = SimDrafterName(params);
  Samples samples[kConfigurationCount];
  for (int round = 0; round < f.rounds; ++round) {
    RETURN_IF_ERROR(MeasureRound(c, f, params, seed + 4 * round, samples, target_only));
  }
  std::vector<SimRow> rows;
  for (int i = 0; i < kConfigurationCount; ++i) {
    const Samples& s = samples[i];
    const bool cache = i == kConfigurationCount - 1;
    const double acceptance =
        s.verified > 0 ? static_cast<double>(s.accepted) / static_cast<double>(s.verified) : 0.0;
    spec::PipelineModelInputs model = s.model;
    model.alpha = acceptance;
    const double lookups =
        static_cast<double>(std::max<uint64_t>(1, s.cache.lookups + s.cache.unplanned_blocks));
    rows.push_back({.drafter = name,
                    .configuration = kConfigurations[i],
                    .speedup = Median(s.speedup),
                    .predicted = Median(s.predicted),
                    .predicted_nominal = Median(s.predicted_nominal),
                    .acceptance = acceptance,
                    .tokens_per_step = s.steps > 0 ? static_cast<double>(s.tokens) / s.steps : 0.0,
                    .model_tokens_per_step = spec::PipelineTokensPerBlock(model, kModes[i]),
                    .cache_hit_rate = cache ? FullHitRate(s.cache) : -1.0,
                    .cache_partial_hit_rate =
                        cache ? static_cast<double>(s.cache.partial_hits) / lookups : -1.0,
                    .breakdown = s.breakdown});
  }
  return rows;
}

// The pipeline model's time inputs, measured on the pipeline itself rather than on
// bare forwards: a target step does more than its forward (it reads the rows and
// verifies), and a block travels. kCalibrationRounds rounds of a target-only run and
// a sequential run with sim:alpha=0.8,ratio=10 (its verify steps feed k + 1 tokens
// whatever alpha is), apart from the runs they predict:
//   s = (verify step / target-only decode step - 1) / k (step spans, both);
//   o = (transit + queue + result trip + turnaround - k T_step / C) / T_step per
//       block (turnaround: the result read to the next block sent, its drafting
//       included; what remains is the trips and the draft's wake-up);
//   P = the target-only run's first step (the prompt) / T_step.
struct PipelineCalibration {
  RunBreakdown target_only, sequential;
  RunBreakdown::Sum step;  // T_step of the target-only runs
};

absl::Status CalibratePipeline(SimContext& c, const SimBenchFlags& f) {
  constexpr int kCalibrationRounds = 5;
  const SimDrafterParams params{0.8, 10.0};
  PipelineCalibration cal;
  for (int round = 0; round < kCalibrationRounds; ++round) {
    ASSIGN_OR_RETURN(SpecRunResult alone, RunChecked(c, nullptr, 1, f.k, f.max_tokens));
    cal.target_only.Merge(BreakdownFromTrace(Tracer::Global().Events()));
    const double step_s = TargetStepSeconds(c, alone);
    cal.step.Add(step_s);
    SimDrafter drafter(params, c.reference, c.target->config().vocab_size, absl::Seconds(step_s),
                       1000 + round);
    RETURN_IF_ERROR(RunChecked(c, &drafter, 1, f.k, f.max_tokens).status());
    cal.sequential.Merge(BreakdownFromTrace(Tracer::Global().Events()));
  }
  // Medians: one step slowed by another process must not move the model's inputs
  // (a target-only run's one prompt step barely moves the median of its ~64).
  const double step_s = cal.step.Median();
  const double decode_step_s = cal.target_only.steps.Median();
  const RunBreakdown& seq = cal.sequential;
  if (decode_step_s <= 0 || seq.verify.count == 0 || seq.turnaround.count == 0) {
    return absl::InternalError("pipeline calibration: the traces have no decode or verify steps");
  }
  c.verify_slope = std::max(0.0, (seq.verify.Median() / decode_step_s - 1.0) / f.k);
  const double trips = seq.transit.Median() + seq.queued.Median() + seq.result_trip.Median() +
                       seq.turnaround.Median() - f.k * step_s / params.cost_ratio;
  c.block_overhead = std::max(0.0, trips) / step_s;
  c.prefill_s = cal.target_only.first_steps.Median();
  if (!f.json) {
    std::printf(
        "pipeline calibration (%d rounds: target-only, then sequential sim:alpha=0.8,ratio=10; "
        "medians): T_step %.2f ms (decode step span %.2f ms), verify step of k + 1 = %d tokens "
        "%.2f ms -> "
        "verify slope s = %.3f; per block transit %.3f + queue %.3f + result trip %.3f + "
        "turnaround %.3f - drafting %.3f ms -> block overhead o = %.3f T_step; prompt step "
        "%.2f ms\n",
        kCalibrationRounds, 1e3 * step_s, 1e3 * decode_step_s, f.k + 1, 1e3 * seq.verify.Median(),
        c.verify_slope, 1e3 * seq.transit.Median(), 1e3 * seq.queued.Median(),
        1e3 * seq.result_trip.Median(), 1e3 * seq.turnaround.Median(),
        1e3 * f.k * step_s / params.cost_ratio, c.block_overhead, 1e3 * c.prefill_s);
  }
  return absl::OkStatus();
}

absl::StatusOr<SimContext> Prepare(const SimBenchFlags& f, model::Transformer* target) {
  ASSIGN_OR_RETURN(model::Tokenizer tokenizer, model::LoadTokenizerFromGguf(target->file()));
  ASSIGN_OR_RETURN(model::ChatTemplate chat,
                   model::ChatTemplate::FromSource(tokenizer.chat_template()));
  ASSIGN_OR_RETURN(std::string text, chat.Apply({{"user", kSimPrompt}}, true));
  SimContext c;
  c.target = target;
  c.prompt = tokenizer.Encode(text, {.add_special = true, .parse_special = true});
  // The reference: a target-only run (its output is the target's greedy decode).
  ASSIGN_OR_RETURN(SpecRunResult reference,
                   RunSpecGeneration(target, nullptr, 1, f.k, c.prompt, f.max_tokens, {}));
  c.reference = c.prompt;
  c.reference.insert(c.reference.end(), reference.output.begin(), reference.output.end());
  ASSIGN_OR_RETURN(TargetTimings t, TimeTargetForwards(*target, c.prompt, f.k));
  c.prefill_s = t.prefill_s;  // until the calibration measures the prompt's step
  if (!f.json) {
    std::printf(
        "bare forwards (for comparison; not the model's inputs): 1 token %.2f ms, k + 1 = %d "
        "tokens %.2f ms (slope %.3f), prefill of %zu tokens %.2f ms\n",
        t.step_s * 1e3, f.k + 1, t.block_s * 1e3, std::max(0.0, (t.block_s / t.step_s - 1) / f.k),
        c.prompt.size(), t.prefill_s * 1e3);
  }
  RETURN_IF_ERROR(CalibratePipeline(c, f));
  return c;
}

absl::Status RunSim(const SimBenchFlags& f) {
  SetDefaultLogLevel(LogLevel::kWarning);  // the in-process services stay quiet
  Tracer::Global().Enable();  // where each configuration's time goes (tools/run_breakdown.h)
  ASSIGN_OR_RETURN(std::unique_ptr<model::Transformer> target,
                   model::Transformer::Load(f.model, {.threads = 1}));
  if (!f.json) {
    std::printf(
        "splitspec bench spec (simulated drafters): model %s, %d new tokens per run, k=%d, "
        "GREEDY verification only, target 1 thread, %u hardware threads\n",
        f.model.c_str(), f.max_tokens, f.k, std::thread::hardware_concurrency());
  }
  ASSIGN_OR_RETURN(SimContext c, Prepare(f, target.get()));
  if (!f.json) {
    std::printf(
        "speedup = tok/s / tok/s of a target-only run just before; predicted = the pipeline "
        "model (runtime/spec/analytic_model.h) at the acceptance each run delivered, C, and "
        "the calibrated slope s and block overhead o, diluted by the prefill; at nominal = the "
        "same at the nominal alpha; medians of %d rounds; accept = accepted / verified; "
        "tok/step = tokens per target verification step, measured and the model's; cache "
        "hits = full + partial hits per block (the model takes the full ones as h)\n\n",
        f.rounds);
    std::printf(
        "| drafter                | configuration    | speedup | predicted | meas/pred | at "
        "nominal "
        "| accept | tok/step: run / model | cache hits    |\n|------------------------|----------"
        "--------|---------|-----------|-----------|------------|--------|-----------------------|"
        "---------------|\n");
  }
  uint64_t seed = 1;
  for (const SimDrafterParams& params : f.drafters) {
    TargetOnlyTimes target_only;
    ASSIGN_OR_RETURN(std::vector<SimRow> rows, MeasureDrafter(c, f, params, seed, &target_only));
    seed += 8 * f.rounds;  // distinct seeds for every run of every drafter
    for (const SimRow& row : rows) {
      if (f.json) {
        PrintRowJson(row, f.k, c.verify_slope, c.block_overhead);
      } else {
        PrintRowTable(row);
      }
    }
    if (!f.json) {
      // Does the sim drafter take T_target / C per token? T_step against the
      // target-only steps' own spans, and the sequential blocks' drafting time.
      // (A target-only run's first step is its prompt's.)
      const RunBreakdown::Sum decode = target_only.breakdown.LaterSteps();
      const RunBreakdown& sequential = rows.front().breakdown;
      const double per_token = sequential.draft_steps.Mean() / f.k;
      std::printf(
          "  target-only: T_step (wall - prefill) / tokens %.2f ms, decode step span %.2f ms x "
          "%lld; sequential drafting %.3f ms per token = T_step / %.1f (C %g)\n",
          1e3 * target_only.step.Mean(), 1e3 * decode.Mean(), static_cast<long long>(decode.count),
          1e3 * per_token, per_token > 0 ? target_only.step.Mean() / per_token : 0.0,
          params.cost_ratio);
      for (const SimRow& row : rows) {
        std::printf("  %s: %s\n", row.configuration.c_str(),
                    FormatBreakdown(row.breakdown).c_str());
      }
    }
    std::fflush(stdout);
  }
  return absl::OkStatus();
}

}  // namespace

bool WantsSimBench(const CommandArgs& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--sim-grid") return true;
    absl::string_view value;
    if (args[i] == "--drafters" && i + 1 < args.size()) value = args[i + 1];
    if (absl::StartsWith(args[i], "--drafters=")) value = absl::string_view(args[i]).substr(11);
    for (const std::string& name : SplitDrafterList(value)) {
      if (IsSimDrafterName(name)) return true;
    }
  }
  return false;
}

int RunBenchSpecSim(const CommandArgs& args) {
  absl::StatusOr<SimBenchFlags> flags = ParseSimFlags(args);
  if (!flags.ok()) {
    std::fprintf(stderr, "splitspec bench spec: %s\n",
                 std::string(flags.status().message()).c_str());
    return 2;
  }
  absl::Status status = RunSim(*flags);
  if (!status.ok()) {
    std::fprintf(stderr, "splitspec bench spec: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}

}  // namespace splitspec::tools
