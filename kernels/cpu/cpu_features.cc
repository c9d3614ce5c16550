#include "kernels/cpu/cpu_features.h"

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

}  // namespace splitspec::kernels
