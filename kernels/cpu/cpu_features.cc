#include "kernels/cpu/cpu_features.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace splitspec::kernels {
namespace {

CpuFeatureSet Probe() {
  CpuFeatureSet f;
  __builtin_cpu_init();
  f.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  f.avx512 = f.avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  f.avx512_vnni = f.avx512 && __builtin_cpu_supports("avx512vnni");
  if (const char* cap = std::getenv("SPLITSPEC_CPU_ISA")) {
    if (std::strcmp(cap, "scalar") == 0) f = CpuFeatureSet{};
    if (std::strcmp(cap, "avx2") == 0) f.avx512 = f.avx512_vnni = false;
    if (std::strcmp(cap, "avx512") == 0) f.avx512_vnni = false;
  }
  return f;
}

}  // namespace

const CpuFeatureSet& CpuFeatures() {
  static const CpuFeatureSet features = Probe();
  return features;
}

const char* CpuIsaName() {
  const CpuFeatureSet& f = CpuFeatures();
  if (f.avx512_vnni) return "avx512-vnni";
  if (f.avx512) return "avx512";
  if (f.avx2) return "avx2";
  return "scalar";
}

GgmlOrder NativeGgmlOrder() {
  static const GgmlOrder order = [] {
    if (const char* forced = std::getenv("SPLITSPEC_GGML_ORDER")) {
      if (std::strcmp(forced, "avx512") == 0) return GgmlOrder::kAvx512;
      if (std::strcmp(forced, "avx2") == 0) return GgmlOrder::kAvx2;
      std::fprintf(stderr, "SPLITSPEC_GGML_ORDER=%s: not avx512 or avx2; using this CPU's order\n",
                   forced);
    }
    __builtin_cpu_init();
    const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
    return avx512 ? GgmlOrder::kAvx512 : GgmlOrder::kAvx2;
  }();
  return order;
}

const char* GgmlOrderName(GgmlOrder order) {
  return order == GgmlOrder::kAvx512 ? "avx512" : "avx2";
}

}  // namespace splitspec::kernels
