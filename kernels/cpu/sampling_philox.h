// Counter-based random numbers for sampling and verification: Philox-4x32-10
// (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011).
//
//   const double u = UniformDouble(seed, position, RandomPurpose::kAcceptTest);
//   const double g = GumbelNoise(seed, position, token);
//
// A random number is a pure function of (seed, position, purpose, index): no
// generator state, so results never depend on thread timing, batch composition
// or which device computes them. Key = the request's 64-bit seed; counter =
// (position low 32 bits, position high 32 bits, purpose, index).
//
// Every function here is header-only and usable from CUDA device code (the same
// bits on host and device), which is what makes the CPU and CUDA verification
// kernels agree token for token.
#ifndef SPLITSPEC_KERNELS_CPU_SAMPLING_PHILOX_H_
#define SPLITSPEC_KERNELS_CPU_SAMPLING_PHILOX_H_

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define SPLITSPEC_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define SPLITSPEC_HOST_DEVICE inline
#endif

namespace splitspec::kernels {

// What a random number is used for. Distinct purposes give independent streams
// at the same (seed, position); the values are part of the reproducibility
// contract (changing one changes every seeded output), so never renumber them.
enum class RandomPurpose : uint32_t {
  kSample = 1,       // target sampling: target-only decoding and the bonus token
  kAcceptTest = 2,   // rejection mode: the uniform of the min(1, p/q) test
  kResidual = 3,     // rejection mode: sampling the correction from the residual
  kGumbel = 4,       // coupled mode: per-token Gumbel noise, shared by draft and target
  kDraftSample = 5,  // the draft's own sampling (rejection mode)
};

struct Philox4x32 {
  uint32_t v[4];
};

namespace internal {

SPLITSPEC_HOST_DEVICE void MulHiLo32(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
  const uint64_t product = static_cast<uint64_t>(a) * static_cast<uint64_t>(b);
  *hi = static_cast<uint32_t>(product >> 32);
  *lo = static_cast<uint32_t>(product);
}

}  // namespace internal

// The Philox-4x32 bijection with 10 rounds: counter [4] x key [2] -> 4 words.
SPLITSPEC_HOST_DEVICE Philox4x32 Philox4x32x10(Philox4x32 counter, uint32_t key0, uint32_t key1) {
  constexpr uint32_t kMultiplier0 = 0xD2511F53u;
  constexpr uint32_t kMultiplier1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u;  // golden ratio
  constexpr uint32_t kWeyl1 = 0xBB67AE85u;  // sqrt(3) - 1
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    internal::MulHiLo32(kMultiplier0, counter.v[0], &hi0, &lo0);
    internal::MulHiLo32(kMultiplier1, counter.v[2], &hi1, &lo1);
    counter = Philox4x32{{hi1 ^ counter.v[1] ^ key0, lo1, hi0 ^ counter.v[3] ^ key1, lo0}};
    key0 += kWeyl0;
    key1 += kWeyl1;
  }
  return counter;
}

// Four random words for (seed, position, purpose, index).
SPLITSPEC_HOST_DEVICE Philox4x32 RandomWords(uint64_t seed, int64_t position, RandomPurpose purpose,
                                             uint32_t index) {
  const uint64_t pos = static_cast<uint64_t>(position);
  const Philox4x32 counter{{static_cast<uint32_t>(pos), static_cast<uint32_t>(pos >> 32),
                            static_cast<uint32_t>(purpose), index}};
  return Philox4x32x10(counter, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// Uniform double strictly inside (0, 1): 52 random bits m, u = (m + 0.5) / 2^52,
// computed exactly (no rounding), so host and device agree bit for bit.
SPLITSPEC_HOST_DEVICE double UniformDouble(uint64_t seed, int64_t position, RandomPurpose purpose,
                                           uint32_t index = 0) {
  const Philox4x32 words = RandomWords(seed, position, purpose, index);
  const uint64_t bits = (static_cast<uint64_t>(words.v[0]) << 20) ^ (words.v[1] >> 12);
  const uint64_t m = bits & ((uint64_t{1} << 52) - 1);
  return (static_cast<double>(m) + 0.5) * 0x1p-52;
}

// Standard Gumbel noise -log(-log(u)) for `token` at (seed, position): the
// coupled mode's shared noise. Finite, since u is strictly inside (0, 1).
SPLITSPEC_HOST_DEVICE double GumbelNoise(uint64_t seed, int64_t position, int32_t token) {
  const double u =
      UniformDouble(seed, position, RandomPurpose::kGumbel, static_cast<uint32_t>(token));
  return -log(-log(u));
}

}  // namespace splitspec::kernels

#endif  // SPLITSPEC_KERNELS_CPU_SAMPLING_PHILOX_H_
