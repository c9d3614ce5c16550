// `deploy_tiny_model PATH [SEED]`: writes the tiny test model (tests/testing/tiny_model.h)
// with Q8_0 weights and 2 KV heads, so that a TP=2 target group can split it.
// The deploy tests start real clusters on it: small enough to load in
// milliseconds on every "host", with a real tokenizer for HTTP text prompts.
#include <cstdio>
#include <cstdlib>

#include "tests/testing/tiny_model.h"

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    std::fprintf(stderr, "usage: %s PATH [SEED]\n", argv[0]);
    return 2;
  }
  splitspec::model::TinyModelOptions options;
  options.weight_type = splitspec::kernels::GgmlType::kQ8_0;
  options.n_kv_heads = 2;
  // Another seed: other weights, the same vocabulary (a draft model for the target).
  if (argc == 3) options.seed = static_cast<uint32_t>(std::strtoul(argv[2], nullptr, 10));
  const absl::Status status = splitspec::model::WriteTinyModel(options, argv[1]);
  if (!status.ok()) {
    std::fprintf(stderr, "deploy_tiny_model: %s: %s\n", argv[1],
                 std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
