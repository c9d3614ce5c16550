// Classifier-free guidance flags of `splitspec generate` and `splitspec client`:
// --guidance-scale S, --negative-prompt TEXT and (generate) --negative-prompt-ids 1,2,3,
// turned into SamplingParams.guidance_scale / negative_prompt_tokens.
//
//   ASSIGN_OR_RETURN(GuidanceFlagValues guidance, ParseGuidanceFlags(args));  // with the flags
//   RETURN_IF_ERROR(ApplyGuidance(guidance, tokenizer, submit.mutable_params()));
//
// The unconditional prompt: --negative-prompt-ids as given; else --negative-prompt
// encoded like a prompt (BOS first when the vocabulary adds it); else BOS alone.
// Errors (InvalidArgument naming the flag): a scale outside [0, 100] or not a
// number; both negative-prompt flags; a negative prompt without a scale other than
// 1; an id outside the vocabulary; no BOS in the vocabulary when one is needed.
#ifndef SPLITSPEC_TOOLS_GUIDANCE_FLAGS_H_
#define SPLITSPEC_TOOLS_GUIDANCE_FLAGS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/splitspec.pb.h"
#include "runtime/cli/cli_args.h"
#include "runtime/tokenizer/tokenizer.h"

namespace splitspec::tools {

// The flag rows, for the commands' flag tables (`with_ids`: also --negative-prompt-ids).
std::vector<cli::Flag> GuidanceFlags(bool with_ids);

struct GuidanceFlagValues {
  double scale = 1.0;
  std::optional<std::string> negative_text;
  std::vector<int32_t> negative_ids;
};

// Reads and checks the flags that need no tokenizer.
absl::StatusOr<GuidanceFlagValues> ParseGuidanceFlags(const cli::CliArgs& args);

// Sets params' guidance fields (nothing when the scale is 1).
absl::Status ApplyGuidance(const GuidanceFlagValues& flags, const model::Tokenizer& tokenizer,
                           proto::SamplingParams* params);

}  // namespace splitspec::tools

#endif  // SPLITSPEC_TOOLS_GUIDANCE_FLAGS_H_
