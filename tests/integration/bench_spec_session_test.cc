// SpecSession (tools/bench_spec.h), what `bench spec --workload` runs each
// configuration on: one set of workers serves every request of the session, as a
// server's do, sessions sharing one target and one draft model take turns
// without touching each other's requests, and every output is the target's own
// greedy decode.
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/model/transformer.h"
#include "runtime/spec/drafter_factory.h"
#include "runtime/tokenizer/tokenizer_gguf.h"
#include "tests/testing/tiny_model.h"
#include "tools/bench_spec.h"

namespace splitspec {
namespace {

// A tiny Q8_0 target in a file of its own, removed with the fixture.
class SpecSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model::TinyModelOptions options;
    options.weight_type = kernels::GgmlType::kQ8_0;
    path_ = ::testing::TempDir() + "/" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".gguf";
    ASSERT_TRUE(model::WriteTinyModel(options, path_).ok());
    auto target = model::Transformer::Load(path_, {.threads = 1});
    ASSERT_TRUE(target.ok()) << target.status();
    target_ = std::move(*target);
  }
  void TearDown() override { std::remove(path_.c_str()); }

  std::string path_;
  std::unique_ptr<model::Transformer> target_;
};

TEST_F(SpecSessionTest, OneSetOfWorkersServesEveryRequestOfItsSession) {
  auto tokenizer = model::LoadTokenizerFromGguf(target_->file());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  // The target as its own draft: a model drafter, one for both speculative sessions.
  auto drafter = spec::MakeDrafter(*spec::ParseDrafterSpec("model", path_), path_, &*tokenizer,
                                   target_->config().vocab_size, 1);
  ASSERT_TRUE(drafter.ok()) << drafter.status();

  auto plain = tools::SpecSession::Start({.target = target_.get()});
  ASSERT_TRUE(plain.ok()) << plain.status();
  auto fixed =
      tools::SpecSession::Start({.target = target_.get(), .drafter = drafter->get(), .k = 2});
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  auto policy = tools::SpecSession::Start({.target = target_.get(), .drafter = drafter->get()});
  ASSERT_TRUE(policy.ok()) << policy.status();

  const std::vector<std::vector<int32_t>> prompts = {{17, 42, 99}, {5, 6, 7, 8}, {250, 3}};
  constexpr int kTokens = 20;
  for (const std::vector<int32_t>& prompt : prompts) {
    auto want = (*plain)->Generate({.prompt = prompt, .max_tokens = kTokens});
    ASSERT_TRUE(want.ok()) << want.status();
    ASSERT_EQ(want->tokens, kTokens);
    for (tools::SpecSession* session : {fixed->get(), policy->get()}) {
      auto got = session->Generate({.prompt = prompt, .max_tokens = kTokens});
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(got->output, want->output);
    }
  }
  // One draft worker per session saw all three requests, and let go of each.
  const tools::SpecSession::Totals fixed_totals = (*fixed)->Finish();
  EXPECT_EQ(fixed_totals.counters.requests_released, prompts.size());
  EXPECT_GE(fixed_totals.counters.blocks_sent, prompts.size());
  EXPECT_GT(fixed_totals.counters.tokens_drafted, 0u);
  EXPECT_EQ((*policy)->Finish().counters.requests_released, prompts.size());
  EXPECT_EQ((*plain)->Finish().counters.blocks_sent, 0u) << "no draft worker";
  auto after = (*fixed)->Generate({.prompt = prompts[0], .max_tokens = kTokens});
  EXPECT_EQ(after.status().code(), absl::StatusCode::kFailedPrecondition);
}

// `bench spec --workload --draft-placement auto` runs lookup and ngram as serve does:
// inside the target worker, with no draft worker at all.
TEST_F(SpecSessionTest, AModelFreeDrafterInTheTargetDraftsWithoutADraftWorker) {
  auto lookup = spec::MakeDrafter(*spec::ParseDrafterSpec("lookup", ""), "", nullptr,
                                  target_->config().vocab_size, 1);
  ASSERT_TRUE(lookup.ok()) << lookup.status();

  auto plain = tools::SpecSession::Start({.target = target_.get()});
  ASSERT_TRUE(plain.ok()) << plain.status();
  auto local = tools::SpecSession::Start(
      {.target = target_.get(), .drafter = lookup->get(), .drafter_in_target = true, .k = 3});
  ASSERT_TRUE(local.ok()) << local.status();

  // Repeated text: the lookup drafter finds the suffix earlier and proposes what followed it.
  const std::vector<int32_t> prompt = {5, 6, 7, 8, 9, 5, 6, 7, 8, 9, 5, 6, 7, 8, 9, 5, 6};
  constexpr int kTokens = 24;
  auto want = (*plain)->Generate({.prompt = prompt, .max_tokens = kTokens});
  ASSERT_TRUE(want.ok()) << want.status();
  auto got = (*local)->Generate({.prompt = prompt, .max_tokens = kTokens});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->output, want->output);
  EXPECT_GT(got->stats.verified(), 0u) << "the target drafted and verified its own proposals";
  EXPECT_EQ(want->stats.verified(), 0u);
  EXPECT_EQ((*local)->Finish().counters.blocks_sent, 0u) << "no draft worker";
}

}  // namespace
}  // namespace splitspec
