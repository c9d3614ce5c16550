#include "tests/integration/in_process_pipeline.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/spec/drafter_factory.h"

namespace splitspec::testing {

absl::StatusOr<PipelineWithClient> StartPipelineWithClient(
    const tools::InProcessClusterOptions& options) {
  PipelineWithClient pipeline;
  absl::StatusOr<std::unique_ptr<tools::InProcessCluster>> cluster =
      tools::InProcessCluster::Start(options);
  if (!cluster.ok()) return cluster.status();
  pipeline.cluster = *std::move(cluster);
  absl::StatusOr<std::unique_ptr<net::RequestClient>> client =
      net::RequestClient::Connect(pipeline.cluster->coordinator_endpoint());
  if (!client.ok()) return client.status();
  pipeline.client = *std::move(client);
  return pipeline;
}

proto::SubmitRequest MakeSubmit(const std::string& id, const std::vector<int32_t>& prompt,
                                proto::SamplingParams params, int max_tokens,
                                proto::VerifyMode mode, int k, const std::string& drafter) {
  proto::SubmitRequest submit;
  submit.set_request_id(id);
  submit.mutable_prompt_tokens()->Assign(prompt.begin(), prompt.end());
  params.set_max_tokens(static_cast<uint32_t>(max_tokens));
  *submit.mutable_params() = std::move(params);
  submit.set_verify_mode(mode);
  submit.set_draft_k(static_cast<uint32_t>(k));
  submit.set_drafter(drafter);
  return submit;
}

absl::StatusOr<PipelineWithClient> StartTinyPairPipeline(const model::TinyModelPair& pair,
                                                         const std::string& drafter_name,
                                                         int lookahead_blocks,
                                                         absl::Duration block_wait) {
  absl::StatusOr<spec::DrafterSpec> drafter_spec =
      spec::ParseDrafterSpec(drafter_name, pair.draft_path);
  if (!drafter_spec.ok()) return drafter_spec.status();
  absl::StatusOr<std::unique_ptr<spec::Drafter>> drafter =
      spec::MakeDrafter(*drafter_spec, pair.target_path, pair.tokenizer.get(),
                        pair.target->config().vocab_size, /*threads=*/1);
  if (!drafter.ok()) return drafter.status();
  tools::InProcessClusterOptions options;
  options.target = pair.target.get();
  options.drafter = drafter->get();
  if (lookahead_blocks > 0) options.draft_engine.lookahead_blocks = lookahead_blocks;
  if (block_wait > absl::ZeroDuration()) options.target_engine.block_wait = block_wait;
  absl::StatusOr<PipelineWithClient> pipeline = StartPipelineWithClient(options);
  if (!pipeline.ok()) return pipeline.status();
  pipeline->drafter = *std::move(drafter);
  return pipeline;
}

void ExpectGreedyEqualsPlainForEveryDrafter(const model::TinyModelPair& pair,
                                            const std::vector<int32_t>& plain,
                                            const GreedySubmitMaker& make_submit) {
  for (const std::string name : {"none", "ngram", "lookup", "model", "layerskip:1"}) {
    SCOPED_TRACE(name);
    const bool none = name == "none";
    auto pipeline = StartTinyPairPipeline(pair, none ? "ngram" : name);
    ASSERT_TRUE(pipeline.ok()) << pipeline.status();
    std::vector<proto::SubmitRequest> submits;
    for (int k : {1, 3})
      submits.push_back(make_submit(absl::StrCat(name, "-k", k), k, none ? "none" : ""));
    for (const std::vector<int32_t>& tokens : CollectTokens(*pipeline->client, submits)) {
      EXPECT_EQ(tokens, plain);
    }
  }
}

bool RunInWaves(net::RequestClient& client, const std::vector<proto::SubmitRequest>& submits,
                const Waves& waves, const ResultVisitor& visit) {
  for (size_t first = 0; first < submits.size(); first += waves.size) {
    const size_t last = std::min(submits.size(), first + waves.size);
    for (size_t i = first; i < last; ++i) EXPECT_TRUE(client.Submit(submits[i]).ok());
    for (int round = 0; round < waves.max_polls; ++round) {
      bool done = true;
      for (size_t i = first; i < last; ++i) done &= client.Done(submits[i].request_id());
      if (done) break;
      EXPECT_TRUE(client.Poll(waves.poll).ok());
    }
    for (size_t i = first; i < last; ++i) {
      const std::string& id = submits[i].request_id();
      EXPECT_TRUE(client.Done(id)) << id << " hung";
      if (!visit(submits[i], client.Result(id))) return false;
    }
  }
  return true;
}

std::vector<std::vector<int32_t>> CollectTokens(net::RequestClient& client,
                                                const std::vector<proto::SubmitRequest>& submits,
                                                proto::SpecStats* stats) {
  std::vector<std::vector<int32_t>> results;
  RunInWaves(client, submits, Waves{},
             [&](const proto::SubmitRequest& submit, const net::GenerationResult& r) {
               EXPECT_NE(r.finish_reason, proto::FINISH_REASON_ERROR)
                   << submit.request_id() << ": " << r.error;
               results.push_back(r.tokens);
               if (stats != nullptr) {
                 stats->set_verified(stats->verified() + r.stats.verified());
                 stats->set_accepted(stats->accepted() + r.stats.accepted());
               }
               return true;
             });
  return results;
}

}  // namespace splitspec::testing
