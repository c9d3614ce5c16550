// Device-side readers of ggml's K-quant super-blocks (the byte layouts of
// kernels/cpu/quant_blocks.h), shared by the matmul and embedding kernels.
//
// Offsets (bytes) inside one super-block of 256 elements:
//   Q4_K (144): d 0, dmin 2, scales[12] 4, qs[128] 16
//   Q5_K (176): d 0, dmin 2, scales[12] 4, qh[32] 16, qs[128] 48
//   Q6_K (210): ql[128] 0, qh[64] 128, scales[16] (int8) 192, d 208
// A Q6_K super-block is only 2-byte aligned in a row (210 is even, not a
// multiple of 4), so word loads go through LoadU16Pair.
#ifndef SPLITSPEC_KERNELS_CUDA_KQUANT_DEVICE_CUH_
#define SPLITSPEC_KERNELS_CUDA_KQUANT_DEVICE_CUH_

#include <cuda_fp16.h>

#include <cstdint>

namespace splitspec::kernels::kquant {

inline constexpr int kQ4KBytes = 144;
inline constexpr int kQ5KBytes = 176;
inline constexpr int kQ6KBytes = 210;

__device__ __forceinline__ float HalfAt(const uint8_t* p) {
  return __half2float(__ushort_as_half(*reinterpret_cast<const uint16_t*>(p)));
}

// 4 bytes at a 2-byte aligned address, little-endian.
__device__ __forceinline__ uint32_t LoadU16Pair(const uint8_t* p) {
  const uint16_t* h = reinterpret_cast<const uint16_t*>(p);
  return static_cast<uint32_t>(h[0]) | (static_cast<uint32_t>(h[1]) << 16);
}

// The 6-bit scale and min of sub-block j in [0, 8) of a Q4_K / Q5_K super-block
// from its 12 packed bytes (the same bits as UnpackScaleMinK4 on the CPU).
__device__ __forceinline__ void ScaleMinK4(const uint8_t* packed, int j, int* scale, int* min) {
  if (j < 4) {
    *scale = packed[j] & 63;
    *min = packed[j + 4] & 63;
  } else {
    *scale = (packed[j + 4] & 0xF) | ((packed[j - 4] >> 6) << 4);
    *min = (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4);
  }
}

// Element i in [0, 256) of a Q4_K (qh == nullptr) or Q5_K super-block as an
// unsigned quant, and its sub-block.
__device__ __forceinline__ int QuantK4(const uint8_t* qs, const uint8_t* qh, int i) {
  const int sub = i / 32;
  const int l = i % 32;
  int q = (qs[32 * (sub / 2) + l] >> (4 * (sub % 2))) & 0xF;
  if (qh != nullptr) q |= ((qh[l] >> sub) & 1) << 4;
  return q;
}

// Element i in [0, 256) of a Q6_K super-block: the 6-bit quant, unsigned (0..63).
__device__ __forceinline__ int QuantQ6K(const uint8_t* block, int i) {
  const int half = i / 128;
  const int k = (i % 128) / 32;
  const int l = i % 32;
  const uint8_t* ql = block + 64 * half + 32 * (k % 2);
  const uint8_t* qh = block + 128 + 32 * half;
  return ((ql[l] >> (4 * (k / 2))) & 0xF) | (((qh[l] >> (2 * k)) & 3) << 4);
}

// Dequantized element c of a K-quant row, with the CPU's float operations
// (DequantizeRow): Q4_K / Q5_K  (d * scale) * q - dmin * min,
//                  Q6_K         (d * scale) * (q - 32).
__device__ __forceinline__ float DequantK4Element(const uint8_t* row, int64_t c, bool q5) {
  const uint8_t* block = row + (c / 256) * (q5 ? kQ5KBytes : kQ4KBytes);
  const int i = static_cast<int>(c % 256);
  int scale, min;
  ScaleMinK4(block + 4, i / 32, &scale, &min);
  const int q = q5 ? QuantK4(block + 48, block + 16, i) : QuantK4(block + 16, nullptr, i);
  const float step = __fmul_rn(HalfAt(block), static_cast<float>(scale));
  const float offset = __fmul_rn(HalfAt(block + 2), static_cast<float>(min));
  return __fsub_rn(__fmul_rn(step, static_cast<float>(q)), offset);
}

__device__ __forceinline__ float DequantQ6KElement(const uint8_t* row, int64_t c) {
  const uint8_t* block = row + (c / 256) * kQ6KBytes;
  const int i = static_cast<int>(c % 256);
  const int scale = reinterpret_cast<const int8_t*>(block + 192)[i / 16];
  const float step = __fmul_rn(HalfAt(block + 208), static_cast<float>(scale));
  return __fmul_rn(step, static_cast<float>(QuantQ6K(block, i) - 32));
}

}  // namespace splitspec::kernels::kquant

#endif  // SPLITSPEC_KERNELS_CUDA_KQUANT_DEVICE_CUH_
