#include "tools/processor_flags.h"

#include <cstdint>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "runtime/base/status_macros.h"
#include "runtime/net/spec_proto.h"

namespace splitspec::tools {

std::vector<cli::Flag> ProcessorFlags() {
  return {{"logit-bias", "ID:BIAS,...", "",
           "add BIAS (in [-100, 100]) to token ID's logit at every position"},
          {"presence-penalty", "X", "0",
           "subtract X (in [-2, 2]) from the logit of every token generated so far"},
          {"frequency-penalty", "X", "0",
           "subtract X (in [-2, 2]) per time a token was generated so far"},
          {"repetition-penalty", "X", "1",
           "divide (multiply if negative) by X the logits of tokens in the prompt or output; "
           "1 = off"}};
}

absl::StatusOr<proto::LogitsProcessors> ParseProcessorFlags(const cli::CliArgs& args) {
  proto::LogitsProcessors processors;
  const std::string bias_list = args.GetString("logit-bias", "");
  if (!bias_list.empty()) {
    for (absl::string_view pair : absl::StrSplit(bias_list, ',')) {
      const std::pair<absl::string_view, absl::string_view> parts = absl::StrSplit(pair, ':');
      int32_t id = -1;
      double bias = 0.0;
      if (!absl::SimpleAtoi(parts.first, &id) || id < 0 ||
          !absl::SimpleAtod(parts.second, &bias)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--logit-bias: '", pair, "' is not ID:BIAS (a token id and a number)"));
      }
      if (processors.logit_bias().contains(id)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--logit-bias names token ", id, " twice"));
      }
      (*processors.mutable_logit_bias())[id] = static_cast<float>(bias);
    }
  }
  ASSIGN_OR_RETURN(double presence, args.GetDouble("presence-penalty", 0.0));
  ASSIGN_OR_RETURN(double frequency, args.GetDouble("frequency-penalty", 0.0));
  ASSIGN_OR_RETURN(double repetition, args.GetDouble("repetition-penalty", 1.0));
  processors.set_presence_penalty(static_cast<float>(presence));
  processors.set_frequency_penalty(static_cast<float>(frequency));
  if (repetition != 1.0) processors.set_repetition_penalty(static_cast<float>(repetition));
  // The ranges are SamplingParams'; its message names the field, the flag is its
  // name with dashes.
  proto::SamplingParams wire;
  *wire.mutable_processors() = processors;
  const absl::StatusOr<spec::SamplingParams> checked = net::SamplingParamsFromProto(wire);
  if (!checked.ok()) {
    std::string message(checked.status().message());
    for (char& c : message) {
      if (c == '_') c = '-';
    }
    return absl::InvalidArgumentError(absl::StrCat("--", message));
  }
  return processors;
}

absl::Status ApplyProcessors(const proto::LogitsProcessors& processors, int vocab_size,
                             proto::SamplingParams* params) {
  for (const auto& [id, bias] : processors.logit_bias()) {
    if (id >= vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("--logit-bias names token ", id,
                                                     ", outside the vocabulary [0, ",
                                                     vocab_size, ")"));
    }
  }
  *params->mutable_processors() = processors;
  if (params->processors().ByteSizeLong() == 0) params->clear_processors();
  return absl::OkStatus();
}

}  // namespace splitspec::tools
