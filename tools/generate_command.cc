// `splitspec generate --target PATH [--drafter none] [--prompt TEXT | --prompt-ids 1,2,3]
//                     [--max-tokens N] [--temperature 0] [--threads N] [--ignore-eos] [--json]`
//
// Target-only greedy decoding on the CPU transformer: prefill the prompt, then
// feed back the argmax (lowest id on ties) one token per step until an
// end-of-generation token (not printed, not in token_ids) or --max-tokens.
// --prompt TEXT is tokenized with the model's own tokenizer (BOS as the model
// asks, special-token text such as "<|im_start|>" parsed). With --json it prints
// one line {"token_ids":[...],"text":"...","stats":{"drafted":0,"verified":0,
// "accepted":0,"steps":N}} where steps counts target forward calls.
//
// Not implemented here (refused with a message): drafters other than "none",
// --draft, and temperature > 0 (sampling lives in runtime/spec).
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"
#include "runtime/model/tokenizer_gguf.h"
#include "runtime/model/transformer.h"
#include "tools/cli_args.h"
#include "tools/commands.h"

namespace splitspec::tools {
namespace {

struct GenerateFlags {
  std::string target;
  std::string prompt;
  std::vector<int32_t> prompt_ids;
  bool has_prompt_text = false;
  int max_tokens = 128;
  int threads = 0;
  bool ignore_eos = false;
  bool json = false;
};

absl::StatusOr<GenerateFlags> ParseFlags(const CommandArgs& argv) {
  ASSIGN_OR_RETURN(CliArgs args, CliArgs::Parse(argv,
                                                {"target", "draft", "drafter", "prompt",
                                                 "prompt-ids", "max-tokens", "temperature",
                                                 "threads"},
                                                {"json", "ignore-eos"}));
  GenerateFlags f;
  f.target = args.GetString("target", "");
  if (f.target.empty()) return absl::InvalidArgumentError("--target PATH is required");
  if (args.Has("draft")) {
    return absl::UnimplementedError("--draft is not implemented yet; use --drafter none");
  }
  const std::string drafter = args.GetString("drafter", "none");
  if (drafter != "none") {
    return absl::UnimplementedError(
        absl::StrCat("--drafter ", drafter, " is not implemented yet; only 'none' is"));
  }
  ASSIGN_OR_RETURN(double temperature, args.GetDouble("temperature", 0.0));
  if (temperature != 0.0) {
    return absl::UnimplementedError(absl::StrCat(
        "--temperature ", temperature, ": only greedy decoding (--temperature 0) is implemented"));
  }
  f.has_prompt_text = args.Has("prompt");
  f.prompt = args.GetString("prompt", "");
  ASSIGN_OR_RETURN(f.prompt_ids, args.GetIntList("prompt-ids"));
  if (f.has_prompt_text == !f.prompt_ids.empty()) {
    return absl::InvalidArgumentError("give exactly one of --prompt TEXT and --prompt-ids 1,2,3");
  }
  ASSIGN_OR_RETURN(int64_t max_tokens, args.GetInt("max-tokens", 128));
  ASSIGN_OR_RETURN(int64_t threads, args.GetInt("threads", 0));
  if (max_tokens < 1 || max_tokens > (1 << 20)) {
    return absl::InvalidArgumentError(absl::StrCat("--max-tokens ", max_tokens, " out of range"));
  }
  if (threads < 0 || threads > 1024) {
    return absl::InvalidArgumentError(absl::StrCat("--threads ", threads, " out of range"));
  }
  f.max_tokens = static_cast<int>(max_tokens);
  f.threads = static_cast<int>(threads);
  f.ignore_eos = args.Has("ignore-eos");
  f.json = args.Has("json");
  return f;
}

int32_t Argmax(const float* logits, int n) {
  int32_t best = 0;
  for (int i = 1; i < n; ++i) {
    if (logits[i] > logits[best]) best = i;
  }
  return best;
}

// Number of bytes of the valid UTF-8 sequence starting at s[i], or 0 if invalid.
size_t Utf8Length(const std::string& s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 0;
  }
  return n;
}

// A JSON string literal of `s`; bytes that are not valid UTF-8 become U+FFFD.
std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    const size_t n = Utf8Length(s, i);
    const auto c = static_cast<unsigned char>(s[i]);
    if (n == 0) {
      out += "\\ufffd";
      ++i;
      continue;
    }
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out.append(s, i, n);
    }
    i += n;
  }
  out.push_back('"');
  return out;
}

absl::Status RunGenerate(const GenerateFlags& f) {
  ASSIGN_OR_RETURN(std::unique_ptr<model::Transformer> target,
                   model::Transformer::Load(f.target, {.threads = f.threads}));
  ASSIGN_OR_RETURN(model::Tokenizer tokenizer, model::LoadTokenizerFromGguf(target->file()));
  std::vector<int32_t> prompt = f.prompt_ids;
  if (f.has_prompt_text) {
    prompt = tokenizer.Encode(f.prompt, {.add_special = true, .parse_special = true});
    if (prompt.empty()) return absl::InvalidArgumentError("--prompt encodes to no tokens");
  }
  const int64_t needed = static_cast<int64_t>(prompt.size()) + f.max_tokens;
  if (needed > target->config().context_length) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prompt (", prompt.size(), " tokens) + --max-tokens ", f.max_tokens,
        " exceeds the model's context of ", target->config().context_length));
  }
  std::unique_ptr<model::KvCache> cache = target->NewCache(static_cast<int>(needed));
  std::vector<int32_t> generated;
  int steps = 0;
  model::ForwardOutput out;
  std::vector<int32_t> input = prompt;
  for (;;) {
    RETURN_IF_ERROR(target->Forward({{cache.get(), input, model::LogitsMode::kLast}}, &out));
    ++steps;
    const int32_t next = Argmax(out.Row(0, 0), out.vocab_size);
    if (!f.ignore_eos && tokenizer.IsEndOfGeneration(next)) break;
    generated.push_back(next);
    if (static_cast<int>(generated.size()) >= f.max_tokens) break;
    input.assign(1, next);
  }
  ASSIGN_OR_RETURN(std::string text, tokenizer.Decode(generated));
  std::string line;
  if (f.json) {
    line = "{\"token_ids\":[";
    for (size_t i = 0; i < generated.size(); ++i) {
      absl::StrAppend(&line, i > 0 ? "," : "", generated[i]);
    }
    absl::StrAppend(&line, "],\"text\":", JsonString(text),
                    ",\"stats\":{\"drafted\":0,\"verified\":0,\"accepted\":0,\"steps\":", steps,
                    "}}\n");
  } else {
    line = text + "\n";
  }
  std::fwrite(line.data(), 1, line.size(), stdout);
  return absl::OkStatus();
}

}  // namespace

int RunGenerateCommand(const CommandArgs& args) {
  absl::StatusOr<GenerateFlags> flags = ParseFlags(args);
  if (!flags.ok()) {
    std::fprintf(stderr, "splitspec generate: %s\n",
                 std::string(flags.status().message()).c_str());
    return 2;
  }
  absl::Status s = RunGenerate(*flags);
  if (s.ok()) return 0;
  std::fprintf(stderr, "splitspec generate: %s\n", std::string(s.message()).c_str());
  return 1;
}

}  // namespace splitspec::tools
