#include "tools/workload_suite.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "coordinator/http/json_guard.h"
#include "coordinator/http/openai_request.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "runtime/base/json_string.h"

namespace splitspec::tools {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

const Value* Find(const Struct& object, const std::string& name) {
  auto it = object.fields().find(name);
  return it == object.fields().end() ? nullptr : &it->second;
}

absl::StatusOr<std::string> StringField(const Struct& object, const std::string& name,
                                        const std::string& label, const std::string& at) {
  const Value* value = Find(object, name);
  if (value == nullptr)
    return absl::InvalidArgumentError(absl::StrCat(at, "missing field '", label, "'"));
  if (value->kind_case() != Value::kStringValue) {
    return absl::InvalidArgumentError(absl::StrCat(at, "field '", label, "' must be a string"));
  }
  return value->string_value();
}

absl::StatusOr<model::ChatMessage> ParseMessage(const Value& value, int index,
                                                const std::string& at) {
  const std::string label = absl::StrCat("messages[", index, "]");
  if (value.kind_case() != Value::kStructValue) {
    return absl::InvalidArgumentError(absl::StrCat(at, "field '", label, "' must be an object"));
  }
  model::ChatMessage message;
  absl::StatusOr<std::string> role = StringField(value.struct_value(), "role", label + ".role", at);
  if (!role.ok()) return role.status();
  if (*role != "system" && *role != "user" && *role != "assistant") {
    return absl::InvalidArgumentError(absl::StrCat(
        at, "field '", label, ".role' must be system, user or assistant, got '", *role, "'"));
  }
  absl::StatusOr<std::string> content =
      StringField(value.struct_value(), "content", label + ".content", at);
  if (!content.ok()) return content.status();
  message.role = *std::move(role);
  message.content = *std::move(content);
  return message;
}

absl::StatusOr<int> ParseMaxTokens(const Struct& object, const std::string& at) {
  const Value* value = Find(object, "max_tokens");
  if (value == nullptr)
    return absl::InvalidArgumentError(absl::StrCat(at, "missing field 'max_tokens'"));
  const double number = value->number_value();
  if (value->kind_case() != Value::kNumberValue || std::floor(number) != number || number < 1 ||
      number > kWorkloadMaxTokens) {
    return absl::InvalidArgumentError(
        absl::StrCat(at, "field 'max_tokens' must be an integer in [1, ", kWorkloadMaxTokens, "]"));
  }
  return static_cast<int>(number);
}

}  // namespace

absl::StatusOr<WorkloadRequest> ParseWorkloadLine(absl::string_view text, absl::string_view file,
                                                  int line) {
  const std::string at = absl::StrCat(file, ":", line, ": ");
  Value root;
  const auto parsed = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(text.data(), text.size()), &root);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(at, "not a JSON object: ", std::string(parsed.message())));
  }
  if (root.kind_case() != Value::kStructValue)
    return absl::InvalidArgumentError(absl::StrCat(at, "not a JSON object"));
  const Struct& object = root.struct_value();
  WorkloadRequest request;
  request.line = line;
  absl::StatusOr<std::string> category = StringField(object, "category", "category", at);
  if (!category.ok()) return category.status();
  if (category->empty())
    return absl::InvalidArgumentError(absl::StrCat(at, "field 'category' is empty"));
  request.category = *std::move(category);
  const Value* messages = Find(object, "messages");
  const Value* prompt = Find(object, "prompt");
  if (messages != nullptr && prompt != nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(at, "give one of 'messages' (chat) and 'prompt' (completion), not both"));
  }
  if (prompt != nullptr) {
    absl::StatusOr<std::string> text = StringField(object, "prompt", "prompt", at);
    if (!text.ok()) return text.status();
    if (text->empty())
      return absl::InvalidArgumentError(absl::StrCat(at, "field 'prompt' is empty"));
    request.prompt = *std::move(text);
  } else {
    if (messages == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(at, "missing field 'messages' (a chat request) or 'prompt' (a completion)"));
    }
    if (messages->kind_case() != Value::kListValue || messages->list_value().values_size() == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(at, "field 'messages' must be a non-empty array"));
    }
    for (int i = 0; i < messages->list_value().values_size(); ++i) {
      absl::StatusOr<model::ChatMessage> message =
          ParseMessage(messages->list_value().values(i), i, at);
      if (!message.ok()) return message.status();
      request.messages.push_back(*std::move(message));
    }
  }
  absl::StatusOr<int> max_tokens = ParseMaxTokens(object, at);
  if (!max_tokens.ok()) return max_tokens.status();
  request.max_tokens = *max_tokens;
  if (const Value* format = Find(object, "response_format");
      format != nullptr && format->kind_case() != Value::kNullValue) {
    if (format->kind_case() != Value::kStructValue || request.messages.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(at, "field 'response_format' must be an object, on a chat request"));
    }
    // The text as written: protobuf's Struct forgets the order of properties.
    const absl::Status strict = coordinator::http::CheckJsonText(text);
    const std::optional<absl::string_view> raw =
        strict.ok() ? coordinator::http::RawJsonValue(text, {"response_format"}) : std::nullopt;
    if (!raw.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat(at, "field 'response_format' cannot be read back from the line",
                       strict.ok() ? "" : absl::StrCat(": ", strict.message())));
    }
    request.response_format = std::string(*raw);
  }
  return request;
}

absl::StatusOr<std::optional<grammar::GrammarSpec>> ResponseFormatGrammar(
    const WorkloadRequest& request, absl::string_view file) {
  if (request.response_format.empty()) return std::nullopt;
  absl::StatusOr<coordinator::http::CompletionRequest> parsed =
      coordinator::http::ParseCompletionRequest(
          absl::StrCat(R"({"messages":[{"role":"user","content":"x"}],"response_format":)",
                       request.response_format, "}"),
          coordinator::http::CompletionRequest::kChat);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ":", request.line, ": ", parsed.status().message()));
  }
  return parsed->grammar;
}

absl::StatusOr<std::vector<WorkloadRequest>> ParseWorkload(absl::string_view contents,
                                                           absl::string_view file) {
  std::vector<WorkloadRequest> requests;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(contents, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    absl::StatusOr<WorkloadRequest> request = ParseWorkloadLine(line, file, line_number);
    if (!request.ok()) return request.status();
    requests.push_back(*std::move(request));
  }
  return requests;
}

absl::StatusOr<std::vector<WorkloadRequest>> LoadWorkload(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read workload file ", path));
  std::stringstream contents;
  contents << in.rdbuf();
  absl::StatusOr<std::vector<WorkloadRequest>> requests = ParseWorkload(contents.str(), path);
  if (requests.ok() && requests->empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": no requests (one JSON object per line)"));
  }
  return requests;
}

std::vector<WorkloadRequest> FirstPerCategory(const std::vector<WorkloadRequest>& requests,
                                              int limit) {
  absl::flat_hash_map<std::string, int> taken;
  std::vector<WorkloadRequest> kept;
  for (const WorkloadRequest& request : requests) {
    if (limit > 0 && taken[request.category]++ >= limit) continue;
    kept.push_back(request);
  }
  return kept;
}

void WorkloadTotals::Add(const std::string& category, const std::string& configuration,
                         const WorkloadRun& run) {
  if (std::find(categories_.begin(), categories_.end(), category) == categories_.end()) {
    categories_.push_back(category);
  }
  if (std::find(configurations_.begin(), configurations_.end(), configuration) ==
      configurations_.end()) {
    configurations_.push_back(configuration);
  }
  Sum& sum = sums_[{category, configuration}];
  ++sum.requests;
  sum.run.tokens += run.tokens;
  sum.run.wall_seconds += run.wall_seconds;
  sum.run.verified += run.verified;
  sum.run.accepted += run.accepted;
  sum.run.steps += run.steps;
  sum.run.cpu_seconds += run.cpu_seconds;
  sum.run.tree_steps += run.tree_steps;
}

std::vector<WorkloadRow> WorkloadTotals::Rows() const {
  std::vector<WorkloadRow> rows;
  for (const std::string& category : categories_) {
    auto baseline = sums_.find({category, kTargetOnly});
    const double baseline_tok_s =
        baseline != sums_.end() && baseline->second.run.wall_seconds > 0
            ? baseline->second.run.tokens / baseline->second.run.wall_seconds
            : 0.0;
    for (const std::string& configuration : configurations_) {
      auto it = sums_.find({category, configuration});
      if (it == sums_.end()) continue;
      const WorkloadRun& run = it->second.run;
      WorkloadRow row{
          .category = category, .configuration = configuration, .requests = it->second.requests};
      row.tok_s = run.wall_seconds > 0 ? run.tokens / run.wall_seconds : 0.0;
      row.ratio_to_target_only = baseline_tok_s > 0 ? row.tok_s / baseline_tok_s : 0.0;
      row.acceptance = run.verified > 0 ? static_cast<double>(run.accepted) / run.verified : 0.0;
      row.tokens_per_step = run.steps > 0 ? static_cast<double>(run.tokens) / run.steps : 0.0;
      row.cpu_ms_per_token = run.tokens > 0 ? 1e3 * run.cpu_seconds / run.tokens : 0.0;
      row.tree_share = run.steps > 0 ? static_cast<double>(run.tree_steps) / run.steps : 0.0;
      row.ratio_low = row.ratio_high = row.ratio_to_target_only;
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

void SetRatioRanges(const std::vector<std::vector<WorkloadRow>>& passes,
                    std::vector<WorkloadRow>& rows) {
  for (WorkloadRow& row : rows) {
    bool seen = false;
    for (const std::vector<WorkloadRow>& pass : passes) {
      for (const WorkloadRow& p : pass) {
        if (p.category != row.category || p.configuration != row.configuration) continue;
        row.ratio_low =
            seen ? std::min(row.ratio_low, p.ratio_to_target_only) : p.ratio_to_target_only;
        row.ratio_high =
            seen ? std::max(row.ratio_high, p.ratio_to_target_only) : p.ratio_to_target_only;
        seen = true;
      }
    }
  }
}

std::string WorkloadRowJson(const WorkloadRow& row) {
  return absl::StrFormat(
      "{\"category\":%s,\"configuration\":%s,\"tok_s\":%.3f,\"ratio_to_target_only\":%.4f,"
      "\"ratio_low\":%.4f,\"ratio_high\":%.4f,"
      "\"acceptance\":%.4f,\"tokens_per_step\":%.4f,\"tree_share\":%.4f}",
      JsonQuote(row.category), JsonQuote(row.configuration), row.tok_s, row.ratio_to_target_only,
      row.ratio_low, row.ratio_high, row.acceptance, row.tokens_per_step, row.tree_share);
}

std::vector<GuidanceSummary> GuidanceSummaries(const std::vector<WorkloadRow>& rows) {
  const std::string guided_baseline = absl::StrCat(kTargetOnly, kGuidedSuffix);
  std::vector<std::string> categories;
  for (const WorkloadRow& row : rows) {
    if (std::find(categories.begin(), categories.end(), row.category) == categories.end())
      categories.push_back(row.category);
  }
  std::vector<GuidanceSummary> summaries;
  for (const std::string& category : categories) {
    const WorkloadRow* plain = nullptr;
    const WorkloadRow* guided = nullptr;
    for (const WorkloadRow& row : rows) {
      if (row.category != category) continue;
      if (row.configuration == kTargetOnly) plain = &row;
      if (row.configuration == guided_baseline) guided = &row;
    }
    if (plain == nullptr || guided == nullptr || plain->tok_s <= 0 || guided->tok_s <= 0) continue;
    GuidanceSummary summary;
    summary.category = category;
    summary.cost_tok_s_ratio = guided->tok_s / plain->tok_s;
    if (plain->cpu_ms_per_token > 0)
      summary.cost_cpu_ms_per_token_ratio = guided->cpu_ms_per_token / plain->cpu_ms_per_token;
    for (const WorkloadRow& row : rows) {
      if (row.category != category || row.configuration == guided_baseline ||
          !absl::EndsWith(row.configuration, kGuidedSuffix)) {
        continue;
      }
      summary.speculation_gain.emplace_back(row.configuration, row.tok_s / guided->tok_s);
    }
    summaries.push_back(std::move(summary));
  }
  return summaries;
}

std::string GuidanceSummaryJson(const GuidanceSummary& summary, double guidance_scale) {
  std::string gains;
  for (const auto& [configuration, gain] : summary.speculation_gain) {
    absl::StrAppend(&gains, gains.empty() ? "" : ",", JsonQuote(configuration),
                    absl::StrFormat(":%.4f", gain));
  }
  return absl::StrFormat(
      "{\"category\":%s,\"guidance_scale\":%.4g,\"cost\":{\"tok_s_ratio\":%.4f,"
      "\"cpu_ms_per_token_ratio\":%.4f},\"speculation_gain\":{%s}}",
      JsonQuote(summary.category), guidance_scale, summary.cost_tok_s_ratio,
      summary.cost_cpu_ms_per_token_ratio, gains);
}

}  // namespace splitspec::tools
