#include "tools/processor_flags.h"

#include <cstdint>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "runtime/base/status_macros.h"
#include "runtime/grammar/grammar_spec.h"
#include "runtime/net/spec_proto.h"

namespace splitspec::tools {
namespace {

absl::StatusOr<std::string> ReadFlagFile(absl::string_view flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("--", flag, ": cannot open '", path, "'"));
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat("--", flag, ": cannot read '", path, "'"));
  return text.str();
}

// The structured-output constraint of --json-schema, --regex, --grammar or --choice (at most
// one); nullopt when none is given.
absl::StatusOr<std::optional<grammar::GrammarSpec>> ParseGrammarFlags(const cli::CliArgs& args) {
  std::vector<std::string> given;
  for (const char* flag : {"json-schema", "regex", "grammar", "choice"}) {
    if (args.Has(flag)) given.push_back(absl::StrCat("--", flag));
  }
  if (given.empty()) return std::nullopt;
  if (given.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "give at most one of --json-schema, --regex, --grammar, --choice; got ",
        absl::StrJoin(given, " and ")));
  }
  if (args.Has("json-schema")) {
    ASSIGN_OR_RETURN(std::string schema,
                     ReadFlagFile("json-schema", args.GetString("json-schema", "")));
    return grammar::GrammarSpec::JsonSchema(std::move(schema), /*strict=*/false);
  }
  if (args.Has("grammar")) {
    ASSIGN_OR_RETURN(std::string ebnf, ReadFlagFile("grammar", args.GetString("grammar", "")));
    return grammar::GrammarSpec::Ebnf(std::move(ebnf));
  }
  if (args.Has("regex")) {
    const std::string pattern = args.GetString("regex", "");
    if (pattern.empty()) return absl::InvalidArgumentError("--regex must not be empty");
    return grammar::GrammarSpec::Regex(pattern);
  }
  std::vector<std::string> choices = absl::StrSplit(args.GetString("choice", ""), ',');
  for (const std::string& choice : choices) {
    if (choice.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--choice '", args.GetString("choice", ""),
                       "' has an empty choice (give A,B,...: the strings the output may be)"));
    }
  }
  return grammar::GrammarSpec::Choice(std::move(choices));
}

}  // namespace

std::vector<cli::Flag> ProcessorFlags() {
  return {{"logit-bias", "ID:BIAS,...", "",
           "add BIAS (in [-100, 100]) to token ID's logit at every position"},
          {"presence-penalty", "X", "0",
           "subtract X (in [-2, 2]) from the logit of every token generated so far"},
          {"frequency-penalty", "X", "0",
           "subtract X (in [-2, 2]) per time a token was generated so far"},
          {"repetition-penalty", "X", "1",
           "divide (multiply if negative) by X the logits of tokens in the prompt or output; "
           "1 = off"},
          {"json-schema", "FILE", "",
           "constrain the output to JSON matching the JSON Schema in FILE (as the HTTP API's "
           "structured_outputs.json: unlisted properties allowed unless the schema forbids them)"},
          {"regex", "RE", "", "constrain the output to a string matching RE (xgrammar's regex)"},
          {"grammar", "FILE", "",
           "constrain the output to the EBNF grammar in FILE (xgrammar's dialect, start rule "
           "'root')"},
          {"choice", "A,B,...", "", "constrain the output to exactly one of the strings A, B, ..."}};
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
  ASSIGN_OR_RETURN(std::optional<grammar::GrammarSpec> grammar, ParseGrammarFlags(args));
  if (grammar.has_value()) net::GrammarToProto(*grammar, processors.mutable_grammar());
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
