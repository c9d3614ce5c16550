#include "runtime/net/spec_proto.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"

namespace splitspec::net {
namespace {

absl::StatusOr<grammar::GrammarSpec> GrammarFromProto(const proto::GrammarConstraint& wire) {
  for (grammar::GrammarKind kind :
       {grammar::GrammarKind::kJsonObject, grammar::GrammarKind::kJsonSchema,
        grammar::GrammarKind::kRegex, grammar::GrammarKind::kChoice, grammar::GrammarKind::kEbnf}) {
    if (grammar::GrammarKindName(kind) != wire.kind()) continue;
    grammar::GrammarSpec spec;
    spec.kind = kind;
    spec.text = wire.text();
    spec.strict = wire.strict();
    spec.choices.assign(wire.choices().begin(), wire.choices().end());
    return spec;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "processors.grammar.kind '", wire.kind(),
      "' is not one of json_object, json_schema, regex, choice, grammar"));
}

}  // namespace

absl::StatusOr<spec::SamplingParams> SamplingParamsFromProto(const proto::SamplingParams& wire) {
  spec::SamplingParams params;
  params.temperature = wire.temperature();
  params.top_k = wire.top_k();
  params.top_p = wire.top_p() == 0.0f ? 1.0f : wire.top_p();
  params.min_p = wire.min_p();
  params.seed = wire.seed();
  params.guidance_scale = wire.has_guidance_scale() ? wire.guidance_scale() : 1.0f;
  const proto::LogitsProcessors& processors = wire.processors();
  params.logit_bias.assign(processors.logit_bias().begin(), processors.logit_bias().end());
  std::sort(params.logit_bias.begin(), params.logit_bias.end());  // the map has no order
  params.presence_penalty = processors.presence_penalty();
  params.frequency_penalty = processors.frequency_penalty();
  params.repetition_penalty =
      processors.has_repetition_penalty() ? processors.repetition_penalty() : 1.0f;
  if (processors.has_grammar()) {
    ASSIGN_OR_RETURN(params.grammar, GrammarFromProto(processors.grammar()));
  }
  if (wire.has_logprobs()) {
    if (wire.logprobs() > static_cast<uint32_t>(spec::kMaxTopLogprobs)) {
      return absl::InvalidArgumentError(absl::StrCat("logprobs (top alternatives) must be in [0, ",
                                                     spec::kMaxTopLogprobs, "], got ",
                                                     wire.logprobs()));
    }
    params.logprobs = static_cast<int>(wire.logprobs());
  }
  params.logprobs_mode = wire.logprobs_mode() == proto::LOGPROBS_MODE_PROCESSED
                             ? spec::LogprobsMode::kProcessed
                             : spec::LogprobsMode::kRaw;
  RETURN_IF_ERROR(params.Validate());
  return params;
}

proto::SamplingParams SamplingParamsToProto(const spec::SamplingParams& params) {
  proto::SamplingParams wire;
  wire.set_temperature(params.temperature);
  wire.set_top_k(params.top_k);
  wire.set_top_p(params.top_p);
  wire.set_min_p(params.min_p);
  wire.set_seed(params.seed);
  if (params.guided()) wire.set_guidance_scale(params.guidance_scale);
  proto::LogitsProcessors* processors = wire.mutable_processors();
  for (const auto& [id, bias] : params.logit_bias) (*processors->mutable_logit_bias())[id] = bias;
  processors->set_presence_penalty(params.presence_penalty);
  processors->set_frequency_penalty(params.frequency_penalty);
  if (params.repetition_penalty != 1.0f) {
    processors->set_repetition_penalty(params.repetition_penalty);
  }
  if (params.grammar.has_value()) GrammarToProto(*params.grammar, processors->mutable_grammar());
  if (processors->ByteSizeLong() == 0) wire.clear_processors();
  if (params.logprobs.has_value()) wire.set_logprobs(static_cast<uint32_t>(*params.logprobs));
  if (params.logprobs_mode == spec::LogprobsMode::kProcessed)
    wire.set_logprobs_mode(proto::LOGPROBS_MODE_PROCESSED);
  return wire;
}

spec::TokenLogprob TokenLogprobFromProto(const proto::TokenLogprob& wire) {
  spec::TokenLogprob entry;
  entry.token = wire.token();
  entry.logprob = wire.logprob();
  entry.top_ids.assign(wire.top_ids().begin(), wire.top_ids().end());
  entry.top_logprobs.assign(wire.top_logprobs().begin(), wire.top_logprobs().end());
  return entry;
}

void TokenLogprobToProto(const spec::TokenLogprob& entry, proto::TokenLogprob* wire) {
  wire->set_token(entry.token);
  wire->set_logprob(entry.logprob);
  wire->mutable_top_ids()->Assign(entry.top_ids.begin(), entry.top_ids.end());
  wire->mutable_top_logprobs()->Assign(entry.top_logprobs.begin(), entry.top_logprobs.end());
}

void GrammarToProto(const grammar::GrammarSpec& spec, proto::GrammarConstraint* wire) {
  wire->set_kind(std::string(grammar::GrammarKindName(spec.kind)));
  wire->set_text(spec.text);
  wire->set_strict(spec.strict);
  wire->mutable_choices()->Assign(spec.choices.begin(), spec.choices.end());
}

spec::VerifyMode VerifyModeFromProto(proto::VerifyMode wire, const spec::SamplingParams& params) {
  switch (wire) {
    case proto::VERIFY_MODE_GREEDY:
      return spec::VerifyMode::kGreedy;
    case proto::VERIFY_MODE_REJECTION:
      return spec::VerifyMode::kRejection;
    case proto::VERIFY_MODE_COUPLED:
      return spec::VerifyMode::kCoupled;
    default:
      return params.greedy() ? spec::VerifyMode::kGreedy : spec::VerifyMode::kRejection;
  }
}

proto::VerifyMode VerifyModeToProto(spec::VerifyMode mode) {
  switch (mode) {
    case spec::VerifyMode::kGreedy:
      return proto::VERIFY_MODE_GREEDY;
    case spec::VerifyMode::kRejection:
      return proto::VERIFY_MODE_REJECTION;
    case spec::VerifyMode::kCoupled:
      return proto::VERIFY_MODE_COUPLED;
  }
  return proto::VERIFY_MODE_UNSPECIFIED;
}

spec::SparseDistribution SparseFromProto(const proto::SparseDistribution& wire) {
  return {{wire.token_ids().begin(), wire.token_ids().end()},
          {wire.probs().begin(), wire.probs().end()}};
}

void SparseToProto(const spec::SparseDistribution& q, proto::SparseDistribution* wire) {
  wire->mutable_token_ids()->Assign(q.token_ids.begin(), q.token_ids.end());
  wire->mutable_probs()->Assign(q.probs.begin(), q.probs.end());
}

}  // namespace splitspec::net
