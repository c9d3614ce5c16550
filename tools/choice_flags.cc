#include "tools/choice_flags.h"

#include <cmath>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/base/json_string.h"
#include "runtime/base/status_macros.h"
#include "runtime/spec/sampling_params.h"

namespace splitspec::tools {
namespace {

constexpr int kMaxChoices = 64;  // as the HTTP API's n

std::string TokenText(const model::Tokenizer& tokenizer, int32_t id) {
  absl::StatusOr<std::string_view> piece = tokenizer.Piece(id, /*render_special=*/true);
  return piece.ok() ? std::string(*piece) : absl::StrCat("<id ", id, ">");
}

std::string Quoted(const model::Tokenizer& tokenizer, int32_t id) {
  return absl::StrCat("\"", absl::CHexEscape(TokenText(tokenizer, id)), "\"");
}

double Finite(float logprob) { return std::isfinite(logprob) ? logprob : -9999.0; }

}  // namespace

std::vector<cli::Flag> ChoiceFlags() {
  return {
      {"n", "N", "1", "independent choices (1-64); choice i uses seed S + i, as the HTTP API's n",
       cli::IntRangeOf<int>()},
      {"logprobs", "N", "",
       "print each token's log-probability and its N (0-20) most likely alternatives",
       cli::IntRangeOf<int>()},
      {"logprobs-mode", "raw|processed", "raw",
       "logprobs of the model's logits (raw) or after the request's processors and "
       "temperature / top-k / top-p / min-p (processed)"}};
}

absl::StatusOr<ChoiceFlagValues> ParseChoiceFlags(const cli::CliArgs& args) {
  ChoiceFlagValues values;
  ASSIGN_OR_RETURN(values.n, args.GetInt<int>("n", 1));
  if (values.n < 1 || values.n > kMaxChoices) {
    return absl::InvalidArgumentError(
        absl::StrCat("--n must be in [1, ", kMaxChoices, "], got ", values.n));
  }
  if (args.Has("logprobs")) {
    ASSIGN_OR_RETURN(int top, args.GetInt<int>("logprobs", 0));
    if (top < 0 || top > spec::kMaxTopLogprobs) {
      return absl::InvalidArgumentError(
          absl::StrCat("--logprobs must be in [0, ", spec::kMaxTopLogprobs, "], got ", top));
    }
    values.logprobs = top;
  }
  const std::string mode = args.GetString("logprobs-mode", "raw");
  if (mode != "raw" && mode != "processed") {
    return absl::InvalidArgumentError(
        absl::StrCat("--logprobs-mode '", mode, "' is not raw or processed"));
  }
  values.logprobs_mode = mode == "raw" ? proto::LOGPROBS_MODE_RAW : proto::LOGPROBS_MODE_PROCESSED;
  return values;
}

void ApplyLogprobs(const ChoiceFlagValues& values, proto::SamplingParams* params) {
  if (!values.logprobs.has_value()) return;
  params->set_logprobs(static_cast<uint32_t>(*values.logprobs));
  params->set_logprobs_mode(values.logprobs_mode);
}

std::string LogprobsTable(const model::Tokenizer& tokenizer,
                          const std::vector<proto::TokenLogprob>& entries) {
  if (entries.empty()) return "";
  std::string table =
      absl::StrFormat("%6s %7s %9s  %-16s %s\n", "#", "id", "logprob", "token", "top");
  for (size_t i = 0; i < entries.size(); ++i) {
    const proto::TokenLogprob& entry = entries[i];
    std::string top;
    for (int j = 0; j < entry.top_ids_size() && j < entry.top_logprobs_size(); ++j) {
      absl::StrAppend(&top, j > 0 ? " | " : "", Quoted(tokenizer, entry.top_ids(j)), " ",
                      absl::StrFormat("%.4f", Finite(entry.top_logprobs(j))));
    }
    absl::StrAppend(
        &table, absl::StrFormat("%6d %7d %9.4f  %-16s %s\n", i, entry.token(),
                                Finite(entry.logprob()), Quoted(tokenizer, entry.token()), top));
  }
  return table;
}

std::string LogprobsJson(const model::Tokenizer& tokenizer,
                         const std::vector<proto::TokenLogprob>& entries) {
  std::string json = "[";
  for (size_t i = 0; i < entries.size(); ++i) {
    const proto::TokenLogprob& entry = entries[i];
    absl::StrAppend(&json, i > 0 ? "," : "", "{\"id\":", entry.token(),
                    ",\"token\":", JsonQuote(TokenText(tokenizer, entry.token())),
                    ",\"logprob\":", Finite(entry.logprob()), ",\"top\":[");
    for (int j = 0; j < entry.top_ids_size() && j < entry.top_logprobs_size(); ++j) {
      absl::StrAppend(&json, j > 0 ? "," : "", "{\"id\":", entry.top_ids(j),
                      ",\"token\":", JsonQuote(TokenText(tokenizer, entry.top_ids(j))),
                      ",\"logprob\":", Finite(entry.top_logprobs(j)), "}");
    }
    json += "]}";
  }
  return json + "]";
}

}  // namespace splitspec::tools
