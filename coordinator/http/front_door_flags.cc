#include "coordinator/http/front_door_flags.h"

#include <cstdlib>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"

namespace splitspec::coordinator::http {

void AppendFrontDoorFlags(cli::FlagTable* table) {
  const FrontDoorOptions defaults;
  table->flags.insert(
      table->flags.end(),
      {{"http", "HOST:PORT", "",
        "serve the OpenAI-compatible HTTP API there; absent: no front door"},
       {"model", "PATH", "",
        "the target model's GGUF (tokenizer, chat template); needed by --http"},
       {"served-model-name", "NAME", "the GGUF's file name without .gguf",
        "the model id /v1/models lists and replies carry; a request naming another gets 404"},
       {"api-key", "KEY", "$SPLITSPEC_API_KEY",
        "require 'Authorization: Bearer KEY' on /v1/*; empty: no authentication"},
       {"http-max-connections", "N", std::to_string(defaults.http.max_connections),
        "open HTTP connections at most", cli::IntRangeOf<int>()},
       {"http-max-in-flight", "N", std::to_string(defaults.max_in_flight),
        "requests in flight through the front door at most", cli::IntRangeOf<int>()},
       {"http-max-connections-per-client", "N",
        std::to_string(defaults.http.max_connections_per_client),
        "open HTTP connections from one client address at most (more: 503 + Retry-After)",
        cli::IntRangeOf<int>()},
       {"http-parse-threads", "N", std::to_string(defaults.parse_threads),
        "threads that parse JSON and tokenize, off the HTTP I/O thread", cli::IntRangeOf<int>()},
       {"metrics-open", "", "off",
        "serve /metrics without the API key (for a scraper on a private network)"},
       {"tool-call-parser", "hermes|llama3_json", "",
        "read tool calls from chat replies under tool_choice \"auto\" in this format (vLLM's "
        "names); unset: \"auto\" is refused, \"required\" and named functions still work"},
       {"logprobs-mode", "raw|processed", "raw",
        "the row logprobs come from: raw = log_softmax of the model's logits; processed = "
        "after the request's processors and temperature / top-k / top-p / min-p (vLLM's)"}});
}

absl::StatusOr<std::optional<FrontDoorOptions>> FrontDoorOptionsFromFlags(
    const cli::CliArgs& args, const std::string& coordinator_endpoint) {
  if (!args.Has("http")) return std::nullopt;
  FrontDoorOptions options;
  const std::string address = args.GetString("http", "");
  const size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(address.substr(colon + 1), &port)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--http '", address, "' must be HOST:PORT, e.g. 127.0.0.1:8000"));
  }
  options.http.host = address.substr(0, colon);
  options.http.port = port;
  options.model_path = args.GetString("model", "");
  if (options.model_path.empty())
    return absl::InvalidArgumentError("--http needs --model PATH (the target's GGUF)");
  options.model_name = args.GetString("served-model-name", "");
  const char* env_key = std::getenv("SPLITSPEC_API_KEY");
  options.api_key = args.GetString("api-key", env_key != nullptr ? env_key : "");
  ASSIGN_OR_RETURN(options.http.max_connections,
                   args.GetInt<int>("http-max-connections", options.http.max_connections));
  ASSIGN_OR_RETURN(options.max_in_flight,
                   args.GetInt<int>("http-max-in-flight", options.max_in_flight));
  ASSIGN_OR_RETURN(
      options.http.max_connections_per_client,
      args.GetInt<int>("http-max-connections-per-client", options.http.max_connections_per_client));
  ASSIGN_OR_RETURN(options.parse_threads,
                   args.GetInt<int>("http-parse-threads", options.parse_threads));
  if (args.Has("tool-call-parser")) {
    absl::StatusOr<ToolCallFormat> parser =
        ToolCallFormatByName(args.GetString("tool-call-parser", ""));
    if (!parser.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--tool-call-parser: ", parser.status().message()));
    }
    options.tool_call_parser = *parser;
  }
  options.metrics_open = args.Has("metrics-open");  // a switch: false when --metrics-open=false
  const std::string logprobs_mode = args.GetString("logprobs-mode", "raw");
  if (logprobs_mode != "raw" && logprobs_mode != "processed") {
    return absl::InvalidArgumentError(
        absl::StrCat("--logprobs-mode '", logprobs_mode, "' is not raw or processed"));
  }
  options.logprobs_mode =
      logprobs_mode == "raw" ? proto::LOGPROBS_MODE_RAW : proto::LOGPROBS_MODE_PROCESSED;
  options.coordinator_endpoint = coordinator_endpoint;
  RETURN_IF_ERROR(options.Validate());
  return options;
}

}  // namespace splitspec::coordinator::http
