// Chrome trace-event recording of busy intervals (chrome://tracing, Perfetto).
//
//   Tracer::Global().Enable();
//   { ScopedTrace span("target", "verify step"); ... }   // one "X" event on track "target"
//   RETURN_IF_ERROR(Tracer::Global().WriteChromeJson("trace.json"));
//
// Disabled by default; a disabled ScopedTrace costs one relaxed atomic load.
// Instants (start == end) mark points such as a block's arrival; `bench spec`
// reads the events back (Events) to say where a run's time went.
// Thread-safe: spans from any thread are appended under a mutex.
#ifndef SPLITSPEC_RUNTIME_BASE_TRACE_H_
#define SPLITSPEC_RUNTIME_BASE_TRACE_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "runtime/base/mutex.h"

namespace splitspec {

struct TraceEvent {
  std::string track;
  std::string name;
  absl::Time start;
  absl::Time end;  // == start for an instant
};

class Tracer {
 public:
  static Tracer& Global();

  void Enable() { enabled_.store(true, std::memory_order_relaxed); }
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }

  // Records a complete event on `track` (one row in the viewer).
  void Record(const std::string& track, const std::string& name, absl::Time start, absl::Time end);
  // Records an instant (a zero-length event) at `at`.
  void Mark(const std::string& track, const std::string& name, absl::Time at) {
    Record(track, name, at, at);
  }
  // A copy of every event recorded since the last Clear, in recording order.
  std::vector<TraceEvent> Events() const;

  // Writes every recorded event as a Chrome trace JSON array. Errors name `path`.
  absl::Status WriteChromeJson(const std::string& path) const;

  // Busy time per track, for reports.
  absl::Duration BusyTime(const std::string& track) const;
  void Clear();

 private:
  using Event = TraceEvent;
  std::atomic<bool> enabled_{false};
  mutable Mutex mu_;
  std::vector<Event> events_ ABSL_GUARDED_BY(mu_);
};

// Records [construction, destruction) on `track` when the global tracer is enabled.
class ScopedTrace {
 public:
  ScopedTrace(const char* track, const char* name)
      : track_(track),
        name_(name),
        start_(Tracer::Global().enabled() ? absl::Now() : absl::InfinitePast()) {}
  ~ScopedTrace() {
    if (start_ != absl::InfinitePast()) Tracer::Global().Record(track_, name_, start_, absl::Now());
  }
  ScopedTrace(const ScopedTrace&) = delete;
  ScopedTrace& operator=(const ScopedTrace&) = delete;

 private:
  const char* track_;
  const char* name_;
  absl::Time start_;
};

}  // namespace splitspec

#endif  // SPLITSPEC_RUNTIME_BASE_TRACE_H_
