#include "kernels/cpu/dequantize.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/quantize_weights.h"

namespace splitspec::kernels {
namespace {

constexpr uint16_t kHalfOne = 0x3C00, kHalfTwo = 0x4000, kHalfHalf = 0x3800, kHalfQuarter = 0x3400,
                   kHalfMinusOne = 0xBC00;

TEST(Fp16Test, EveryHalfRoundTripsThroughFloat) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = Fp16ToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(Fp16ToFloat(FloatToFp16(f)))) << h;
      continue;
    }
    ASSERT_EQ(FloatToFp16(f), h) << "half 0x" << std::hex << h << " = " << f;
  }
}

TEST(Fp16Test, KnownValuesAndTiesToEven) {
  EXPECT_EQ(Fp16ToFloat(kHalfOne), 1.0f);
  EXPECT_EQ(Fp16ToFloat(0xC000), -2.0f);
  EXPECT_EQ(Fp16ToFloat(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(Fp16ToFloat(0x7BFF), 65504.0f);
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties go to the even mantissa (1).
  EXPECT_EQ(FloatToFp16(1.0f + std::ldexp(1.0f, -11)), kHalfOne);
  EXPECT_EQ(FloatToFp16(1.0f + 3 * std::ldexp(1.0f, -11)), kHalfOne + 2);
  EXPECT_EQ(FloatToFp16(65520.0f), 0x7C00);               // rounds up past the largest finite half
  EXPECT_EQ(FloatToFp16(std::ldexp(1.0f, -25)), 0x0000);  // tie with zero: even
  EXPECT_EQ(FloatToFp16(std::ldexp(1.5f, -25)), 0x0001);
}

// The row conversion (F16C where the CPU has it) gives FloatToFp16's bits for every
// non-NaN float: exact halves, values just off every half (ties, one ulp either side),
// subnormals, overflow, signed zeros and random normals, at ragged lengths (the vector
// loop's tail runs the scalar conversion).
TEST(Fp16Test, RowConversionMatchesTheScalarConversionBitwise) {
  std::vector<float> x;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = Fp16ToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    x.push_back(f);
    x.push_back(std::nextafter(f, INFINITY));
    x.push_back(std::nextafter(f, -INFINITY));
    const float next = Fp16ToFloat(static_cast<uint16_t>(h + 1));
    if (!std::isnan(next) && !std::isinf(next) && !std::isinf(f)) x.push_back((f + next) / 2);
  }
  std::mt19937 rng(std::random_device{}());
  std::normal_distribution<float> normal(0.0f, 300.0f);
  for (int i = 0; i < 100000; ++i) x.push_back(normal(rng));
  x.push_back(65520.0f);
  x.push_back(-1e30f);
  for (size_t n : {x.size(), x.size() - 1, size_t{7}, size_t{9}, size_t{0}}) {
    std::vector<uint16_t> got(n + 1, 0xABCD);
    FloatsToFp16(x.data(), static_cast<int64_t>(n), got.data());
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(got[i], FloatToFp16(x[i])) << "x[" << i << "] = " << x[i] << " n = " << n;
    }
    EXPECT_EQ(got[n], 0xABCD) << "wrote past n = " << n;
  }
}

TEST(Bf16Test, KnownValuesAndRounding) {
  EXPECT_EQ(Bf16ToFloat(0x3F80), 1.0f);
  EXPECT_EQ(Bf16ToFloat(0xC040), -3.0f);
  EXPECT_EQ(FloatToBf16(1.0f), 0x3F80);
  EXPECT_EQ(FloatToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);      // tie -> even
  EXPECT_EQ(FloatToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);  // tie -> even (up)
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(NAN))));
}

TEST(DequantizeTest, FloatTypesByHand) {
  const uint16_t halves[2] = {kHalfOne, 0xC000};
  const uint16_t bf16[2] = {0x3F80, 0xC040};
  const float floats[2] = {0.25f, -7.5f};
  float out[2];
  DequantizeRow(GgmlType::kF16, halves, out, 2);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -2.0f);
  DequantizeRow(GgmlType::kBF16, bf16, out, 2);
  EXPECT_EQ(out[1], -3.0f);
  DequantizeRow(GgmlType::kF32, floats, out, 2);
  EXPECT_EQ(out[1], -7.5f);
}

TEST(DequantizeTest, Q4_0ByHand) {
  BlockQ4_0 block = {};
  block.d = kHalfTwo;
  block.qs[0] = 0xF3;  // element 0: 3, element 16: 15
  std::vector<float> out(32);
  DequantizeRow(GgmlType::kQ4_0, &block, out.data(), 32);
  EXPECT_EQ(out[0], 2.0f * (3 - 8));
  EXPECT_EQ(out[16], 2.0f * (15 - 8));
  EXPECT_EQ(out[1], 2.0f * (0 - 8));
}

TEST(DequantizeTest, Q5_0ByHand) {
  BlockQ5_0 block = {};
  block.d = kHalfTwo;
  block.qs[0] = 0xF3;  // element 0: low 3, element 16: low 15
  block.qh[0] = 0x01;  // element 0's fifth bit: 3 + 16 = 19
  block.qh[2] = 0x01;  // element 16's fifth bit: 15 + 16 = 31
  std::vector<float> out(32);
  DequantizeRow(GgmlType::kQ5_0, &block, out.data(), 32);
  EXPECT_EQ(out[0], 2.0f * (19 - 16));
  EXPECT_EQ(out[16], 2.0f * (31 - 16));
  EXPECT_EQ(out[1], 2.0f * (0 - 16));
  EXPECT_EQ(out[17], 2.0f * (0 - 16));
}

// Widening to Q8_0 keeps every value: the widened blocks dequantize to the Q5_0 values.
TEST(DequantizeTest, Q5_0WidensToQ8_0Exactly) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<BlockQ5_0> q5(64);
  for (BlockQ5_0& b : q5) {
    b.d = FloatToFp16(std::uniform_real_distribution<float>(-0.1f, 0.1f)(rng));
    for (uint8_t& x : b.qh) x = static_cast<uint8_t>(byte(rng));
    for (uint8_t& x : b.qs) x = static_cast<uint8_t>(byte(rng));
  }
  std::vector<BlockQ8_0> q8(q5.size());
  WidenQ5_0ToQ8_0(q5.data(), q8.data(), static_cast<int64_t>(q5.size()));
  const int64_t n = 32 * static_cast<int64_t>(q5.size());
  std::vector<float> from_q5(n), from_q8(n);
  DequantizeRow(GgmlType::kQ5_0, q5.data(), from_q5.data(), n);
  DequantizeRow(GgmlType::kQ8_0, q8.data(), from_q8.data(), n);
  EXPECT_EQ(from_q5, from_q8);
  int low = 0, high = 0;  // both ends of the 5-bit range occur
  for (const BlockQ8_0& b : q8) {
    for (int8_t q : b.qs) low += q == -16, high += q == 15;
  }
  EXPECT_GT(low, 0);
  EXPECT_GT(high, 0);
}

TEST(DequantizeTest, Q4_1ByHand) {
  BlockQ4_1 block = {};
  block.d = kHalfHalf;
  block.m = kHalfMinusOne;
  block.qs[1] = 0x94;  // element 1: 4, element 17: 9
  std::vector<float> out(32);
  DequantizeRow(GgmlType::kQ4_1, &block, out.data(), 32);
  EXPECT_EQ(out[1], 0.5f * 4 - 1.0f);
  EXPECT_EQ(out[17], 0.5f * 9 - 1.0f);
  EXPECT_EQ(out[0], -1.0f);
}

TEST(DequantizeTest, Q8_0ByHand) {
  BlockQ8_0 blocks[2] = {};
  blocks[1].d = kHalfQuarter;
  blocks[1].qs[5] = -100;
  std::vector<float> out(64);
  DequantizeRow(GgmlType::kQ8_0, blocks, out.data(), 64);
  EXPECT_EQ(out[32 + 5], -25.0f);
  EXPECT_EQ(out[32 + 6], 0.0f);
}

// 6-bit scales and mins: sub-block 0 takes byte 0 / byte 4; sub-block 4 takes the
// nibbles of byte 8 with the top two bits of bytes 0 / 4 on top.
BlockQ4_K HandQ4_K() {
  BlockQ4_K block = {};
  block.d = kHalfOne;
  block.dmin = kHalfHalf;
  block.scales[0] = 0xC5;  // scale 0 = 5; top bits 3 -> scale 4 high bits
  block.scales[4] = 0x47;  // min 0 = 7; top bits 1 -> min 4 high bits
  block.scales[1] = 4;     // scale 1
  block.scales[5] = 2;     // min 1
  block.scales[8] = 0x92;  // scale 4 low nibble 2, min 4 low nibble 9
  block.qs[0] = 0x3A;      // element 0 (sub-block 0): 10, element 32 (sub-block 1): 3
  block.qs[64] = 0x0C;     // element 128 (sub-block 4): 12
  return block;
}

TEST(DequantizeTest, Q4_KScalesAndMinsByHand) {
  uint8_t scale, min;
  const BlockQ4_K block = HandQ4_K();
  UnpackScaleMinK4(block.scales, 4, &scale, &min);
  EXPECT_EQ(scale, 2 + (3 << 4));
  EXPECT_EQ(min, 9 + (1 << 4));
  std::vector<float> out(256);
  DequantizeRow(GgmlType::kQ4_K, &block, out.data(), 256);
  EXPECT_EQ(out[0], 1.0f * 5 * 10 - 0.5f * 7);
  EXPECT_EQ(out[32], 1.0f * 4 * 3 - 0.5f * 2);
  EXPECT_EQ(out[128], 1.0f * 50 * 12 - 0.5f * 25);
  EXPECT_EQ(out[129], -0.5f * 25);
}

TEST(DequantizeTest, WordwiseScaleUnpackingMatchesBytewise) {
  std::mt19937 rng(std::random_device{}());
  for (int trial = 0; trial < 1000; ++trial) {
    uint8_t packed[12];
    for (uint8_t& b : packed) b = static_cast<uint8_t>(rng());
    uint64_t scales, mins;
    UnpackScalesMinsK4(packed, &scales, &mins);
    for (int j = 0; j < 8; ++j) {
      uint8_t scale, min;
      UnpackScaleMinK4(packed, j, &scale, &min);
      ASSERT_EQ((scales >> (8 * j)) & 0xFF, scale) << j;
      ASSERT_EQ((mins >> (8 * j)) & 0xFF, min) << j;
    }
  }
}

TEST(DequantizeTest, Q5_KHighBitsByHand) {
  const BlockQ4_K q4 = HandQ4_K();
  BlockQ5_K block = {};
  block.d = q4.d;
  block.dmin = q4.dmin;
  std::memcpy(block.scales, q4.scales, 12);
  std::memcpy(block.qs, q4.qs, 128);
  block.qh[0] = 0x11;  // bit 0: element 0 of sub-block 0; bit 4: element 0 of sub-block 4
  std::vector<float> out(256);
  DequantizeRow(GgmlType::kQ5_K, &block, out.data(), 256);
  EXPECT_EQ(out[0], 1.0f * 5 * (10 + 16) - 0.5f * 7);
  EXPECT_EQ(out[32], 1.0f * 4 * 3 - 0.5f * 2);  // bit 1 clear
  EXPECT_EQ(out[128], 1.0f * 50 * (12 + 16) - 0.5f * 25);
}

TEST(DequantizeTest, Q6_KByHand) {
  BlockQ6_K block = {};
  block.d = kHalfHalf;
  block.scales[0] = 3;
  block.scales[4] = -2;
  block.scales[10] = 5;
  block.ql[0] = 0x7A;   // element 0 low 4 bits: 0xA; element 64 low 4 bits: 7
  block.qh[0] = 0x21;   // element 0 high bits: 1; element 64 high bits: 2
  block.ql[96] = 0x05;  // element 160 (half 1, second quarter) low bits: 5
  block.qh[32] = 0x0C;  // element 160 high bits (bits 2-3): 3
  std::vector<float> out(256);
  DequantizeRow(GgmlType::kQ6_K, &block, out.data(), 256);
  EXPECT_EQ(out[0], 0.5f * 3 * ((0xA | 16) - 32));
  EXPECT_EQ(out[64], 0.5f * -2 * ((7 | 32) - 32));
  EXPECT_EQ(out[160], 0.5f * 5 * ((5 | 48) - 32));
  EXPECT_EQ(out[1], 0.5f * 3 * -32);
}

// The test quantizer is the inverse of DequantizeRow to within its step: relative RMS
// error on normal data at most about half a step of each format.
TEST(QuantizeWeightsTest, RoundTripErrorMatchesFormatPrecision) {
  std::mt19937 rng(std::random_device{}());
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const struct {
    GgmlType type;
    double max_relative_rms;
  } cases[] = {{GgmlType::kF32, 0.0},   {GgmlType::kF16, 1e-3},  {GgmlType::kBF16, 5e-3},
               {GgmlType::kQ8_0, 0.01}, {GgmlType::kQ4_0, 0.15}, {GgmlType::kQ4_1, 0.12},
               {GgmlType::kQ4_K, 0.15}, {GgmlType::kQ5_K, 0.08}, {GgmlType::kQ6_K, 0.04}};
  const int n = 1024;
  for (const auto& c : cases) {
    std::vector<float> x(n), back(n);
    for (float& v : x) v = normal(rng);
    std::vector<uint8_t> bytes(RowBytes(c.type, n));
    QuantizeRow(c.type, x.data(), bytes.data(), n);
    DequantizeRow(c.type, bytes.data(), back.data(), n);
    double err = 0, ref = 0;
    for (int i = 0; i < n; ++i) {
      err += (back[i] - x[i]) * (back[i] - x[i]);
      ref += x[i] * x[i];
    }
    EXPECT_LE(std::sqrt(err / ref), c.max_relative_rms) << GetGgmlTypeTraits(c.type).name;
    if (c.type != GgmlType::kF32) {
      EXPECT_GT(err, 0.0) << GetGgmlTypeTraits(c.type).name;
    }
  }
}

}  // namespace
}  // namespace splitspec::kernels
