// Helpers for the tests that run the whole pipeline in one process
// (tools/cluster/in_process_cluster.h): a started cluster with a connected client,
// and many requests run through it a wave at a time.
//
//   auto pipeline = testing::StartPipelineWithClient(options);
//   ASSERT_TRUE(pipeline.ok()) << pipeline.status();
//   for (const std::vector<int32_t>& tokens : testing::CollectTokens(*pipeline->client, submits))
//     ...
#ifndef SPLITSPEC_TESTS_INTEGRATION_IN_PROCESS_PIPELINE_H_
#define SPLITSPEC_TESTS_INTEGRATION_IN_PROCESS_PIPELINE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/splitspec.pb.h"
#include "runtime/net/request_client.h"
#include "runtime/spec/drafter.h"
#include "tests/testing/tiny_model_pair.h"
#include "tools/cluster/in_process_cluster.h"

namespace splitspec::testing {

// An in-process cluster and a client connected to its coordinator. Destroyed in
// reverse order: the client (its socket closed) first, the drafter the cluster
// drafts with last.
struct PipelineWithClient {
  std::unique_ptr<spec::Drafter> drafter;  // set when the pipeline owns its drafter
  std::unique_ptr<tools::InProcessCluster> cluster;
  std::unique_ptr<net::RequestClient> client;
};

// Starts the cluster `options` describe and connects a client to it; the error of
// whichever of the two failed.
absl::StatusOr<PipelineWithClient> StartPipelineWithClient(
    const tools::InProcessClusterOptions& options);

// A request for `prompt` with the sampling parameters `params` (their max_tokens set
// to `max_tokens`), verified by `mode` with draft_k `k`; `drafter` is
// SubmitRequest.drafter ("none": the target alone; empty: the cluster's drafter).
proto::SubmitRequest MakeSubmit(const std::string& id, const std::vector<int32_t>& prompt,
                                proto::SamplingParams params, int max_tokens,
                                proto::VerifyMode mode, int k, const std::string& drafter);

// Starts a pipeline on `pair`'s target (TinyModelPair::Load first) whose draft worker
// drafts with the DrafterSpec `drafter_name` ("model": the pair's draft model; "none":
// InProcessClusterOptions::drafter null), one thread; `lookahead_blocks` > 0
// replaces the draft engine's default; `block_wait` > 0 replaces the target's
// (TargetEngineOptions::block_wait): a test whose sampled outputs must not depend on
// timing sets it long, so that a block delayed on a loaded machine never makes the
// target decide that position alone. The result owns the drafter.
absl::StatusOr<PipelineWithClient> StartTinyPairPipeline(
    const model::TinyModelPair& pair, const std::string& drafter_name, int lookahead_blocks = 0,
    absl::Duration block_wait = absl::ZeroDuration());

// Builds the greedy request `id` with draft_k `k` and SubmitRequest.drafter `drafter`.
using GreedySubmitMaker =
    std::function<proto::SubmitRequest(const std::string& id, int k, const std::string& drafter)>;

// For each drafter of "none", "ngram", "lookup", "model" and "layerskip:1"
// (StartTinyPairPipeline on `pair`; for "none" the request says so and the draft
// worker drafts with ngram), the greedy requests NAME-k1 and NAME-k3 (k = 1, 3) commit
// exactly `plain`. Fails the current test otherwise (fatally when a pipeline does not
// start).
void ExpectGreedyEqualsPlainForEveryDrafter(const model::TinyModelPair& pair,
                                            const std::vector<int32_t>& plain,
                                            const GreedySubmitMaker& make_submit);

// How RunInWaves paces its requests. The wait is bounded by a count of polls, never
// by a timed assertion.
struct Waves {
  size_t size = 50;      // requests in flight at once (within the target's 64)
  int max_polls = 6000;  // polls per wave before its unfinished requests count as hung
  absl::Duration poll = absl::Milliseconds(20);  // each poll's budget
};

// Called once per request, in the order of `submits`, after its wave; false stops
// RunInWaves.
using ResultVisitor =
    std::function<bool(const proto::SubmitRequest& submit, const net::GenerationResult& result)>;

// Submits `submits` a wave of `waves.size` at a time; when every request of a wave
// is done (or its polls have run out) calls `visit` on each of them in order. Returns
// false as soon as `visit` does (the later requests are then neither visited nor
// submitted), true otherwise. A refused submit, a failed poll and a request not done
// after the wave's polls fail the current test (EXPECT: the run goes on).
bool RunInWaves(net::RequestClient& client, const std::vector<proto::SubmitRequest>& submits,
                const Waves& waves, const ResultVisitor& visit);

// RunInWaves with the default Waves, which also fails the current test on a request
// that finished with an error. Returns each request's tokens in the order of
// `submits`; their verified and accepted counts are added to `stats` (nullable).
std::vector<std::vector<int32_t>> CollectTokens(net::RequestClient& client,
                                                const std::vector<proto::SubmitRequest>& submits,
                                                proto::SpecStats* stats = nullptr);

}  // namespace splitspec::testing

#endif  // SPLITSPEC_TESTS_INTEGRATION_IN_PROCESS_PIPELINE_H_
