// Run-time CPU feature probe used to choose kernel paths.
//
//   if (CpuFeatures().avx2) { ... }
//
// The probe runs once (thread-safe static); setting the environment variable
// SPLITSPEC_CPU_ISA=scalar|avx2|avx512|avx512-vnni caps the paths used, so that tests
// and benchmarks can compare paths on one machine (avx512-vnni: everything but AMX).
#ifndef SPLITSPEC_KERNELS_CPU_CPU_FEATURES_H_
#define SPLITSPEC_KERNELS_CPU_CPU_FEATURES_H_

namespace splitspec::kernels {

struct CpuFeatureSet {
  bool avx2 = false;         // AVX2 + FMA + F16C
  bool avx512 = false;       // AVX-512 F/BW/VL/DQ
  bool avx512_vnni = false;  // AVX-512 VNNI (vpdpbusd)
  // AMX-TILE + AMX-INT8 beside AVX-512 VNNI, and the OS granted this process the tile
  // state (Linux: arch_prctl ARCH_REQ_XCOMP_PERM, requested by the probe).
  bool amx_int8 = false;
};

const CpuFeatureSet& CpuFeatures();

// "avx512-vnni", "avx512", "avx2" or "scalar": the best vector path in use (AMX, where
// used, is reported apart: CpuFeatures().amx_int8).
const char* CpuIsaName();

// The x86 build of llama.cpp's CPU backend whose order of float operations the
// model's attention, softmax and SiLU reproduce (runtime/model/transformer_ops.h).
// ggml compiles for the machine it is built on and picks its vectorized expf, its
// softmax chunks and its F16 GEMM lanes by that ISA:
//   kAvx512  AVX-512 F and DQ: 16-lane sums, ggml's AVX-512 expf
//   kAvx2    everything else:  8-lane sums, ggml's AVX2 expf
// Every kernel path (scalar, AVX2) computes either order bit for bit; only the order
// decides the bits. NativeGgmlOrder() reads the CPU itself, not the SPLITSPEC_CPU_ISA
// cap, so capping the paths never changes a result; SPLITSPEC_GGML_ORDER=avx512|avx2
// overrides it (to give machines of different kinds the same bits).
enum class GgmlOrder { kAvx512, kAvx2 };

GgmlOrder NativeGgmlOrder();
const char* GgmlOrderName(GgmlOrder order);

}  // namespace splitspec::kernels

#endif  // SPLITSPEC_KERNELS_CPU_CPU_FEATURES_H_
