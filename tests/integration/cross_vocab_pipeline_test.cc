// A draft model of another vocabulary through the whole in-process pipeline
// (coordinator, target worker, draft worker as threads): MakeDrafter picks the
// cross-vocabulary drafter for it, and greedy speculative output equals plain
// greedy output token for token, drafts accepted, under both mappings:
// - tiny models: a byte-level BPE target, a SentencePiece draft
//   (tests/unit/spec/cross_vocab_test_util.h);
// - the real pair when installed, both ways: SmolLM2-135M and Gemma 3 270M each
//   drafting for the other (skipped, naming deploy/models.sh gemma3-270m, when it
//   is not).
// The output law under sampled verification is the unit test's chi-square
// (tests/unit/spec/cross_vocab_drafter_test.cc); here sampled requests only have to
// finish with drafts accepted.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/model/transformer.h"
#include "runtime/net/request_client.h"
#include "runtime/net/spec_proto.h"
#include "runtime/spec/cross_vocab_drafter.h"
#include "runtime/spec/drafter_factory.h"
#include "runtime/spec/logits_pipeline.h"
#include "runtime/tokenizer/tokenizer_gguf.h"
#include "tests/testing/tiny_model.h"
#include "tests/unit/spec/cross_vocab_test_util.h"
#include "tools/cluster/in_process_cluster.h"

namespace splitspec {
namespace {

struct Target {
  std::unique_ptr<model::Transformer> model;
  std::unique_ptr<model::Tokenizer> tokenizer;
};

Target LoadTarget(const std::string& path, int threads) {
  Target target;
  auto loaded = model::Transformer::Load(path, {.threads = threads});
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  if (!loaded.ok()) return target;
  target.model = *std::move(loaded);
  auto tokenizer = model::LoadTokenizerFromGguf(target.model->file());
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  target.tokenizer = std::make_unique<model::Tokenizer>(*std::move(tokenizer));
  return target;
}

// Plain greedy decoding through the logits pipeline (the request's logit_bias
// applied), from scratch per token.
std::vector<int32_t> PlainGreedy(model::Transformer& model, const spec::SamplingParams& params,
                                 std::vector<int32_t> context, int n) {
  std::vector<int32_t> out;
  auto cache = model.NewCache();
  std::vector<int32_t> feed = context;
  model::ForwardOutput forward;
  std::vector<float> probs(model.config().vocab_size);
  for (int i = 0; i < n; ++i) {
    EXPECT_TRUE(model.Forward({{cache.get(), feed, model::LogitsMode::kLast}}, &forward).ok());
    const absl::Span<const float> logits(forward.Row(0, 0), forward.vocab_size);
    EXPECT_TRUE(spec::ProcessRow(params, {.tokens = context, .prompt_length = 0, .allowed = {}},
                                 logits, absl::MakeSpan(probs))
                    .ok());
    const int32_t best =
        static_cast<int32_t>(std::max_element(probs.begin(), probs.end()) - probs.begin());
    out.push_back(best);
    context.push_back(best);
    feed = {best};
  }
  return out;
}

struct Outcome {
  std::vector<int32_t> tokens;
  proto::SpecStats stats;
};

// Runs `submit` through an in-process cluster whose draft worker drafts with
// `drafter`.
Outcome Generate(model::Transformer& target, spec::Drafter& drafter,
                 const proto::SubmitRequest& submit) {
  Outcome outcome;
  tools::InProcessClusterOptions options;
  options.target = &target;
  options.drafter = &drafter;
  options.draft_engine.lookahead_blocks = 1;
  // Every block is waited for: whether drafts are accepted must not depend on
  // how fast the draft runs on a loaded machine.
  options.target_engine.block_wait = absl::Minutes(2);
  options.router.max_new_tokens = static_cast<int>(submit.params().max_tokens());
  auto cluster = tools::InProcessCluster::Start(options);
  EXPECT_TRUE(cluster.ok()) << cluster.status();
  if (!cluster.ok()) return outcome;
  auto client = net::RequestClient::Connect((*cluster)->coordinator_endpoint());
  EXPECT_TRUE(client.ok()) << client.status();
  if (!client.ok()) return outcome;
  auto result = (*client)->Generate(submit, absl::Minutes(5));
  EXPECT_TRUE(result.ok()) << result.status();
  if (!result.ok()) return outcome;
  EXPECT_TRUE(result->error.empty()) << result->error;
  outcome.tokens = result->tokens;
  outcome.stats = result->stats;
  return outcome;
}

proto::SubmitRequest Submit(const std::vector<int32_t>& prompt, const spec::SamplingParams& params,
                            proto::VerifyMode mode, int max_tokens) {
  proto::SubmitRequest submit;
  submit.set_request_id("cross");
  submit.mutable_prompt_tokens()->Assign(prompt.begin(), prompt.end());
  *submit.mutable_params() = net::SamplingParamsToProto(params);
  submit.mutable_params()->set_max_tokens(static_cast<uint32_t>(max_tokens));
  submit.set_verify_mode(mode);
  submit.set_draft_k(4);
  submit.set_drafter("model");
  return submit;
}

std::unique_ptr<spec::Drafter> MakeCrossDrafter(const std::string& draft_path,
                                                const std::string& target_path,
                                                const model::Tokenizer& tokenizer, int vocab,
                                                spec::VocabMapping mapping, int threads) {
  auto spec = spec::ParseDrafterSpec("model", draft_path);
  EXPECT_TRUE(spec.ok()) << spec.status();
  spec->vocab_mapping = mapping;
  auto drafter = spec::MakeDrafter(*spec, target_path, &tokenizer, vocab, threads);
  EXPECT_TRUE(drafter.ok()) << drafter.status();
  if (!drafter.ok()) return nullptr;
  EXPECT_NE(dynamic_cast<spec::CrossVocabDrafter*>(drafter->get()), nullptr)
      << "a draft of another vocabulary must get the cross-vocabulary drafter";
  return *std::move(drafter);
}

// Greedy speculative output of `target` with the draft at `draft_path` (another
// vocabulary: the cross-vocabulary drafter) equals plain greedy under `params` (a
// greedy temperature, the request's processors), `tokens` tokens after `prompt`, with
// drafts accepted, under both mappings (auto and intersection). Prints each mapping's
// acceptance as "LABEL, mapping M: A of D drafts accepted".
void ExpectGreedyEqualsPlainUnderBothMappings(const Target& target, const std::string& target_path,
                                              const std::string& draft_path,
                                              const std::vector<int32_t>& prompt,
                                              const spec::SamplingParams& params, int tokens,
                                              const std::string& label) {
  const std::vector<int32_t> want = PlainGreedy(*target.model, params, prompt, tokens);
  for (spec::VocabMapping mapping :
       {spec::VocabMapping::kAuto, spec::VocabMapping::kIntersection}) {
    std::unique_ptr<spec::Drafter> drafter = MakeCrossDrafter(
        draft_path, target_path, *target.tokenizer, target.model->config().vocab_size, mapping, 1);
    ASSERT_NE(drafter, nullptr);
    const Outcome got = Generate(*target.model, *drafter,
                                 Submit(prompt, params, proto::VERIFY_MODE_GREEDY, tokens));
    EXPECT_EQ(got.tokens, want) << spec::VocabMappingName(mapping);
    EXPECT_GT(got.stats.accepted(), 0u) << spec::VocabMappingName(mapping);
    std::printf("%s, mapping %s: %llu of %llu drafts accepted\n", label.c_str(),
                std::string(spec::VocabMappingName(mapping)).c_str(),
                static_cast<unsigned long long>(got.stats.accepted()),
                static_cast<unsigned long long>(got.stats.drafted()));
  }
}

TEST(CrossVocabPipelineTest, TinyGreedyEqualsPlainUnderBothMappings) {
  const std::string dir = ::testing::TempDir() + "/" + std::to_string(::getpid());
  const std::string target_path = dir + "-xpipe-target.gguf";
  const std::string draft_path = dir + "-xpipe-draft.gguf";
  ASSERT_TRUE(model::WriteTinyModel({}, target_path).ok());
  ASSERT_TRUE(spec::testing::MakeSentencePieceDraft(1, 3).WriteFile(draft_path).ok());
  Target target = LoadTarget(target_path, 1);
  ASSERT_NE(target.model, nullptr);
  const std::vector<int32_t> prompt =
      target.tokenizer->Encode("the in on the er at", {.add_special = false});
  // The random model's favourites are lone UTF-8 lead bytes, on which a draft waits
  // (a text ending inside a character): a bias keeps the text to ASCII.
  spec::SamplingParams params;
  params.temperature = 0.0f;
  for (int byte = 0x80; byte < 0x100; ++byte) params.logit_bias.emplace_back(3 + byte, -100.0f);
  ExpectGreedyEqualsPlainUnderBothMappings(target, target_path, draft_path, prompt, params, 24,
                                           "tiny greedy");
}

std::string ModelPath(const char* file) {
  return std::string(SPLITSPEC_SOURCE_DIR) + "/models/" + file;
}

const std::string kGemma3 = ModelPath("gemma-3-270m-q4_k_m.gguf");
const std::string kSmolLm2 = ModelPath("SmolLM2-135M-Instruct.Q4_1.gguf");

// Why the tests of the real pair cannot run (a model is missing), or empty.
std::string MissingRealModels() {
  if (std::ifstream(kGemma3) && std::ifstream(kSmolLm2)) return "";
  return "models not found: " + kGemma3 + " (deploy/models.sh gemma3-270m installs it), " +
         kSmolLm2;
}

// Greedy, temperature 0.
spec::SamplingParams Greedy() {
  spec::SamplingParams greedy;
  greedy.temperature = 0.0f;
  return greedy;
}

TEST(CrossVocabPipelineRealTest, Gemma3DraftingForSmolLm2IsExactAndAccepted) {
  if (const std::string missing = MissingRealModels(); !missing.empty()) GTEST_SKIP() << missing;
  Target target = LoadTarget(kSmolLm2, 2);
  ASSERT_NE(target.model, nullptr);
  const std::vector<int32_t> prompt = target.tokenizer->Encode(
      "<|im_start|>user\nList the days of the week, one per line.<|im_end|>\n"
      "<|im_start|>assistant\n",
      {.add_special = true, .parse_special = true});
  constexpr int kTokens = 32;
  ASSERT_NO_FATAL_FAILURE(
      ExpectGreedyEqualsPlainUnderBothMappings(target, kSmolLm2, kGemma3, prompt, Greedy(), kTokens,
                                               "SmolLM2 target, Gemma 3 draft, greedy"));
  // Sampled: intersection under auto; the request finishes with drafts accepted.
  spec::SamplingParams sampled;
  sampled.temperature = 0.7f;
  sampled.seed = 11;
  std::unique_ptr<spec::Drafter> drafter =
      MakeCrossDrafter(kGemma3, kSmolLm2, *target.tokenizer, target.model->config().vocab_size,
                       spec::VocabMapping::kAuto, 1);
  ASSERT_NE(drafter, nullptr);
  const Outcome got = Generate(*target.model, *drafter,
                               Submit(prompt, sampled, proto::VERIFY_MODE_REJECTION, kTokens));
  EXPECT_EQ(got.tokens.size(), static_cast<size_t>(kTokens));
  EXPECT_GT(got.stats.accepted(), 0u);
  std::printf("SmolLM2 target, Gemma 3 draft, rejection (intersection): %llu of %llu accepted\n",
              static_cast<unsigned long long>(got.stats.accepted()),
              static_cast<unsigned long long>(got.stats.drafted()));
}

// The other direction: SmolLM2 (135M) drafting for Gemma 3 (270M), greedy.
TEST(CrossVocabPipelineRealTest, SmolLm2DraftingForGemma3GreedyEqualsPlain) {
  if (const std::string missing = MissingRealModels(); !missing.empty()) GTEST_SKIP() << missing;
  Target target = LoadTarget(kGemma3, 2);
  ASSERT_NE(target.model, nullptr);
  const std::vector<int32_t> prompt =
      target.tokenizer->Encode("The history of the Roman Empire began", {.add_special = true});
  ExpectGreedyEqualsPlainUnderBothMappings(target, kGemma3, kSmolLm2, prompt, Greedy(), 32,
                                           "Gemma 3 target, SmolLM2 draft, greedy");
}

}  // namespace
}  // namespace splitspec
