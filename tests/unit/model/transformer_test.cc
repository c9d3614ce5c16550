#include "runtime/model/transformer.h"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/reference_forward.h"
#include "tests/testing/tiny_model.h"

namespace splitspec::model {
namespace {

using kernels::GgmlType;
using ::testing::HasSubstr;

std::unique_ptr<Transformer> LoadTiny(const TinyModelOptions& options, int threads = 2) {
  auto file = GgufFile::FromBuffer(MakeTinyModel(options).Serialize());
  EXPECT_TRUE(file.ok()) << file.status();
  auto model = Transformer::FromFile(std::move(*file), {.threads = threads});
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? std::move(*model) : nullptr;
}

const std::vector<int32_t> kPrompt = {0, 72, 101, 108, 260, 262, 33, 299, 5, 150, 301, 17};

// Logits of every position of `tokens` in one call.
std::vector<std::vector<float>> AllLogits(Transformer& model, const std::vector<int32_t>& tokens) {
  auto cache = model.NewCache();
  ForwardOutput out;
  absl::Status s = model.Forward({{cache.get(), tokens, LogitsMode::kAll}}, &out);
  EXPECT_TRUE(s.ok()) << s;
  std::vector<std::vector<float>> rows;
  for (int j = 0; j < out.num_rows[0]; ++j) {
    rows.emplace_back(out.Row(0, j), out.Row(0, j) + out.vocab_size);
  }
  return rows;
}

// Largest |a - b| over all positions, and the largest |b|.
void MaxDiff(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b,
             double* diff, double* scale) {
  *diff = 0;
  *scale = 0;
  for (size_t t = 0; t < a.size(); ++t) {
    for (size_t i = 0; i < a[t].size(); ++i) {
      *diff = std::max(*diff, std::fabs(static_cast<double>(a[t][i]) - b[t][i]));
      *scale = std::max(*scale, std::fabs(static_cast<double>(b[t][i])));
    }
  }
}

struct ReferenceCase {
  std::string name;
  TinyModelOptions options;
  double tolerance;  // on max |ours - reference| / max |reference|
};

class ReferenceTest : public ::testing::TestWithParam<ReferenceCase> {};

TEST_P(ReferenceTest, MatchesReferenceForward) {
  const ReferenceCase& c = GetParam();
  auto file = GgufFile::FromBuffer(MakeTinyModel(c.options).Serialize());
  ASSERT_TRUE(file.ok()) << file.status();
  auto reference = ReferenceForward(**file, kPrompt);
  ASSERT_TRUE(reference.ok()) << reference.status();
  std::unique_ptr<Transformer> model = LoadTiny(c.options);
  ASSERT_NE(model, nullptr);
  const auto ours = AllLogits(*model, kPrompt);
  ASSERT_EQ(ours.size(), kPrompt.size());
  double diff, scale;
  MaxDiff(ours, *reference, &diff, &scale);
  EXPECT_GT(scale, 0.1);  // the logits are not degenerate
  EXPECT_LT(diff / scale, c.tolerance) << "max diff " << diff << " scale " << scale;
}

TinyModelOptions With(std::string arch, GgmlType type, bool tied = true) {
  TinyModelOptions o;
  o.architecture = std::move(arch);
  o.weight_type = type;
  o.embedding_type = type;
  o.tied_output = tied;
  return o;
}

// K-quants need rows of a multiple of 256.
TinyModelOptions WithKQuant(GgmlType type) {
  TinyModelOptions o = With("llama", type);
  o.n_embd = 256;
  o.n_ff = 512;
  return o;
}

TinyModelOptions WithLinearRope() {
  TinyModelOptions o;
  o.rope_linear_factor = 4.f;
  o.rope_freq_base = 500.f;
  return o;
}

// Float weights: only float rounding differs (measured ~3e-7). Quantized weights: our matmul also
// quantizes the activations to 8 bits, which the float64 reference does not (measured ~1.5e-2).
// Both round Q, K, V and the attention probabilities to half precision, but a last-bit
// difference before one of those roundings moves it by a whole half step (2^-11 relative):
// measured up to 5e-5 in the logits, against ~3e-7 elsewhere.
constexpr double kHalfFlip = 2e-4;
INSTANTIATE_TEST_SUITE_P(
    Types, ReferenceTest,
    ::testing::Values(ReferenceCase{"LlamaF32", With("llama", GgmlType::kF32), kHalfFlip},
                      ReferenceCase{"Qwen2F32", With("qwen2", GgmlType::kF32, false), kHalfFlip},
                      ReferenceCase{"LlamaF16Untied", With("llama", GgmlType::kF16, false),
                                    kHalfFlip},
                      ReferenceCase{"LlamaBF16", With("llama", GgmlType::kBF16), kHalfFlip},
                      ReferenceCase{"LlamaQ8_0", With("llama", GgmlType::kQ8_0), 3e-2},
                      ReferenceCase{"LlamaQ4_1", With("llama", GgmlType::kQ4_1), 3e-2},
                      ReferenceCase{"Qwen2Q4_0", With("qwen2", GgmlType::kQ4_0), 3e-2},
                      ReferenceCase{"LinearRope", WithLinearRope(), kHalfFlip},
                      ReferenceCase{"LlamaQ4_K", WithKQuant(GgmlType::kQ4_K), 3e-2},
                      ReferenceCase{"LlamaQ5_K", WithKQuant(GgmlType::kQ5_K), 3e-2},
                      ReferenceCase{"LlamaQ6_K", WithKQuant(GgmlType::kQ6_K), 3e-2}),
    [](const ::testing::TestParamInfo<ReferenceCase>& info) { return info.param.name; });

// --- batch invariance: bitwise equality ---

class BatchInvarianceTest : public ::testing::TestWithParam<TinyModelOptions> {};

TEST_P(BatchInvarianceTest, PrefillEqualsTokenByToken) {
  std::unique_ptr<Transformer> model = LoadTiny(GetParam());
  const auto all = AllLogits(*model, kPrompt);
  auto cache = model->NewCache();
  for (size_t t = 0; t < kPrompt.size(); ++t) {
    ForwardOutput out;
    ASSERT_TRUE(model->Forward({{cache.get(), {&kPrompt[t], 1}, LogitsMode::kLast}}, &out).ok());
    ASSERT_EQ(out.num_rows[0], 1);
    for (int i = 0; i < out.vocab_size; ++i) {
      ASSERT_EQ(out.Row(0, 0)[i], all[t][i]) << "position " << t << " logit " << i;
    }
  }
  EXPECT_EQ(cache->length(), static_cast<int>(kPrompt.size()));
}

TEST_P(BatchInvarianceTest, PositionInsideBlockEqualsAlone) {
  std::unique_ptr<Transformer> model = LoadTiny(GetParam());
  const std::vector<int32_t> prefix(kPrompt.begin(), kPrompt.begin() + 4);
  const std::vector<int32_t> block(kPrompt.begin() + 4, kPrompt.begin() + 9);  // 5 tokens
  auto block_cache = model->NewCache();
  ForwardOutput out;
  ASSERT_TRUE(model->Forward({{block_cache.get(), prefix, LogitsMode::kNone}}, &out).ok());
  ASSERT_TRUE(model->Forward({{block_cache.get(), block, LogitsMode::kAll}}, &out).ok());
  ASSERT_EQ(out.num_rows[0], 5);
  const ForwardOutput in_block = out;
  // Position 4 + 2 alone: prefix + first two block tokens, then the third alone.
  auto alone_cache = model->NewCache();
  std::vector<int32_t> before(kPrompt.begin(), kPrompt.begin() + 6);
  ASSERT_TRUE(model->Forward({{alone_cache.get(), before, LogitsMode::kNone}}, &out).ok());
  ASSERT_TRUE(
      model->Forward({{alone_cache.get(), {&kPrompt[6], 1}, LogitsMode::kLast}}, &out).ok());
  for (int i = 0; i < out.vocab_size; ++i) ASSERT_EQ(out.Row(0, 0)[i], in_block.Row(0, 2)[i]);
}

TEST_P(BatchInvarianceTest, BatchedSequencesEqualSeparate) {
  std::unique_ptr<Transformer> model = LoadTiny(GetParam());
  const std::vector<int32_t> a = {0, 50, 60, 70, 80, 90, 100};
  const std::vector<int32_t> b = {0, 290, 280};
  const auto a_alone = AllLogits(*model, a);
  const auto b_alone = AllLogits(*model, b);
  auto ca = model->NewCache();
  auto cb = model->NewCache();
  ForwardOutput out;
  ASSERT_TRUE(
      model->Forward({{ca.get(), a, LogitsMode::kAll}, {cb.get(), b, LogitsMode::kAll}}, &out)
          .ok());
  ASSERT_EQ(out.num_rows, (std::vector<int>{7, 3}));
  for (int j = 0; j < 7; ++j) {
    for (int i = 0; i < out.vocab_size; ++i) ASSERT_EQ(out.Row(0, j)[i], a_alone[j][i]);
  }
  for (int j = 0; j < 3; ++j) {
    for (int i = 0; i < out.vocab_size; ++i) ASSERT_EQ(out.Row(1, j)[i], b_alone[j][i]);
  }
  // Mixed shapes: a decodes one token while b verifies a block of four.
  const std::vector<int32_t> a_next = {111};
  const std::vector<int32_t> b_next = {1, 2, 3, 4};
  ASSERT_TRUE(
      model
          ->Forward({{cb.get(), b_next, LogitsMode::kAll}, {ca.get(), a_next, LogitsMode::kLast}},
                    &out)
          .ok());
  std::vector<int32_t> a_full = a;
  a_full.push_back(111);
  std::vector<int32_t> b_full = b;
  b_full.insert(b_full.end(), b_next.begin(), b_next.end());
  const auto a_ref = AllLogits(*model, a_full);
  const auto b_ref = AllLogits(*model, b_full);
  for (int i = 0; i < out.vocab_size; ++i) ASSERT_EQ(out.Row(1, 0)[i], a_ref[7][i]);
  for (int j = 0; j < 4; ++j) {
    for (int i = 0; i < out.vocab_size; ++i) ASSERT_EQ(out.Row(0, j)[i], b_ref[3 + j][i]);
  }
}

TEST_P(BatchInvarianceTest, TruncateThenRecomputeMatches) {
  std::unique_ptr<Transformer> model = LoadTiny(GetParam());
  const auto all = AllLogits(*model, kPrompt);
  auto cache = model->NewCache();
  ForwardOutput out;
  ASSERT_TRUE(model->Forward({{cache.get(), kPrompt, LogitsMode::kNone}}, &out).ok());
  // Roll back the last five positions, write different tokens there, roll back again.
  ASSERT_TRUE(cache->Truncate(7).ok());
  const std::vector<int32_t> other = {200, 201, 202};
  ASSERT_TRUE(model->Forward({{cache.get(), other, LogitsMode::kAll}}, &out).ok());
  ASSERT_TRUE(cache->Truncate(7).ok());
  const std::vector<int32_t> tail(kPrompt.begin() + 7, kPrompt.end());
  ASSERT_TRUE(model->Forward({{cache.get(), tail, LogitsMode::kAll}}, &out).ok());
  ASSERT_EQ(out.num_rows[0], 5);
  for (int j = 0; j < 5; ++j) {
    for (int i = 0; i < out.vocab_size; ++i) ASSERT_EQ(out.Row(0, j)[i], all[7 + j][i]);
  }
}

TEST_P(BatchInvarianceTest, ThreadCountDoesNotChangeLogits) {
  std::unique_ptr<Transformer> one = LoadTiny(GetParam(), 1);
  std::unique_ptr<Transformer> three = LoadTiny(GetParam(), 3);
  const auto a = AllLogits(*one, kPrompt);
  const auto b = AllLogits(*three, kPrompt);
  for (size_t t = 0; t < a.size(); ++t) ASSERT_EQ(a[t], b[t]) << "position " << t;
}

INSTANTIATE_TEST_SUITE_P(
    Models, BatchInvarianceTest,
    ::testing::Values(With("llama", GgmlType::kF32), With("llama", GgmlType::kQ4_1),
                      WithKQuant(GgmlType::kQ4_K), With("qwen2", GgmlType::kQ8_0, false)),
    [](const ::testing::TestParamInfo<TinyModelOptions>& info) {
      return info.param.architecture + kernels::GetGgmlTypeTraits(info.param.weight_type).name;
    });

// --- errors leave the caches unchanged ---

TEST(TransformerTest, BadTokenIsRefusedAndAppendsNothing) {
  std::unique_ptr<Transformer> model = LoadTiny(TinyModelOptions{});
  auto good = model->NewCache();
  auto bad = model->NewCache();
  ForwardOutput out;
  ASSERT_TRUE(model->Forward({{good.get(), kPrompt, LogitsMode::kNone}}, &out).ok());
  const std::vector<int32_t> tokens = {5, TinyModelVocabSize()};
  absl::Status s = model->Forward(
      {{good.get(), kPrompt, LogitsMode::kLast}, {bad.get(), tokens, LogitsMode::kLast}}, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("sequence 1: token 1 = 304 outside"));
  EXPECT_EQ(good->length(), static_cast<int>(kPrompt.size()));
  EXPECT_EQ(bad->length(), 0);
}

TEST(TransformerTest, CacheLimitGivesOutOfRange) {
  std::unique_ptr<Transformer> model = LoadTiny(TinyModelOptions{});
  auto cache = model->NewCache(8);
  ForwardOutput out;
  absl::Status s = model->Forward({{cache.get(), kPrompt, LogitsMode::kLast}}, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(std::string(s.message()), HasSubstr("12 tokens exceed the KV cache limit of 8"));
  EXPECT_EQ(cache->length(), 0);
}

TEST(TransformerTest, RefusesMalformedBatches) {
  std::unique_ptr<Transformer> model = LoadTiny(TinyModelOptions{});
  auto cache = model->NewCache();
  KvCache wrong(3, 32, 100);
  ForwardOutput out;
  EXPECT_THAT(std::string(model->Forward({}, &out).message()), HasSubstr("at least one"));
  EXPECT_THAT(std::string(model->Forward({{cache.get(), {}, LogitsMode::kLast}}, &out).message()),
              HasSubstr("sequence 0: no tokens"));
  EXPECT_THAT(std::string(model->Forward({{&wrong, kPrompt, LogitsMode::kLast}}, &out).message()),
              HasSubstr("KV cache shaped for 3 layers"));
  EXPECT_THAT(std::string(model
                              ->Forward({{cache.get(), kPrompt, LogitsMode::kLast},
                                         {cache.get(), kPrompt, LogitsMode::kLast}},
                                        &out)
                              .message()),
              HasSubstr("sequence 1: KV cache also used"));
  EXPECT_EQ(cache->length(), 0);
}

TEST(TransformerTest, LogitsModesSelectRows) {
  std::unique_ptr<Transformer> model = LoadTiny(TinyModelOptions{});
  const auto all = AllLogits(*model, kPrompt);
  auto c1 = model->NewCache();
  auto c2 = model->NewCache();
  ForwardOutput out;
  ASSERT_TRUE(model
                  ->Forward({{c1.get(), kPrompt, LogitsMode::kNone},
                             {c2.get(), kPrompt, LogitsMode::kLast}},
                            &out)
                  .ok());
  EXPECT_EQ(out.num_rows, (std::vector<int>{0, 1}));
  EXPECT_EQ(out.logits.size(), static_cast<size_t>(out.vocab_size));
  EXPECT_EQ(std::vector<float>(out.Row(1, 0), out.Row(1, 0) + out.vocab_size), all.back());
}

// --- loading ---

TEST(TransformerTest, RefusesUnsupportedArchitectureByName) {
  GgufWriter w = MakeTinyModel(TinyModelOptions{});
  w.SetString("general.architecture", "mamba");
  auto file = GgufFile::FromBuffer(w.Serialize());
  ASSERT_TRUE(file.ok());
  auto model = Transformer::FromFile(std::move(*file), {});
  EXPECT_EQ(model.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(model.status().message()), HasSubstr("'mamba'"));
}

TEST(TransformerTest, RefusesMissingKeyAndTensorByName) {
  {
    TinyModelOptions o;
    GgufWriter w = MakeTinyModel(o);
    w.SetString("llama.attention.layer_norm_rms_epsilon", "oops");
    auto model = Transformer::FromFile(*GgufFile::FromBuffer(w.Serialize()), {});
    EXPECT_THAT(std::string(model.status().message()),
                HasSubstr("llama.attention.layer_norm_rms_epsilon"));
  }
  {
    TinyModelOptions o;
    o.n_layers = 1;
    GgufWriter w = MakeTinyModel(o);
    w.SetUint32("llama.block_count", 2);  // layer 1 has no tensors
    auto model = Transformer::FromFile(*GgufFile::FromBuffer(w.Serialize()), {});
    EXPECT_EQ(model.status().code(), absl::StatusCode::kNotFound);
    EXPECT_THAT(std::string(model.status().message()), HasSubstr("'blk.1.attn_norm.weight'"));
  }
  {
    TinyModelOptions o;
    GgufWriter w = MakeTinyModel(o);
    w.SetUint32("llama.feed_forward_length", 96);
    auto model = Transformer::FromFile(*GgufFile::FromBuffer(w.Serialize()), {});
    EXPECT_THAT(std::string(model.status().message()),
                HasSubstr("'blk.0.ffn_gate.weight' has dims [64, 128], expected [64, 96]"));
  }
}

TEST(TransformerTest, LayerSkipRunsTheFirstLayersOnly) {
  TinyModelOptions o;
  o.n_layers = 3;
  GgufWriter full = MakeTinyModel(o);
  auto skip = Transformer::FromFile(*GgufFile::FromBuffer(full.Serialize()), {.layers = 2});
  ASSERT_TRUE(skip.ok()) << skip.status();
  EXPECT_EQ((*skip)->config().n_layers, 2);
  GgufWriter truncated = MakeTinyModel(o);
  truncated.SetUint32("llama.block_count", 2);  // layer 2's tensors stay, unused
  auto two = Transformer::FromFile(*GgufFile::FromBuffer(truncated.Serialize()), {});
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(AllLogits(**skip, kPrompt), AllLogits(**two, kPrompt));
  EXPECT_NE(AllLogits(**skip, kPrompt), AllLogits(*LoadTiny(o), kPrompt));
  auto too_many = Transformer::FromFile(*GgufFile::FromBuffer(full.Serialize()), {.layers = 4});
  EXPECT_THAT(std::string(too_many.status().message()), HasSubstr("layers = 4 outside [0, 3]"));
}

TEST(TransformerTest, ReadsConfigFromMetadata) {
  TinyModelOptions o = With("qwen2", GgmlType::kF32, false);
  o.rope_linear_factor = 2.f;
  std::unique_ptr<Transformer> model = LoadTiny(o);
  const ModelConfig& c = model->config();
  EXPECT_EQ(c.architecture, "qwen2");
  EXPECT_EQ(c.n_layers, 2);
  EXPECT_EQ(c.n_heads, 4);
  EXPECT_EQ(c.n_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.vocab_size, TinyModelVocabSize());
  EXPECT_EQ(c.rope_layout, RopeLayout::kHalfSplit);
  EXPECT_EQ(c.rope_freq_scale, 0.5f);
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_FALSE(model->weights().tied_output);
}

}  // namespace
}  // namespace splitspec::model
