#include "runtime/dist/store_exchange.h"

#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"

namespace splitspec::net {

absl::StatusOr<std::string> ShareFromRoot(RendezvousStore& store,
                                          const CommunicatorOptions& options,
                                          absl::string_view name, size_t bytes,
                                          absl::FunctionRef<absl::StatusOr<std::string>()> make) {
  RETURN_IF_ERROR(ValidateCommunicatorOptions(options));
  const std::string key = absl::StrCat(options.group, "/", name);
  std::string value;
  if (options.rank == 0) {
    ASSIGN_OR_RETURN(value, make());
  } else {
    ASSIGN_OR_RETURN(value, store.Get(key, options.timeout));
  }
  if (value.size() != bytes) {
    return absl::InvalidArgumentError(absl::StrCat("rendezvous key '", key, "' holds ",
                                                   value.size(), " bytes, expected ", bytes));
  }
  if (options.rank == 0) RETURN_IF_ERROR(store.Set(key, value));
  return value;
}

absl::StatusOr<std::vector<std::string>> GatherFromAll(RendezvousStore& store,
                                                       const CommunicatorOptions& options,
                                                       absl::string_view name,
                                                       absl::string_view mine) {
  RETURN_IF_ERROR(ValidateCommunicatorOptions(options));
  const auto key = [&](int rank) { return absl::StrCat(options.group, "/", name, "/rank-", rank); };
  RETURN_IF_ERROR(store.Set(key(options.rank), mine));
  std::vector<std::string> values(options.size);
  for (int r = 0; r < options.size; ++r) {
    if (r == options.rank) {
      values[r] = std::string(mine);
      continue;
    }
    ASSIGN_OR_RETURN(values[r], store.Get(key(r), options.timeout));
  }
  return values;
}

}  // namespace splitspec::net
