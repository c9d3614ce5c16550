// MatMulRows dispatch and the scalar reference of the quantized dot products.
#include "kernels/cpu/matmul.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/quantize_activations.h"

namespace splitspec::kernels {
namespace {

using RowsFn = void (*)(GgmlType, const void*, int64_t, const PackedActivations&, int64_t, int64_t,
                        float*, int64_t);

float DotFloat(GgmlType type, const void* row, const float* x, int64_t cols) {
  float acc = 0.0f;
  for (int64_t i = 0; i < cols; ++i) {
    float w;
    if (type == GgmlType::kF32) {
      w = static_cast<const float*>(row)[i];
    } else if (type == GgmlType::kF16) {
      w = Fp16ToFloat(static_cast<const uint16_t*>(row)[i]);
    } else {
      w = Bf16ToFloat(static_cast<const uint16_t*>(row)[i]);
    }
    acc += w * x[i];
  }
  return acc;
}

// sum over the 32 elements of a block of (4-bit quant) * activation.
int32_t DotNibbles(const uint8_t* qs, const int8_t* x) {
  int32_t sum = 0;
  for (int j = 0; j < 16; ++j) sum += (qs[j] & 0xF) * x[j] + (qs[j] >> 4) * x[j + 16];
  return sum;
}

float DotBlock32(GgmlType type, const void* row, const Blocks32View& x, int64_t blocks) {
  float acc = 0.0f;
  for (int64_t b = 0; b < blocks; ++b) {
    const int8_t* xq = x.qs + 32 * b;
    const int32_t xsum = static_cast<int32_t>(x.sum[b]);
    if (type == GgmlType::kQ4_0) {
      const BlockQ4_0& w = static_cast<const BlockQ4_0*>(row)[b];
      const int32_t isum = DotNibbles(w.qs, xq) - 8 * xsum;
      acc += static_cast<float>(isum) * (Fp16ToFloat(w.d) * x.d[b]);
    } else if (type == GgmlType::kQ4_1) {  // matmul.h, "Q4_1 order": one chain
      const BlockQ4_1& w = static_cast<const BlockQ4_1*>(row)[b];
      const int32_t isum = DotNibbles(w.qs, xq);
      acc = std::fma(static_cast<float>(isum), Fp16ToFloat(w.d) * x.d[b], acc);
      acc = std::fma(Fp16ToFloat(w.m), x.d_sum[b], acc);
    } else {
      const BlockQ8_0& w = static_cast<const BlockQ8_0*>(row)[b];
      int32_t isum = 0;
      for (int j = 0; j < 32; ++j) isum += w.qs[j] * xq[j];
      acc = std::fma(static_cast<float>(isum), Fp16ToFloat(w.d) * x.d[b], acc);  // Q8_0 order
    }
  }
  return acc;
}

// Q4_1 in llama.cpp's order (matmul.h, "llama.cpp's Q4_1 order").
float DotQ4_1LlamaCppOrder(const BlockQ4_1* row, const Blocks32View& x, int64_t blocks) {
  float lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  float mins = 0.0f;
  for (int64_t b = 0; b < blocks; ++b) {
    const BlockQ4_1& w = row[b];
    const int8_t* xq = x.qs + 32 * b;
    const float scale = Fp16ToFloat(w.d) * x.d[b];
    for (int lane = 0; lane < 8; ++lane) {
      int32_t partial = 0;
      for (int e = 4 * lane; e < 4 * lane + 4; ++e) {
        const int q = e < 16 ? (w.qs[e] & 0xF) : (w.qs[e - 16] >> 4);
        partial += q * xq[e];
      }
      lanes[lane] = std::fma(scale, static_cast<float>(partial), lanes[lane]);
    }
    mins = std::fma(Fp16ToFloat(w.m), x.d_sum[b], mins);
  }
  return (((lanes[4] + lanes[0]) + (lanes[6] + lanes[2])) +
          ((lanes[5] + lanes[1]) + (lanes[7] + lanes[3]))) +
         mins;
}

// Q4_K / Q5_K super-block: sum_s scale_s * dot_s and sum_s min_s * activation-sum_s.
void DotSuperBlockK4(const uint8_t* scales, const uint8_t* qs, const uint8_t* qh,
                     const ActivationBlock256& x, int32_t* isum, int32_t* imin) {
  *isum = 0;
  *imin = 0;
  for (int sub = 0; sub < 8; ++sub) {
    uint8_t scale, min;
    UnpackScaleMinK4(scales, sub, &scale, &min);
    const uint8_t* q = qs + 32 * (sub / 2);
    const int shift = (sub % 2) * 4;
    int32_t dot = 0;
    for (int l = 0; l < 32; ++l) {
      int value = (q[l] >> shift) & 0xF;
      if (qh != nullptr) value |= ((qh[l] >> sub) & 1) << 4;
      dot += value * x.qs[32 * sub + l];
    }
    *isum += scale * dot;
    *imin += min * (x.sums16[2 * sub] + x.sums16[2 * sub + 1]);
  }
}

int32_t DotSuperBlockQ6_K(const BlockQ6_K& w, const ActivationBlock256& x) {
  int32_t dots[16] = {};
  for (int half = 0; half < 2; ++half) {
    const uint8_t* ql = w.ql + 64 * half;
    const uint8_t* qh = w.qh + 32 * half;
    for (int l = 0; l < 32; ++l) {
      const int q[4] = {
          (ql[l] & 0xF) | ((qh[l] >> 0) & 3) << 4, (ql[l + 32] & 0xF) | ((qh[l] >> 2) & 3) << 4,
          (ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4, (ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4};
      for (int k = 0; k < 4; ++k) {
        const int e = 128 * half + 32 * k + l;
        dots[e / 16] += q[k] * x.qs[e];
      }
    }
  }
  int32_t isum = 0;
  for (int g = 0; g < 16; ++g) isum += w.scales[g] * (dots[g] - 32 * x.sums16[g]);
  return isum;
}

float DotBlock256(GgmlType type, const void* row, const ActivationBlock256* x, int64_t blocks) {
  float acc = 0.0f;
  float acc_min = 0.0f;
  for (int64_t b = 0; b < blocks; ++b) {
    if (type == GgmlType::kQ6_K) {
      const BlockQ6_K& w = static_cast<const BlockQ6_K*>(row)[b];
      acc += static_cast<float>(DotSuperBlockQ6_K(w, x[b])) * (Fp16ToFloat(w.d) * x[b].d);
      continue;
    }
    int32_t isum, imin;
    uint16_t d, dmin;
    if (type == GgmlType::kQ4_K) {
      const BlockQ4_K& w = static_cast<const BlockQ4_K*>(row)[b];
      DotSuperBlockK4(w.scales, w.qs, nullptr, x[b], &isum, &imin);
      d = w.d;
      dmin = w.dmin;
    } else {
      const BlockQ5_K& w = static_cast<const BlockQ5_K*>(row)[b];
      DotSuperBlockK4(w.scales, w.qs, w.qh, x[b], &isum, &imin);
      d = w.d;
      dmin = w.dmin;
    }
    acc += static_cast<float>(isum) * (Fp16ToFloat(d) * x[b].d);
    acc_min += static_cast<float>(imin) * (Fp16ToFloat(dmin) * x[b].d);
  }
  return acc - acc_min;
}

// Chosen once per process, so that every call on this machine takes the same path.
RowsFn ChoosePath() {
  const CpuFeatureSet& f = CpuFeatures();
  if (f.avx512_vnni) return internal::MatMulRowsAvx512Vnni;
  if (f.avx512) return internal::MatMulRowsAvx512;
  if (f.avx2) return internal::MatMulRowsAvx2;
  return MatMulRowsReference;
}

void CheckArguments(GgmlType weight_type, int64_t cols, const PackedActivations& x) {
  // Programmer errors: the activations were packed for another matrix.
  if (x.weight_type != weight_type || x.cols != cols) std::abort();
}

}  // namespace

void MatMulRowsReference(GgmlType weight_type, const void* w, int64_t cols,
                         const PackedActivations& x, int64_t row_begin, int64_t row_end, float* y,
                         int64_t y_stride) {
  CheckArguments(weight_type, cols, x);
  const size_t row_bytes = RowBytes(weight_type, cols);
  const int64_t token_bytes = PackedTokenBytes(weight_type, cols);
  const ActivationFamily family = ActivationFamilyOf(weight_type);
  for (int64_t r = row_begin; r < row_end; ++r) {
    const void* row = static_cast<const uint8_t*>(w) + static_cast<size_t>(r) * row_bytes;
    for (int64_t t = 0; t < x.tokens; ++t) {
      const uint8_t* xt = x.data.data() + t * token_bytes;
      float value;
      if (family == ActivationFamily::kFloat) {
        value = DotFloat(weight_type, row, reinterpret_cast<const float*>(xt), cols);
      } else if (family == ActivationFamily::kBlock32) {
        value = DotBlock32(weight_type, row, ViewBlocks32(xt, cols), cols / 32);
      } else {
        value = DotBlock256(weight_type, row, reinterpret_cast<const ActivationBlock256*>(xt),
                            cols / 256);
      }
      y[t * y_stride + r] = value;
    }
  }
}

void internal::MatMulRowsQ4_1LlamaCppOrder(const void* w, int64_t cols, const PackedActivations& x,
                                           int64_t row_begin, int64_t row_end, float* y,
                                           int64_t y_stride) {
  CheckArguments(GgmlType::kQ4_1, cols, x);
  const int64_t nb = cols / 32;
  const int64_t token_bytes = PackedTokenBytes(GgmlType::kQ4_1, cols);
  for (int64_t r = row_begin; r < row_end; ++r) {
    const BlockQ4_1* row = static_cast<const BlockQ4_1*>(w) + r * nb;
    for (int64_t t = 0; t < x.tokens; ++t) {
      y[t * y_stride + r] =
          DotQ4_1LlamaCppOrder(row, ViewBlocks32(x.data.data() + t * token_bytes, cols), nb);
    }
  }
}

MatMulOrder ActiveMatMulOrder() {
  static const MatMulOrder order = [] {
    const char* forced = std::getenv("SPLITSPEC_MATMUL_ORDER");
    if (forced == nullptr || std::strcmp(forced, "interleaved") == 0) {
      return MatMulOrder::kInterleaved;
    }
    if (std::strcmp(forced, "llama.cpp") == 0) return MatMulOrder::kLlamaCpp;
    std::fprintf(stderr,
                 "SPLITSPEC_MATMUL_ORDER=%s: not interleaved or llama.cpp; using interleaved\n",
                 forced);
    return MatMulOrder::kInterleaved;
  }();
  return order;
}

const char* MatMulOrderName(MatMulOrder order) {
  return order == MatMulOrder::kLlamaCpp ? "llama.cpp" : "interleaved";
}

bool RunsOnInterleavedRows(GgmlType weight_type) {
  return HasInterleavedLayout(weight_type) &&
         !(weight_type == GgmlType::kQ4_1 && ActiveMatMulOrder() == MatMulOrder::kLlamaCpp);
}

void MatMulRows(GgmlType weight_type, const void* w, int64_t cols, const PackedActivations& x,
                int64_t row_begin, int64_t row_end, float* y, int64_t y_stride) {
  static const RowsFn path = ChoosePath();
  CheckArguments(weight_type, cols, x);
  if (weight_type == GgmlType::kQ4_1 && ActiveMatMulOrder() == MatMulOrder::kLlamaCpp) {
    return internal::MatMulRowsQ4_1LlamaCppOrder(w, cols, x, row_begin, row_end, y, y_stride);
  }
  path(weight_type, w, cols, x, row_begin, row_end, y, y_stride);
}

const char* MatMulPathName() { return CpuIsaName(); }

}  // namespace splitspec::kernels
