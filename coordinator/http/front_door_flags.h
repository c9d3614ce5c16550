// Command-line flags of the HTTP front door, for the coordinator binary.
//
//   std::set<std::string> known = {...coordinator flags...};
//   known.insert(kFrontDoorFlags.begin(), kFrontDoorFlags.end());
//   std::set<std::string> switches(kFrontDoorSwitches.begin(), kFrontDoorSwitches.end());
//   ASSIGN_OR_RETURN(tools::CliArgs args, tools::CliArgs::Parse(argv, known, switches));
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
#ifndef SPLITSPEC_COORDINATOR_HTTP_FRONT_DOOR_FLAGS_H_
#define SPLITSPEC_COORDINATOR_HTTP_FRONT_DOOR_FLAGS_H_

#include <array>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "coordinator/http/front_door.h"
#include "tools/cli_args.h"

namespace splitspec::coordinator::http {

inline constexpr std::array<const char*, 8> kFrontDoorFlags = {"http",
                                                               "model",
                                                               "model-name",
                                                               "api-key",
                                                               "http-max-connections",
                                                               "http-max-in-flight",
                                                               "http-max-connections-per-client",
                                                               "http-parse-threads"};
// Flags without a value (CliArgs::Parse's `switches`).
inline constexpr std::array<const char*, 1> kFrontDoorSwitches = {"metrics-open"};

// nullopt when --http is absent. Errors (InvalidArgument naming the flag): a
// malformed --http, --http without --model, a non-integer limit.
absl::StatusOr<std::optional<FrontDoorOptions>> FrontDoorOptionsFromFlags(const tools::CliArgs& args,
                                                                          const std::string& coordinator_endpoint);

}  // namespace splitspec::coordinator::http

#endif  // SPLITSPEC_COORDINATOR_HTTP_FRONT_DOOR_FLAGS_H_
