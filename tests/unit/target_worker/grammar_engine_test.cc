// Structured outputs on the target (runtime/grammar through TargetEngine): the
// masks of a verification block's rows equal fresh matchers' masks after the
// committed and drafted tokens before each row (GrammarRowMasks), and a
// constrained request decodes exactly as constrained plain greedy decoding,
// with speculation or without, drafts that leave the grammar cut where they
// leave it, finishing with "stop" when the grammar is complete.
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/grammar/grammar_compiler.h"
#include "runtime/grammar/grammar_matcher.h"
#include "runtime/net/spec_proto.h"
#include "runtime/tokenizer/tokenizer.h"
#include "target_worker/grammar_rows.h"
#include "target_worker/target_engine.h"
#include "tests/unit/grammar/grammar_test_util.h"
#include "tests/unit/target_worker/fake_language_model.h"
#include "tests/unit/target_worker/json_tokenizer.h"

namespace splitspec::target {
namespace {

using ::testing::HasSubstr;
using grammar::GrammarSpec;
using splitspec::testing::FakeLanguageModel;
using splitspec::testing::JsonTokenizer;

constexpr uint64_t kDraftWorker = 7;
constexpr int kEos = splitspec::testing::kJsonTokenizerEos;

const GrammarSpec kSchema = GrammarSpec::JsonSchema(
    R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"boolean"},)"
    R"("c":{"type":"array","items":{"type":"string"}}},"required":["a","b","c"]})",
    /*strict=*/true);
const GrammarSpec kChoice = GrammarSpec::Choice({"true", "abc", "[1,2]", "null"});

class GrammarEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(tokenizer_.vocab_size(), FakeLanguageModel::kVocab);
    auto compiler = grammar::GrammarCompiler::Create(tokenizer_);
    ASSERT_TRUE(compiler.ok()) << compiler.status();
    compiler_ = std::move(compiler).value();
  }

  std::shared_ptr<const grammar::CompiledGrammar> Compile(const GrammarSpec& spec) {
    auto compiled = compiler_->Compile(spec);
    EXPECT_TRUE(compiled.ok()) << compiled.status();
    return *compiled;
  }

  // Constrained plain greedy decoding of the fake model: at each position the
  // argmax (lowest id among ties) of the logits masked by a fresh matcher fed
  // the tokens generated so far; stops after the end-of-generation token.
  std::vector<int32_t> ConstrainedGreedy(const GrammarSpec& spec, std::vector<int32_t> sequence,
                                         int max_new) {
    const auto compiled = Compile(spec);
    const size_t prompt = sequence.size();
    for (int i = 0; i < max_new; ++i) {
      const std::vector<int32_t> mask = grammar::testing::MaskAfter(
          compiled, std::vector<int32_t>(sequence.begin() + prompt, sequence.end()));
      std::vector<float> logits = FakeLanguageModel::Logits(sequence);
      grammar::ApplyBitmaskToLogits(mask, absl::MakeSpan(logits));
      int32_t best = 0;
      for (int32_t t = 1; t < FakeLanguageModel::kVocab; ++t) {
        if (logits[t] > logits[best]) best = t;
      }
      sequence.push_back(best);
      if (best == kEos) break;
    }
    return sequence;
  }

  proto::Assignment Assign(const std::string& id, const std::vector<int32_t>& prompt,
                           int max_tokens, const GrammarSpec& spec, uint64_t draft_worker) {
    proto::Assignment a;
    a.set_request_id(id);
    a.mutable_committed_tokens()->Assign(prompt.begin(), prompt.end());
    a.set_prompt_length(static_cast<uint32_t>(prompt.size()));
    a.set_draft_worker_id(draft_worker);
    a.mutable_params()->set_max_tokens(static_cast<uint32_t>(max_tokens));
    a.mutable_params()->add_stop_token_ids(kEos);
    net::GrammarToProto(spec, a.mutable_params()->mutable_processors()->mutable_grammar());
    a.set_verify_mode(proto::VERIFY_MODE_GREEDY);
    return a;
  }

  // Runs `assignments` to the end; requests with a draft worker get a block
  // after every result: the truth's next tokens with one changed now and then,
  // or random tokens (which mostly leave the grammar). Returns what the
  // coordinator was told, and each request's finish reason.
  std::map<std::string, std::vector<int32_t>> Run(
      const std::vector<proto::Assignment>& assignments,
      std::map<std::string, std::vector<int32_t>> truth,
      std::map<std::string, proto::FinishReason>* finish) {
    TargetEngineOptions options;
    options.block_wait = absl::Hours(1);
    options.feed_wait = absl::ZeroDuration();
    options.grammar_compiler = compiler_;
    TargetEngine engine(&model_, options);
    std::map<std::string, std::vector<int32_t>> seen;
    std::mt19937 rng(5);
    uint64_t sequence = 0;
    auto propose = [&](const std::string& id, uint64_t epoch, int frontier) {
      const int kind = static_cast<int>(rng() % 4);
      const int k = 1 + static_cast<int>(rng() % 4);
      std::vector<int32_t> tokens;
      for (int i = 0; i < k; ++i) {
        const size_t at = static_cast<size_t>(frontier + i);
        tokens.push_back(kind == 3 || at >= truth[id].size()
                             ? static_cast<int32_t>(rng() % FakeLanguageModel::kVocab)
                             : truth[id][at]);
      }
      if (kind == 2) tokens[rng() % tokens.size()] = static_cast<int32_t>(rng() % 32);
      engine.AddBlock(BlockOf(id, epoch, frontier, tokens, ++sequence), "d");
    };
    for (const proto::Assignment& a : assignments) {
      seen[a.request_id()].assign(a.committed_tokens().begin(), a.committed_tokens().end());
      EXPECT_TRUE(engine.AddRequest(a).ok());
      if (a.draft_worker_id() != 0)
        propose(a.request_id(), 0, a.committed_tokens_size());
    }
    const absl::Time now = absl::Now();
    for (int step = 0; step < 500 && engine.HasWork(now); ++step) {
      std::vector<TargetEvent> events;
      EXPECT_TRUE(engine.Step(now, &events).ok());
      for (const TargetEvent& e : events) {
        const proto::VerifyResult& r = e.result;
        if (e.to_coordinator) {
          std::vector<int32_t>& s = seen[r.request_id()];
          if (r.full_sequence()) s.clear();
          s.resize(r.frontier() - r.committed_tokens_size());
          s.insert(s.end(), r.committed_tokens().begin(), r.committed_tokens().end());
          if (r.finished()) (*finish)[r.request_id()] = r.finish_reason();
        }
        if (!e.draft_peer.empty() && !r.finished())
          propose(r.request_id(), r.epoch(), static_cast<int>(r.frontier()));
      }
    }
    EXPECT_EQ(engine.active_requests(), 0);
    return seen;
  }

  static proto::DraftBlock BlockOf(const std::string& id, uint64_t epoch, int start,
                                   const std::vector<int32_t>& tokens, uint64_t sequence) {
    proto::DraftBlock b;
    b.set_request_id(id);
    b.set_epoch(epoch);
    b.set_start(static_cast<uint32_t>(start));
    b.set_block_sequence(sequence);
    b.mutable_tokens()->Assign(tokens.begin(), tokens.end());
    return b;
  }

  model::Tokenizer tokenizer_ = JsonTokenizer();
  std::shared_ptr<grammar::GrammarCompiler> compiler_;
  FakeLanguageModel model_;
};

TEST_F(GrammarEngineTest, BlockRowMasksEqualFreshMatchersMasks) {
  const auto compiled = Compile(kSchema);
  std::mt19937 rng(11);
  int cut = 0;
  for (int trial = 0; trial < 60; ++trial) {
    // Committed output: a constrained random walk; then a random draft.
    grammar::GrammarMatcher matcher(compiled);
    const grammar::testing::SampledText committed =
        grammar::testing::SampleConstrained(matcher, tokenizer_, rng, static_cast<int>(rng() % 12));
    if (matcher.IsTerminated()) continue;
    const std::vector<int32_t> draft =
        grammar::testing::RandomDraft(compiled, committed.ids, 1 + static_cast<int>(rng() % 5), rng);
    const int n = static_cast<int>(draft.size());
    for (int rows : {n + 1, n}) {  // unfed token + block, or a block after a pending p
      if (rows < 1) continue;
      absl::StatusOr<GrammarRows> masks = GrammarRowMasks(matcher, draft, rows);
      ASSERT_TRUE(masks.ok()) << masks.status();
      EXPECT_EQ(matcher.num_accepted_tokens(), static_cast<int>(committed.ids.size()))
          << "the matcher was not left as it was";
      std::vector<int32_t> prefix = committed.ids;
      bool left = false;  // a drafted token before the row left the grammar
      for (int r = 0; r < rows; ++r) {
        const int before = n + 1 - rows + r;
        prefix.assign(committed.ids.begin(), committed.ids.end());
        prefix.insert(prefix.end(), draft.begin(), draft.begin() + before);
        grammar::GrammarMatcher fresh(compiled);
        left = false;
        for (int32_t t : prefix) left = left || !fresh.AcceptToken(t);
        if (left) {
          EXPECT_FALSE(masks->masked[r]) << "row " << r << " after a refused draft token";
          ++cut;
          continue;
        }
        ASSERT_TRUE(masks->masked[r]) << "trial " << trial << " row " << r;
        const std::vector<int32_t> expected = grammar::testing::MaskAfter(compiled, prefix);
        const auto row = masks->Row(r);
        EXPECT_EQ(std::vector<int32_t>(row.begin(), row.end()),
                  expected)
            << "trial " << trial << " row " << r;
      }
    }
  }
  EXPECT_GT(cut, 0) << "no draft left the grammar: the cut was never exercised";
  EXPECT_THAT(GrammarRowMasks(*std::make_unique<grammar::GrammarMatcher>(compiled),
                              std::vector<int32_t>{3}, 3)
                  .status()
                  .message(),
              HasSubstr("3 rows after 1 drafted tokens"));
}

TEST_F(GrammarEngineTest, ConstrainedDecodingIsExactWithAndWithoutSpeculation) {
  const std::vector<int32_t> prompt_a = {5, 9, 1};
  const std::vector<int32_t> prompt_b = {30, 3, 3, 17};
  constexpr int kNew = 40;
  const std::vector<int32_t> truth_a = ConstrainedGreedy(kSchema, prompt_a, kNew);
  const std::vector<int32_t> truth_b = ConstrainedGreedy(kChoice, prompt_b, kNew);
  ASSERT_EQ(truth_b.back(), kEos) << "the choice grammar ends";
  std::string choice;
  for (size_t i = prompt_b.size(); i + 1 < truth_b.size(); ++i)
    choice += std::string(*tokenizer_.Piece(truth_b[i]));
  EXPECT_THAT((std::vector<std::string>{"true", "abc", "[1,2]", "null"}),
              ::testing::Contains(choice));
  const std::map<std::string, std::vector<int32_t>> truth = {{"a", truth_a}, {"b", truth_b}};
  for (uint64_t draft_worker : {uint64_t{0}, kDraftWorker}) {
    std::map<std::string, proto::FinishReason> finish;
    const auto seen = Run({Assign("a", prompt_a, kNew, kSchema, draft_worker),
                           Assign("b", prompt_b, kNew, kChoice, draft_worker)},
                          truth, &finish);
    EXPECT_EQ(seen.at("a"), truth_a) << "draft worker " << draft_worker;
    EXPECT_EQ(seen.at("b"), truth_b) << "draft worker " << draft_worker;
    EXPECT_EQ(finish["b"], proto::FINISH_REASON_STOP);
    EXPECT_EQ(finish["a"], truth_a.back() == kEos ? proto::FINISH_REASON_STOP
                                                  : proto::FINISH_REASON_LENGTH);
  }
}

TEST_F(GrammarEngineTest, WithoutACompilerOrWithABadSchemaTheRequestIsRefusedByName) {
  TargetEngine plain(&model_, {});
  absl::Status status = plain.AddRequest(Assign("r", {1, 2}, 4, kSchema, 0));
  EXPECT_THAT(status.message(), HasSubstr("structured outputs (json_schema)"));
  TargetEngineOptions options;
  options.grammar_compiler = compiler_;
  TargetEngine engine(&model_, options);
  status = engine.AddRequest(
      Assign("r", {1, 2}, 4, GrammarSpec::JsonSchema(R"({"type": "nonsense"})", true), 0));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("json_schema"));
}

}  // namespace
}  // namespace splitspec::target
