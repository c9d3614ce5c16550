// `splitspec keygen --out DIR --name ROLE`: writes a CURVE keypair for one
// role of a cluster: DIR/ROLE.pub (the Z85 public key) and DIR/ROLE.key (the
// Z85 secret key, mode 0600). ROLE is coordinator, target, draft, client,
// admin, or "all" for the five. Existing files are never overwritten.
// Processes find the keys through SPLITSPEC_KEYS=DIR (see
// runtime/net/channel_security.h and docs/protocol.md, "Security model").
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"
#include "runtime/net/channel_security.h"
#include "tools/commands.h"

namespace splitspec::tools {
namespace {

absl::StatusOr<std::vector<net::KeyRole>> RolesNamed(const std::string& name) {
  const std::vector<net::KeyRole> all = {net::kCoordinator, net::kTarget, net::kDraft,
                                         net::kClient, net::kAdmin};
  if (name == "all") return all;
  for (net::KeyRole role : all) {
    if (name == net::KeyRoleName(role)) return std::vector<net::KeyRole>{role};
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--name '", name, "' is not coordinator, target, draft, client, admin or all"));
}

absl::Status Run(const CommandArgs& args) {
  ASSIGN_OR_RETURN(CliArgs parsed, CliArgs::Parse(args, KeygenFlagTable()));
  const std::string dir = parsed.GetString("out", "");
  if (dir.empty()) return absl::InvalidArgumentError("--out DIR is required");
  if (!parsed.Has("name")) return absl::InvalidArgumentError("--name ROLE is required");
  ASSIGN_OR_RETURN(std::vector<net::KeyRole> roles, RolesNamed(parsed.GetString("name", "")));
  for (net::KeyRole role : roles) {
    ASSIGN_OR_RETURN(net::CurveKeyPair keys, net::GenerateCurveKeyPair());
    RETURN_IF_ERROR(net::WriteKeyFiles(dir, net::KeyRoleName(role), keys));
    std::printf("%s/%s.pub %s\n", dir.c_str(), net::KeyRoleName(role), keys.public_key.c_str());
  }
  return absl::OkStatus();
}

}  // namespace

int RunKeygenCommand(const CommandArgs& args) {
  absl::Status status = Run(args);
  if (!status.ok()) {
    std::fprintf(stderr, "splitspec keygen: %s\n", std::string(status.message()).c_str());
    return absl::IsInvalidArgument(status) ? 2 : 1;
  }
  return 0;
}

}  // namespace splitspec::tools
