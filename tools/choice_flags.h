// Choices and log-probability flags of `splitspec generate` and `splitspec
// client`: --n N (independent choices; choice i seeded spec::ChoiceSeed(seed,
// i) = seed + i, as the HTTP API's n), --logprobs N (each token's
// log-probability and its N most likely alternatives, N in [0, 20]) and
// --logprobs-mode raw|processed (runtime/spec/token_logprobs.h).
//
//   ASSIGN_OR_RETURN(ChoiceFlagValues choices, ParseChoiceFlags(args));
//   ApplyLogprobs(choices, submit.mutable_params());
//   ...
//   std::fputs(LogprobsTable(tokenizer, result.logprobs).c_str(), stdout);
//
// The table, one row per token: its position in the output, its id, its
// log-probability, its text (quoted, C escapes), then the alternatives as
// "text" logprob, most likely first:
//      #     id   logprob  token          top
//      0    254   -0.4012  " the"         " the" -0.4012 | " a" -1.9321
#ifndef SPLITSPEC_TOOLS_CHOICE_FLAGS_H_
#define SPLITSPEC_TOOLS_CHOICE_FLAGS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/splitspec.pb.h"
#include "runtime/cli/cli_args.h"
#include "runtime/tokenizer/tokenizer.h"

namespace splitspec::tools {

// The flag rows, for the commands' flag tables.
std::vector<cli::Flag> ChoiceFlags();

struct ChoiceFlagValues {
  int n = 1;
  std::optional<int> logprobs;  // alternatives per token; nullopt: no logprobs
  proto::LogprobsMode logprobs_mode = proto::LOGPROBS_MODE_RAW;
};

// Errors (InvalidArgument naming the flag): --n outside [1, 64], --logprobs
// outside [0, 20], --logprobs-mode other than raw or processed.
absl::StatusOr<ChoiceFlagValues> ParseChoiceFlags(const cli::CliArgs& args);

// Sets params' logprobs and logprobs_mode (nothing without --logprobs).
void ApplyLogprobs(const ChoiceFlagValues& values, proto::SamplingParams* params);

// The table above, "" for no entries. Ids outside the vocabulary print as <id N>.
std::string LogprobsTable(const model::Tokenizer& tokenizer,
                          const std::vector<proto::TokenLogprob>& entries);

// The entries as a JSON array [{"id","token","logprob","top":[{"id","token","logprob"}]}]
// (-inf written as -9999.0, as the HTTP API does).
std::string LogprobsJson(const model::Tokenizer& tokenizer,
                         const std::vector<proto::TokenLogprob>& entries);

}  // namespace splitspec::tools

#endif  // SPLITSPEC_TOOLS_CHOICE_FLAGS_H_
