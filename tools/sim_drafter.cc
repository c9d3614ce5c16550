#include "tools/sim_drafter.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "runtime/base/trace.h"

namespace splitspec::tools {

bool IsSimDrafterName(absl::string_view name) { return absl::StartsWith(name, kSimDrafterPrefix); }

absl::StatusOr<SimDrafterParams> ParseSimDrafterName(absl::string_view name) {
  absl::string_view rest = name;
  if (!absl::ConsumePrefix(&rest, kSimDrafterPrefix)) {
    return absl::InvalidArgumentError(absl::StrCat("drafter '", name, "' is not sim:..."));
  }
  SimDrafterParams params;
  bool has_alpha = false, has_ratio = false;
  for (absl::string_view part : absl::StrSplit(rest, ',')) {
    const std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(part, absl::MaxSplits('=', 1));
    double value = 0;
    if (!absl::SimpleAtod(kv.second, &value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("drafter '", name, "': '", part, "' is not KEY=NUMBER (alpha=A,ratio=C)"));
    }
    bool* seen = kv.first == "alpha" ? &has_alpha : kv.first == "ratio" ? &has_ratio : nullptr;
    if (seen == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("drafter '", name, "': unknown key '",
                                                     kv.first, "' (expected alpha and ratio)"));
    }
    if (*seen) {
      return absl::InvalidArgumentError(
          absl::StrCat("drafter '", name, "': '", kv.first, "' given twice"));
    }
    *seen = true;
    (kv.first == "alpha" ? params.alpha : params.cost_ratio) = value;
  }
  if (!has_alpha || !has_ratio) {
    return absl::InvalidArgumentError(absl::StrCat(
        "drafter '", name, "': needs both alpha=A and ratio=C (e.g. sim:alpha=0.8,ratio=10)"));
  }
  if (!(params.alpha >= 0.0 && params.alpha <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("drafter '", name, "': alpha must be in [0, 1]"));
  }
  if (!(params.cost_ratio > 0.0) || !std::isfinite(params.cost_ratio)) {
    return absl::InvalidArgumentError(
        absl::StrCat("drafter '", name, "': ratio must be finite and > 0"));
  }
  return params;
}

std::string SimDrafterName(const SimDrafterParams& params) {
  return absl::StrFormat("sim:alpha=%g,ratio=%g", params.alpha, params.cost_ratio);
}

std::vector<std::string> SplitDrafterList(absl::string_view list) {
  std::vector<std::string> drafters;
  for (absl::string_view piece : absl::StrSplit(list, ',', absl::SkipEmpty())) {
    const size_t eq = piece.find('=');
    const bool continues =
        eq != absl::string_view::npos && piece.substr(0, eq).find(':') == absl::string_view::npos;
    if (continues && !drafters.empty()) {
      absl::StrAppend(&drafters.back(), ",", piece);
    } else {
      drafters.emplace_back(piece);
    }
  }
  return drafters;
}

SimDrafter::SimDrafter(SimDrafterParams params, std::vector<int32_t> reference, int vocab_size,
                       absl::Duration target_step, uint64_t seed)
    : params_(params),
      name_(SimDrafterName(params)),
      reference_(std::move(reference)),
      vocab_size_(vocab_size),
      per_token_(target_step / params.cost_ratio),
      rng_(seed),
      correct_(params.alpha) {}

absl::Status SimDrafter::Start(const std::string& request_id, absl::Span<const int32_t> tokens) {
  if (held_.contains(request_id)) {
    return absl::AlreadyExistsError(
        absl::StrCat(name_, ": request '", request_id, "' already started"));
  }
  const bool prefix = tokens.size() <= reference_.size() &&
                      std::equal(tokens.begin(), tokens.end(), reference_.begin());
  if (!prefix) {
    return absl::InvalidArgumentError(
        absl::StrCat(name_, ": request '", request_id, "' (", tokens.size(),
                     " tokens) is not a prefix of the reference it was built for (",
                     reference_.size(), " tokens)"));
  }
  held_[request_id] = static_cast<int64_t>(tokens.size());
  return absl::OkStatus();
}

absl::Status SimDrafter::Truncate(const std::string& request_id, int64_t length) {
  auto it = held_.find(request_id);
  if (it == held_.end()) {
    return absl::NotFoundError(absl::StrCat(name_, ": unknown request '", request_id, "'"));
  }
  if (length < 0 || length > it->second) {
    return absl::OutOfRangeError(absl::StrCat(name_, ": cannot truncate request '", request_id,
                                              "' to ", length, " tokens, it holds ", it->second));
  }
  it->second = length;
  return absl::OkStatus();
}

spec::SparseDistribution SimDrafter::Alternatives(int32_t right, bool drafted_right,
                                                  const spec::DraftRequest& request) {
  const int size = std::min(request.alternatives, vocab_size_);
  // The rank of the right token in the row: 0 if the draft was right, else each
  // later rank holds it with probability alpha; `size` = not in the row.
  int right_rank = 0;
  if (!drafted_right) {
    right_rank = 1;
    while (right_rank < size && !correct_(rng_)) ++right_rank;
  }
  spec::SparseDistribution row;
  double total = 0;
  int wrong = 0;  // wrong tokens placed so far; the drafted wrong token is right + 1
  for (int rank = 0; rank < size; ++rank) {
    row.token_ids.push_back(rank == right_rank ? right : (right + 1 + wrong++) % vocab_size_);
    const double p = params_.alpha * std::pow(1.0 - params_.alpha, rank);
    row.probs.push_back(static_cast<float>(p));
    total += p;
  }
  for (float& p : row.probs) {
    p = total > 0 ? static_cast<float>(p / total) : 1.0f / static_cast<float>(size);
  }
  return row;
}

absl::Status SimDrafter::Propose(absl::Span<spec::DraftRequest> batch) {
  const absl::Time start = absl::Now();
  int64_t drafted = 0;
  for (spec::DraftRequest& request : batch) {
    request.tokens.clear();
    request.parents.clear();  // a chain
    request.q.clear();
    request.top.clear();
    request.status = absl::OkStatus();
    auto it = held_.find(request.request_id);
    if (it == held_.end()) {
      request.status =
          absl::NotFoundError(absl::StrCat(name_, ": unknown request '", request.request_id, "'"));
      continue;
    }
    if (request.mode != spec::VerifyMode::kGreedy) {
      request.status = absl::FailedPreconditionError(absl::StrCat(
          name_, ": request '", request.request_id, "' verifies in ",
          spec::VerifyModeName(request.mode), " mode; the simulated drafter is greedy-only"));
      continue;
    }
    const int64_t n = static_cast<int64_t>(request.context.size());
    if (n < it->second || request.k < 0) {
      request.status = absl::InvalidArgumentError(
          absl::StrCat(name_, ": request '", request.request_id, "': context of ", n, " tokens, k ",
                       request.k, ", the drafter holds ", it->second));
      continue;
    }
    for (int i = 0; i < request.k; ++i) {
      const int64_t position = n + i;
      const int32_t right =
          position < static_cast<int64_t>(reference_.size()) ? reference_[position] : 0;
      const bool correct = correct_(rng_);
      request.tokens.push_back(correct ? right : (right + 1) % vocab_size_);
      proposed_correct_ += correct ? 1 : 0;
      if (request.alternatives > 0) request.top.push_back(Alternatives(right, correct, request));
    }
    proposed_ += request.k;
    drafted += request.k;
    it->second = n + request.k;
  }
  // The simulated device's time: waited, not computed.
  const absl::Time due = start + per_token_ * drafted;
  const absl::Duration remaining = due - absl::Now();
  if (remaining > absl::ZeroDuration()) absl::SleepFor(remaining);
  // How late the simulated device finished (the sleep's wake-up latency).
  if (Tracer::Global().enabled()) Tracer::Global().Record("sim", "late", due, absl::Now());
  return absl::OkStatus();
}

}  // namespace splitspec::tools
