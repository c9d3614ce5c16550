// The command-line flags of splitspec-coordinator: its own (control endpoint,
// liveness, drain and queue timeouts) and the HTTP front door's
// (coordinator/http/front_door_flags.h). One table for the binary's parser and
// --help, and for `splitspec serve`, which accepts the ones it does not set
// itself and passes them on (tools/serve_plan.h).
//
//   ASSIGN_OR_RETURN(cli::CliArgs args, cli::CliArgs::Parse(argv, CoordinatorFlagTable()));
#ifndef SPLITSPEC_COORDINATOR_COORDINATOR_FLAGS_H_
#define SPLITSPEC_COORDINATOR_COORDINATOR_FLAGS_H_

#include "runtime/cli/cli_args.h"

namespace splitspec::coordinator {

cli::FlagTable CoordinatorFlagTable();

}  // namespace splitspec::coordinator

#endif  // SPLITSPEC_COORDINATOR_COORDINATOR_FLAGS_H_
