#include "runtime/base/trace.h"

#include <unistd.h>

#include <fstream>
#include <map>

#include "absl/strings/str_cat.h"

namespace splitspec {

Tracer& Tracer::Global() {
  static Tracer* tracer = new Tracer();
  return *tracer;
}

void Tracer::Record(const std::string& track, const std::string& name, absl::Time start,
                    absl::Time end) {
  MutexLock lock(&mu_);
  events_.push_back({track, name, start, end});
}

absl::Duration Tracer::BusyTime(const std::string& track) const {
  MutexLock lock(&mu_);
  absl::Duration total;
  for (const Event& e : events_) {
    if (e.track == track) total += e.end - e.start;
  }
  return total;
}

std::vector<TraceEvent> Tracer::Events() const {
  MutexLock lock(&mu_);
  return events_;
}

void Tracer::Clear() {
  MutexLock lock(&mu_);
  events_.clear();
}

absl::Status Tracer::WriteChromeJson(const std::string& path) const {
  MutexLock lock(&mu_);
  std::map<std::string, int> track_ids;
  for (const Event& e : events_) track_ids.emplace(e.track, static_cast<int>(track_ids.size()) + 1);
  const absl::Time origin = events_.empty() ? absl::UnixEpoch() : events_.front().start;
  std::ofstream out(path);
  out << "[\n";
  bool first = true;
  for (const auto& [track, id] : track_ids) {
    out << (first ? "" : ",\n") << "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" << getpid()
        << ",\"tid\":" << id << ",\"args\":{\"name\":\"" << track << "\"}}";
    first = false;
  }
  for (const Event& e : events_) {
    out << (first ? "" : ",\n") << "{\"ph\":\"X\",\"name\":\"" << e.name << "\",\"cat\":\""
        << e.track << "\",\"pid\":" << getpid() << ",\"tid\":" << track_ids[e.track]
        << ",\"ts\":" << absl::ToDoubleMicroseconds(e.start - origin)
        << ",\"dur\":" << absl::ToDoubleMicroseconds(e.end - e.start) << "}";
    first = false;
  }
  out << "\n]\n";
  if (!out) return absl::UnavailableError(absl::StrCat("cannot write trace file ", path));
  return absl::OkStatus();
}

}  // namespace splitspec
