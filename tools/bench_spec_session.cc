// SpecSession and RunSpecGeneration (tools/bench_spec.h): generations through the
// in-process cluster, timed from submit to the last token.
#include <sys/resource.h>

#include <atomic>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"
#include "runtime/base/trace.h"
#include "runtime/net/spec_proto.h"
#include "tools/bench_spec.h"

namespace splitspec::tools {
namespace {

// User + system CPU time of this process (every thread).
double ProcessCpuSeconds() {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec * 1e-6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

}  // namespace

absl::StatusOr<std::unique_ptr<SpecSession>> SpecSession::Start(const SpecSessionOptions& options) {
  if (options.target == nullptr)
    return absl::InvalidArgumentError("SpecSessionOptions.target is null");
  InProcessClusterOptions cluster;
  cluster.target = options.target;
  (options.drafter_in_target ? cluster.target_drafter : cluster.drafter) = options.drafter;
  cluster.target_engine.grammar_compiler = options.compiler;
  cluster.draft_engine.spec_cache = options.spec_cache;
  cluster.draft_engine.adaptive_window = options.adaptive_window;
  cluster.draft_engine.cache_guard = options.cache_guard;
  cluster.draft_engine.trees = options.trees;
  cluster.draft_engine.lookahead_blocks = options.lookahead;
  cluster.draft_engine.default_k = options.k;
  if (options.max_new_tokens > 0) cluster.router.max_new_tokens = options.max_new_tokens;
  std::unique_ptr<SpecSession> session(new SpecSession());
  ASSIGN_OR_RETURN(session->cluster_, InProcessCluster::Start(std::move(cluster)));
  ASSIGN_OR_RETURN(session->client_,
                   net::RequestClient::Connect(session->cluster_->coordinator_endpoint()));
  session->speculative_ = options.drafter != nullptr;
  session->k_ = options.k;
  return session;
}

SpecSession::~SpecSession() = default;

absl::StatusOr<SpecRunResult> SpecSession::Generate(const SpecRequest& request) {
  if (finished_) return absl::FailedPreconditionError("SpecSession::Generate after Finish");
  static std::atomic<int> run_counter{0};  // request ids unique in the process
  proto::SubmitRequest submit;
  submit.set_request_id(absl::StrCat("bench-", ++run_counter));
  submit.mutable_prompt_tokens()->Assign(request.prompt.begin(), request.prompt.end());
  proto::SamplingParams* params = submit.mutable_params();
  params->set_temperature(0.0f);
  params->set_max_tokens(static_cast<uint32_t>(request.max_tokens));
  params->mutable_stop_token_ids()->Assign(request.stop_token_ids.begin(),
                                           request.stop_token_ids.end());
  if (request.guidance_scale != 1.0f) {
    params->set_guidance_scale(request.guidance_scale);
    params->mutable_negative_prompt_tokens()->Assign(request.negative_prompt.begin(),
                                                     request.negative_prompt.end());
  }
  if (request.grammar.has_value()) {
    net::GrammarToProto(*request.grammar, params->mutable_processors()->mutable_grammar());
  }
  submit.set_verify_mode(proto::VERIFY_MODE_GREEDY);
  submit.set_draft_k(static_cast<uint32_t>(k_));
  if (!speculative_) submit.set_drafter("none");
  Tracer::Global().Clear();
  const double cpu_start = ProcessCpuSeconds();
  const absl::Time start = absl::Now();
  ASSIGN_OR_RETURN(net::GenerationResult result, client_->Generate(submit, absl::Minutes(10)));
  const double wall = absl::ToDoubleSeconds(absl::Now() - start);
  const double cpu = ProcessCpuSeconds() - cpu_start;
  if (result.finish_reason == proto::FINISH_REASON_ERROR) return absl::InternalError(result.error);
  // The draft worker drafts ahead: it may still be in a Propose for this request
  // when its last token arrives. The next generation (maybe another session's,
  // with the same drafter) starts once it has let go of it.
  if (speculative_) {
    RETURN_IF_ERROR(cluster_->WaitForDraftReleases(++generated_, absl::Seconds(30)));
  }
  SpecRunResult run;
  run.tokens = static_cast<int>(result.tokens.size());
  run.output = result.tokens;
  run.tokens_per_s = run.tokens / wall;
  run.stats = result.stats;
  run.wall_s = wall;
  run.cpu_s = cpu;
  run.draft_busy_s = absl::ToDoubleSeconds(Tracer::Global().BusyTime("draft"));
  run.target_busy_s = absl::ToDoubleSeconds(Tracer::Global().BusyTime("target"));
  return run;
}

SpecSession::Totals SpecSession::Finish() {
  finished_ = true;
  cluster_->KillDraftWorker();  // its counters are safe to read once its thread is gone
  return {.counters = cluster_->DraftCountersAfterKill(),
          .cache = cluster_->CacheCountersAfterKill()};
}

absl::StatusOr<SpecRunResult> RunSpecGeneration(
    model::Transformer* target, spec::Drafter* drafter, int lookahead, int k,
    const std::vector<int32_t>& prompt, int max_tokens, const std::vector<int32_t>& stop_token_ids,
    bool spec_cache, bool adaptive_window, float guidance_scale,
    const std::vector<int32_t>& negative_prompt, bool cache_guard,
    const SpecRunConstraint& constraint, bool trees) {
  ASSIGN_OR_RETURN(std::unique_ptr<SpecSession> session,
                   SpecSession::Start({.target = target,
                                       .drafter = drafter,
                                       .lookahead = lookahead,
                                       .k = k,
                                       .spec_cache = spec_cache,
                                       .adaptive_window = adaptive_window,
                                       .cache_guard = cache_guard,
                                       .trees = trees,
                                       .compiler = constraint.compiler,
                                       .max_new_tokens = max_tokens}));
  absl::StatusOr<SpecRunResult> run = session->Generate({.prompt = prompt,
                                                         .max_tokens = max_tokens,
                                                         .stop_token_ids = stop_token_ids,
                                                         .guidance_scale = guidance_scale,
                                                         .negative_prompt = negative_prompt,
                                                         .grammar = constraint.grammar});
  const SpecSession::Totals totals = session->Finish();
  if (run.ok()) run->cache = totals.cache;
  return run;
}

}  // namespace splitspec::tools
