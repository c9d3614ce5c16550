// The benchmarks' synthetic prompts: token ids from a 32-bit LCG, the same in `bench decode`,
// `bench verify` and the Python scripts that run llama.cpp beside them
// (tools/bench_common.py: lcg_tokens), so both sides time the very same tokens.
#ifndef SPLITSPEC_TOOLS_BENCH_TOKENS_H_
#define SPLITSPEC_TOOLS_BENCH_TOKENS_H_

#include <cstdint>
#include <vector>

namespace splitspec::tools {

// `n` ids in [0, vocab) from the LCG state `seed`.
inline std::vector<int32_t> BenchTokens(int n, int vocab, uint32_t seed) {
  std::vector<int32_t> ids(n);
  uint32_t state = seed;
  for (int i = 0; i < n; ++i) {
    state = state * 1664525u + 1013904223u;
    ids[i] = static_cast<int32_t>((state >> 8) % static_cast<uint32_t>(vocab));
  }
  return ids;
}

}  // namespace splitspec::tools

#endif  // SPLITSPEC_TOOLS_BENCH_TOKENS_H_
