// `splitspec client [--coordinator ENDPOINT] [--model PATH] (--prompt TEXT | --prompt-ids 1,2,3)
//                   [--chat] [--max-tokens N] [--temperature T] [--top-k K] [--top-p P]
//                   [--seed S] [--verify MODE] [--drafter none] [--json] [--logit-bias ID:BIAS,...]
//                   [--presence-penalty X] [--frequency-penalty X] [--repetition-penalty X]
//                   [--json-schema FILE | --regex RE | --grammar FILE | --choice A,B,...]
//                   [--n N] [--logprobs N] [--logprobs-mode raw|processed]`
//
// Sends one request to a running cluster and streams the text to stdout as the
// coordinator commits tokens (never half a UTF-8 character). --model names the
// GGUF whose tokenizer encodes the prompt and decodes the stream (default: the
// default model); --chat wraps --prompt as a user message in the model's chat
// template. The speculation stats go to stderr at the end; with --json one
// line {"token_ids":[...],"text":"...","finish_reason":"...","stats":{...}}
// is printed instead of the stream. The constraint flags (tools/processor_flags.h)
// give the request a structured-output grammar, as the HTTP API's structured_outputs.
// --n N sends N independent choices (choice i
// seeded spec::ChoiceSeed(seed, i) = seed + i) and prints each when all are done,
// under a "--- choice i ---" line (JSON: one line each, with "index").
// --logprobs N prints each token's log-probability and its N most likely
// alternatives after the text (tools/choice_flags.h; "logprobs" in JSON).
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/base/json_string.h"
#include "runtime/base/logging.h"
#include "runtime/base/status_macros.h"
#include "runtime/model/gguf_reader.h"
#include "runtime/net/channel_security.h"
#include "runtime/net/request_client.h"
#include "runtime/spec/sampling_params.h"
#include "runtime/tokenizer/chat_template.h"
#include "runtime/tokenizer/detokenizer.h"
#include "runtime/tokenizer/tokenizer_gguf.h"
#include "tools/choice_flags.h"
#include "tools/commands.h"
#include "tools/default_paths.h"
#include "tools/guidance_flags.h"
#include "tools/processor_flags.h"

namespace splitspec::tools {
namespace {

absl::StatusOr<std::vector<int32_t>> PromptTokens(const CliArgs& args,
                                                  const model::Tokenizer& tokenizer,
                                                  const model::GgufFile& file) {
  ASSIGN_OR_RETURN(std::vector<int32_t> ids, args.GetIntList("prompt-ids"));
  if (args.Has("prompt") == !ids.empty()) {
    return absl::InvalidArgumentError("give exactly one of --prompt TEXT and --prompt-ids 1,2,3");
  }
  if (!ids.empty()) return ids;
  std::string text = args.GetString("prompt", "");
  if (args.Has("chat")) {
    ASSIGN_OR_RETURN(model::ChatTemplate chat,
                     model::ChatTemplate::FromSource(tokenizer.chat_template()));
    std::vector<model::ChatMessage> messages = {{"user", text}};
    ASSIGN_OR_RETURN(text, chat.Apply(messages, /*add_generation_prompt=*/true));
  }
  ids = tokenizer.Encode(text, {.add_special = true, .parse_special = true});
  if (ids.empty()) return absl::InvalidArgumentError("--prompt encodes to no tokens");
  return ids;
}

// Choice 0 is the request itself; choice i "ID#i" (as the HTTP front door names them).
std::string ChoiceId(const std::string& request_id, int index) {
  return index == 0 ? request_id : absl::StrCat(request_id, "#", index);
}

absl::Status Run(const CommandArgs& argv) {
  SetDefaultLogLevel(LogLevel::kWarning);  // the in-process services stay quiet
  ASSIGN_OR_RETURN(CliArgs args, CliArgs::Parse(argv, ClientFlagTable()));
  const std::string model_path = args.GetString("model", DefaultModelPath());
  ASSIGN_OR_RETURN(std::unique_ptr<model::GgufFile> file, model::GgufFile::Open(model_path));
  ASSIGN_OR_RETURN(model::Tokenizer tokenizer, model::LoadTokenizerFromGguf(*file));
  ASSIGN_OR_RETURN(std::vector<int32_t> prompt, PromptTokens(args, tokenizer, *file));
  ASSIGN_OR_RETURN(uint32_t max_tokens, args.GetInt<uint32_t>("max-tokens", 128));
  ASSIGN_OR_RETURN(double temperature, args.GetDouble("temperature", 0.0));
  ASSIGN_OR_RETURN(int32_t top_k, args.GetInt<int32_t>("top-k", 0));
  ASSIGN_OR_RETURN(double top_p, args.GetDouble("top-p", 1.0));
  ASSIGN_OR_RETURN(int64_t seed, args.GetInt<int64_t>("seed", 0));  // >= 0 (its int_range)
  ASSIGN_OR_RETURN(GuidanceFlagValues guidance, ParseGuidanceFlags(args));
  ASSIGN_OR_RETURN(proto::LogitsProcessors processors, ParseProcessorFlags(args));
  ASSIGN_OR_RETURN(ChoiceFlagValues choices, ParseChoiceFlags(args));

  proto::SubmitRequest submit;
  submit.set_request_id(absl::StrCat("client-", getpid()));
  submit.mutable_prompt_tokens()->Assign(prompt.begin(), prompt.end());
  proto::SamplingParams* params = submit.mutable_params();
  params->set_max_tokens(max_tokens);
  params->set_temperature(static_cast<float>(temperature));
  params->set_top_k(top_k);
  params->set_top_p(static_cast<float>(top_p));
  params->set_seed(static_cast<uint64_t>(seed));
  RETURN_IF_ERROR(ApplyGuidance(guidance, tokenizer, params));
  RETURN_IF_ERROR(ApplyProcessors(processors, tokenizer.vocab_size(), params));
  ApplyLogprobs(choices, params);
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    if (tokenizer.IsEndOfGeneration(id)) params->add_stop_token_ids(id);
  }
  const std::string verify = args.GetString("verify", "");
  if (verify == "greedy")
    submit.set_verify_mode(proto::VERIFY_MODE_GREEDY);
  else if (verify == "rejection")
    submit.set_verify_mode(proto::VERIFY_MODE_REJECTION);
  else if (verify == "coupled")
    submit.set_verify_mode(proto::VERIFY_MODE_COUPLED);
  else if (!verify.empty())
    return absl::InvalidArgumentError(
        absl::StrCat("--verify '", verify, "' is not greedy, rejection or coupled"));
  submit.set_drafter(args.GetString("drafter", ""));

  const std::string endpoint = args.GetString("coordinator", "tcp://127.0.0.1:5555");
  // Submitting needs the client key (SPLITSPEC_KEYS=DIR holding client.key).
  RETURN_IF_ERROR(net::ConfigureProcessSecurity(net::kClient));
  ASSIGN_OR_RETURN(std::unique_ptr<net::RequestClient> client,
                   net::RequestClient::Connect(endpoint));
  model::StreamingDetokenizer stream(&tokenizer);
  const bool json = args.Has("json");
  // One choice streams its text as it comes; several are printed when all are done.
  const bool streaming = !json && choices.n == 1;
  auto on_tokens = [&](const std::string&, const std::vector<int32_t>& tokens) {
    if (!streaming) return;
    for (int32_t id : tokens) {
      if (tokenizer.IsEndOfGeneration(id)) continue;
      absl::StatusOr<std::string> piece = stream.Push(id);
      if (piece.ok()) std::fwrite(piece->data(), 1, piece->size(), stdout);
    }
    std::fflush(stdout);
  };
  std::vector<std::string> ids;
  const uint64_t request_seed = params->seed();
  for (int index = 0; index < choices.n; ++index) {
    proto::SubmitRequest choice = submit;
    choice.set_request_id(ChoiceId(submit.request_id(), index));
    choice.mutable_params()->set_seed(spec::ChoiceSeed(request_seed, index));
    RETURN_IF_ERROR(client->Submit(choice));
    ids.push_back(choice.request_id());
  }
  const absl::Time deadline = absl::Now() + absl::Hours(1);
  for (const std::string& id : ids) {
    while (!client->Done(id)) {
      if (absl::Now() >= deadline) {
        for (const std::string& cancel : ids) (void)client->Cancel(cancel);
        return absl::DeadlineExceededError(absl::StrCat("request ", id, " took over an hour"));
      }
      RETURN_IF_ERROR(client->Poll(absl::Milliseconds(50), on_tokens));
    }
  }
  for (int index = 0; index < choices.n; ++index) {
    const net::GenerationResult& result = client->Result(ids[index]);
    if (result.finish_reason == proto::FINISH_REASON_ERROR) {
      return absl::InternalError(absl::StrCat("request failed: ", result.error));
    }
    std::vector<int32_t> tokens = result.tokens;
    std::vector<proto::TokenLogprob> logprobs = result.logprobs;
    if (choices.logprobs.has_value() && logprobs.size() != tokens.size()) {
      return absl::InternalError(absl::StrCat(
          "the log probabilities of ", tokens.size() - logprobs.size(), " tokens were lost"));
    }
    if (!tokens.empty() && tokenizer.IsEndOfGeneration(tokens.back())) {
      tokens.pop_back();
      if (!logprobs.empty()) logprobs.pop_back();
    }
    const proto::SpecStats& s = result.stats;
    if (json) {
      ASSIGN_OR_RETURN(std::string text, tokenizer.Decode(tokens));
      std::string line = "{";
      if (choices.n > 1) absl::StrAppend(&line, "\"index\":", index, ",");
      line += "\"token_ids\":[";
      for (size_t i = 0; i < tokens.size(); ++i) absl::StrAppend(&line, i ? "," : "", tokens[i]);
      absl::StrAppend(&line, "],\"text\":", JsonQuote(text));
      if (choices.logprobs.has_value())
        absl::StrAppend(&line, ",\"logprobs\":", LogprobsJson(tokenizer, logprobs));
      absl::StrAppend(&line, ",\"finish_reason\":\"",
                      proto::FinishReason_Name(result.finish_reason),
                      "\",\"stats\":{\"drafted\":", s.drafted(), ",\"verified\":", s.verified(),
                      ",\"accepted\":", s.accepted(), ",\"steps\":", s.steps(), "}}\n");
      std::fwrite(line.data(), 1, line.size(), stdout);
      continue;
    }
    if (streaming) {
      const std::string tail = stream.Finish();
      std::fwrite(tail.data(), 1, tail.size(), stdout);
    } else {
      ASSIGN_OR_RETURN(std::string text, tokenizer.Decode(tokens));
      std::fprintf(stdout, "--- choice %d ---\n%s", index, text.c_str());
    }
    std::fprintf(stdout, "\n%s", LogprobsTable(tokenizer, logprobs).c_str());
    std::fprintf(stderr,
                 "[%s%zu tokens, %s; drafted %llu, verified %llu, accepted %llu, steps %llu]\n",
                 choices.n > 1 ? absl::StrCat("choice ", index, ": ").c_str() : "", tokens.size(),
                 proto::FinishReason_Name(result.finish_reason).c_str(),
                 (unsigned long long)s.drafted(), (unsigned long long)s.verified(),
                 (unsigned long long)s.accepted(), (unsigned long long)s.steps());
  }
  return absl::OkStatus();
}

}  // namespace

int RunClientCommand(const CommandArgs& args) {
  absl::Status status = Run(args);
  if (!status.ok()) {
    std::fprintf(stderr, "splitspec client: %s\n", std::string(status.message()).c_str());
    return absl::IsInvalidArgument(status) ? 2 : 1;
  }
  return 0;
}

}  // namespace splitspec::tools
