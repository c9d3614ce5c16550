// Batch invariance past 4,096 positions: the block attention order (kernels/cpu/attention.h)
// gives a position the same bits whether it is computed in a prefill (tiles walking the
// blocks), alone (blocks split across threads), in a verification block, in a batch with
// another sequence, after a chunked prefill, or with another thread count. A tiny model
// with head_dim 64 so that the vector attention paths run (2 layers: quick).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/model/transformer.h"
#include "tests/testing/tiny_model.h"

namespace splitspec::model {
namespace {

constexpr int kContext = 4500;  // past 4,096 positions: 71 blocks of 64

TinyModelOptions LongContextModel() {
  TinyModelOptions o;
  o.n_embd = 128;
  o.n_heads = 2;
  o.n_kv_heads = 1;  // grouped-query attention: two query heads share the KV head
  o.n_ff = 128;
  o.context_length = 8192;
  return o;
}

std::unique_ptr<Transformer> Load(int threads, KvCacheType kv_cache_type) {
  auto file = GgufFile::FromBuffer(MakeTinyModel(LongContextModel()).Serialize());
  EXPECT_TRUE(file.ok()) << file.status();
  auto model =
      Transformer::FromFile(std::move(*file), {.threads = threads, .kv_cache_type = kv_cache_type});
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? std::move(*model) : nullptr;
}

std::vector<int32_t> Tokens(int n, int vocab) {
  std::vector<int32_t> t(n);
  uint32_t x = 12345;
  for (int i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    t[i] = static_cast<int32_t>((x >> 8) % vocab);
  }
  return t;
}

// The logits rows of one sequence's call, copied.
std::vector<std::vector<float>> Rows(const ForwardOutput& out, int seq) {
  std::vector<std::vector<float>> rows;
  for (int j = 0; j < out.num_rows[seq]; ++j) {
    rows.emplace_back(out.Row(seq, j), out.Row(seq, j) + out.vocab_size);
  }
  return rows;
}

bool SameBits(const std::vector<float>& a, const float* b) {
  return std::memcmp(a.data(), b, a.size() * sizeof(float)) == 0;
}

class LongContextTest : public ::testing::TestWithParam<KvCacheType> {
 protected:
  void SetUp() override {
    model_ = Load(2, GetParam());
    ASSERT_NE(model_, nullptr);
    tokens_ = Tokens(kContext, model_->config().vocab_size);
    // The last 16 positions' logits from one prefill of the whole context.
    auto cache = model_->NewCache();
    ForwardOutput out;
    const std::vector<int32_t> head(tokens_.begin(), tokens_.end() - 16);
    const std::vector<int32_t> tail(tokens_.end() - 16, tokens_.end());
    // One forward over everything but the tail (a prefill task walks 70 blocks) ...
    ASSERT_TRUE(model_->Forward({{cache.get(), head, LogitsMode::kNone}}, &out).ok());
    // ... and the tail as a prefill of 16 tokens too (more than a verification block).
    std::vector<int32_t> tail17(tokens_.end() - 17, tokens_.end());
    ASSERT_TRUE(cache->Truncate(kContext - 17).ok());
    ASSERT_TRUE(model_->Forward({{cache.get(), tail17, LogitsMode::kAll}}, &out).ok());
    ASSERT_EQ(out.num_rows[0], 17);
    prefill_rows_ = Rows(out, 0);
    prefill_rows_.erase(prefill_rows_.begin());  // the rows of positions kContext-16 ..
  }

  std::unique_ptr<Transformer> model_;
  std::vector<int32_t> tokens_;
  std::vector<std::vector<float>> prefill_rows_;  // [16][vocab]
};

TEST_P(LongContextTest, DecodeStepsEqualThePrefill) {
  auto cache = model_->NewCache();
  ForwardOutput out;
  const std::vector<int32_t> head(tokens_.begin(), tokens_.end() - 16);
  ASSERT_TRUE(model_->Forward({{cache.get(), head, LogitsMode::kNone}}, &out).ok());
  for (int i = 0; i < 16; ++i) {
    const int32_t token = tokens_[kContext - 16 + i];
    ASSERT_TRUE(model_->Forward({{cache.get(), {&token, 1}, LogitsMode::kLast}}, &out).ok());
    ASSERT_TRUE(SameBits(prefill_rows_[i], out.Row(0, 0))) << "position " << kContext - 16 + i;
  }
}

TEST_P(LongContextTest, VerificationBlockEqualsThePrefill) {
  auto cache = model_->NewCache();
  ForwardOutput out;
  const std::vector<int32_t> head(tokens_.begin(), tokens_.end() - 16);
  ASSERT_TRUE(model_->Forward({{cache.get(), head, LogitsMode::kNone}}, &out).ok());
  // Blocks of k+1 = 5 and 9 tokens, the second crossing a 64-position block boundary
  // (kContext - 16 + 5 = 4489; 4480 = 70 * 64).
  const std::vector<int32_t> block5(tokens_.end() - 16, tokens_.end() - 11);
  ASSERT_TRUE(model_->Forward({{cache.get(), block5, LogitsMode::kAll}}, &out).ok());
  for (int j = 0; j < 5; ++j) ASSERT_TRUE(SameBits(prefill_rows_[j], out.Row(0, j))) << j;
  const std::vector<int32_t> block9(tokens_.end() - 11, tokens_.end() - 2);
  ASSERT_TRUE(model_->Forward({{cache.get(), block9, LogitsMode::kAll}}, &out).ok());
  for (int j = 0; j < 9; ++j) ASSERT_TRUE(SameBits(prefill_rows_[5 + j], out.Row(0, j))) << j;
}

TEST_P(LongContextTest, BatchedWithAShortSequenceEqualsAlone) {
  auto long_cache = model_->NewCache();
  auto short_cache = model_->NewCache();
  ForwardOutput out;
  const std::vector<int32_t> head(tokens_.begin(), tokens_.end() - 16);
  const std::vector<int32_t> other = {3, 1, 4, 1, 5};
  ASSERT_TRUE(model_
                  ->Forward({{short_cache.get(), other, LogitsMode::kNone},
                             {long_cache.get(), head, LogitsMode::kNone}},
                            &out)
                  .ok());
  // The long sequence verifies 3 tokens while the short one decodes one.
  const std::vector<int32_t> block(tokens_.end() - 16, tokens_.end() - 13);
  const int32_t next = 9;
  ASSERT_TRUE(model_
                  ->Forward({{short_cache.get(), {&next, 1}, LogitsMode::kLast},
                             {long_cache.get(), block, LogitsMode::kAll}},
                            &out)
                  .ok());
  for (int j = 0; j < 3; ++j) ASSERT_TRUE(SameBits(prefill_rows_[j], out.Row(1, j))) << j;
}

TEST_P(LongContextTest, ChunkedPrefillAndThreadCountEqualOnePrefill) {
  std::unique_ptr<Transformer> three = Load(3, GetParam());
  ASSERT_NE(three, nullptr);
  auto cache = three->NewCache();
  ForwardOutput out;
  for (int begin = 0; begin < kContext - 16; begin += 256) {  // the serving path's chunks
    const int end = std::min(kContext - 16, begin + 256);
    const std::vector<int32_t> chunk(tokens_.begin() + begin, tokens_.begin() + end);
    ASSERT_TRUE(three->Forward({{cache.get(), chunk, LogitsMode::kNone}}, &out).ok());
  }
  const std::vector<int32_t> tail(tokens_.end() - 16, tokens_.end());
  ASSERT_TRUE(three->Forward({{cache.get(), tail, LogitsMode::kAll}}, &out).ok());
  for (int j = 0; j < 16; ++j) ASSERT_TRUE(SameBits(prefill_rows_[j], out.Row(0, j))) << j;
}

INSTANTIATE_TEST_SUITE_P(KvCacheTypes, LongContextTest,
                         ::testing::Values(KvCacheType::kF16, KvCacheType::kQ8_0),
                         [](const auto& info) { return std::string(KvCacheTypeName(info.param)); });

// q8_0 is CPU only and needs heads of whole q8_0 blocks: refused by name otherwise,
// before any device is probed.
TEST(LongContextQ8Test, Q8_0IsRefusedOnCudaAndForHeadsOfOtherSizes) {
  auto file = GgufFile::FromBuffer(MakeTinyModel(LongContextModel()).Serialize());
  ASSERT_TRUE(file.ok()) << file.status();
  auto cuda = Transformer::FromFile(
      std::move(*file), {.threads = 1,
                         .device = {.kind = DeviceSpec::Kind::kCuda, .ordinal = 0},
                         .kv_cache_type = KvCacheType::kQ8_0});
  EXPECT_EQ(cuda.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(cuda.status().message()), ::testing::HasSubstr("--kv-cache-type q8_0"));
  TinyModelOptions heads16;  // n_embd 64, 4 heads: 16 per head
  auto small = GgufFile::FromBuffer(MakeTinyModel(heads16).Serialize());
  ASSERT_TRUE(small.ok()) << small.status();
  auto refused =
      Transformer::FromFile(std::move(*small), {.threads = 1, .kv_cache_type = KvCacheType::kQ8_0});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.status().message()),
              ::testing::HasSubstr("--kv-cache-type q8_0 needs a head dimension that is a multiple "
                                   "of 32 and at most 256; this model's is 16"));
}

// q8_0 is a different model: its caches are q8_0, and its logits differ from f16's
// (the rows are quantized), though not by much.
TEST(LongContextQ8Test, Q8_0CacheChangesTheLogitsSlightly) {
  std::unique_ptr<Transformer> f16 = Load(2, KvCacheType::kF16);
  std::unique_ptr<Transformer> q8 = Load(2, KvCacheType::kQ8_0);
  ASSERT_NE(f16, nullptr);
  ASSERT_NE(q8, nullptr);
  auto f16_cache = f16->NewCache();
  auto q8_cache = q8->NewCache();
  EXPECT_EQ(q8_cache->type(), KvCacheType::kQ8_0);
  EXPECT_LT(q8_cache->bytes_per_position(), f16_cache->bytes_per_position());
  const std::vector<int32_t> tokens = Tokens(300, f16->config().vocab_size);
  ForwardOutput a, b;
  ASSERT_TRUE(f16->Forward({{f16_cache.get(), tokens, LogitsMode::kLast}}, &a).ok());
  ASSERT_TRUE(q8->Forward({{q8_cache.get(), tokens, LogitsMode::kLast}}, &b).ok());
  float max_diff = 0, max_abs = 0;
  for (int i = 0; i < a.vocab_size; ++i) {
    max_diff = std::max(max_diff, std::fabs(a.Row(0, 0)[i] - b.Row(0, 0)[i]));
    max_abs = std::max(max_abs, std::fabs(a.Row(0, 0)[i]));
  }
  EXPECT_GT(max_diff, 0.0f);
  EXPECT_LT(max_diff, 0.1f * max_abs);
}

}  // namespace
}  // namespace splitspec::model
