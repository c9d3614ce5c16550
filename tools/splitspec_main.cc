// `splitspec`: the one command-line entry point. Dispatches to the subcommands
// declared in tools/commands.h; `splitspec --help` lists them, `splitspec
// CMD --help` lists a subcommand's flags.
#include "tools/commands.h"

int main(int argc, char** argv) {
  return splitspec::tools::RunSplitspec(splitspec::tools::CommandArgs(argv + 1, argv + argc));
}
