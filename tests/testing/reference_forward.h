// A slow, straightforward float64 forward pass of a Llama-family GGUF model, written
// independently of runtime/model/transformer.cc for tests: every matrix is
// dequantized to floats, attention is the textbook loop. Only the config is
// read with ReadModelConfig. Like llama.cpp (and the transformer), it rounds Q, K,
// and V to half precision, and the attention probabilities too when the CPU attention
// runs in llama.cpp's order (SPLITSPEC_ATTENTION_ORDER=llama.cpp); everything else is
// exact. Gemma 3 ("gemma3") per llama.cpp's graph: embedding times sqrt(n_embd), per-head
// Q/K norms, post-norms, tanh-GELU (exact, where llama.cpp and the transformer read an fp16
// table), sliding-window layers (l % 6 != 5) with RoPE base 10000.
#ifndef SPLITSPEC_TESTS_TESTING_REFERENCE_FORWARD_H_
#define SPLITSPEC_TESTS_TESTING_REFERENCE_FORWARD_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/model/gguf_reader.h"

namespace splitspec::model {

// Logits [tokens.size()][vocab] for every position of one sequence starting at 0.
absl::StatusOr<std::vector<std::vector<float>>> ReferenceForward(
    const GgufFile& file, const std::vector<int32_t>& tokens);

}  // namespace splitspec::model

#endif  // SPLITSPEC_TESTS_TESTING_REFERENCE_FORWARD_H_
