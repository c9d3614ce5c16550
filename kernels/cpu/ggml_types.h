// Tensor element types as numbered by GGUF/ggml, with their block layout.
//
//   const GgmlTypeTraits& t = GetGgmlTypeTraits(GgmlType::kQ4_1);
//   size_t row_bytes = RowBytes(GgmlType::kQ4_1, 576);   // 576 / 32 blocks * 20 bytes
//
// Only the types splitspec reads are listed; LookupGgmlType refuses the others
// by number so that a file using them is refused at load with a clear message.
#ifndef SPLITSPEC_KERNELS_CPU_GGML_TYPES_H_
#define SPLITSPEC_KERNELS_CPU_GGML_TYPES_H_

#include <cstddef>
#include <cstdint>

namespace splitspec::kernels {

enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,  // a file type only: widened to Q8_0 at load (WidenQ5_0ToQ8_0)
  kQ8_0 = 8,
  kQ8_1 = 9,  // activations only (never a weight type here)
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,  // activations only
  kBF16 = 30,
};

struct GgmlTypeTraits {
  GgmlType type;
  const char* name;    // "q4_1"
  int block_size;      // elements per block (1 for float types)
  size_t block_bytes;  // bytes per block
};

// Traits of a supported type. REQUIRES: `type` is one of the enumerators above.
const GgmlTypeTraits& GetGgmlTypeTraits(GgmlType type);

// Traits for a raw type number read from a file; nullptr if splitspec does not support it.
const GgmlTypeTraits* LookupGgmlType(uint32_t raw_type);

// Bytes of one row of `n` elements. REQUIRES: n % block_size == 0.
inline size_t RowBytes(GgmlType type, int64_t n) {
  const GgmlTypeTraits& t = GetGgmlTypeTraits(type);
  return static_cast<size_t>(n / t.block_size) * t.block_bytes;
}

}  // namespace splitspec::kernels

#endif  // SPLITSPEC_KERNELS_CPU_GGML_TYPES_H_
