// The KV-cache memory budget of one worker process (one rank): how many bytes
// its sequences' KV caches may hold together, the start-up choice of that
// number, and the accounting that sums what the caches hold.
//
//   ASSIGN_OR_RETURN(KvBudgetPlan plan,
//                    PlanKvBudget(flag_amount, device, weight_bytes, SystemDeviceProbe()));
//   SPLITSPEC_LOG(INFO) << DescribeKvBudget(plan, bytes_per_position, context_length);
//   KvBudget budget(plan.budget_bytes);
//   budget.Track(cache.get());                          // every cache the worker makes
//   if (budget.Allows(budget.used_bytes() + cache->BytesAfterReserve(n) - cache->memory_bytes()))
//     ... grow it ...
//   budget.Untrack(cache.get());                        // before the cache is destroyed
//
// Accounting comes from the caches themselves: a tracked cache counts
// KvCache::memory_bytes() (its bytes per position x the positions it has
// reserved, including the doubling growth), so a change of storage type (fp32,
// fp16 on the host; fp16 on a device) changes the count with it. The budget is
// per process: each rank of a tensor-parallel group has its own, and the group's
// leader schedules by its own (the ranks mirror its caches position for position).
//
// The default (no --kv-cache-memory): kDefaultKvHostPercent of the host memory
// left after the weights for a CPU rank (MemAvailable in /proc/meminfo, less the
// mapped weights, which the kernel counts as reclaimable cache), and
// kDefaultKvDevicePercent of the device's free memory after the weights and
// workspace are allocated for a CUDA rank (DeviceProbe::QueryCuda).
//
// Thread safety: thread-compatible (the worker's loop owns it).
#ifndef SPLITSPEC_RUNTIME_MODEL_KV_BUDGET_H_
#define SPLITSPEC_RUNTIME_MODEL_KV_BUDGET_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "runtime/base/memory_amount.h"
#include "runtime/model/device.h"
#include "runtime/model/kv_cache.h"

namespace splitspec::model {

inline constexpr double kDefaultKvHostPercent = 50.0;
inline constexpr double kDefaultKvDevicePercent = 80.0;

// What PlanKvBudget chose, and from what (for the start-up line and /metrics).
struct KvBudgetPlan {
  uint64_t budget_bytes = 0;
  uint64_t available_bytes = 0;        // the memory left after the weights (0: not read)
  std::string memory;                  // "host memory" or "cuda:0 (NVIDIA H100) memory"
  std::optional<MemoryAmount> amount;  // the flag's value; unset: the default percentage
  double percent = 0;                  // the share of available_bytes taken (0: a number of bytes)
};

// MemAvailable of a /proc/meminfo-format file, in bytes. Errors: NotFound or
// DataLoss naming the file when it cannot be read or has no MemAvailable line.
absl::StatusOr<uint64_t> ReadMemAvailable(const std::string& meminfo_path = "/proc/meminfo");

// The budget of a rank on `device`: `amount` in bytes, or as a percentage of the
// memory left after the weights (unset: the default percentage). For the CPU,
// host_weight_bytes (the mapped model file) is taken off MemAvailable; for a CUDA
// device the free memory is read now (call it after the model is loaded). Errors:
// reading MemAvailable or querying the device (only for a percentage or the
// default); InvalidArgument naming the amount when it resolves to 0 bytes.
absl::StatusOr<KvBudgetPlan> PlanKvBudget(const std::optional<MemoryAmount>& amount,
                                          const DeviceSpec& device, uint64_t host_weight_bytes,
                                          const DeviceProbe& probe,
                                          const std::string& meminfo_path = "/proc/meminfo");

// One line for the start-up log: the budget, where it came from, and what it
// holds: "KV cache budget 256.0 MiB (--kv-cache-memory) = 5461 positions of
// 49152 bytes: 0 sequences x the full context of 8192 (the longest sequence:
// 5461 positions)".
std::string DescribeKvBudget(const KvBudgetPlan& plan, uint64_t bytes_per_position,
                             int context_length);

class Transformer;

// The budget of a worker running `model` (weights: its mapped file; device: the
// model's), planned with PlanKvBudget and logged at INFO with DescribeKvBudget,
// prefixed by `who` ("target worker 't1'"). Call it after the model is loaded.
absl::StatusOr<uint64_t> StartKvBudget(const Transformer& model,
                                       const std::optional<MemoryAmount>& amount,
                                       const std::string& who);

struct KvBudgetCounters {
  uint64_t waits = 0;        // sequences that had to wait for room before starting
  uint64_t preemptions = 0;  // running sequences evicted to make room (recomputed later)
  uint64_t refused = 0;      // sequences larger than the whole budget
  uint64_t peak_used_bytes = 0;
};

class KvBudget {
 public:
  // budget_bytes 0: unlimited (it still counts).
  explicit KvBudget(uint64_t budget_bytes = 0) : budget_bytes_(budget_bytes) {}

  uint64_t budget_bytes() const { return budget_bytes_; }
  bool unlimited() const { return budget_bytes_ == 0; }
  // True if caches holding `total_bytes` together stay within the budget.
  bool Allows(uint64_t total_bytes) const { return unlimited() || total_bytes <= budget_bytes_; }

  // Counts `cache` from now on. REQUIRES: Untrack(cache) before it is destroyed.
  void Track(const KvCache* cache);
  void Untrack(const KvCache* cache);
  // The bytes the tracked caches hold now.
  uint64_t used_bytes() const;
  // budget - used (0 when over or unlimited... unlimited: UINT64_MAX).
  uint64_t free_bytes() const;
  int tracked() const { return static_cast<int>(caches_.size()); }

  // Records used_bytes() into the peak; call after every change of the caches.
  void ObserveUsed();
  void CountWait() { ++counters_.waits; }
  void CountPreemption() { ++counters_.preemptions; }
  void CountRefused() { ++counters_.refused; }
  const KvBudgetCounters& counters() const { return counters_; }

 private:
  uint64_t budget_bytes_;
  absl::flat_hash_set<const KvCache*> caches_;
  KvBudgetCounters counters_;
};

}  // namespace splitspec::model

#endif  // SPLITSPEC_RUNTIME_MODEL_KV_BUDGET_H_
