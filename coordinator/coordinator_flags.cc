#include "coordinator/coordinator_flags.h"

#include "coordinator/http/front_door_flags.h"

namespace splitspec::coordinator {

cli::FlagTable CoordinatorFlagTable() {
  cli::FlagTable table{
      .command = "splitspec-coordinator",
      .summary =
          "the cluster's membership authority and request router, with an optional "
          "OpenAI-compatible HTTP front door",
      .flags = {
          {"control", "ENDPOINT", "tcp://127.0.0.1:5555",
           "the control endpoint to bind; tcp://127.0.0.1:* picks a free port"},
          {"endpoint-file", "PATH", "", "write the bound control endpoint there"},
          {"heartbeat-ms", "N", "500", "the heartbeat interval workers are told",
           cli::IntRangeOf<int64_t>()},
          {"suspect-after", "N", "2", "missed heartbeats before a worker is suspect",
           cli::IntRangeOf<int>()},
          {"dead-after", "N", "5", "missed heartbeats before a worker is dead",
           cli::IntRangeOf<int>()},
          {"drain-timeout-ms", "N", "30000",
           "how long a draining target group's running requests may take before they are "
           "re-placed",
           cli::IntRangeOf<int64_t>()},
          {"queue-timeout-ms", "N", "30000",
           "how long a request may wait queued for a target group before it fails",
           cli::IntRangeOf<int64_t>()},
      }};
  http::AppendFrontDoorFlags(&table);
  return table;
}

}  // namespace splitspec::coordinator
