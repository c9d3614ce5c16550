#include "tools/run_breakdown.h"

#include <algorithm>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "tools/median.h"

namespace splitspec::tools {
namespace {

// "PREFIX N" -> N; 0 if `name` is not of that form.
uint64_t SequenceAfter(absl::string_view name, absl::string_view prefix) {
  uint64_t sequence = 0;
  if (!absl::ConsumePrefix(&name, prefix)) return 0;
  return absl::SimpleAtoi(name, &sequence) ? sequence : 0;
}

double Seconds(absl::Time start, absl::Time end) { return absl::ToDoubleSeconds(end - start); }

struct BlockTimes {
  absl::Time sent = absl::InfinitePast(), received = absl::InfinitePast();
  absl::Time verify_start = absl::InfinitePast(), verify_end = absl::InfinitePast();
  absl::Time result = absl::InfinitePast();
};

bool Known(absl::Time t) { return t != absl::InfinitePast(); }

}  // namespace

double RunBreakdown::Sum::Median() const { return tools::Median(values); }

void RunBreakdown::Merge(const RunBreakdown& o) {
  for (auto [mine, theirs] : {std::pair{&transit, &o.transit},
                              {&queued, &o.queued},
                              {&verify, &o.verify},
                              {&result_trip, &o.result_trip},
                              {&turnaround, &o.turnaround},
                              {&steps, &o.steps},
                              {&forward, &o.forward},
                              {&first_steps, &o.first_steps},
                              {&undecided, &o.undecided},
                              {&alone, &o.alone},
                              {&target_idle, &o.target_idle},
                              {&draft_steps, &o.draft_steps},
                              {&pre_draft, &o.pre_draft},
                              {&draft_idle, &o.draft_idle},
                              {&sim_late, &o.sim_late}}) {
    mine->Merge(*theirs);
  }
}

RunBreakdown BreakdownFromTrace(const std::vector<TraceEvent>& events) {
  RunBreakdown b;
  std::map<uint64_t, BlockTimes> blocks;
  std::vector<absl::Time> sends;
  absl::Time first_step_start = absl::InfinitePast();
  double first_step = 0;
  for (const TraceEvent& e : events) {
    const double span = Seconds(e.start, e.end);
    if (e.track == "block") {
      if (uint64_t n = SequenceAfter(e.name, "sent "); n > 0) {
        blocks[n].sent = e.start;
        sends.push_back(e.start);
      } else if (uint64_t n = SequenceAfter(e.name, "received "); n > 0) {
        blocks[n].received = e.start;
      } else if (uint64_t n = SequenceAfter(e.name, "verified "); n > 0) {
        blocks[n].verify_start = e.start;
        blocks[n].verify_end = e.end;
      } else if (uint64_t n = SequenceAfter(e.name, "result "); n > 0) {
        blocks[n].result = e.start;
      } else if (e.name == "decided alone") {
        b.alone.Add(span);
      }
    } else if (e.track == "target") {
      b.steps.Add(span);
      if (!Known(first_step_start) || e.start < first_step_start) {
        first_step_start = e.start;
        first_step = span;
      }
    } else if (e.track == "target.phase" && e.name == "forward") {
      b.forward.Add(span);
    } else if (e.track == "target.idle") {
      b.target_idle.Add(span);
    } else if (e.track == "target.steps") {
      b.undecided.Add(span);
    } else if (e.track == "draft") {
      (e.name == "pre-draft" ? b.pre_draft : b.draft_steps).Add(span);
    } else if (e.track == "draft.idle") {
      b.draft_idle.Add(span);
    } else if (e.track == "sim") {
      b.sim_late.Add(span);
    }
  }
  if (Known(first_step_start)) b.first_steps.Add(first_step);
  std::sort(sends.begin(), sends.end());
  for (const auto& [sequence, t] : blocks) {
    // The first block is sent during the prefill and waits for it: not a block's cost.
    const bool first = sequence == blocks.begin()->first;
    if (!first && Known(t.sent) && Known(t.received)) b.transit.Add(Seconds(t.sent, t.received));
    if (!Known(t.verify_start)) continue;  // stale: never decided
    if (!first && Known(t.received)) b.queued.Add(Seconds(t.received, t.verify_start));
    b.verify.Add(Seconds(t.verify_start, t.verify_end));
    if (!Known(t.result)) continue;
    b.result_trip.Add(Seconds(t.verify_end, t.result));
    auto next = std::lower_bound(sends.begin(), sends.end(), t.result);
    if (next != sends.end()) b.turnaround.Add(Seconds(t.result, *next));
  }
  return b;
}

std::string FormatBreakdown(const RunBreakdown& b) {
  const double blocks = static_cast<double>(std::max<int64_t>(1, b.verify.count));
  auto ms = [](const RunBreakdown::Sum& s) { return 1e3 * s.Mean(); };
  auto per_block = [&](const RunBreakdown::Sum& s) {
    return static_cast<double>(s.count) / blocks;
  };
  auto ms_per_block = [&](const RunBreakdown::Sum& s) { return 1e3 * s.seconds / blocks; };
  return absl::StrFormat(
      "blocks %d: transit %.3f, queued %.3f, verify %.2f, result trip %.3f, turnaround %.2f ms; "
      "per block: target steps %.2f x %.2f ms (forward %.2f ms; undecided %.2f x %.2f ms, alone "
      "%.2f), target idle %.2f ms "
      "(%.2f waits), draft steps %.2f x %.2f ms, pre-draft %.2f x %.2f ms, draft idle %.2f ms, "
      "sim late %.3f ms x %.2f",
      b.verify.count, ms(b.transit), ms(b.queued), ms(b.verify), ms(b.result_trip),
      ms(b.turnaround), per_block(b.steps), ms(b.steps), ms(b.forward), per_block(b.undecided),
      ms(b.undecided), per_block(b.alone), ms_per_block(b.target_idle), per_block(b.target_idle),
      per_block(b.draft_steps), ms(b.draft_steps), per_block(b.pre_draft), ms(b.pre_draft),
      ms_per_block(b.draft_idle), ms(b.sim_late), per_block(b.sim_late));
}

}  // namespace splitspec::tools
