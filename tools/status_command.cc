// `splitspec status --coordinator ENDPOINT [--timeout-ms N]`: asks the
// coordinator for its membership table and prints it as one JSON object.
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"
#include "runtime/base/status_macros.h"
#include "runtime/net/channel.h"
#include "runtime/net/wire_format.h"
#include "tools/cli_args.h"
#include "tools/commands.h"

namespace splitspec::tools {
namespace {

absl::StatusOr<proto::StatusReply> FetchStatus(const std::string& endpoint, absl::Duration timeout) {
  ASSIGN_OR_RETURN(std::unique_ptr<net::Channel> channel,
                   net::ConnectChannel(endpoint, absl::StrCat("status-", getpid())));
  proto::Envelope request = net::NewEnvelope();
  request.mutable_status_request();
  RETURN_IF_ERROR(channel->Send("", request));
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    absl::StatusOr<net::Frame> frame = channel->Receive(deadline - absl::Now());
    if (!frame.ok()) break;
    if (frame->envelope.has_status_reply()) return frame->envelope.status_reply();
  }
  return absl::DeadlineExceededError(
      absl::StrCat("no status reply from ", endpoint, " within ", absl::FormatDuration(timeout)));
}

absl::Status Run(const CommandArgs& args) {
  ASSIGN_OR_RETURN(CliArgs parsed, CliArgs::Parse(args, {"coordinator", "timeout-ms"}));
  const std::string endpoint = parsed.GetString("coordinator", "tcp://127.0.0.1:5555");
  ASSIGN_OR_RETURN(int64_t timeout_ms, parsed.GetInt("timeout-ms", 3000));
  ASSIGN_OR_RETURN(proto::StatusReply reply, FetchStatus(endpoint, absl::Milliseconds(timeout_ms)));
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
