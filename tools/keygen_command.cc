// `splitspec keygen --out DIR --name ROLE`: writes a CURVE keypair for one
// role of a cluster: DIR/ROLE.pub (the Z85 public key) and DIR/ROLE.key (the
// Z85 secret key, mode 0600). ROLE is coordinator, target, draft, client,
// admin, or "all" for the five. `--draft-workers N` / `--draft-worker NAME`
// also write keys of their own for draft workers: DIR/draft.d/NAME.pub and
// .key, loaded by the draft worker started with --name NAME;
// `--target-workers N` / `--target-worker NAME` the same for target ranks in
// DIR/target.d. Existing files are never overwritten, except by
// `--rotate ROLE [--grace-s S]`: fresh keys replace the role's keys in a
// running cluster, the old public keys staying accepted for the grace period
// (net::RotateRoleKeys; docs/protocol.md, "Security model").
// Processes find the keys through SPLITSPEC_KEYS=DIR (see
// runtime/net/channel_security.h and docs/protocol.md, "Security model").
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
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

// The workers of `role` ("draft" or "target") named by --ROLE-workers and
// --ROLE-worker, checked.
absl::StatusOr<std::vector<std::string>> WorkersNamed(const CliArgs& parsed,
                                                      const std::string& role) {
  const std::string count_flag = absl::StrCat(role, "-workers");
  const std::string name_flag = absl::StrCat(role, "-worker");
  ASSIGN_OR_RETURN(int count, parsed.GetInt<int>(count_flag, 0));
  if (count < 0 || count > 4096)
    return absl::InvalidArgumentError(
        absl::StrCat("--", count_flag, " ", count, ": not in [0, 4096]"));
  std::vector<std::string> names;
  for (int64_t i = 0; i < count; ++i) names.push_back(absl::StrCat(role, "-", i));
  const std::string listed = parsed.GetString(name_flag, "");
  for (absl::string_view name : absl::StrSplit(listed, ',', absl::SkipEmpty())) {
    if (absl::Status valid = net::CheckWorkerKeyName(name); !valid.ok())
      return absl::InvalidArgumentError(absl::StrCat("--", name_flag, ": ", valid.message()));
    names.emplace_back(name);
  }
  return names;
}

absl::Status WriteAndPrint(const std::string& dir, const std::string& name) {
  ASSIGN_OR_RETURN(net::CurveKeyPair keys, net::GenerateCurveKeyPair());
  RETURN_IF_ERROR(net::WriteKeyFiles(dir, name, keys));
  std::printf("%s/%s.pub %s\n", dir.c_str(), name.c_str(), keys.public_key.c_str());
  return absl::OkStatus();
}

// --rotate ROLE: new keys for the role, the old ones retiring after --grace-s.
absl::Status Rotate(const CliArgs& parsed, const std::string& dir) {
  if (parsed.Has("name") || parsed.Has("draft-workers") || parsed.Has("draft-worker") ||
      parsed.Has("target-workers") || parsed.Has("target-worker")) {
    return absl::InvalidArgumentError("--rotate ROLE goes alone (with --out and --grace-s)");
  }
  ASSIGN_OR_RETURN(std::vector<net::KeyRole> roles, RolesNamed(parsed.GetString("rotate", "")));
  if (roles.size() != 1)
    return absl::InvalidArgumentError("--rotate takes one role: target, draft, client or admin");
  ASSIGN_OR_RETURN(double grace_s, parsed.GetDouble("grace-s", 300));
  if (!(grace_s > 0) || grace_s > 7 * 86400) {
    return absl::InvalidArgumentError(
        absl::StrCat("--grace-s ", grace_s, ": not in (0, 604800] seconds"));
  }
  const absl::Time now = absl::Now();
  ASSIGN_OR_RETURN(std::vector<std::string> names,
                   net::RotateRoleKeys(dir, roles[0], absl::Seconds(grace_s), now));
  for (const std::string& name : names) {
    ASSIGN_OR_RETURN(std::string key, net::ReadPublicKeyFile(absl::StrCat(dir, "/", name, ".pub")));
    std::printf("%s/%s.pub %s\n", dir.c_str(), name.c_str(), key.c_str());
  }
  std::printf("old %s keys accepted until %s (%s/%s)\n", net::KeyRoleName(roles[0]),
              absl::FormatTime(absl::RFC3339_sec, now + absl::Seconds(grace_s),
                               absl::UTCTimeZone())
                  .c_str(),
              dir.c_str(), net::kRetiringKeyDir);
  return absl::OkStatus();
}

absl::Status Run(const CommandArgs& args) {
  ASSIGN_OR_RETURN(CliArgs parsed, CliArgs::Parse(args, KeygenFlagTable()));
  const std::string dir = parsed.GetString("out", "");
  if (dir.empty()) return absl::InvalidArgumentError("--out DIR is required");
  if (parsed.Has("rotate")) return Rotate(parsed, dir);
  ASSIGN_OR_RETURN(std::vector<std::string> draft_workers, WorkersNamed(parsed, "draft"));
  ASSIGN_OR_RETURN(std::vector<std::string> target_workers, WorkersNamed(parsed, "target"));
  if (!parsed.Has("name") && draft_workers.empty() && target_workers.empty()) {
    return absl::InvalidArgumentError(
        "--name ROLE (or --draft-workers N, --target-workers N) is required");
  }
  if (parsed.Has("name")) {
    ASSIGN_OR_RETURN(std::vector<net::KeyRole> roles, RolesNamed(parsed.GetString("name", "")));
    for (net::KeyRole role : roles) RETURN_IF_ERROR(WriteAndPrint(dir, net::KeyRoleName(role)));
  }
  if (!draft_workers.empty() || !target_workers.empty()) {
    // The parent first: WriteKeyFiles makes only the last directory (0700).
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
      return absl::UnavailableError(absl::StrCat("cannot create ", dir, ": ", strerror(errno)));
  }
  for (const std::string& name : draft_workers) {
    RETURN_IF_ERROR(WriteAndPrint(absl::StrCat(dir, "/", net::kDraftWorkerKeyDir), name));
  }
  for (const std::string& name : target_workers) {
    RETURN_IF_ERROR(WriteAndPrint(absl::StrCat(dir, "/", net::kTargetWorkerKeyDir), name));
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
