// The token-level intersection of two vocabularies: synthetic byte-level BPE and
// SentencePiece vocabularies, the tiny test models, and the real SmolLM2 / Gemma 3
// pair when installed.
#include "runtime/spec/vocabulary_map.h"

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/model/gguf_reader.h"
#include "runtime/tokenizer/tokenizer_gguf.h"
#include "tests/unit/spec/cross_vocab_test_util.h"

namespace splitspec::spec {
namespace {

using model::TokenType;

model::Tokenizer Make(model::TokenizerVocab vocab) {
  absl::StatusOr<model::Tokenizer> tokenizer = model::Tokenizer::Create(std::move(vocab));
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return *std::move(tokenizer);
}

// Byte-level BPE: <|endoftext|> (control), then "A", "a", "Ġ", "t", "h", "e", "Ġt",
// "he", "Ġthe", "Ċ", "bpe" (target-only), "<s>" as a normal token.
model::Tokenizer BpeVocab() {
  model::TokenizerVocab v;
  v.model = "gpt2";
  v.pre = "smollm";
  v.tokens = {"<|endoftext|>", "A", "a", "Ġ", "t",  "h",   "e",  "Ġt", "he",
              "Ġthe",          "Ċ", "b", "p", "bp", "bpe", "<s>"};
  v.token_types.assign(v.tokens.size(), TokenType::kNormal);
  v.token_types[0] = TokenType::kControl;
  v.merges = {"Ġ t", "h e", "Ġt he", "b p", "bp e"};
  v.bos_id = 0;
  v.eos_id = 0;
  return Make(std::move(v));
}

// SentencePiece: <unk>, <s>, </s> (special), <0x41> and "A" (the same byte twice),
// "▁the", "▁t", "he", "h", "e", "t", "▁", "<0x0A>", "zz" (draft-only), "a".
model::Tokenizer SpmVocab() {
  model::TokenizerVocab v;
  v.model = "llama";
  v.tokens = {"<unk>", "<s>", "</s>", "<0x41>", "A",      "▁the", "▁t", "he",
              "h",     "e",   "t",    "▁",      "<0x0A>", "zz",   "a"};
  v.token_types.assign(v.tokens.size(), TokenType::kNormal);
  v.token_types[0] = TokenType::kUnknown;
  v.token_types[1] = TokenType::kControl;
  v.token_types[2] = TokenType::kControl;
  v.token_types[3] = TokenType::kByte;
  v.token_types[12] = TokenType::kByte;
  v.scores.assign(v.tokens.size(), 0.0f);
  v.unk_id = 0;
  v.bos_id = 1;
  v.eos_id = 2;
  v.add_space_prefix = false;
  return Make(std::move(v));
}

TEST(IntersectionBytesTest, NormalizesEachKindToBytes) {
  const model::Tokenizer bpe = BpeVocab();
  const model::Tokenizer spm = SpmVocab();
  EXPECT_EQ(IntersectionBytes(bpe, 9), " the");        // Ġthe
  EXPECT_EQ(IntersectionBytes(bpe, 10), "\n");         // Ċ
  EXPECT_EQ(IntersectionBytes(spm, 5), " the");        // ▁the
  EXPECT_EQ(IntersectionBytes(spm, 3), "A");           // <0x41>
  EXPECT_EQ(IntersectionBytes(spm, 12), "\n");         // <0x0A>
  EXPECT_EQ(IntersectionBytes(bpe, 0), std::nullopt);  // control
  EXPECT_EQ(IntersectionBytes(spm, 0), std::nullopt);  // unknown
  EXPECT_EQ(IntersectionBytes(spm, 1), std::nullopt);  // control
}

TEST(VocabularyMapTest, MapsTokensWithEqualBytesBothWays) {
  const model::Tokenizer target = BpeVocab();
  const model::Tokenizer draft = SpmVocab();
  absl::StatusOr<VocabularyMap> map = VocabularyMap::Build(target, draft);
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(map->draft_size(), 15);
  EXPECT_EQ(map->target_size(), 16);
  // draft -> target.
  EXPECT_EQ(map->ToTarget(5), 9);    // " the"
  EXPECT_EQ(map->ToTarget(6), 7);    // " t"
  EXPECT_EQ(map->ToTarget(7), 8);    // "he"
  EXPECT_EQ(map->ToTarget(11), 3);   // " "
  EXPECT_EQ(map->ToTarget(12), 10);  // "\n"
  EXPECT_EQ(map->ToTarget(14), 2);   // "a"
  EXPECT_EQ(map->ToTarget(3), 1);    // byte <0x41> and "A": both to the target's "A"
  EXPECT_EQ(map->ToTarget(4), 1);
  EXPECT_EQ(map->ToTarget(13), model::kNoToken);  // "zz": draft-only
  EXPECT_EQ(map->ToTarget(0), model::kNoToken);   // specials never map...
  EXPECT_EQ(map->ToTarget(1), model::kNoToken);   // ...not even to the target's normal "<s>"
  EXPECT_EQ(map->ToTarget(2), model::kNoToken);
  EXPECT_EQ(map->ToTarget(-1), model::kNoToken);
  EXPECT_EQ(map->ToTarget(15), model::kNoToken);
  // target -> draft: the normal "A" before the byte token.
  EXPECT_EQ(map->ToDraft(1), 4);
  EXPECT_EQ(map->ToDraft(9), 5);
  EXPECT_EQ(map->ToDraft(14), model::kNoToken);  // "bpe": target-only
  EXPECT_EQ(map->ToDraft(15), model::kNoToken);  // "<s>" is text in the target only
  EXPECT_EQ(map->ToDraft(0), model::kNoToken);
  EXPECT_EQ(map->shared_draft_tokens(), 11);  // 3..12 and 14, not 13
  // The mask is exactly the mapped draft ids.
  ASSERT_EQ(map->draft_mask().size(), 1u);
  for (int id = 0; id < 15; ++id) {
    EXPECT_EQ((map->draft_mask()[0] >> id) & 1u, map->ToTarget(id) != model::kNoToken ? 1u : 0u)
        << id;
  }
}

TEST(VocabularyMapTest, DraftLogitsPastTheTokenizerAreInNoIntersection) {
  absl::StatusOr<VocabularyMap> map = VocabularyMap::Build(BpeVocab(), SpmVocab(), 40);
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(map->draft_size(), 40);
  EXPECT_EQ(map->draft_mask().size(), 2u);
  EXPECT_EQ(map->draft_mask()[1], 0u);
  EXPECT_EQ(map->ToTarget(39), model::kNoToken);
}

TEST(VocabularyMapTest, MapsQIntoTargetIdsAddingSharedIds) {
  absl::StatusOr<VocabularyMap> map = VocabularyMap::Build(BpeVocab(), SpmVocab());
  ASSERT_TRUE(map.ok()) << map.status();
  SparseDistribution q{{4, 5, 3}, {0.5f, 0.3f, 0.2f}};  // "A", " the", <0x41>
  absl::StatusOr<SparseDistribution> mapped = map->MapToTarget(q);
  ASSERT_TRUE(mapped.ok()) << mapped.status();
  EXPECT_EQ(mapped->token_ids, (std::vector<int32_t>{1, 9}));
  EXPECT_FLOAT_EQ(mapped->probs[0], 0.7f);
  EXPECT_FLOAT_EQ(mapped->probs[1], 0.3f);
  EXPECT_TRUE(mapped->Validate(16).ok());

  absl::StatusOr<SparseDistribution> outside =
      map->MapToTarget(SparseDistribution{{5, 13}, {0.5f, 0.5f}});
  ASSERT_FALSE(outside.ok());
  EXPECT_EQ(outside.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(outside.status().message().find("draft token 13 (entry 1 of q"), std::string::npos)
      << outside.status();
}

TEST(VocabularyMapTest, RefusesVocabulariesWithNothingInCommon) {
  model::TokenizerVocab v;
  v.model = "llama";
  v.tokens = {"<unk>", "zz", "yy"};
  v.token_types = {TokenType::kUnknown, TokenType::kNormal, TokenType::kNormal};
  v.scores.assign(3, 0.0f);
  v.unk_id = 0;
  v.add_bos = false;
  absl::StatusOr<VocabularyMap> map = VocabularyMap::Build(BpeVocab(), Make(std::move(v)));
  ASSERT_FALSE(map.ok());
  EXPECT_EQ(map.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(map.status().message().find("(3 tokens) and the target's (16 tokens) share no token"),
            std::string::npos)
      << map.status();
}

model::Tokenizer LoadTokenizer(const model::GgufWriter& writer) {
  absl::StatusOr<std::unique_ptr<model::GgufFile>> file =
      model::GgufFile::FromBuffer(writer.Serialize());
  EXPECT_TRUE(file.ok()) << file.status();
  absl::StatusOr<model::Tokenizer> tokenizer = model::LoadTokenizerFromGguf(**file);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return *std::move(tokenizer);
}

// The tiny models of the drafter tests: the draft's ids keep the target's bytes but
// for every third merged token (draft-only there, target-only here).
TEST(VocabularyMapTest, TinySentencePieceDraftOfTheTinyTarget) {
  const model::Tokenizer target = LoadTokenizer(model::MakeTinyModel({}));
  const model::Tokenizer draft = LoadTokenizer(testing::MakeSentencePieceDraft(1, 3));
  ASSERT_TRUE(draft.is_sentencepiece());
  absl::StatusOr<VocabularyMap> map = VocabularyMap::Build(target, draft);
  ASSERT_TRUE(map.ok()) << map.status();
  for (int id = 3; id < 259; ++id) EXPECT_EQ(map->ToTarget(id), id) << id;
  int changed = 0;
  for (int id = 259; id < draft.vocab_size(); ++id) {
    if ((id - 259) % 3 == 2) {
      EXPECT_EQ(map->ToTarget(id), model::kNoToken) << id;
      EXPECT_EQ(map->ToDraft(id), model::kNoToken) << id;
      ++changed;
    } else {
      EXPECT_EQ(map->ToTarget(id), id) << id << " " << draft.TokenText(id);
    }
  }
  EXPECT_GT(changed, 0);
  EXPECT_EQ(map->shared_draft_tokens(), draft.vocab_size() - 3 - changed);
}

std::string ModelPath(const char* file) {
  return std::string(SPLITSPEC_SOURCE_DIR) + "/models/" + file;
}

// SmolLM2 (byte-level BPE, 49152 tokens) and Gemma 3 (SentencePiece, 262144).
TEST(VocabularyMapRealTest, SmolLm2AndGemma3) {
  const std::string smollm = ModelPath("SmolLM2-135M-Instruct.Q4_1.gguf");
  const std::string gemma = ModelPath("gemma-3-270m-q4_k_m.gguf");
  if (!std::ifstream(gemma) || !std::ifstream(smollm)) {
    GTEST_SKIP() << "models not found: " << gemma << " (deploy/models.sh gemma3-270m installs it), "
                 << smollm << " (deploy/setup.sh)";
  }
  auto load = [](const std::string& path) {
    absl::StatusOr<std::unique_ptr<model::GgufFile>> file = model::GgufFile::Open(path);
    EXPECT_TRUE(file.ok()) << file.status();
    absl::StatusOr<model::Tokenizer> tokenizer = model::LoadTokenizerFromGguf(**file);
    EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
    return *std::move(tokenizer);
  };
  const model::Tokenizer s = load(smollm);
  const model::Tokenizer g = load(gemma);
  absl::StatusOr<VocabularyMap> g_to_s = VocabularyMap::Build(s, g);
  ASSERT_TRUE(g_to_s.ok()) << g_to_s.status();
  std::printf("Gemma 3 draft -> SmolLM2 target: %d of %d draft tokens shared\n",
              g_to_s->shared_draft_tokens(), g.vocab_size());
  EXPECT_GT(g_to_s->shared_draft_tokens(), 10000);
  // Every mapped pair stands for the same bytes, both ways.
  for (int id = 0; id < g.vocab_size(); ++id) {
    const int32_t t = g_to_s->ToTarget(id);
    if (t == model::kNoToken) continue;
    ASSERT_EQ(*IntersectionBytes(g, id), *IntersectionBytes(s, t)) << id << " -> " << t;
  }
  for (int id = 0; id < s.vocab_size(); ++id) {
    const int32_t d = g_to_s->ToDraft(id);
    if (d == model::kNoToken) continue;
    ASSERT_EQ(*IntersectionBytes(s, id), *IntersectionBytes(g, d)) << id << " -> " << d;
  }
  const std::vector<int32_t> the = s.Encode(" the", {.add_special = false});
  ASSERT_EQ(the.size(), 1u);
  EXPECT_NE(g_to_s->ToDraft(the[0]), model::kNoToken);
  EXPECT_EQ(g_to_s->ToTarget(g.bos_id()), model::kNoToken);
  EXPECT_EQ(g_to_s->ToDraft(s.eos_id()), model::kNoToken);

  absl::StatusOr<VocabularyMap> s_to_g = VocabularyMap::Build(g, s);
  ASSERT_TRUE(s_to_g.ok()) << s_to_g.status();
  std::printf("SmolLM2 draft -> Gemma 3 target: %d of %d draft tokens shared\n",
              s_to_g->shared_draft_tokens(), s.vocab_size());
  EXPECT_EQ(s_to_g->ToTarget(the[0]), g_to_s->ToDraft(the[0]));
}

}  // namespace
}  // namespace splitspec::spec
