// The subcommands of the `splitspec` CLI. Each takes the arguments after its
// name and returns the process exit code (0 ok, 1 failure, 2 usage error);
// errors are printed to stderr as one line naming the flag or file at fault.
//
// Each subcommand parses its arguments with its flag table (XFlagTable()
// below); RunSplitspec answers `splitspec CMD --help` (and -h) from that same
// table, so the help lists exactly the flags the parser accepts.
#ifndef SPLITSPEC_TOOLS_COMMANDS_H_
#define SPLITSPEC_TOOLS_COMMANDS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/cli/cli_args.h"
#include "runtime/model/device.h"
#include "runtime/model/kv_cache.h"

namespace splitspec::tools {

using CommandArgs = std::vector<std::string>;
using cli::CliArgs;

int RunStatusCommand(const CommandArgs& args);    // tools/status_command.cc
int RunServeCommand(const CommandArgs& args);     // tools/serve_command.cc
int RunClientCommand(const CommandArgs& args);    // tools/client_command.cc
int RunLogitsCommand(const CommandArgs& args);    // tools/logits_command.cc
int RunGenerateCommand(const CommandArgs& args);  // tools/generate_command.cc
int RunBenchCommand(const CommandArgs& args);     // tools/bench_command.cc
int RunBenchSpec(const CommandArgs& args);        // tools/bench_spec.cc (bench spec)
int RunBenchVerify(const CommandArgs& args);      // tools/bench_verify.cc (bench verify)
int RunBenchServe(const CommandArgs& args);       // tools/bench_serve.cc (bench serve)
int RunPlanCommand(const CommandArgs& args);      // tools/plan_command.cc
int RunScaleCommand(const CommandArgs& args);     // tools/scale_command.cc
int RunKeygenCommand(const CommandArgs& args);    // tools/keygen_command.cc

// The flag tables the subcommands parse with (tools/commands.cc).
const cli::FlagTable& StatusFlagTable();
const cli::FlagTable& ServeFlagTable();
const cli::FlagTable& ClientFlagTable();
const cli::FlagTable& LogitsFlagTable();
const cli::FlagTable& GenerateFlagTable();
const cli::FlagTable& BenchDecodeFlagTable();
const cli::FlagTable& BenchSpecFlagTable();
const cli::FlagTable& BenchVerifyFlagTable();
const cli::FlagTable& BenchServeFlagTable();
const cli::FlagTable& PlanFlagTable();
const cli::FlagTable& ScaleFlagTable();
const cli::FlagTable& KeygenFlagTable();

// The --device flag of generate and bench (its table entry), and its value:
// InvalidArgument naming the flag and the value when it is not cpu or cuda:N.
cli::Flag DeviceFlag();
absl::StatusOr<model::DeviceSpec> ParseDeviceFlag(const CliArgs& args);
// --cuda-graphs on|off of bench decode and verify (TransformerOptions::cuda_graphs);
// InvalidArgument naming the flag for another value.
cli::Flag CudaGraphsFlag();
absl::StatusOr<bool> ParseCudaGraphsFlag(const CliArgs& args);
// --kv-cache-type f16|q8_0 of generate, serve and bench decode / verify
// (TransformerOptions::kv_cache_type); InvalidArgument naming the flag for another value.
cli::Flag KvCacheTypeFlag();
absl::StatusOr<model::KvCacheType> ParseKvCacheTypeFlag(const CliArgs& args);
// --results-jsonl FILE and --shape NAME of bench decode and verify (bench_results.h).
cli::Flag ResultsJsonlFlag();
cli::Flag ShapeFlag();

// A subcommand: a leaf with a flag table, or a group (`bench`) whose first
// argument names one of its `children` (their `run` is unused: the group's
// run gets the whole argument list, child name first).
struct Subcommand {
  std::string name;
  std::string summary;
  const cli::FlagTable* flags;  // nullptr for a group
  int (*run)(const CommandArgs&);
  std::vector<Subcommand> children = {};
};

// Every subcommand, in the order `splitspec --help` lists them.
const std::vector<Subcommand>& Subcommands();

// `splitspec ARGS...`: dispatches to the subcommand ARGS[0]; `--help`, `-h`
// or `help` alone, or after a subcommand, prints the help and returns 0.
int RunSplitspec(const CommandArgs& args);

}  // namespace splitspec::tools

#endif  // SPLITSPEC_TOOLS_COMMANDS_H_
