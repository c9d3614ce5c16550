// Flag parsing for every splitspec binary and `splitspec` subcommand, from one
// flag table per command. The table is what the parser accepts AND what --help
// prints, so the help can never list a flag the parser refuses, or miss one.
//
//   const cli::FlagTable kLogitsFlags = {
//       .command = "splitspec logits",
//       .summary = "last-position logits of a prompt as JSON",
//       .flags = {{"model", "PATH", "", "the model's GGUF (required)"},
//                 {"threads", "N", "0", "compute threads; 0 = one per core"},
//                 {"all-positions", "", "", "print every position's logits"}}};
//   ASSIGN_OR_RETURN(cli::CliArgs args, cli::CliArgs::Parse(argv, kLogitsFlags));
//   std::string model = args.GetString("model", "");
//   ASSIGN_OR_RETURN(int64_t threads, args.GetInt("threads", 0));
//
// Accepted forms: `--name value`, `--name=value`, and bare `--name` for a
// switch (value "true"). A flag not in the table is refused with a message
// naming it, as is a positional argument. `--help` or `-h` where a flag may
// stand sets help_requested(); RunMain (binaries) and the `splitspec`
// dispatcher print Help(table) on stdout and exit 0.
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
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"

namespace splitspec::cli {

struct Flag {
  std::string name;           // without the leading "--"
  std::string value;          // the placeholder in help ("PATH", "N"); empty: a switch
  std::string default_value;  // shown in help as "(default: ...)"; empty: no default
  std::string help;           // what the flag means
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
  // or the flag whose value is missing.
  static absl::StatusOr<CliArgs> Parse(const std::vector<std::string>& args,
                                       const FlagTable& table);

  // `--help` or `-h` stood where a flag may stand; the other flags after it
  // are not parsed.
  bool help_requested() const { return help_requested_; }
  bool Has(const std::string& name) const { return values_.contains(name); }
  std::string GetString(const std::string& name, const std::string& fallback) const;
  absl::StatusOr<int64_t> GetInt(const std::string& name, int64_t fallback) const;
  absl::StatusOr<double> GetDouble(const std::string& name, double fallback) const;
  // Comma-separated integers ("1,2,3"); empty if the flag is absent.
  absl::StatusOr<std::vector<int32_t>> GetIntList(const std::string& name) const;

 private:
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
