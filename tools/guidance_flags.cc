#include "tools/guidance_flags.h"

#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"
#include "runtime/spec/sampling_params.h"

namespace splitspec::tools {

std::vector<cli::Flag> GuidanceFlags(bool with_ids) {
  std::vector<cli::Flag> flags = {
      {"guidance-scale", "S", "1",
       "classifier-free guidance: sample from l_u + S (l_c - l_u); 1 = off"},
      {"negative-prompt", "TEXT", "BOS", "the unconditional prompt of guidance"}};
  if (with_ids) {
    flags.push_back(
        {"negative-prompt-ids", "1,2,3", "", "the unconditional prompt as token ids"});
  }
  return flags;
}

absl::StatusOr<GuidanceFlagValues> ParseGuidanceFlags(const cli::CliArgs& args) {
  GuidanceFlagValues f;
  ASSIGN_OR_RETURN(f.scale, args.GetDouble("guidance-scale", 1.0));
  if (args.Has("negative-prompt")) f.negative_text = args.GetString("negative-prompt", "");
  if (args.Has("negative-prompt-ids")) {
    ASSIGN_OR_RETURN(f.negative_ids, args.GetIntList("negative-prompt-ids"));
  }
  if (!(f.scale >= 0.0 && f.scale <= spec::SamplingParams::kMaxGuidanceScale)) {
    return absl::InvalidArgumentError(absl::StrCat("--guidance-scale must be in [0, ",
                                                   spec::SamplingParams::kMaxGuidanceScale,
                                                   "], got ", f.scale));
  }
  if (f.negative_text && !f.negative_ids.empty()) {
    return absl::InvalidArgumentError(
        "give at most one of --negative-prompt and --negative-prompt-ids");
  }
  if (f.scale == 1.0 && (f.negative_text || !f.negative_ids.empty())) {
    return absl::InvalidArgumentError(
        "--negative-prompt needs --guidance-scale other than 1 (1 = no guidance)");
  }
  return f;
}

absl::Status ApplyGuidance(const GuidanceFlagValues& flags, const model::Tokenizer& tokenizer,
                           proto::SamplingParams* params) {
  if (flags.scale == 1.0) return absl::OkStatus();
  std::vector<int32_t> ids = flags.negative_ids;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= tokenizer.vocab_size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--negative-prompt-ids: id ", ids[i], " at index ", i,
                       " is outside the vocabulary [0, ", tokenizer.vocab_size(), ")"));
    }
  }
  if (flags.negative_text) {
    ids = tokenizer.Encode(*flags.negative_text, {.add_special = true, .parse_special = true});
  }
  if (ids.empty()) {
    if (tokenizer.bos_id() < 0) {
      return absl::InvalidArgumentError(
          "the model has no BOS token to stand for an empty unconditional prompt; give "
          "--negative-prompt or --negative-prompt-ids");
    }
    ids.push_back(tokenizer.bos_id());
  }
  params->set_guidance_scale(static_cast<float>(flags.scale));
  params->mutable_negative_prompt_tokens()->Assign(ids.begin(), ids.end());
  return absl::OkStatus();
}

}  // namespace splitspec::tools
