// Flag parsing for the `splitspec` subcommands.
//
//   ASSIGN_OR_RETURN(CliArgs args, CliArgs::Parse(argv_after_subcommand,
//                                                 {"model", "prompt-ids", "json"}));
//   std::string model = args.GetString("model", "");
//   ASSIGN_OR_RETURN(int threads, args.GetInt("threads", 2));
//   bool json = args.Has("json");
//
// Accepted forms: `--name value`, `--name=value`, and bare `--name` (a switch,
// value "true"). Anything not in `known` is refused with a message naming it,
// as is a positional argument.
#ifndef SPLITSPEC_TOOLS_CLI_ARGS_H_
#define SPLITSPEC_TOOLS_CLI_ARGS_H_

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace splitspec::tools {

class CliArgs {
 public:
  // `switches` are flags that take no value (e.g. "json"); every other known
  // flag takes exactly one value.
  static absl::StatusOr<CliArgs> Parse(const std::vector<std::string>& args,
                                       const std::set<std::string>& flags_with_values,
                                       const std::set<std::string>& switches = {});

  bool Has(const std::string& name) const { return values_.contains(name); }
  std::string GetString(const std::string& name, const std::string& fallback) const;
  absl::StatusOr<int64_t> GetInt(const std::string& name, int64_t fallback) const;
  absl::StatusOr<double> GetDouble(const std::string& name, double fallback) const;
  // Comma-separated integers ("1,2,3"); empty if the flag is absent.
  absl::StatusOr<std::vector<int32_t>> GetIntList(const std::string& name) const;

 private:
  absl::flat_hash_map<std::string, std::string> values_;
};

}  // namespace splitspec::tools

#endif  // SPLITSPEC_TOOLS_CLI_ARGS_H_
