// Command-line flags of the HTTP front door, for the coordinator binary.
//
//   cli::FlagTable table = {...coordinator flags...};
//   AppendFrontDoorFlags(&table);
//   ASSIGN_OR_RETURN(cli::CliArgs args, cli::CliArgs::Parse(argv, table));
//   ASSIGN_OR_RETURN(std::optional<FrontDoorOptions> http,
//                    FrontDoorOptionsFromFlags(args, service->control_endpoint()));
//   if (http) ASSIGN_OR_RETURN(front_door, FrontDoor::Start(*http));   // keep it alive while
//   serving
//
// Flags:
//   --http HOST:PORT          serve HTTP there (e.g. 127.0.0.1:8000); absent: no front door
//   --model PATH              the target model's GGUF (tokenizer, chat template); required with
//   --http
//   --model-name NAME         the served model id (default: general.name, else the file name)
//   --api-key KEY             require "Authorization: Bearer KEY" on /v1/*; default: the
//                             environment variable SPLITSPEC_API_KEY; empty: no authentication
//   --http-max-connections N  (512)   --http-max-in-flight N (256)
//   --http-max-connections-per-client N (64): from one client address
//   --http-parse-threads N    (2): threads that parse JSON and tokenize
//   --metrics-open            (a switch) serve /metrics without the API key,
//                             for a scraper on a private network
//   --tool-call-parser hermes|llama3_json  how tool calls are read from chat replies
//                             under tool_choice "auto" (chat_tools.h); unset: "auto" is refused
//   --logprobs-mode raw|processed  (raw) the row requests' logprobs come from
//                             (runtime/spec/token_logprobs.h)
#ifndef SPLITSPEC_COORDINATOR_HTTP_FRONT_DOOR_FLAGS_H_
#define SPLITSPEC_COORDINATOR_HTTP_FRONT_DOOR_FLAGS_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "coordinator/http/front_door.h"
#include "runtime/cli/cli_args.h"

namespace splitspec::coordinator::http {

// Adds the front door's flags (above) to `table`.
void AppendFrontDoorFlags(cli::FlagTable* table);

// nullopt when --http is absent. Errors (InvalidArgument naming the flag): a
// malformed --http, --http without --model, a non-integer limit.
absl::StatusOr<std::optional<FrontDoorOptions>> FrontDoorOptionsFromFlags(
    const cli::CliArgs& args, const std::string& coordinator_endpoint);

}  // namespace splitspec::coordinator::http

#endif  // SPLITSPEC_COORDINATOR_HTTP_FRONT_DOOR_FLAGS_H_
