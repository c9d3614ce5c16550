// Flag parsing for every splitspec binary and `splitspec` subcommand, from one
// flag table per command. The table is what the parser accepts AND what --help
// prints, so the help can never list a flag the parser refuses, or miss one.
//
//   const cli::FlagTable kLogitsFlags = {
//       .command = "splitspec logits",
//       .summary = "last-position logits of a prompt as JSON",
//       .flags = {{"model", "PATH", "", "the model's GGUF (required)"},
//                 {"threads", "N", "0", "compute threads; 0 = one per core",
//                  cli::IntRangeOf<int>()},
//                 {"all-positions", "", "", "print every position's logits"}}};
//   ASSIGN_OR_RETURN(cli::CliArgs args, cli::CliArgs::Parse(argv, kLogitsFlags));
//   std::string model = args.GetString("model", "");
//   ASSIGN_OR_RETURN(int threads, args.GetInt<int>("threads", 0));
//   bool all_positions = args.Has("all-positions");
//
// Accepted forms: `--name value`, `--name=value`, and for a switch (a flag
// with no placeholder) bare `--name` (true) or `--name=true|false|1|0`; a
// switch given false is as if absent, so Has() is a switch's value. Any other
// switch value is refused naming the switch (`--dry-run=no` is an error, never
// a dry run). An integer flag (one with an int_range) is refused at Parse,
// naming it, when its value is not an integer in that range, the range of the
// field it fills; GetInt<T> checks the range of T again before narrowing. A
// flag not in the table is refused with a message naming it, as is a
// positional argument. `--help` or `-h` where a flag may stand sets
// help_requested(); RunMain (binaries) and the `splitspec` dispatcher print
// Help(table) on stdout and exit 0.
//
// Why our own table and not absl flags (ABSL_FLAG) or CLI11: absl flags are
// process-global definitions, one registry per binary, but `splitspec` hosts a
// dozen subcommands whose flags share names with different meanings and
// defaults (--draft is a path in `serve` and a count in `scale`; --k an integer
// in `plan` and "auto" in `generate`), and tests and the in-process cluster
// parse several command lines in one process. A table per command is a plain
// value: each subcommand gets its own namespace, parsing stays a pure function
// tests can call, and no dependency is added (CLI11 would add one, for the
// same per-command table under another name).
#ifndef SPLITSPEC_RUNTIME_CLI_CLI_ARGS_H_
#define SPLITSPEC_RUNTIME_CLI_CLI_ARGS_H_

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"

namespace splitspec::cli {

// The values an integer flag accepts, both ends included: the range of the
// field the flag fills (IntRangeOf<int>() for an `int`), so that no value is
// narrowed into another (4294967297 into an int32 would be 1).
struct IntRange {
  int64_t min = 0;
  int64_t max = 0;
  bool Contains(int64_t value) const { return value >= min && value <= max; }
};

template <typename T>
constexpr IntRange IntRangeOf() {
  static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>);
  static_assert(std::numeric_limits<T>::max() <= std::numeric_limits<int64_t>::max(),
                "flags hold at most int64 values");
  return {std::numeric_limits<T>::min(), std::numeric_limits<T>::max()};
}

struct Flag {
  std::string name;           // without the leading "--"
  std::string value;          // the placeholder in help ("PATH", "N"); empty: a switch
  std::string default_value;  // shown in help as "(default: ...)"; empty: no default
  std::string help;           // what the flag means
  // Set for an integer flag: Parse refuses a value that is not an integer in
  // this range. Unset: the value is text (or a number read with GetDouble).
  std::optional<IntRange> int_range = std::nullopt;
};

struct FlagTable {
  std::string command;  // "splitspec serve", "splitspec-coordinator"
  std::string summary;  // one line: what the command does
  std::vector<Flag> flags;
  std::string details = {};  // optional paragraphs printed after the flags

  // The flag named `name`, or nullptr.
  const Flag* Find(const std::string& name) const;
};

// The --help text: "usage: COMMAND [flags]", the summary, then one line per
// flag with its placeholder, meaning and default, then -h/--help, then details.
std::string Help(const FlagTable& table);

class CliArgs {
 public:
  // Errors: InvalidArgument naming the unknown flag, the positional argument,
  // the flag whose value is missing, the switch whose value is not
  // true/false/1/0, or the integer flag whose value is not an integer in its
  // int_range.
  static absl::StatusOr<CliArgs> Parse(const std::vector<std::string>& args,
                                       const FlagTable& table);

  // `--help` or `-h` stood where a flag may stand; the other flags after it
  // are not parsed.
  bool help_requested() const { return help_requested_; }
  // The flag was given; for a switch: it was given and is true.
  bool Has(const std::string& name) const { return values_.contains(name); }
  std::string GetString(const std::string& name, const std::string& fallback) const;
  // The flag's integer value, or `fallback` if it is absent, for a field of
  // type T. Errors: InvalidArgument naming the flag when its value is not an
  // integer or lies outside T's range (checked before narrowing).
  template <typename T>
  absl::StatusOr<T> GetInt(const std::string& name, std::type_identity_t<T> fallback) const {
    absl::StatusOr<int64_t> value = GetIntIn(name, fallback, IntRangeOf<T>());
    if (!value.ok()) return value.status();
    return static_cast<T>(*value);
  }
  absl::StatusOr<double> GetDouble(const std::string& name, double fallback) const;
  // Comma-separated integers ("1,2,3"); empty if the flag is absent.
  absl::StatusOr<std::vector<int32_t>> GetIntList(const std::string& name) const;

 private:
  absl::StatusOr<int64_t> GetIntIn(const std::string& name, int64_t fallback, IntRange range) const;

  absl::flat_hash_map<std::string, std::string> values_;
  bool help_requested_ = false;
};

// True when `args` asks for help (see CliArgs::help_requested); false when
// they do not, or do not parse (the command then reports the error itself).
bool HelpRequested(const std::vector<std::string>& args, const FlagTable& table);

// The main() of a binary: parses argv[1..] with `table`; --help/-h prints
// Help(table) on stdout and returns 0; else runs `body`. A failure prints
// "COMMAND: message" on stderr and returns 2 for InvalidArgument (a usage
// error), 1 otherwise.
int RunMain(int argc, char** argv, const FlagTable& table,
            absl::FunctionRef<absl::Status(const CliArgs&)> body);

}  // namespace splitspec::cli

#endif  // SPLITSPEC_RUNTIME_CLI_CLI_ARGS_H_
