// Conversions between the wire messages (proto/splitspec.proto) and the
// speculative core's types (runtime/spec), in one place.
#ifndef SPLITSPEC_RUNTIME_NET_SPEC_PROTO_H_
#define SPLITSPEC_RUNTIME_NET_SPEC_PROTO_H_

#include "absl/status/statusor.h"
#include "proto/splitspec.pb.h"
#include "runtime/spec/sampling_params.h"
#include "runtime/spec/sparse_distribution.h"
#include "runtime/spec/token_logprobs.h"
#include "runtime/spec/verify_mode.h"

namespace splitspec::net {

// Validated (SamplingParams::Validate); errors name the field. Proto defaults
// map as: top_p 0 -> 1 (off), other zeros keep their meaning.
absl::StatusOr<spec::SamplingParams> SamplingParamsFromProto(const proto::SamplingParams& wire);
proto::SamplingParams SamplingParamsToProto(const spec::SamplingParams& params);
// A grammar spec on the wire (LogitsProcessors.grammar); the front door uses it too.
void GrammarToProto(const grammar::GrammarSpec& spec, proto::GrammarConstraint* wire);

// VERIFY_MODE_UNSPECIFIED picks greedy at temperature 0, rejection otherwise.
spec::VerifyMode VerifyModeFromProto(proto::VerifyMode wire, const spec::SamplingParams& params);
proto::VerifyMode VerifyModeToProto(spec::VerifyMode mode);

// A committed token's log-probability entry (VerifyResult / TokenStream.logprobs).
spec::TokenLogprob TokenLogprobFromProto(const proto::TokenLogprob& wire);
void TokenLogprobToProto(const spec::TokenLogprob& entry, proto::TokenLogprob* wire);

spec::SparseDistribution SparseFromProto(const proto::SparseDistribution& wire);
void SparseToProto(const spec::SparseDistribution& q, proto::SparseDistribution* wire);

}  // namespace splitspec::net

#endif  // SPLITSPEC_RUNTIME_NET_SPEC_PROTO_H_
