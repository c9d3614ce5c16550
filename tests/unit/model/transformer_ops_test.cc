#include "runtime/model/transformer_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/exp_approx.h"
#include "kernels/cpu/quant_blocks.h"

namespace splitspec::model::internal {
namespace {

std::vector<float> Normal(int64_t n, float stddev, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

std::vector<float> Half(std::vector<float> v) {
  RoundToHalf(v.data(), static_cast<int64_t>(v.size()));
  return v;
}

using kernels::GgmlOrder;

constexpr GgmlOrder kBothOrders[] = {GgmlOrder::kAvx512, GgmlOrder::kAvx2};

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) void Exp8(GgmlOrder order, const float* x, float* y) {
  const __m256 v = _mm256_loadu_ps(x);
  _mm256_storeu_ps(y, order == GgmlOrder::kAvx512 ? kernels::ExpApprox8<GgmlOrder::kAvx512>(v)
                                                  : kernels::ExpApprox8<GgmlOrder::kAvx2>(v));
}
#endif

float Exp(GgmlOrder order, float x) {
  return order == GgmlOrder::kAvx512 ? kernels::ExpApprox<GgmlOrder::kAvx512>(x)
                                     : kernels::ExpApprox<GgmlOrder::kAvx2>(x);
}

TEST(ExpApproxTest, VectorAndScalarAgreeBitwiseAndStayWithinFourUlp) {
#if !defined(__x86_64__)
  GTEST_SKIP() << "no AVX2 path on this architecture";
#else
  if (!kernels::CpuFeatures().avx2) GTEST_SKIP() << "no AVX2 on this CPU";
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> range(-110.0f, 95.0f);
  std::vector<float> x(4096);
  for (float& v : x) v = range(rng);
  x[0] = -std::numeric_limits<float>::infinity();
  x[1] = 0.0f;
  x[2] = -0.0f;
  x[3] = std::numeric_limits<float>::quiet_NaN();
  x[4] = -95.0f;  // the AVX2 order's scaled path (|n| > 126) beside ordinary lanes
  x[5] = 89.0f;
  for (GgmlOrder order : kBothOrders) {
    for (size_t i = 0; i < x.size(); i += 8) {
      float vec[8];
      Exp8(order, &x[i], vec);
      for (int k = 0; k < 8; ++k) {
        const float x_k = x[i + k];
        const float scalar = Exp(order, x_k);
        if (std::isnan(x_k)) {
          EXPECT_TRUE(std::isnan(vec[k]) && std::isnan(scalar));
          continue;
        }
        ASSERT_EQ(std::memcmp(&vec[k], &scalar, sizeof(float)), 0)
            << kernels::GgmlOrderName(order) << " x=" << x_k;
        if (x_k > -87.0f && x_k < 88.0f) {
          const double exact = std::exp(static_cast<double>(x_k));
          EXPECT_NEAR(scalar, exact, 4 * std::ldexp(1.0, -24) * exact)
              << kernels::GgmlOrderName(order) << " x=" << x_k;
        }
      }
    }
    EXPECT_EQ(Exp(order, -std::numeric_limits<float>::infinity()), 0.0f);
    EXPECT_EQ(Exp(order, -110.0f), 0.0f);
    EXPECT_EQ(Exp(order, 100.0f), std::numeric_limits<float>::infinity());
  }
  // The AVX2 order reaches into the subnormals as ggml's does; the AVX-512 order stops at 0.
  EXPECT_GT(Exp(GgmlOrder::kAvx2, -95.0f), 0.0f);
  EXPECT_NEAR(Exp(GgmlOrder::kAvx2, -95.0f), std::exp(-95.0), 1e-3 * std::exp(-95.0));
#endif
}

// The two orders are different functions: some inputs round differently in the last bit
// (so a model that used the wrong one would drift from llama.cpp), never by more.
TEST(ExpApproxTest, TheTwoOrdersDifferOnlyInTheLastBit) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> range(-80.0f, 80.0f);
  int differ = 0;
  for (int i = 0; i < 20000; ++i) {
    const float x = range(rng);
    const float a = Exp(GgmlOrder::kAvx512, x), b = Exp(GgmlOrder::kAvx2, x);
    ASSERT_LE(std::fabs(a - b), std::ldexp(std::fabs(a), -23)) << "x=" << x;
    differ += a != b;
  }
  EXPECT_GT(differ, 0);
}

TEST(RoundToHalfTest, MatchesTheScalarConversionAtRaggedSizes) {
  std::mt19937 rng(std::random_device{}());
  for (int64_t n : {1, 7, 8, 9, 33, 200}) {
    std::vector<float> x = Normal(n, 3.0f, rng);
    x[0] = 1.0f + std::ldexp(1.0f, -11);  // a tie: rounds to even (1.0)
    std::vector<float> y = x;
    RoundToHalf(y.data(), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], kernels::RoundToHalf(x[i])) << i;
    EXPECT_EQ(y[0], 1.0f);
  }
}

// The dispatched path (AVX2 where available) performs the reference's operations, in
// both orders: bitwise equal at ragged lengths (inside and across 8- and 16-position
// chunks, the scores taken eight positions at a time and the rest one by one), several
// head sizes, strided caches.
TEST(AttendOneHeadTest, FastPathEqualsReferenceBitwise) {
  std::mt19937 rng(std::random_device{}());
  for (GgmlOrder order : kBothOrders) {
    for (int head_dim : {16, 64, 128}) {
      const int64_t stride = 3 * head_dim + 16;
      for (int pos : {0, 1, 6, 7, 8, 15, 16, 17, 23, 40, 100, 301}) {
        const std::vector<float> q = Half(Normal(head_dim, 1.0f, rng));
        const std::vector<float> keys = Half(Normal((pos + 1) * stride, 1.0f, rng));
        const std::vector<float> values = Half(Normal((pos + 1) * stride, 1.0f, rng));
        std::vector<float> scratch_a(pos + 1), scratch_b(pos + 1), a(head_dim), b(head_dim);
        const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
        AttendOneHead(order, q.data(), keys.data() + head_dim, values.data() + head_dim, stride,
                      pos, head_dim, scale, scratch_a.data(), a.data());
        AttendOneHeadReference(order, q.data(), keys.data() + head_dim, values.data() + head_dim,
                               stride, pos, head_dim, scale, scratch_b.data(), b.data());
        for (int d = 0; d < head_dim; ++d) {
          ASSERT_EQ(a[d], b[d]) << kernels::GgmlOrderName(order) << " head_dim=" << head_dim
                                << " pos=" << pos << " d=" << d;
        }
      }
    }
  }
}

// A group of queries against one KV head (a verification block's tokens times the query
// heads sharing the KV head) gives each query exactly its own attention: bitwise equal to
// AttendOneHead and to the reference, at ragged group sizes and positions (the queries'
// positions differ, as in a causal block, and some are shuffled), both orders, several
// head sizes, strided caches.
TEST(AttendHeadGroupTest, EachQueryEqualsItsOwnAttentionBitwise) {
  std::mt19937 rng(std::random_device{}());
  std::vector<float> scratch;
  for (GgmlOrder order : kBothOrders) {
    for (int head_dim : {16, 64, 128}) {
      const int64_t stride = 3 * head_dim + 16;
      for (int count : {1, 2, 3, 5, 7, 9, 16, 27}) {
        for (int first : {0, 6, 37, 100}) {
          const int heads_per_kv = 1 + count % 3;  // queries i and i + 1 may share a token
          const int n = first + (count + heads_per_kv - 1) / heads_per_kv;
          const std::vector<float> keys = Half(Normal(n * stride, 1.0f, rng));
          const std::vector<float> values = Half(Normal(n * stride, 1.0f, rng));
          std::vector<std::vector<float>> q(count), out(count);
          std::vector<AttentionQuery> queries(count);
          for (int i = 0; i < count; ++i) {
            q[i] = Half(Normal(head_dim, 1.0f, rng));
            out[i].assign(head_dim, std::numeric_limits<float>::quiet_NaN());
            queries[i] = {q[i].data(), first + i / heads_per_kv, out[i].data()};
          }
          if (first == 37) std::shuffle(queries.begin(), queries.end(), rng);
          const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
          AttendHeadGroup(order, queries.data(), count, keys.data() + head_dim,
                          values.data() + head_dim, stride, head_dim, scale, &scratch);
          std::vector<float> alone_scratch(n), alone(head_dim), reference(head_dim);
          for (const AttentionQuery& query : queries) {
            AttendOneHead(order, query.q, keys.data() + head_dim, values.data() + head_dim,
                          stride, query.pos, head_dim, scale, alone_scratch.data(), alone.data());
            AttendOneHeadReference(order, query.q, keys.data() + head_dim,
                                   values.data() + head_dim, stride, query.pos, head_dim, scale,
                                   alone_scratch.data(), reference.data());
            for (int d = 0; d < head_dim; ++d) {
              ASSERT_EQ(query.out[d], alone[d])
                  << kernels::GgmlOrderName(order) << " head_dim=" << head_dim
                  << " count=" << count << " pos=" << query.pos << " d=" << d;
              ASSERT_EQ(query.out[d], reference[d]) << "pos=" << query.pos << " d=" << d;
            }
          }
        }
      }
    }
  }
}

// The reference against exact softmax attention: only the half-precision probabilities
// (2^-11 relative each) and float rounding separate them.
TEST(AttendOneHeadTest, ReferenceMatchesExactAttentionWithinHalfPrecision) {
  std::mt19937 rng(std::random_device{}());
  const int head_dim = 64, pos = 37;
  const std::vector<float> q = Half(Normal(head_dim, 1.0f, rng));
  const std::vector<float> k = Half(Normal((pos + 1) * head_dim, 1.0f, rng));
  const std::vector<float> v = Half(Normal((pos + 1) * head_dim, 1.0f, rng));
  for (GgmlOrder order : kBothOrders) {
    std::vector<float> scratch(pos + 1), out(head_dim);
    AttendOneHeadReference(order, q.data(), k.data(), v.data(), head_dim, pos, head_dim, 0.125f,
                           scratch.data(), out.data());
    std::vector<double> p(pos + 1);
    double max = -1e300, sum = 0;
    for (int j = 0; j <= pos; ++j) {
      double s = 0;
      for (int d = 0; d < head_dim; ++d) s += static_cast<double>(q[d]) * k[j * head_dim + d];
      p[j] = s * 0.125;
      max = std::max(max, p[j]);
    }
    for (double& e : p) sum += (e = std::exp(e - max));
    for (int d = 0; d < head_dim; ++d) {
      double exact = 0, mass = 0;
      for (int j = 0; j <= pos; ++j) {
        exact += p[j] / sum * v[j * head_dim + d];
        mass += p[j] / sum * std::fabs(v[j * head_dim + d]);
      }
      EXPECT_NEAR(out[d], exact, 2 * std::ldexp(1.0, -11) * mass + 1e-6)
          << kernels::GgmlOrderName(order) << " d=" << d;
    }
  }
}

TEST(SiluMulTest, FastPathEqualsReferenceBitwiseAndApproximatesSilu) {
  std::mt19937 rng(std::random_device{}());
  for (GgmlOrder order : kBothOrders) {
    for (int64_t n : {1, 5, 8, 13, 1536}) {
      const std::vector<float> gate = Normal(n, 4.0f, rng);
      const std::vector<float> up = Normal(n, 1.0f, rng);
      std::vector<float> a = gate, b = gate;
      SiluMul(order, a.data(), up.data(), n);
      SiluMulReference(order, b.data(), up.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(a[i], b[i]) << "n=" << n << " i=" << i;
        const double g = gate[i];
        const double exact = g / (1.0 + std::exp(-g)) * up[i];
        EXPECT_NEAR(b[i], exact, 1e-6 * (std::fabs(exact) + 1e-3)) << "n=" << n << " i=" << i;
      }
    }
  }
}

// GeGLU: the table path gives the reference's bits over every half input (and past the
// +-10 cut-offs), and both stay within the half rounding of the exact tanh GELU.
TEST(GeluMulTest, TablePathEqualsReferenceBitwiseAndApproximatesGelu) {
  std::vector<float> gate;
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    const float x = kernels::Fp16ToFloat(static_cast<uint16_t>(bits));
    if (std::isfinite(x)) gate.push_back(x);
  }
  std::mt19937 rng(std::random_device{}());
  const std::vector<float> wide = Normal(4096, 6.0f, rng);
  gate.insert(gate.end(), wide.begin(), wide.end());
  gate.insert(gate.end(), {-10.0f, 10.0f, -10.5f, 12.0f, 9.999f, -9.999f});
  const int64_t n = static_cast<int64_t>(gate.size());
  const std::vector<float> up = Normal(n, 1.0f, rng);
  std::vector<float> a = gate, b = gate;
  GeluMul(a.data(), up.data(), n);
  GeluMulReference(b.data(), up.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(std::memcmp(&a[i], &b[i], sizeof(float)), 0) << "x=" << gate[i];
    const double x = gate[i];
    const double exact =
        0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))) * up[i];
    // Input and output each rounded to half: a few 2^-11 relative, plus the cut-offs' tails.
    EXPECT_NEAR(b[i], exact, 4e-3 * std::fabs(exact) + 1e-4 * std::fabs(up[i])) << "x=" << x;
  }
}

TEST(RopeAnglesTest, FloatRecurrenceStaysCloseToTheExactAngles) {
  ModelConfig config;
  config.rope_dim = 64;
  config.rope_freq_base = 100000.0f;
  for (int pos : {0, 1, 100, 2000}) {
    std::vector<float> cos_a(32), sin_a(32);
    RopeAngles(config, {}, pos, cos_a.data(), sin_a.data());
    for (int i = 0; i < 32; ++i) {
      const double angle = pos * std::pow(100000.0, -2.0 * i / 64);
      // theta is advanced by i float multiplications: relative error <= ~(i + 2) ulp.
      const double tolerance = (i + 4) * std::ldexp(1.0, -24) * angle + 1e-6;
      EXPECT_NEAR(cos_a[i], std::cos(angle), tolerance) << "pos=" << pos << " i=" << i;
      EXPECT_NEAR(sin_a[i], std::sin(angle), tolerance) << "pos=" << pos << " i=" << i;
    }
  }
}

}  // namespace
}  // namespace splitspec::model::internal
