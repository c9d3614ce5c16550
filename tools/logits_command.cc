// `splitspec logits --model PATH --prompt-ids 1,2,3 [--threads N] [--all-positions]`
//
// Runs the prompt through the model in one forward call and prints the logits of
// the last position as one JSON line: {"logits":[...]} (vocab floats, printed
// with 9 significant digits so they round-trip exactly). With --all-positions it
// prints {"logits":[[...], ...]}, one row per prompt position (row i is the
// next-token distribution after token i), for reference checks.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"
#include "runtime/model/transformer.h"
#include "tools/commands.h"

namespace splitspec::tools {
namespace {

void AppendRow(const float* row, int n, std::string& out) {
  out.push_back('[');
  char buf[32];
  for (int i = 0; i < n; ++i) {
    if (i > 0) out.push_back(',');
    std::snprintf(buf, sizeof(buf), "%.9g", row[i]);
    out.append(buf);
  }
  out.push_back(']');
}

struct LogitsFlags {
  std::string model;
  std::vector<int32_t> ids;
  int threads = 0;
  bool all_positions = false;
};

absl::StatusOr<LogitsFlags> ParseFlags(const CommandArgs& argv) {
  ASSIGN_OR_RETURN(CliArgs args, CliArgs::Parse(argv, LogitsFlagTable()));
  LogitsFlags flags;
  flags.model = args.GetString("model", "");
  if (flags.model.empty()) return absl::InvalidArgumentError("--model PATH is required");
  ASSIGN_OR_RETURN(flags.ids, args.GetIntList("prompt-ids"));
  if (flags.ids.empty()) {
    return absl::InvalidArgumentError("--prompt-ids 1,2,3 is required (non-empty)");
  }
  ASSIGN_OR_RETURN(int threads, args.GetInt<int>("threads", 0));
  if (threads < 0 || threads > 1024) {
    return absl::InvalidArgumentError(absl::StrCat("--threads ", threads, " out of range"));
  }
  flags.threads = static_cast<int>(threads);
  flags.all_positions = args.Has("all-positions");
  return flags;
}

absl::Status RunLogits(const LogitsFlags& flags) {
  ASSIGN_OR_RETURN(std::unique_ptr<model::Transformer> model,
                   model::Transformer::Load(flags.model, {.threads = flags.threads}));
  std::unique_ptr<model::KvCache> cache = model->NewCache(static_cast<int>(flags.ids.size()));
  model::ForwardOutput out;
  const model::LogitsMode mode =
      flags.all_positions ? model::LogitsMode::kAll : model::LogitsMode::kLast;
  RETURN_IF_ERROR(model->Forward({{cache.get(), flags.ids, mode}}, &out));
  std::string json = "{\"logits\":";
  if (flags.all_positions) {
    json.push_back('[');
    for (int j = 0; j < out.num_rows[0]; ++j) {
      if (j > 0) json.push_back(',');
      AppendRow(out.Row(0, j), out.vocab_size, json);
    }
    json.push_back(']');
  } else {
    AppendRow(out.Row(0, 0), out.vocab_size, json);
  }
  json.append("}\n");
  std::fwrite(json.data(), 1, json.size(), stdout);
  return absl::OkStatus();
}

}  // namespace

int RunLogitsCommand(const CommandArgs& args) {
  absl::StatusOr<LogitsFlags> flags = ParseFlags(args);
  if (!flags.ok()) {
    std::fprintf(stderr, "splitspec logits: %s\n", std::string(flags.status().message()).c_str());
    return 2;
  }
  absl::Status s = RunLogits(*flags);
  if (s.ok()) return 0;
  std::fprintf(stderr, "splitspec logits: %s\n", std::string(s.message()).c_str());
  return 1;
}

}  // namespace splitspec::tools
