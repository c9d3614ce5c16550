// Run-time CPU feature probe used to choose kernel paths.
//
//   if (CpuFeatures().avx2) { ... }
//
// The probe runs once (thread-safe static); setting the environment variable
// SPLITSPEC_CPU_ISA=scalar|avx2|avx512 caps the paths used, so that tests and
// benchmarks can compare paths on one machine.
#ifndef SPLITSPEC_KERNELS_CPU_CPU_FEATURES_H_
#define SPLITSPEC_KERNELS_CPU_CPU_FEATURES_H_

namespace splitspec::kernels {

struct CpuFeatureSet {
  bool avx2 = false;         // AVX2 + FMA + F16C
  bool avx512 = false;       // AVX-512 F/BW/VL/DQ
  bool avx512_vnni = false;  // AVX-512 VNNI (vpdpbusd)
};

const CpuFeatureSet& CpuFeatures();

// "avx512-vnni", "avx512", "avx2" or "scalar": the best path in use.
const char* CpuIsaName();

}  // namespace splitspec::kernels

#endif  // SPLITSPEC_KERNELS_CPU_CPU_FEATURES_H_
