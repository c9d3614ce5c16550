// Workload files for `splitspec bench spec --workload FILE` (bench/workloads/):
// one request per line as JSON: a chat request,
//   {"category": "qa", "messages": [{"role": "user", "content": "..."}], "max_tokens": 96}
// or a completion (the prompt is the model's input as it stands, no chat template),
//   {"category": "code", "prompt": "def fib(n):", "max_tokens": 64}
// and the per-(category, configuration) totals the bench prints.
//
//   ASSIGN_OR_RETURN(std::vector<WorkloadRequest> requests, LoadWorkload("suite.jsonl"));
//   WorkloadTotals totals;
//   totals.Add("qa", "target-only", {.tokens = 96, .wall_seconds = 2.0});
//   for (const WorkloadRow& row : totals.Rows()) ...
//
// Rules of a line: an object; "category" a non-empty string; either "messages" a
// non-empty array of objects whose "role" is "system", "user" or "assistant"
// and whose "content" is a string, or "prompt" a non-empty string (not both);
// "max_tokens" an integer in [1, 4096]; "response_format" (chat only,
// optional) an object, kept as its JSON text for `bench serve` to send as it
// stands (e.g. {"type": "json_schema", "json_schema": {...}}); other
// fields are ignored; blank lines are skipped. A malformed line is refused with
// InvalidArgument "FILE:LINE: ..." naming the field at fault.
//
// Thread safety: functions are pure; WorkloadTotals is thread-compatible.
#ifndef SPLITSPEC_TOOLS_WORKLOAD_SUITE_H_
#define SPLITSPEC_TOOLS_WORKLOAD_SUITE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/grammar/grammar_spec.h"
#include "runtime/tokenizer/chat_template.h"

namespace splitspec::tools {

inline constexpr int kWorkloadMaxTokens = 4096;

struct WorkloadRequest {
  std::string category;
  std::vector<model::ChatMessage> messages;  // a chat request; empty for a completion
  std::string prompt;                        // a completion's prompt; empty for a chat request
  int max_tokens = 0;
  // The line's "response_format" exactly as written (property order kept: the order a
  // JSON-schema grammar generates them in); "" when absent.
  std::string response_format;
  int line = 0;  // 1-based line in its file
};

// One line; `file` and `line` only label errors.
absl::StatusOr<WorkloadRequest> ParseWorkloadLine(absl::string_view text, absl::string_view file,
                                                  int line);

// Every request of `contents` (the text of `file`), in file order.
absl::StatusOr<std::vector<WorkloadRequest>> ParseWorkload(absl::string_view contents,
                                                           absl::string_view file);

// The structured-output constraint of a request's response_format, read as the HTTP
// front door reads it (coordinator/http/openai_request.h); nullopt when it has none (or
// type "text"). Errors: InvalidArgument naming the line and the field at fault.
absl::StatusOr<std::optional<grammar::GrammarSpec>> ResponseFormatGrammar(
    const WorkloadRequest& request, absl::string_view file);

// Reads and parses `path`; NotFound naming it when unreadable, InvalidArgument
// when it holds no request.
absl::StatusOr<std::vector<WorkloadRequest>> LoadWorkload(const std::string& path);

// The first `limit` requests of each category (limit <= 0: all), in file order.
std::vector<WorkloadRequest> FirstPerCategory(const std::vector<WorkloadRequest>& requests,
                                              int limit);

// The measurements of one generation.
struct WorkloadRun {
  int64_t tokens = 0;         // generated
  double wall_seconds = 0.0;  // submit to last token
  int64_t verified = 0;       // draft tokens verified / accepted (speculative runs)
  int64_t accepted = 0;
  int64_t steps = 0;         // target steps (0: not reported)
  double cpu_seconds = 0.0;  // CPU time of every thread that served it
  int64_t tree_steps = 0;    // of the steps, blocks verified as trees (SpecStats.tree_steps)
};

// One (category, configuration) aggregate. Rates are over the sums (total
// tokens / total seconds), so long requests weigh by their length.
struct WorkloadRow {
  std::string category;
  std::string configuration;
  int requests = 0;
  double tok_s = 0.0;
  double ratio_to_target_only = 0.0;  // tok_s / the category's target-only tok_s; 0 without one
  double acceptance = 0.0;            // accepted / verified; 0 without verified tokens
  double tokens_per_step = 0.0;       // tokens / steps; 0 without steps
  // CPU milliseconds per token: unlike tok/s, barely moved by other processes'
  // load (preemption does not count), so configurations compare on a busy machine.
  double cpu_ms_per_token = 0.0;
  double tree_share = 0.0;  // tree steps / steps; 0 without steps
  // The lowest and highest ratio_to_target_only of any one pass over the workload
  // (bench spec --workload --rounds): the machine's noise beside the total's ratio.
  // Both equal ratio_to_target_only until SetRatioRanges is called.
  double ratio_low = 0.0;
  double ratio_high = 0.0;
};

inline constexpr char kTargetOnly[] = "target-only";

class WorkloadTotals {
 public:
  void Add(const std::string& category, const std::string& configuration, const WorkloadRun& run);

  // Categories in first-added order, configurations in first-added order within each.
  std::vector<WorkloadRow> Rows() const;

 private:
  struct Sum {
    int requests = 0;
    WorkloadRun run;
  };
  std::vector<std::string> categories_;
  std::vector<std::string> configurations_;
  std::map<std::pair<std::string, std::string>, Sum> sums_;
};

// Sets each row's ratio_low / ratio_high to the range of its ratio over `passes`
// (each the Rows() of one pass; a row absent from a pass is skipped there).
void SetRatioRanges(const std::vector<std::vector<WorkloadRow>>& passes,
                    std::vector<WorkloadRow>& rows);

// {"category":..,"configuration":..,"tok_s":..,"ratio_to_target_only":..,
//  "acceptance":..,"tokens_per_step":..} on one line.
std::string WorkloadRowJson(const WorkloadRow& row);

// A configuration run under classifier-free guidance is named "NAME cfg"
// ("target-only cfg", "ngram k=4 cfg").
inline constexpr char kGuidedSuffix[] = " cfg";

// Classifier-free guidance in one run, per category: what guidance costs the
// target alone, and what speculation gains under guidance.
struct GuidanceSummary {
  std::string category;
  double cost_tok_s_ratio = 0.0;             // tok/s of "target-only cfg" / of "target-only"
  double cost_cpu_ms_per_token_ratio = 0.0;  // cpu ms/tok of "target-only cfg" / of "target-only"
  // Each other "NAME cfg" configuration, in row order: its tok/s / "target-only cfg" tok/s.
  std::vector<std::pair<std::string, double>> speculation_gain;
};

// One summary per category (in row order) that holds both "target-only" and
// "target-only cfg" rows with positive tok/s; other categories are left out.
std::vector<GuidanceSummary> GuidanceSummaries(const std::vector<WorkloadRow>& rows);

// {"category":..,"guidance_scale":S,"cost":{"tok_s_ratio":..,"cpu_ms_per_token_ratio":..},
//  "speculation_gain":{"NAME cfg":..,..}} on one line (a cpu ratio without CPU
// time is 0).
std::string GuidanceSummaryJson(const GuidanceSummary& summary, double guidance_scale);

}  // namespace splitspec::tools

#endif  // SPLITSPEC_TOOLS_WORKLOAD_SUITE_H_
