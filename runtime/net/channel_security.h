// Channel security: ZeroMQ CURVE keys, who may connect to a listener, and the
// roles a peer's key grants (docs/protocol.md, "Security model").
//
//   ASSIGN_OR_RETURN(ChannelSecurity security, LoadChannelSecurity("keys", KeyRole::kTarget));
//   SetDefaultChannelSecurity(security);       // once, in main(), before any channel
//   ASSIGN_OR_RETURN(auto data, ListenChannel("tcp://0.0.0.0:*"));   // CURVE server
//
// With CURVE on, a listener is a CURVE server with this process's keypair and a
// connector a CURVE client that must know the listener's public key. A ZAP
// handler (one thread per process, started with the first CURVE listener)
// accepts a client only if its public key is in the listener's `authorized`
// table (an empty table accepts any client that completes the handshake); a
// refused client is logged with its address and counted. Every frame a CURVE
// listener receives carries the sender's public key (Frame::peer_key), the
// identity the services authorize on. inproc:// connections never use CURVE
// (they stay inside one process): their frames carry no key.
//
// Key files (written by `splitspec keygen --out DIR --name ROLE`): DIR/ROLE.pub
// holds the Z85 public key, DIR/ROLE.key the Z85 secret key (mode 0600; a
// secret file readable by group or others is refused). Workers may hold
// keys of their own (`keygen --draft-workers N`, `--draft-worker NAME`,
// `--target-workers N`, `--target-worker NAME`): DIR/draft.d/NAME.pub and
// .key for draft workers, DIR/target.d/NAME.pub and .key for target ranks,
// NAME the worker's --name. Every key in draft.d holds the draft role, as does
// DIR/draft.pub (the shared key, kept for compatibility); every key in
// target.d holds the target role, as does DIR/target.pub. The coordinator
// binds each worker id to the key that registered it and hands that key on:
// a target's data port answers a request's draft traffic only from the key
// of the draft worker the coordinator assigned it to, a draft worker expects
// the assigned target's own key as its data port's server key
// (Assignment.target_worker_key), and a follower rank the key its group's
// leader announced with (GroupInfo.leader_key).
//
// Thread safety: the default security may be set and read from any thread.
#ifndef SPLITSPEC_RUNTIME_NET_CHANNEL_SECURITY_H_
#define SPLITSPEC_RUNTIME_NET_CHANNEL_SECURITY_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace splitspec::net {

// Z85 text, 40 characters each.
struct CurveKeyPair {
  std::string public_key;
  std::string secret_key;
};

// The roles of a cluster's keys. A key may hold several (a bitmask).
enum KeyRole : uint32_t {
  kCoordinator = 1u << 0,
  kTarget = 1u << 1,
  kDraft = 1u << 2,
  kClient = 1u << 3,  // submit and cancel requests (HTTP front door, `splitspec client`)
  kAdmin = 1u << 4,   // drain workers (`splitspec scale`)
};
constexpr uint32_t kAllRoles = kCoordinator | kTarget | kDraft | kClient | kAdmin;

// The file names of role keys: "coordinator", "target", "draft", "client", "admin".
const char* KeyRoleName(KeyRole role);
// "target|draft", for messages.
std::string KeyRolesString(uint32_t roles);

struct ChannelSecurity {
  bool curve = false;  // false: plaintext, anyone who reaches a port may talk
  CurveKeyPair own;    // this process's keypair
  // The public keys connectors expect of the listeners they connect to.
  std::string coordinator_public_key;
  std::string target_public_key;  // target data ports and tensor-parallel rendezvous
  // Listeners: public key -> roles. Empty: any CURVE client is accepted (and holds no role).
  std::map<std::string, uint32_t> authorized;
  // Where it was loaded from (LoadChannelSecurity), for RefreshProcessSecurity;
  // empty: made in code.
  std::string keys_dir;
  KeyRole role = kCoordinator;
  std::string worker_name;

  // The roles `peer_key` holds. No CURVE, or no key (an inproc:// peer in this
  // process): every role.
  uint32_t RolesOf(absl::string_view peer_key) const;
};

// The process-wide security that ListenChannel / ConnectChannel use unless
// given one. Default: no CURVE.
void SetDefaultChannelSecurity(const ChannelSecurity& security);
ChannelSecurity DefaultChannelSecurity();

// A fresh keypair. Internal if libzmq was built without CURVE.
absl::StatusOr<CurveKeyPair> GenerateCurveKeyPair();
// The public key of a Z85 secret key; InvalidArgument if it is not one.
absl::StatusOr<std::string> CurvePublicKey(absl::string_view secret_key);

// Writes DIR/NAME.pub and DIR/NAME.key (0600), creating DIR (0700) if needed.
// AlreadyExists if either file exists (keys are never overwritten).
absl::Status WriteKeyFiles(const std::string& dir, const std::string& name,
                           const CurveKeyPair& keys);
// Reads a Z85 public key file (DIR/NAME.pub). Errors name the file.
absl::StatusOr<std::string> ReadPublicKeyFile(const std::string& path);
// Reads DIR/NAME.key (refused if group/other may read it) and derives the public key.
absl::StatusOr<CurveKeyPair> ReadKeyPairFiles(const std::string& dir, const std::string& name);

// The directories of the workers' own keys: "draft.d" and "target.d".
constexpr char kDraftWorkerKeyDir[] = "draft.d";
constexpr char kTargetWorkerKeyDir[] = "target.d";

// InvalidArgument unless `name` can name a worker key file: 1 to 64 of
// [A-Za-z0-9._-], not starting with '.'.
absl::Status CheckWorkerKeyName(absl::string_view name);

// The public keys in DIR/draft.d/*.pub (DIR/target.d/*.pub), sorted; none if
// the directory is absent.
absl::StatusOr<std::vector<std::string>> ReadDraftWorkerPublicKeys(const std::string& dir);
absl::StatusOr<std::vector<std::string>> ReadTargetWorkerPublicKeys(const std::string& dir);

// Key rotation (`splitspec keygen --rotate ROLE`): the role's keys (ROLE and
// every ROLE.d/NAME of draft and target) are replaced by fresh ones, and each
// old public key is kept as DIR/retiring/ROLE.ID.UNTIL.pub (UNTIL: Unix
// seconds); it holds ROLE, beside the new keys, until UNTIL, so that processes
// still running with an old key keep working for the grace period while they
// are restarted or replaced onto the new keys. The coordinator and targets
// re-read the directory while they run (RefreshProcessSecurity). The
// coordinator's key cannot be rotated this way (it is every connector's
// server key): InvalidArgument. Returns the names (relative to DIR) of the
// keys replaced. Errors: the role's keys are missing (NotFound) or cannot be
// written.
constexpr char kRetiringKeyDir[] = "retiring";
absl::StatusOr<std::vector<std::string>> RotateRoleKeys(const std::string& dir, KeyRole role,
                                                        absl::Duration grace,
                                                        absl::Time now = absl::Now());

// The security of a process of `role` from the key directory `dir`:
//   coordinator: own = coordinator.key; authorized = target, draft, client,
//     admin .pub, target.d/*.pub and draft.d/*.pub (those present; target.pub
//     or a target.d key required) and itself (its HTTP front door) as client
//     and admin.
//   target: own = target.d/WORKER.key if `worker_name` is set and that file
//     exists, else target.key; servers: coordinator.pub, target.pub (the
//     default when the coordinator names no target's own key);
//     authorized = draft.pub and draft.d/*.pub (data port) and target.pub and
//     target.d/*.pub (tensor-parallel peers), and its own key.
//   draft: own = draft.d/WORKER.key if `worker_name` is set and that file
//     exists, else draft.key; servers: coordinator.pub, target.pub (as target).
//   client / admin: own = ROLE.key; server: coordinator.pub.
// target.pub may be absent when every target has a key of its own. Wherever
// a role's keys are authorized, so are its retiring keys until their time
// (after `now`). Errors name the missing or malformed file.
absl::StatusOr<ChannelSecurity> LoadChannelSecurity(const std::string& dir, KeyRole role,
                                                    const std::string& worker_name = "",
                                                    absl::Time now = absl::Now());

// Re-reads the key directory the process's default security came from
// (ConfigureProcessSecurity) and, if the authorized keys changed (keys added,
// rotated, retired past their grace), makes the new set the default and the
// one every listener made with the default admits from now on. The process
// keeps its own keypair. Returns whether anything changed; false without a
// key directory. Errors: LoadChannelSecurity's (the old set stays).
absl::StatusOr<bool> RefreshProcessSecurity(absl::Time now = absl::Now());

// Calls RefreshProcessSecurity at most once per `period` from a service's
// loop; a failure is logged once (until it changes or clears) and the old
// keys stay. Thread-compatible (one loop owns it); cheap between refreshes,
// so a service may poll it before every message it authorizes.
class SecurityRefresher {
 public:
  explicit SecurityRefresher(absl::Duration period = absl::Seconds(1)) : period_(period) {}
  // True when the default security changed since the last call (refreshed
  // here, or elsewhere in the process: the ZAP handler re-reads the keys
  // before refusing an unknown one); the caller then takes
  // DefaultChannelSecurity() again.
  bool Poll(absl::Time now);

 private:
  absl::Duration period_;
  absl::Time next_ = absl::InfinitePast();
  std::string last_error_;
  uint64_t seen_generation_ = 0;
};

// The key file name (relative to DIR, without .key/.pub) a process of `role`
// named `worker_name` loads: "draft.d/NAME" ("target.d/NAME") for a draft
// (target) worker whose own key exists, else the role's name.
std::string OwnKeyName(const std::string& dir, KeyRole role, const std::string& worker_name);

// Sets this process's default security from its environment (called once by
// every binary's main, before any channel):
//   SPLITSPEC_KEYS=DIR        CURVE with the keys of `role` in DIR (LoadChannelSecurity)
//   SPLITSPEC_SECURITY=none   plaintext, asked for explicitly
//   neither                   plaintext
// Plaintext is logged as a WARNING naming the risk. Errors: LoadChannelSecurity's,
// or both variables set. `worker_name`: a worker's --name (its own key).
absl::Status ConfigureProcessSecurity(KeyRole role, const std::string& worker_name = "");

// One key directory for a cluster on one host: keys for every role, made now,
// and one key of its own for each of `draft_workers` (draft.d/NAME) and of
// `target_workers` (target.d/NAME, one per target rank). The coordinator's
// security accepts them all; see LoadChannelSecurity.
absl::Status WriteEphemeralClusterKeys(const std::string& dir,
                                       const std::vector<std::string>& draft_workers = {},
                                       const std::vector<std::string>& target_workers = {});

// A security in which one fresh keypair holds every role (an in-process
// cluster over tcp:// loopback, tests).
absl::StatusOr<ChannelSecurity> SingleKeySecurity();

// Counts, process-wide, of CURVE clients the ZAP handler refused (key not
// authorized) and of refusals the services made on top of identity.
uint64_t RefusedHandshakes();
uint64_t RefusedMessages();
void CountRefusedMessage();

// 32 hex digits from the system's cryptographic random source.
std::string RandomHexId128();

// Unguessable names for a sequence of numbers: For(n) is 32 hex digits, a
// keyed pseudo-random function (SipHash-2-4 under two random 128-bit keys) of
// n, the same for the same n on one object; seeing some names tells nothing of
// the others. Thread-safe (immutable after construction).
class UnguessableIds {
 public:
  UnguessableIds();
  std::string For(uint64_t n) const;

 private:
  uint64_t keys_[4];
};

}  // namespace splitspec::net

#endif  // SPLITSPEC_RUNTIME_NET_CHANNEL_SECURITY_H_
