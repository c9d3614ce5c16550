// Tiny draft models whose vocabulary differs from the tiny target's
// (tests/testing/tiny_model.h), for the cross-vocabulary drafter tests.
//
// The draft has the target's weights (same seed) and as many tokens, so for a
// token whose bytes both vocabularies give the same id, its distribution is the
// target's: the drafts are mostly accepted. Its tokenizer is SentencePiece
// ("llama"): id 0 <unk>, 1 <s> (BOS, added), 2 </s>; ids 3..258 are the target's
// bytes, printable ASCII as normal pieces (a space as "▁"), the rest as <0xNN>
// byte tokens; ids 259.. are the target's merged tokens written with "▁", except
// every `changed_every`-th, which becomes a draft-only multi-character token
// (so the target's token at that id is target-only).
#ifndef SPLITSPEC_TESTS_UNIT_SPEC_CROSS_VOCAB_TEST_UTIL_H_
#define SPLITSPEC_TESTS_UNIT_SPEC_CROSS_VOCAB_TEST_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "runtime/tokenizer/bpe_byte_encoding.h"
#include "tests/testing/tiny_model.h"

namespace splitspec::spec::testing {

inline constexpr char kSpmSpace[] = "\xe2\x96\x81";  // "▁"

inline model::GgufWriter MakeSentencePieceDraft(uint32_t seed, int changed_every) {
  model::TinyModelOptions options;
  options.seed = seed;
  model::GgufWriter w = model::MakeTinyModel(options);
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {2, 3, 3};  // unknown, control, control
  std::vector<float> scores = {0.0f, 0.0f, 0.0f};
  for (int b = 0; b < 256; ++b) {
    if (b > ' ' && b < 0x7F) {
      tokens.push_back(std::string(1, static_cast<char>(b)));
      types.push_back(1);
    } else if (b == ' ') {
      tokens.push_back(kSpmSpace);
      types.push_back(1);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "<0x%02X>", b);
      tokens.push_back(hex);
      types.push_back(6);
    }
    scores.push_back(-1000.0f);
  }
  const std::vector<std::string>& merges = model::TinyModelMerges();
  for (size_t m = 0; m < merges.size(); ++m) {
    const size_t space = merges[m].find(' ');
    std::string bytes;
    model::BpeTextToBytes(merges[m].substr(0, space) + merges[m].substr(space + 1), &bytes);
    if (changed_every > 0 && m % changed_every == static_cast<size_t>(changed_every) - 1) {
      tokens.push_back(absl::StrCat(kSpmSpace, "zq", m));  // draft-only
    } else {
      tokens.push_back(absl::StrReplaceAll(bytes, {{" ", kSpmSpace}}));
    }
    types.push_back(1);
    scores.push_back(-static_cast<float>(m));  // earlier merges first, as BPE ranks them
  }
  w.SetString("tokenizer.ggml.model", "llama");
  w.SetStringArray("tokenizer.ggml.tokens", tokens);
  w.SetInt32Array("tokenizer.ggml.token_type", types);
  w.SetFloat32Array("tokenizer.ggml.scores", scores);
  w.SetStringArray("tokenizer.ggml.merges", {});
  w.SetUint32("tokenizer.ggml.bos_token_id", 1);
  w.SetUint32("tokenizer.ggml.eos_token_id", 2);
  w.SetUint32("tokenizer.ggml.unknown_token_id", 0);
  w.SetBool("tokenizer.ggml.add_bos_token", true);
  w.SetBool("tokenizer.ggml.add_space_prefix", false);
  return w;
}

}  // namespace splitspec::spec::testing

#endif  // SPLITSPEC_TESTS_UNIT_SPEC_CROSS_VOCAB_TEST_UTIL_H_
