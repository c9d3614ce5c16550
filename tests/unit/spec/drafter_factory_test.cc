#include <unistd.h>

#include "runtime/spec/drafter_factory.h"

#include "gtest/gtest.h"
#include "runtime/model/gguf_reader.h"
#include "runtime/tokenizer/tokenizer_gguf.h"
#include "tests/testing/tiny_model.h"

namespace splitspec::spec {
namespace {

TEST(DrafterFactoryTest, ParsesEveryName) {
  EXPECT_EQ(ParseDrafterSpec("none", "")->kind, DrafterSpec::Kind::kNone);
  EXPECT_EQ(ParseDrafterSpec("ngram", "")->kind, DrafterSpec::Kind::kNgram);
  auto model = ParseDrafterSpec("model", "/tmp/draft.gguf");
  ASSERT_TRUE(model.ok());
  EXPECT_EQ(model->kind, DrafterSpec::Kind::kModel);
  EXPECT_EQ(model->draft_path, "/tmp/draft.gguf");
  auto skip = ParseDrafterSpec("layerskip:12", "");
  ASSERT_TRUE(skip.ok());
  EXPECT_EQ(skip->kind, DrafterSpec::Kind::kLayerSkip);
  EXPECT_EQ(skip->layers, 12);
}

TEST(DrafterFactoryTest, RefusesBadNamesWithTheValue) {
  EXPECT_NE(ParseDrafterSpec("medusa", "").status().message().find("unknown drafter 'medusa'"),
            std::string::npos);
  EXPECT_NE(ParseDrafterSpec("layerskip:0", "").status().message().find("layerskip:0"),
            std::string::npos);
  EXPECT_NE(ParseDrafterSpec("layerskip:x", "").status().message().find("positive integer"),
            std::string::npos);
  EXPECT_NE(ParseDrafterSpec("model", "").status().message().find("--draft PATH"),
            std::string::npos);
}

// The benchmark's simulated drafter (tools/sim_drafter.h) knows the answer in advance: no
// binary that serves requests (serve, the draft worker, generate) may build it.
TEST(DrafterFactoryTest, RefusesTheSimulatedDrafterByName) {
  const absl::StatusOr<DrafterSpec> sim = ParseDrafterSpec("sim:alpha=0.8,ratio=10", "");
  ASSERT_FALSE(sim.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(sim.status()));
  EXPECT_NE(sim.status().message().find(
                "drafter 'sim:alpha=0.8,ratio=10' is the simulated drafter of `splitspec bench "
                "spec` only"),
            std::string::npos)
      << sim.status();
}

TEST(DrafterFactoryTest, ModelDraftersNeedTheTargetTokenizer) {
  auto spec = ParseDrafterSpec("layerskip:1", "");
  ASSERT_TRUE(spec.ok());
  auto drafter = MakeDrafter(*spec, "/nonexistent.gguf", nullptr, 100, 1);
  EXPECT_EQ(drafter.status().code(), absl::StatusCode::kInvalidArgument);
}

// layerskip:1 on a 2-layer model drafts from the first layer of the same file.
TEST(DrafterFactoryTest, LayerSkipDraftsFromTheTargetsOwnFile) {
  const std::string path =
      ::testing::TempDir() + "/" + std::to_string(::getpid()) + "-factory-tiny.gguf";
  ASSERT_TRUE(model::WriteTinyModel(model::TinyModelOptions{}, path).ok());
  auto file = model::GgufFile::Open(path);
  ASSERT_TRUE(file.ok());
  auto tokenizer = model::LoadTokenizerFromGguf(**file);
  ASSERT_TRUE(tokenizer.ok());
  auto spec = ParseDrafterSpec("layerskip:1", "");
  ASSERT_TRUE(spec.ok());
  auto drafter = MakeDrafter(*spec, path, &*tokenizer, tokenizer->vocab_size(), 1);
  ASSERT_TRUE(drafter.ok()) << drafter.status();
  ASSERT_NE(*drafter, nullptr);
  const std::vector<int32_t> prompt = {5, 6, 7};
  ASSERT_TRUE((*drafter)->Start("r", prompt).ok());
  std::vector<DraftRequest> batch(1);
  batch[0].request_id = "r";
  batch[0].context = prompt;
  batch[0].k = 3;
  batch[0].mode = VerifyMode::kGreedy;
  batch[0].params.temperature = 0.0f;
  ASSERT_TRUE((*drafter)->Propose(absl::MakeSpan(batch)).ok());
  ASSERT_TRUE(batch[0].status.ok()) << batch[0].status;
  EXPECT_EQ(batch[0].tokens.size(), 3u);
  // The policy's prior for its cost: one of two layers, the same head and embedding.
  EXPECT_GT((*drafter)->decode_bytes_ratio(), 0.0);
  EXPECT_LT((*drafter)->decode_bytes_ratio(), 1.0);
  // The target as its own draft reads every weight the target reads.
  auto self = MakeDrafter(*ParseDrafterSpec("model", path), path, &*tokenizer,
                          tokenizer->vocab_size(), 1);
  ASSERT_TRUE(self.ok()) << self.status();
  EXPECT_DOUBLE_EQ((*self)->decode_bytes_ratio(), 1.0);
  // An unreadable target leaves the prior unknown, not the drafter unmade.
  auto unknown = MakeDrafter(*ParseDrafterSpec("model", path), "/nonexistent.gguf", &*tokenizer,
                             tokenizer->vocab_size(), 1);
  ASSERT_TRUE(unknown.ok()) << unknown.status();
  EXPECT_EQ((*unknown)->decode_bytes_ratio(), 0.0);

  auto too_deep = MakeDrafter(*ParseDrafterSpec("layerskip:9", ""), path, &*tokenizer,
                              tokenizer->vocab_size(), 1);
  EXPECT_FALSE(too_deep.ok());
}

TEST(DrafterFactoryTest, LookupNeedsNoTokenizer) {
  auto spec = ParseDrafterSpec("lookup", "");
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->kind, DrafterSpec::Kind::kLookup);
  auto drafter = MakeDrafter(*spec, "", nullptr, 0, 1);
  ASSERT_TRUE(drafter.ok()) << drafter.status();
  ASSERT_NE(*drafter, nullptr);
  EXPECT_EQ((*drafter)->name(), "lookup");
  EXPECT_EQ((*drafter)->decode_bytes_ratio(), 0.0) << "a lookup costs no target step";
}

TEST(DrafterFactoryTest, NoneMakesNoDrafter) {
  auto drafter = MakeDrafter(*ParseDrafterSpec("none", ""), "", nullptr, 0, 1);
  ASSERT_TRUE(drafter.ok());
  EXPECT_EQ(*drafter, nullptr);
}

}  // namespace
}  // namespace splitspec::spec
