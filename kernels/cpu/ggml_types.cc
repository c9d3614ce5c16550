#include "kernels/cpu/ggml_types.h"

#include <cstdlib>

namespace splitspec::kernels {
namespace {

// Block sizes and byte counts follow ggml's definitions (QK_K = 256).
constexpr GgmlTypeTraits kTraits[] = {
    {GgmlType::kF32, "f32", 1, 4},
    {GgmlType::kF16, "f16", 1, 2},
    {GgmlType::kQ4_0, "q4_0", 32, 2 + 16},
    {GgmlType::kQ4_1, "q4_1", 32, 2 + 2 + 16},
    {GgmlType::kQ5_0, "q5_0", 32, 2 + 4 + 16},
    {GgmlType::kQ8_0, "q8_0", 32, 2 + 32},
    {GgmlType::kQ8_1, "q8_1", 32, 2 + 2 + 32},
    {GgmlType::kQ4_K, "q4_K", 256, 2 + 2 + 12 + 128},
    {GgmlType::kQ5_K, "q5_K", 256, 2 + 2 + 12 + 32 + 128},
    {GgmlType::kQ6_K, "q6_K", 256, 128 + 64 + 16 + 2},
    {GgmlType::kQ8_K, "q8_K", 256, 4 + 256 + 2 * 16},
    {GgmlType::kBF16, "bf16", 1, 2},
};

}  // namespace

const GgmlTypeTraits* LookupGgmlType(uint32_t raw_type) {
  for (const GgmlTypeTraits& t : kTraits) {
    if (static_cast<uint32_t>(t.type) == raw_type) return &t;
  }
  return nullptr;
}

const GgmlTypeTraits& GetGgmlTypeTraits(GgmlType type) {
  const GgmlTypeTraits* t = LookupGgmlType(static_cast<uint32_t>(type));
  if (t == nullptr) std::abort();  // programmer error: every enumerator has traits
  return *t;
}

}  // namespace splitspec::kernels
