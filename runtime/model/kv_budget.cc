#include "runtime/model/kv_budget.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "runtime/base/logging.h"
#include "runtime/base/status_macros.h"
#include "runtime/model/transformer.h"

namespace splitspec::model {

absl::StatusOr<uint64_t> ReadMemAvailable(const std::string& meminfo_path) {
  std::ifstream in(meminfo_path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", meminfo_path));
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view rest = line;
    if (!absl::ConsumePrefix(&rest, "MemAvailable:")) continue;
    // "MemAvailable:   12345678 kB"
    std::vector<absl::string_view> fields = absl::StrSplit(rest, ' ', absl::SkipWhitespace());
    uint64_t kib = 0;
    if (fields.size() != 2 || fields[1] != "kB" || !absl::SimpleAtoi(fields[0], &kib)) {
      return absl::DataLossError(
          absl::StrCat(meminfo_path, ": unreadable MemAvailable line '", line, "'"));
    }
    return kib * 1024;
  }
  return absl::DataLossError(absl::StrCat(meminfo_path, " has no MemAvailable line"));
}

absl::StatusOr<KvBudgetPlan> PlanKvBudget(const std::optional<MemoryAmount>& amount,
                                          const DeviceSpec& device, uint64_t host_weight_bytes,
                                          const DeviceProbe& probe,
                                          const std::string& meminfo_path) {
  KvBudgetPlan plan;
  plan.amount = amount;
  plan.memory = device.is_cuda() ? absl::StrCat(device.ToString(), " memory") : "host memory";
  if (amount.has_value() && !amount->is_percent()) {
    plan.budget_bytes = amount->bytes;
    return plan;
  }
  if (device.is_cuda()) {
    ASSIGN_OR_RETURN(DeviceMemoryInfo info, probe.QueryCuda(device.ordinal));
    plan.memory = absl::StrCat(device.ToString(), " (", info.name, ") memory");
    plan.available_bytes = info.free_bytes;
  } else {
    ASSIGN_OR_RETURN(uint64_t available, ReadMemAvailable(meminfo_path));
    plan.available_bytes = available > host_weight_bytes ? available - host_weight_bytes : 0;
  }
  const MemoryAmount share =
      amount.has_value() ? *amount
                         : MemoryAmount{.percent = device.is_cuda() ? kDefaultKvDevicePercent
                                                                    : kDefaultKvHostPercent};
  plan.percent = share.percent;
  plan.budget_bytes = share.Resolve(plan.available_bytes);
  if (plan.budget_bytes == 0) {
    return absl::InvalidArgumentError(absl::StrCat("KV cache budget ", share.ToString(), " of ",
                                                   plan.memory, " (", plan.available_bytes,
                                                   " bytes left after the weights) is 0 bytes"));
  }
  return plan;
}

std::string DescribeKvBudget(const KvBudgetPlan& plan, uint64_t bytes_per_position,
                             int context_length) {
  const std::string origin =
      plan.percent == 0 ? std::string("--kv-cache-memory")
                        : absl::StrCat(plan.amount.has_value() ? "" : "default: ", plan.percent,
                                       "% of ", FormatBytes(plan.available_bytes), " of ",
                                       plan.memory, " left after the weights");
  const std::string line =
      absl::StrCat("KV cache budget ", FormatBytes(plan.budget_bytes), " (", origin, ")");
  if (bytes_per_position == 0 || context_length <= 0) return line;
  const uint64_t positions = plan.budget_bytes / bytes_per_position;
  return absl::StrCat(
      line, " = ", positions, " positions of ", bytes_per_position,
      " bytes: ", positions / static_cast<uint64_t>(context_length),
      " sequence(s) x the full context of ", context_length, " (the longest sequence: ",
      std::min<uint64_t>(positions, static_cast<uint64_t>(context_length)), " positions)");
}

absl::StatusOr<uint64_t> StartKvBudget(const Transformer& model,
                                       const std::optional<MemoryAmount>& amount,
                                       const std::string& who) {
  ASSIGN_OR_RETURN(KvBudgetPlan plan, PlanKvBudget(amount, model.device(), model.file().file_size(),
                                                   SystemDeviceProbe()));
  const uint64_t per_position = model.NewCache()->bytes_per_position();  // allocates nothing
  SPLITSPEC_LOG(INFO) << who << ": "
                      << DescribeKvBudget(plan, per_position, model.config().context_length);
  return plan.budget_bytes;
}

void KvBudget::Track(const KvCache* cache) {
  caches_.insert(cache);
  ObserveUsed();
}

void KvBudget::Untrack(const KvCache* cache) { caches_.erase(cache); }

uint64_t KvBudget::used_bytes() const {
  uint64_t used = 0;
  for (const KvCache* cache : caches_) used += cache->memory_bytes();
  return used;
}

uint64_t KvBudget::free_bytes() const {
  if (unlimited()) return std::numeric_limits<uint64_t>::max();
  const uint64_t used = used_bytes();
  return used >= budget_bytes_ ? 0 : budget_bytes_ - used;
}

void KvBudget::ObserveUsed() {
  counters_.peak_used_bytes = std::max(counters_.peak_used_bytes, used_bytes());
}

}  // namespace splitspec::model
