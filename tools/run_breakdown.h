// Where a pipeline run's time went, read from the trace events the services record
// when the global tracer is on (runtime/base/trace.h): `bench spec --sim-grid`
// prints it per configuration beside the speedups.
//
//   Tracer::Global().Enable();  ... one generation (RunSpecGeneration clears the tracer) ...
//   RunBreakdown b = BreakdownFromTrace(Tracer::Global().Events());
//
// The events (one request per run, so block sequences identify blocks):
//   track "block":  "sent N" (draft: block N leaves), "received N" (target: block N
//                   is queued), span "verified N" (the target step that decided block N),
//                   "result N" (draft: the VerifyResult of block N is read), span
//                   "decided alone" (a step that decided a position without a block);
//   track "target": span "verify step" (every step); "target.phase": spans "forward",
//                   "rows", "verify", "resolve" (the parts of a step; only "forward"
//                   is summed here); "target.idle": span "wait" (the
//                   target waits while a request is active); "target.steps": span
//                   "undecided" (a step that decided nothing: a token fed alone, or a
//                   prompt chunk);
//   track "draft":  span "draft step" (blocks sent) or "pre-draft" (speculation cache);
//                   "draft.idle": span "wait";
//   track "sim":    span "late" (from when the sim drafter was due to finish to when it
//                   did: its sleep's wake-up latency).
// A block sent from the cache is sent in a draft step that did not propose for it;
// it shows as a short turnaround (result read -> next block sent).
//
// Thread safety: pure functions over a copy of the events.
#ifndef SPLITSPEC_TOOLS_RUN_BREAKDOWN_H_
#define SPLITSPEC_TOOLS_RUN_BREAKDOWN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/base/trace.h"

namespace splitspec::tools {

// Sums and counts (seconds), so that runs merge; the accessors give means.
struct RunBreakdown {
  struct Sum {
    double seconds = 0;
    int64_t count = 0;
    std::vector<double> values;  // every sample, for Median
    double Mean() const { return count > 0 ? seconds / static_cast<double>(count) : 0.0; }
    double Median() const;  // 0 if empty; robust to one slow step, where Mean is not
    void Add(double s) {
      seconds += s;
      ++count;
      values.push_back(s);
    }
    void Merge(const Sum& o) {
      seconds += o.seconds;
      count += o.count;
      values.insert(values.end(), o.values.begin(), o.values.end());
    }
  };
  // transit and queued leave out the first block, which waits for the prefill.
  Sum transit;      // per block: sent -> received (draft to target)
  Sum queued;       // per block: received -> the start of the step that decided it
  Sum verify;       // per block: the deciding step's duration
  Sum result_trip;  // per block: the deciding step's end -> its result read by the draft
  Sum turnaround;   // per result: read -> the draft's next block sent
  Sum steps;        // every target step
  Sum first_steps;  // the first target step of each run (its prompt's forward)
  Sum forward;      // the model's forwards within the target steps
  Sum undecided;    // target steps that decided nothing
  Sum alone;        // target steps that decided a position without a block
  Sum target_idle;  // the target's waits while a request was active
  Sum draft_steps;  // draft steps that sent blocks
  Sum pre_draft;    // draft steps that pre-drafted for the cache
  Sum draft_idle;   // the draft's waits while a request was active
  Sum sim_late;     // the sim drafter's wake-up latency, per Propose

  // Target steps after each run's first: a target-only run's decode steps (no values).
  Sum LaterSteps() const {
    return {steps.seconds - first_steps.seconds, steps.count - first_steps.count, {}};
  }

  void Merge(const RunBreakdown& o);
};

RunBreakdown BreakdownFromTrace(const std::vector<TraceEvent>& events);

// One line per configuration: means in ms, counts per decided block.
std::string FormatBreakdown(const RunBreakdown& b);

}  // namespace splitspec::tools

#endif  // SPLITSPEC_TOOLS_RUN_BREAKDOWN_H_
