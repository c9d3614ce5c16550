// `splitspec generate --target PATH [--draft PATH | --drafter none|ngram|layerskip:L]
//     [--prompt TEXT | --prompt-ids 1,2,3] [--max-tokens N] [--temperature T] [--top-k K]
//     [--top-p P] [--min-p P] [--seed S] [--k K] [--verify greedy|rejection|coupled]
//     [--samples M] [--threads N] [--draft-threads N] [--sequential] [--ignore-eos] [--json]
//     [--trace FILE] [--target-tp N] [--vocab-mapping auto|intersection|string]
//     [--logit-bias ID:BIAS,...] [--presence-penalty X]
//     [--frequency-penalty X] [--repetition-penalty X]
//     [--json-schema FILE | --regex RE | --grammar FILE | --choice A,B,...]
//     [--n N] [--logprobs N] [--logprobs-mode raw|processed]`
//
// Runs the whole speculative pipeline in this process: coordinator, target
// worker and draft worker as threads talking over inproc:// channels, the same
// services and code paths as a cluster of processes (tools/cluster/in_process_cluster.h).
// --drafter none runs the target alone. A --draft whose vocabulary differs from
// the target's drafts through --vocab-mapping (runtime/spec/vocab_mapping.h), and
// the mapping is named on stderr. --sequential makes the draft wait for
// each verification (lookahead 1) instead of drafting ahead (lookahead 2).
// The constraint flags (tools/processor_flags.h) give the output a structured-output
// grammar, as the HTTP API's structured_outputs, exact under speculation.
// --prompt TEXT is tokenized with the target's tokenizer (BOS as the model asks,
// special-token text such as "<|im_start|>" parsed). Generation stops at an
// end-of-generation token (not printed, not in token_ids) unless --ignore-eos.
// Each of the M samples uses seed S + sample index; --n N makes N independent
// choices of each (choice i seeded spec::ChoiceSeed(seed, i) = seed + i, run
// concurrently, printed by index: "--- choice i ---" lines, or "index" in JSON).
// --logprobs N prints each token's log-probability and its N most likely
// alternatives after the text (tools/choice_flags.h; "logprobs" in JSON). With --json each sample
// prints one line {"token_ids":[...],"text":"...","stats":{"drafted":..,
// "verified":..,"accepted":..,"steps":..}} where steps counts verified blocks
// and tokens the target chose alone. --trace FILE writes a Chrome trace-event
// JSON of the draft and target workers' busy intervals (open in Perfetto).
// --target-tp N (1, 2, 4, 8) runs the target as a tensor-parallel group of N
// rank threads joined by Gloo on 127.0.0.1 (target_worker/tp_group_runner.h),
// each with --threads / N threads; the model must split N ways (its KV heads).
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/base/json_string.h"
#include "runtime/base/logging.h"
#include "runtime/base/status_macros.h"
#include "runtime/base/trace.h"
#include "runtime/cli/worker_flags.h"
#include "runtime/model/transformer.h"
#include "runtime/net/request_client.h"
#include "runtime/spec/cross_vocab_drafter.h"
#include "runtime/spec/drafter_factory.h"
#include "runtime/spec/sampling_params.h"
#include "runtime/spec/verify_mode.h"
#include "runtime/tokenizer/tokenizer_gguf.h"
#include "target_worker/request_setup.h"
#include "target_worker/single_rank_model.h"
#include "tools/choice_flags.h"
#include "tools/cluster/in_process_cluster.h"
#include "tools/commands.h"
#include "tools/guidance_flags.h"
#include "tools/processor_flags.h"

namespace splitspec::tools {
namespace {

struct GenerateFlags {
  std::string target;
  spec::DrafterSpec drafter;
  std::string prompt;
  std::vector<int32_t> prompt_ids;
  bool has_prompt_text = false;
  int max_tokens = 128;
  proto::SamplingParams params;
  GuidanceFlagValues guidance;
  proto::LogitsProcessors processors;
  ChoiceFlagValues choices;  // --n, --logprobs, --logprobs-mode
  proto::VerifyMode verify = proto::VERIFY_MODE_UNSPECIFIED;
  int k = 4;  // 0: adaptive (--k auto)
  int samples = 1;
  int threads = 0;
  int draft_threads = 1;
  bool sequential = false;
  bool trees = false;  // --tree auto|off
  bool ignore_eos = false;
  bool json = false;
  model::DeviceSpec device = {};  // --device: the target's and a model drafter's
  bool cuda_graphs = true;        // --cuda-graphs: the target's
  model::KvCacheType kv_cache_type = model::KvCacheType::kF16;  // --kv-cache-type: the target's
  int target_tp = 1;       // --target-tp N: the target as a tensor-parallel group of N rank threads
  std::string trace_path;  // --trace FILE: Chrome trace of draft / target busy intervals
};

absl::Status ParseSampling(const CliArgs& args, GenerateFlags& f) {
  ASSIGN_OR_RETURN(double temperature, args.GetDouble("temperature", 0.0));
  ASSIGN_OR_RETURN(int32_t top_k, args.GetInt<int32_t>("top-k", 0));
  ASSIGN_OR_RETURN(double top_p, args.GetDouble("top-p", 1.0));
  ASSIGN_OR_RETURN(double min_p, args.GetDouble("min-p", 0.0));
  ASSIGN_OR_RETURN(int64_t seed, args.GetInt<int64_t>("seed", 0));  // >= 0 (its int_range)
  f.params.set_temperature(static_cast<float>(temperature));
  f.params.set_top_k(top_k);
  f.params.set_top_p(static_cast<float>(top_p));
  f.params.set_min_p(static_cast<float>(min_p));
  f.params.set_seed(static_cast<uint64_t>(seed));
  if (args.Has("verify")) {
    ASSIGN_OR_RETURN(spec::VerifyMode mode, spec::ParseVerifyMode(args.GetString("verify", "")));
    f.verify = mode == spec::VerifyMode::kGreedy    ? proto::VERIFY_MODE_GREEDY
               : mode == spec::VerifyMode::kCoupled ? proto::VERIFY_MODE_COUPLED
                                                    : proto::VERIFY_MODE_REJECTION;
  }
  if (f.verify == proto::VERIFY_MODE_GREEDY && temperature != 0.0) {
    return absl::InvalidArgumentError("--verify greedy needs --temperature 0");
  }
  return absl::OkStatus();
}

absl::StatusOr<GenerateFlags> ParseFlags(const CommandArgs& argv) {
  ASSIGN_OR_RETURN(CliArgs args, CliArgs::Parse(argv, GenerateFlagTable()));
  GenerateFlags f;
  f.target = args.GetString("target", "");
  if (f.target.empty()) return absl::InvalidArgumentError("--target PATH is required");
  const std::string draft_path = args.GetString("draft", "");
  const std::string drafter = args.GetString("drafter", draft_path.empty() ? "none" : "model");
  ASSIGN_OR_RETURN(f.drafter, spec::ParseDrafterSpec(drafter, draft_path));
  ASSIGN_OR_RETURN(f.drafter.vocab_mapping,
                   spec::ParseVocabMapping(args.GetString("vocab-mapping", "auto")));
  RETURN_IF_ERROR(ParseSampling(args, f));
  ASSIGN_OR_RETURN(f.guidance, ParseGuidanceFlags(args));
  ASSIGN_OR_RETURN(f.processors, ParseProcessorFlags(args));
  ASSIGN_OR_RETURN(f.choices, ParseChoiceFlags(args));
  f.has_prompt_text = args.Has("prompt");
  f.prompt = args.GetString("prompt", "");
  ASSIGN_OR_RETURN(f.prompt_ids, args.GetIntList("prompt-ids"));
  if (f.has_prompt_text == !f.prompt_ids.empty()) {
    return absl::InvalidArgumentError("give exactly one of --prompt TEXT and --prompt-ids 1,2,3");
  }
  ASSIGN_OR_RETURN(int64_t max_tokens, args.GetInt<uint32_t>("max-tokens", 128));
  ASSIGN_OR_RETURN(int threads, args.GetInt<int>("threads", 0));
  ASSIGN_OR_RETURN(int draft_threads, args.GetInt<int>("draft-threads", 1));
  ASSIGN_OR_RETURN(int samples, args.GetInt<int>("samples", 1));
  ASSIGN_OR_RETURN(int target_tp, args.GetInt<int>("target-tp", 1));
  if (target_tp != 1 && target_tp != 2 && target_tp != 4 && target_tp != 8) {
    return absl::InvalidArgumentError(
        absl::StrCat("--target-tp must be 1, 2, 4 or 8, got ", target_tp));
  }
  f.target_tp = static_cast<int>(target_tp);
  ASSIGN_OR_RETURN(f.device, ParseDeviceFlag(args));
  ASSIGN_OR_RETURN(f.cuda_graphs, ParseCudaGraphsFlag(args));
  ASSIGN_OR_RETURN(f.kv_cache_type, ParseKvCacheTypeFlag(args));
  if (f.kv_cache_type != model::KvCacheType::kF16 && f.target_tp > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--kv-cache-type ", model::KvCacheTypeName(f.kv_cache_type),
        " is not implemented for a tensor-parallel target (--target-tp ", f.target_tp, ")"));
  }
  f.drafter.device = f.device;
  if (f.device.is_cuda() && f.target_tp > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--device ", f.device.ToString(), " with --target-tp ", f.target_tp,
                     ": tensor-parallel targets on CUDA devices are not supported yet"));
  }
  // --k auto: the draft worker picks k per block from measured acceptance and
  // costs (the speculation policy, runtime/spec/spec_policy.h); on the wire that is draft_k 0.
  const bool auto_k = args.GetString("k", "4") == "auto";
  int k_value = 0;
  if (!auto_k) {
    ASSIGN_OR_RETURN(k_value, args.GetInt<int>("k", 4));
  }
  if (max_tokens < 1 || max_tokens > (1 << 20)) {
    return absl::InvalidArgumentError(absl::StrCat("--max-tokens ", max_tokens, " out of range"));
  }
  if (threads < 0 || threads > 1024)
    return absl::InvalidArgumentError(absl::StrCat("--threads ", threads, " out of range"));
  if (draft_threads < 1 || draft_threads > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("--draft-threads ", draft_threads, " out of range"));
  }
  if (samples < 1 || samples > 100000)
    return absl::InvalidArgumentError(absl::StrCat("--samples ", samples, " out of range"));
  if (!auto_k && (k_value < 1 || k_value > 64)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--k ", k_value, " out of range [1, 64] (or auto)"));
  }
  f.max_tokens = static_cast<int>(max_tokens);
  f.threads = static_cast<int>(threads);
  f.draft_threads = static_cast<int>(draft_threads);
  f.samples = static_cast<int>(samples);
  f.k = static_cast<int>(k_value);
  f.sequential = args.Has("sequential");
  ASSIGN_OR_RETURN(f.trees, cli::ParseTreeSwitch(args.GetString("tree", "off")));
  if (f.trees && f.kv_cache_type != model::KvCacheType::kF16) {
    return absl::InvalidArgumentError(
        "--tree auto with --kv-cache-type q8_0: tree forwards over a q8_0 cache are not "
        "implemented; use --tree off");
  }
  f.ignore_eos = args.Has("ignore-eos");
  f.json = args.Has("json");
  f.trace_path = args.GetString("trace", "");
  return f;
}

std::string SampleLine(const GenerateFlags& f, const model::Tokenizer& tokenizer, int index,
                       const std::vector<int32_t>& ids, const std::string& text,
                       const std::vector<proto::TokenLogprob>& logprobs,
                       const proto::SpecStats& stats) {
  if (!f.json) {
    const std::string header =
        f.choices.n > 1 ? absl::StrCat("--- choice ", index, " ---\n") : std::string();
    return absl::StrCat(header, text, "\n", LogprobsTable(tokenizer, logprobs));
  }
  std::string line = "{";
  if (f.choices.n > 1) absl::StrAppend(&line, "\"index\":", index, ",");
  line += "\"token_ids\":[";
  for (size_t i = 0; i < ids.size(); ++i) absl::StrAppend(&line, i > 0 ? "," : "", ids[i]);
  absl::StrAppend(&line, "],\"text\":", JsonQuote(text));
  if (f.choices.logprobs.has_value())
    absl::StrAppend(&line, ",\"logprobs\":", LogprobsJson(tokenizer, logprobs));
  absl::StrAppend(&line, ",\"stats\":{\"drafted\":", stats.drafted(),
                  ",\"verified\":", stats.verified(), ",\"accepted\":", stats.accepted(),
                  ",\"steps\":", stats.steps(), "}}\n");
  return line;
}

// Submits every request, then polls until all are done (at most `timeout`).
absl::Status RunAll(net::RequestClient& client, const std::vector<proto::SubmitRequest>& submits,
                    absl::Duration timeout) {
  for (const proto::SubmitRequest& submit : submits) RETURN_IF_ERROR(client.Submit(submit));
  const absl::Time deadline = absl::Now() + timeout;
  for (const proto::SubmitRequest& submit : submits) {
    while (!client.Done(submit.request_id())) {
      if (absl::Now() >= deadline) {
        return absl::DeadlineExceededError(absl::StrCat(
            "request ", submit.request_id(), " took longer than ", absl::FormatDuration(timeout)));
      }
      RETURN_IF_ERROR(client.Poll(absl::Milliseconds(50)));
    }
  }
  return absl::OkStatus();
}

absl::Status RunGenerate(const GenerateFlags& f) {
  SetDefaultLogLevel(LogLevel::kWarning);  // the in-process services stay quiet
  // A one-rank target on a GPU joins a one-rank NCCL group (single_rank_model.h); with
  // --target-tp N the in-process group's ranks load their own shards.
  ASSIGN_OR_RETURN(
      target::SingleRankModel loaded,
      target::LoadSingleRankModel(
          f.target, {.threads = f.threads,
                     .device = f.device,
                     .cuda_graphs = f.cuda_graphs,
                     .kv_cache_type = f.kv_cache_type}));
  const std::unique_ptr<model::Transformer>& target = loaded.model;
  if (f.kv_cache_type != model::KvCacheType::kF16) {  // a different model: say so
    std::fprintf(stderr, "splitspec generate: target KV cache %s (%llu bytes per position)\n",
                 model::KvCacheTypeName(f.kv_cache_type),
                 static_cast<unsigned long long>(target->NewCache(1)->bytes_per_position()));
  }
  ASSIGN_OR_RETURN(model::Tokenizer tokenizer, model::LoadTokenizerFromGguf(target->file()));
  ASSIGN_OR_RETURN(std::unique_ptr<spec::Drafter> drafter,
                   spec::MakeDrafter(f.drafter, f.target, &tokenizer, target->config().vocab_size,
                                     f.draft_threads));
  if (const auto* cross = dynamic_cast<const spec::CrossVocabDrafter*>(drafter.get())) {
    std::fprintf(stderr, "splitspec generate: %s\n", cross->Describe().c_str());
  }
  std::vector<int32_t> prompt = f.prompt_ids;
  if (f.has_prompt_text) {
    prompt = tokenizer.Encode(f.prompt, {.add_special = true, .parse_special = true});
    if (prompt.empty()) return absl::InvalidArgumentError("--prompt encodes to no tokens");
  }
  if (!f.trace_path.empty()) Tracer::Global().Enable();
  InProcessClusterOptions options;
  options.target = target.get();
  options.drafter = drafter.get();
  options.target_tp = f.target_tp;
  // A target on a GPU verifies there (its probabilities never come to the host).
  if (f.device.is_cuda()) options.target_verify_device = f.device.ordinal;
  options.target_path = f.target;
  // Each rank gets an equal share of --threads (at least one).
  options.target_threads = std::max(1, target->num_threads() / f.target_tp);
  if (f.k > 0) options.draft_engine.default_k = f.k;
  options.draft_engine.lookahead_blocks = f.sequential ? 1 : 2;
  options.draft_engine.trees = f.trees;
  options.router.max_new_tokens = f.max_tokens;
  // --json-schema / --regex / --grammar / --choice: the target masks with this compiler, as
  // a target worker does (target_worker/main.cc).
  if (f.processors.has_grammar()) {
    ASSIGN_OR_RETURN(options.target_engine.grammar_compiler,
                     target::GrammarCompilerForModel(f.target, target->config().vocab_size));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<InProcessCluster> cluster, InProcessCluster::Start(options));
  ASSIGN_OR_RETURN(std::unique_ptr<net::RequestClient> client,
                   net::RequestClient::Connect(cluster->coordinator_endpoint()));

  proto::SubmitRequest submit;
  submit.mutable_prompt_tokens()->Assign(prompt.begin(), prompt.end());
  *submit.mutable_params() = f.params;
  RETURN_IF_ERROR(ApplyGuidance(f.guidance, tokenizer, submit.mutable_params()));
  RETURN_IF_ERROR(ApplyProcessors(f.processors, tokenizer.vocab_size(), submit.mutable_params()));
  submit.mutable_params()->set_max_tokens(static_cast<uint32_t>(f.max_tokens));
  if (!f.ignore_eos) {
    for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
      if (tokenizer.IsEndOfGeneration(id)) submit.mutable_params()->add_stop_token_ids(id);
    }
  }
  submit.set_verify_mode(f.verify);
  submit.set_drafter(f.drafter.name);
  submit.set_draft_k(static_cast<uint32_t>(f.k));
  ApplyLogprobs(f.choices, submit.mutable_params());
  for (int sample = 0; sample < f.samples; ++sample) {
    const uint64_t seed = f.params.seed() + static_cast<uint64_t>(sample);
    std::vector<proto::SubmitRequest> choices;
    for (int index = 0; index < f.choices.n; ++index) {
      submit.set_request_id(index == 0 ? absl::StrCat("generate-", sample)
                                       : absl::StrCat("generate-", sample, "#", index));
      submit.mutable_params()->set_seed(spec::ChoiceSeed(seed, index));
      choices.push_back(submit);
    }
    RETURN_IF_ERROR(RunAll(*client, choices, absl::Hours(1)));
    for (int index = 0; index < f.choices.n; ++index) {
      const net::GenerationResult& result = client->Result(choices[index].request_id());
      if (result.finish_reason == proto::FINISH_REASON_ERROR) {
        return absl::InternalError(absl::StrCat("generation failed: ", result.error));
      }
      std::vector<int32_t> ids = result.tokens;
      std::vector<proto::TokenLogprob> logprobs = result.logprobs;
      if (f.choices.logprobs.has_value() && logprobs.size() != ids.size()) {
        return absl::InternalError(absl::StrCat("the log probabilities of ",
                                                ids.size() - logprobs.size(), " tokens were lost"));
      }
      if (!f.ignore_eos && !ids.empty() && tokenizer.IsEndOfGeneration(ids.back())) {
        ids.pop_back();
        if (!logprobs.empty()) logprobs.pop_back();
      }
      ASSIGN_OR_RETURN(std::string text, tokenizer.Decode(ids));
      const std::string line = SampleLine(f, tokenizer, index, ids, text, logprobs, result.stats);
      std::fwrite(line.data(), 1, line.size(), stdout);
      std::fflush(stdout);
    }
  }
  if (!f.trace_path.empty()) RETURN_IF_ERROR(Tracer::Global().WriteChromeJson(f.trace_path));
  return absl::OkStatus();
}

}  // namespace

int RunGenerateCommand(const CommandArgs& args) {
  absl::StatusOr<GenerateFlags> flags = ParseFlags(args);
  if (!flags.ok()) {
    std::fprintf(stderr, "splitspec generate: %s\n", std::string(flags.status().message()).c_str());
    return 2;
  }
  absl::Status s = RunGenerate(*flags);
  if (s.ok()) return 0;
  std::fprintf(stderr, "splitspec generate: %s\n", std::string(s.message()).c_str());
  return 1;
}

}  // namespace splitspec::tools
