// Shared helpers of the runtime/spec tests: fresh seeds and random distributions.
#ifndef SPLITSPEC_TESTS_UNIT_SPEC_SPEC_TEST_UTIL_H_
#define SPLITSPEC_TESTS_UNIT_SPEC_SPEC_TEST_UTIL_H_

#include <cstdint>
#include <random>
#include <vector>

namespace splitspec::spec::testing {

// A 64-bit seed from std::random_device: each run draws fresh randomness, so a
// wrong implementation cannot hide behind a lucky fixed seed.
inline uint64_t FreshSeed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

// A random distribution over `vocab` tokens (normalized exponentials), with
// entries set to exactly 0 with probability `zero_fraction` (at least one kept).
inline std::vector<float> RandomDistribution(int vocab, std::mt19937_64& rng,
                                             double zero_fraction = 0.0) {
  std::exponential_distribution<double> exponential(1.0);
  std::uniform_real_distribution<double> coin(0.0, 1.0);
  std::vector<double> w(vocab);
  double total = 0.0;
  for (int v = 0; v < vocab; ++v) {
    w[v] = coin(rng) < zero_fraction ? 0.0 : exponential(rng) + 0.05;
    total += w[v];
  }
  if (total == 0.0) {
    w[std::uniform_int_distribution<int>(0, vocab - 1)(rng)] = 1.0;
    total = 1.0;
  }
  std::vector<float> p(vocab);
  for (int v = 0; v < vocab; ++v) p[v] = static_cast<float>(w[v] / total);
  return p;
}

inline std::vector<double> ToDouble(const std::vector<float>& p) {
  double total = 0.0;
  for (float x : p) total += x;
  std::vector<double> out(p.size());
  for (size_t i = 0; i < p.size(); ++i) out[i] = p[i] / total;
  return out;
}

}  // namespace splitspec::spec::testing

#endif  // SPLITSPEC_TESTS_UNIT_SPEC_SPEC_TEST_UTIL_H_
