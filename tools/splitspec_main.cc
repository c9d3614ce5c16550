// `splitspec`: the one command-line entry point. Dispatches to the subcommands
// declared in tools/commands.h.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tools/commands.h"

namespace {

struct Subcommand {
  const char* name;
  const char* summary;
  int (*run)(const splitspec::tools::CommandArgs&);
};

constexpr Subcommand kSubcommands[] = {
    {"serve", "start a local cluster as processes: [--model PATH] [--drafter NAME] [--drafts N]", splitspec::tools::RunServeCommand},
    {"client", "send a request to a running cluster and stream the text: --prompt TEXT", splitspec::tools::RunClientCommand},
    {"status", "print cluster membership as JSON: --coordinator ENDPOINT", splitspec::tools::RunStatusCommand},
    {"scale", "grow or drain pools of a running cluster: --draft +N|-N, --target-groups +N|-N", splitspec::tools::RunScaleCommand},
    {"generate", "speculative generation in one process: --target PATH [--drafter D] --prompt TEXT [--json]", splitspec::tools::RunGenerateCommand},
    {"logits", "last-position logits as JSON: --model PATH --prompt-ids 1,2,3", splitspec::tools::RunLogitsCommand},
    {"bench", "benchmarks: bench decode --model PATH [--threads N] | bench spec [--model PATH] | bench verify --model PATH", splitspec::tools::RunBenchCommand},
    {"plan", "analytic speedup model: --alpha A --cost-ratio C [--k K] [--json]", splitspec::tools::RunPlanCommand},
};

void PrintUsage() {
  std::fprintf(stderr, "usage: splitspec <command> [flags]\n\ncommands:\n");
  for (const Subcommand& c : kSubcommands) std::fprintf(stderr, "  %-10s %s\n", c.name, c.summary);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "help") == 0) {
    PrintUsage();
    return argc < 2 ? 2 : 0;
  }
  const splitspec::tools::CommandArgs args(argv + 2, argv + argc);
  for (const Subcommand& c : kSubcommands) {
    if (std::strcmp(argv[1], c.name) == 0) return c.run(args);
  }
  std::fprintf(stderr, "splitspec: unknown command '%s'\n", argv[1]);
  PrintUsage();
  return 2;
}
