#include "kernels/cpu/cpu_features.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace splitspec::kernels {
namespace {

// AMX-TILE and AMX-INT8 (CPUID leaf 7, EDX bits 24 and 25), and the tile data state
// granted to this process: Linux enables it per process on request (arch_prctl
// ARCH_REQ_XCOMP_PERM for XTILEDATA, state component 18); without the grant the first
// tile instruction faults.
bool ProbeAmxInt8() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
  if ((edx & (1u << 24)) == 0 || (edx & (1u << 25)) == 0) return false;
#if defined(__linux__) && defined(SYS_arch_prctl)
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

CpuFeatureSet Probe() {
  CpuFeatureSet f;
  __builtin_cpu_init();
  f.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  f.avx512 = f.avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  f.avx512_vnni = f.avx512 && __builtin_cpu_supports("avx512vnni");
  const char* cap = std::getenv("SPLITSPEC_CPU_ISA");
  if (cap != nullptr) {
    if (std::strcmp(cap, "scalar") == 0) f = CpuFeatureSet{};
    if (std::strcmp(cap, "avx2") == 0) f.avx512 = f.avx512_vnni = false;
    if (std::strcmp(cap, "avx512") == 0) f.avx512_vnni = false;
  }
  // Asked for only when it would be used (any cap keeps the process off the tiles).
  f.amx_int8 = f.avx512_vnni && cap == nullptr && ProbeAmxInt8();
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
