// `splitspec status --coordinator ENDPOINT [--timeout-ms N]`: asks the
// coordinator for its membership table and prints it as one JSON object.
#include <cstdio>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"
#include "runtime/base/status_macros.h"
#include "runtime/net/channel_security.h"
#include "runtime/net/request_client.h"
#include "tools/commands.h"

namespace splitspec::tools {
namespace {

absl::Status Run(const CommandArgs& args) {
  ASSIGN_OR_RETURN(CliArgs parsed, CliArgs::Parse(args, StatusFlagTable()));
  const std::string endpoint = parsed.GetString("coordinator", "tcp://127.0.0.1:5555");
  ASSIGN_OR_RETURN(int64_t timeout_ms, parsed.GetInt<int64_t>("timeout-ms", 3000));
  RETURN_IF_ERROR(net::ConfigureProcessSecurity(net::kAdmin));
  ASSIGN_OR_RETURN(proto::StatusReply reply,
                   net::FetchCoordinatorStatus(endpoint, absl::Milliseconds(timeout_ms)));
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  if (!google::protobuf::util::MessageToJsonString(reply, &json, options).ok()) {
    return absl::InternalError("cannot print the status reply as JSON");
  }
  std::cout << json << std::endl;
  return absl::OkStatus();
}

}  // namespace

int RunStatusCommand(const CommandArgs& args) {
  absl::Status status = Run(args);
  if (!status.ok()) {
    std::fprintf(stderr, "splitspec status: %s\n", std::string(status.message()).c_str());
    return absl::IsInvalidArgument(status) ? 2 : 1;
  }
  return 0;
}

}  // namespace splitspec::tools
