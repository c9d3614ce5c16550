// The subcommands of the `splitspec` CLI. Each takes the arguments after its
// name and returns the process exit code (0 ok, 1 failure, 2 usage error);
// errors are printed to stderr as one line naming the flag or file at fault.
#ifndef SPLITSPEC_TOOLS_COMMANDS_H_
#define SPLITSPEC_TOOLS_COMMANDS_H_

#include <string>
#include <vector>

namespace splitspec::tools {

using CommandArgs = std::vector<std::string>;

int RunStatusCommand(const CommandArgs& args);   // tools/status_command.cc
int RunServeCommand(const CommandArgs& args);    // tools/serve_command.cc
int RunClientCommand(const CommandArgs& args);   // tools/client_command.cc
int RunLogitsCommand(const CommandArgs& args);   // tools/logits_command.cc
int RunGenerateCommand(const CommandArgs& args); // tools/generate_command.cc
int RunBenchCommand(const CommandArgs& args);    // tools/bench_command.cc
int RunBenchSpec(const CommandArgs& args);       // tools/bench_spec.cc (bench spec)
int RunBenchVerify(const CommandArgs& args);     // tools/bench_verify.cc (bench verify)
int RunPlanCommand(const CommandArgs& args);     // tools/plan_command.cc
int RunScaleCommand(const CommandArgs& args);    // tools/scale_command.cc



}  // namespace splitspec::tools

#endif  // SPLITSPEC_TOOLS_COMMANDS_H_
