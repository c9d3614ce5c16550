// Logits-processor flags of `splitspec generate` and `splitspec client`:
// --logit-bias ID:BIAS[,ID:BIAS...], --presence-penalty X, --frequency-penalty X,
// --repetition-penalty X, turned into SamplingParams.processors (the context
// processors of runtime/spec/logits_pipeline.h, as the HTTP API's logit_bias
// and penalties); and the structured-output constraint, at most one of
// --json-schema FILE, --regex RE, --grammar FILE (EBNF), --choice A,B,... (as the
// HTTP API's structured_outputs json / regex / grammar / choice: the same
// GrammarSpec in processors.grammar; a choice cannot contain a comma here).
//
//   ASSIGN_OR_RETURN(proto::LogitsProcessors processors, ParseProcessorFlags(args));
//   RETURN_IF_ERROR(ApplyProcessors(processors, tokenizer.vocab_size(), submit.mutable_params()));
//
// Errors (InvalidArgument naming the flag and the value): a malformed ID:BIAS
// pair, an id named twice, a value outside SamplingParams' ranges, an id outside
// the vocabulary; two constraint flags, an empty --regex or --choice item; a
// --json-schema / --grammar FILE that cannot be read (NotFound naming it). A
// schema or grammar xgrammar cannot compile is refused by the target, by name.
#ifndef SPLITSPEC_TOOLS_PROCESSOR_FLAGS_H_
#define SPLITSPEC_TOOLS_PROCESSOR_FLAGS_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/splitspec.pb.h"
#include "runtime/cli/cli_args.h"

namespace splitspec::tools {

// The flag rows, for the commands' flag tables.
std::vector<cli::Flag> ProcessorFlags();

// Reads and checks the flags that need no vocabulary.
absl::StatusOr<proto::LogitsProcessors> ParseProcessorFlags(const cli::CliArgs& args);

// Checks the ids against the vocabulary and sets params->processors (cleared when all off).
absl::Status ApplyProcessors(const proto::LogitsProcessors& processors, int vocab_size,
                             proto::SamplingParams* params);

}  // namespace splitspec::tools

#endif  // SPLITSPEC_TOOLS_PROCESSOR_FLAGS_H_
