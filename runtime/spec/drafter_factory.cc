#include "runtime/spec/drafter_factory.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"
#include "runtime/model/gguf_reader.h"
#include "runtime/model/model_config.h"
#include "runtime/model/transformer.h"
#include "runtime/model/weights.h"
#include "runtime/spec/cross_vocab_drafter.h"
#include "runtime/spec/lookup_drafter.h"
#include "runtime/spec/model_drafter.h"
#include "runtime/spec/ngram_drafter.h"
#include "runtime/spec/vocabulary_check.h"
#include "runtime/tokenizer/tokenizer_gguf.h"

namespace splitspec::spec {
namespace {

// Bytes of weights one decode step of the model at `path` reads; 0 if unreadable.
uint64_t DecodeBytesPerToken(const std::string& path) {
  absl::StatusOr<std::unique_ptr<model::GgufFile>> file = model::GgufFile::Open(path);
  if (!file.ok()) return 0;
  absl::StatusOr<model::ModelConfig> config = model::ReadModelConfig(**file);
  if (!config.ok()) return 0;
  absl::StatusOr<model::ModelWeights> weights = model::LoadModelWeights(**file, *config);
  return weights.ok() ? weights->DecodeBytesPerToken() : 0;
}

// Sets the drafter's decode_bytes_ratio() from its model's weights and the target's.
std::unique_ptr<Drafter> WithDecodeBytesRatio(std::unique_ptr<Drafter> drafter,
                                              uint64_t draft_bytes,
                                              const std::string& target_path) {
  const uint64_t target_bytes = DecodeBytesPerToken(target_path);
  if (target_bytes > 0) {
    drafter->set_decode_bytes_ratio(static_cast<double>(draft_bytes) /
                                    static_cast<double>(target_bytes));
  }
  return drafter;
}

// Drafter "model": the draft file's vocabulary decides between the plain model
// drafter and the cross-vocabulary one.
absl::StatusOr<std::unique_ptr<Drafter>> MakeModelDrafter(const DrafterSpec& spec,
                                                          const model::Tokenizer& target_tokenizer,
                                                          int target_vocab_size,
                                                          const ModelDrafterOptions& options) {
  model::TransformerOptions model_options;
  model_options.threads = options.threads;
  model_options.device = options.device;
  ASSIGN_OR_RETURN(std::unique_ptr<model::Transformer> draft,
                   model::Transformer::Load(spec.draft_path, model_options));
  absl::StatusOr<model::Tokenizer> tokenizer = model::LoadTokenizerFromGguf(draft->file());
  auto named = [&spec](const absl::Status& status) {
    return absl::Status(status.code(),
                        absl::StrCat("draft model ", spec.draft_path, ": ", status.message()));
  };
  if (!tokenizer.ok()) return named(tokenizer.status());
  const bool same_vocabulary = CheckSameVocabulary(target_tokenizer, *tokenizer).ok() &&
                               draft->config().vocab_size == target_vocab_size;
  if (same_vocabulary && spec.vocab_mapping == VocabMapping::kAuto) {
    absl::StatusOr<std::unique_ptr<ModelDrafter>> drafter = ModelDrafter::Create(
        std::move(draft), *tokenizer, target_tokenizer, target_vocab_size, options);
    if (!drafter.ok()) return named(drafter.status());
    return std::unique_ptr<Drafter>(*std::move(drafter));
  }
  CrossVocabDrafterOptions cross_options;
  cross_options.mapping = spec.vocab_mapping;
  cross_options.model = options;
  absl::StatusOr<std::unique_ptr<CrossVocabDrafter>> drafter = CrossVocabDrafter::Create(
      std::move(draft), *std::move(tokenizer), &target_tokenizer, cross_options);
  if (!drafter.ok()) return named(drafter.status());
  return std::unique_ptr<Drafter>(*std::move(drafter));
}

}  // namespace

absl::StatusOr<DrafterSpec> ParseDrafterSpec(const std::string& name,
                                             const std::string& draft_path) {
  DrafterSpec spec;
  spec.name = name;
  spec.draft_path = draft_path;
  if (name == "none") {
    spec.kind = DrafterSpec::Kind::kNone;
  } else if (name == "ngram") {
    spec.kind = DrafterSpec::Kind::kNgram;
  } else if (name == "lookup") {
    spec.kind = DrafterSpec::Kind::kLookup;
  } else if (name == "model") {
    if (draft_path.empty())
      return absl::InvalidArgumentError("drafter 'model' needs a draft model path (--draft PATH)");
    spec.kind = DrafterSpec::Kind::kModel;
  } else if (absl::StartsWith(name, "layerskip:")) {
    if (!absl::SimpleAtoi(name.substr(10), &spec.layers) || spec.layers < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("drafter '", name, "': L must be a positive integer"));
    }
    spec.kind = DrafterSpec::Kind::kLayerSkip;
  } else if (absl::StartsWith(name, "sim:")) {
    // tools/sim_drafter.h: it proposes from the target's answer, computed in advance.
    return absl::InvalidArgumentError(absl::StrCat(
        "drafter '", name,
        "' is the simulated drafter of `splitspec bench spec` only; it cannot draft for a "
        "served request"));
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown drafter '", name, "' (expected none, ngram, lookup, model or layerskip:L)"));
  }
  return spec;
}

absl::StatusOr<std::unique_ptr<Drafter>> MakeDrafter(const DrafterSpec& spec,
                                                     const std::string& target_path,
                                                     const model::Tokenizer* target_tokenizer,
                                                     int target_vocab_size, int threads) {
  if (target_tokenizer == nullptr &&
      (spec.kind == DrafterSpec::Kind::kModel || spec.kind == DrafterSpec::Kind::kLayerSkip)) {
    return absl::InvalidArgumentError(
        absl::StrCat("drafter '", spec.name, "' needs the target's tokenizer"));
  }
  ModelDrafterOptions options;
  options.threads = threads;
  options.device = spec.device;
  switch (spec.kind) {
    case DrafterSpec::Kind::kNone:
      return std::unique_ptr<Drafter>();
    case DrafterSpec::Kind::kNgram:
      return std::unique_ptr<Drafter>(new NgramDrafter(NgramDrafterConfig{}));
    case DrafterSpec::Kind::kLookup:
      return std::unique_ptr<Drafter>(new LookupDrafter(LookupDrafterConfig{}));
    case DrafterSpec::Kind::kModel: {
      ASSIGN_OR_RETURN(std::unique_ptr<Drafter> drafter,
                       MakeModelDrafter(spec, *target_tokenizer, target_vocab_size, options));
      return WithDecodeBytesRatio(std::move(drafter), DecodeBytesPerToken(spec.draft_path),
                                  target_path);
    }
    case DrafterSpec::Kind::kLayerSkip: {
      model::TransformerOptions model_options;
      model_options.threads = threads;
      model_options.layers = spec.layers;
      model_options.device = spec.device;
      ASSIGN_OR_RETURN(std::unique_ptr<model::Transformer> truncated,
                       model::Transformer::Load(target_path, model_options));
      const uint64_t draft_bytes = truncated->weights().DecodeBytesPerToken();
      ASSIGN_OR_RETURN(std::unique_ptr<ModelDrafter> drafter,
                       ModelDrafter::Create(std::move(truncated), *target_tokenizer,
                                            *target_tokenizer, target_vocab_size, options));
      return WithDecodeBytesRatio(std::move(drafter), draft_bytes, target_path);
    }
  }
  return absl::InternalError("unreachable drafter kind");
}

}  // namespace splitspec::spec
