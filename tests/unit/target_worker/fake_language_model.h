// FakeLanguageModel: a small deterministic LanguageModel for the engine specs
// (tests only; never linked into a binary users run).
//
//   FakeLanguageModel model;                  // vocab 32, context 256
//   TargetEngine engine(&model, options);
//   ... engine.Step(now, &events) ...
//   EXPECT_EQ(committed, FakeLanguageModel::GreedyExtend(prompt, 8));
//
// The logits at a position depend on the WHOLE sequence up to and including it
// (read back from the KV cache), so an engine that feeds a token at the wrong
// position, or leaves a stale token in the cache after a rejection, produces a
// different continuation than plain greedy decoding — the specs see it.
//
// Each cache position stores its token id (n_layers 1, kv_dim 1), which is how
// the model reads the prefix back. Forward follows Transformer::Forward's
// contract: on any error no cache changes. Every successful call is recorded
// (start position, tokens, logits mode per sequence) so that a test can check
// what the engine fed, e.g. the prefill chunks and the token budget.
//
// Thread-compatible, like the real model.
#ifndef SPLITSPEC_TESTS_UNIT_TARGET_WORKER_FAKE_LANGUAGE_MODEL_H_
#define SPLITSPEC_TESTS_UNIT_TARGET_WORKER_FAKE_LANGUAGE_MODEL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "runtime/model/kv_cache.h"
#include "runtime/model/language_model.h"
#include "runtime/model/model_config.h"

namespace splitspec::testing {

class FakeLanguageModel : public model::LanguageModel {
 public:
  static constexpr int kVocab = 32;

  // One sequence of one recorded Forward call.
  struct FedSequence {
    int start = 0;                // cache length before the call
    std::vector<int32_t> tokens;  // fed at start, start + 1, ...
    model::LogitsMode logits = model::LogitsMode::kNone;
    const model::KvCache* cache = nullptr;  // which sequence (valid while its owner lives)
  };

  explicit FakeLanguageModel(int context_length = 256) {
    config_.architecture = "fake";
    config_.n_layers = 1;
    config_.n_embd = 1;
    config_.n_ff = 1;
    config_.n_heads = 1;
    config_.n_kv_heads = 1;
    config_.head_dim = 1;
    config_.vocab_size = kVocab;
    config_.context_length = context_length;
  }

  // The greedy next token after `sequence` (non-empty): a function of every
  // token and its position.
  static int32_t NextToken(absl::Span<const int32_t> sequence) {
    uint32_t h = 0;
    for (size_t i = 0; i < sequence.size(); ++i)
      h = h * 31u + static_cast<uint32_t>(sequence[i]) + 7u * i;
    return static_cast<int32_t>((5u * static_cast<uint32_t>(sequence.back()) + 3u + h) % kVocab);
  }

  // The logits after `sequence`: NextToken is the unique maximum; the other
  // entries are spread so that sampling modes see a non-trivial distribution.
  static std::vector<float> Logits(absl::Span<const int32_t> sequence) {
    const int32_t next = NextToken(sequence);
    std::vector<float> logits(kVocab);
    for (int v = 0; v < kVocab; ++v) {
      logits[v] = v == next ? 3.0f : 0.25f * static_cast<float>((v * 7 + next) % 5);
    }
    return logits;
  }

  // `prefix` followed by `n` plain-greedy tokens: what any lossless greedy
  // engine must commit.
  static std::vector<int32_t> GreedyExtend(std::vector<int32_t> prefix, int n) {
    for (int i = 0; i < n; ++i) prefix.push_back(NextToken(prefix));
    return prefix;
  }

  // The next Forward fails with `status` and changes nothing.
  void FailNextForward(absl::Status status) { fail_next_ = std::move(status); }

  const std::vector<std::vector<FedSequence>>& forwards() const { return forwards_; }
  int failed_forwards() const { return failed_forwards_; }

  const model::ModelConfig& config() const override { return config_; }

  std::unique_ptr<model::KvCache> NewCache(int max_tokens = 0) const override {
    return std::make_unique<model::KvCache>(1, 1,
                                            max_tokens > 0 ? max_tokens : config_.context_length);
  }

  absl::Status Forward(absl::Span<const model::SequenceInput> batch,
                       model::ForwardOutput* out) override {
    if (fail_next_.has_value()) {
      absl::Status status = *std::move(fail_next_);
      fail_next_.reset();
      ++failed_forwards_;
      return status;
    }
    if (batch.empty()) return absl::InvalidArgumentError("Forward: empty batch");
    for (size_t s = 0; s < batch.size(); ++s) {
      const model::SequenceInput& in = batch[s];
      if (in.cache == nullptr || in.tokens.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("Forward: sequence ", s, " has no cache or no tokens"));
      }
      for (int32_t token : in.tokens) {
        if (token < 0 || token >= kVocab) {
          return absl::InvalidArgumentError(
              absl::StrCat("Forward: sequence ", s, ": token ", token));
        }
      }
      if (in.cache->length() + static_cast<int>(in.tokens.size()) > in.cache->max_tokens()) {
        return absl::OutOfRangeError(absl::StrCat("Forward: sequence ", s, " overflows its cache"));
      }
    }
    out->vocab_size = kVocab;
    out->logits.clear();
    out->first_row.clear();
    out->num_rows.clear();
    std::vector<FedSequence> record;
    for (const model::SequenceInput& in : batch) {
      model::KvCache& cache = *in.cache;
      const int start = cache.length();
      const int n = static_cast<int>(in.tokens.size());
      record.push_back({start, {in.tokens.begin(), in.tokens.end()}, in.logits, &cache});
      std::vector<int32_t> sequence;
      for (int pos = 0; pos < start; ++pos)
        sequence.push_back(static_cast<int32_t>(cache.KeyAt(0, pos, 0)));
      (void)cache.Reserve(start + n);  // checked above
      out->first_row.push_back(static_cast<int>(out->logits.size() / kVocab));
      int rows = 0;
      for (int i = 0; i < n; ++i) {
        // The token id as the key (exact in half precision: kVocab < 2048).
        std::vector<float> kv_row(cache.kv_dim(), 0.0f);
        kv_row[0] = static_cast<float>(in.tokens[i]);
        cache.WriteRow(0, start + i, kv_row.data(), kv_row.data());
        sequence.push_back(in.tokens[i]);
        const bool wanted = in.logits == model::LogitsMode::kAll ||
                            (in.logits == model::LogitsMode::kLast && i == n - 1);
        if (!wanted) continue;
        const std::vector<float> row = Logits(sequence);
        out->logits.insert(out->logits.end(), row.begin(), row.end());
        ++rows;
      }
      cache.Commit(start + n);
      out->num_rows.push_back(rows);
    }
    forwards_.push_back(std::move(record));
    return absl::OkStatus();
  }

 private:
  model::ModelConfig config_;
  std::optional<absl::Status> fail_next_;
  int failed_forwards_ = 0;
  std::vector<std::vector<FedSequence>> forwards_;
};

}  // namespace splitspec::testing

#endif  // SPLITSPEC_TESTS_UNIT_TARGET_WORKER_FAKE_LANGUAGE_MODEL_H_
