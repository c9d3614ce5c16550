// Shared helpers of the runtime/spec tests: seeds and random distributions.
#ifndef SPLITSPEC_TESTS_UNIT_SPEC_SPEC_TEST_UTIL_H_
#define SPLITSPEC_TESTS_UNIT_SPEC_SPEC_TEST_UTIL_H_

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace splitspec::spec::testing {

// A 64-bit seed from std::random_device: each run draws fresh randomness, so a
// wrong implementation cannot hide behind a lucky fixed seed.
inline uint64_t FreshSeed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

// Seeds of the chi-square (distribution) tests: the n-th call within a test returns a
// seed fixed by the test's full name and n, so each such test draws the same sample on
// every run. Sampling and verification are pure functions of their seeds, so a
// distribution test is then one draw checked once at its stated significance, not a new
// draw on every CI run: a dozen fresh-seeded tests at 1e-3 each, run again under tsan and
// asan, made a ~3% false alarm per CI run. A wrong rule still fails: the harness tests
// (a residual-free rule, a wrong guidance combination, a biased sampler) are rejected on
// these seeds with power ~1. SPLITSPEC_TEST_SEED=<integer> draws another reproducible
// sample of every distribution test (to explore, or to tell a bug from a seed).
inline uint64_t DistributionTestSeed() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string test =
      info == nullptr ? "" : std::string(info->test_suite_name()) + "." + info->name();
  static std::string last_test;
  static uint64_t calls = 0;
  if (test != last_test) {
    last_test = test;
    calls = 0;
  }
  uint64_t h = 1469598103934665603ull;  // FNV-1a of the name, then the run's offset
  for (unsigned char c : test) h = (h ^ c) * 1099511628211ull;
  const char* offset = std::getenv("SPLITSPEC_TEST_SEED");
  if (offset != nullptr) h ^= std::strtoull(offset, nullptr, 10) * 0x9e3779b97f4a7c15ull;
  uint64_t z = h + ++calls * 0x9e3779b97f4a7c15ull;  // splitmix64 of the n-th call
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
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
