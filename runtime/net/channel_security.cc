#include "runtime/net/channel_security.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/base/logging.h"
#include "runtime/base/mutex.h"
#include "runtime/base/status_macros.h"
#include "runtime/net/zap_handler.h"

namespace splitspec::net {
namespace {

constexpr size_t kZ85KeyLength = 40;

Mutex default_mu;
ChannelSecurity& DefaultSecurityLocked() {
  static ChannelSecurity* security = new ChannelSecurity();
  return *security;
}
// Bumped by every SetDefaultChannelSecurity (SecurityRefresher watches it).
std::atomic<uint64_t> default_generation{0};

std::atomic<uint64_t> refused_messages{0};

absl::Status WriteFileWithMode(const std::string& path, const std::string& text, mode_t mode) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) {
    if (errno == EEXIST)
      return absl::AlreadyExistsError(absl::StrCat(path, " exists; keys are never overwritten"));
    return absl::UnavailableError(absl::StrCat("cannot create ", path, ": ", strerror(errno)));
  }
  const ssize_t written = write(fd, text.data(), text.size());
  fchmod(fd, mode);  // whatever the umask
  close(fd);
  if (written != static_cast<ssize_t>(text.size()))
    return absl::UnavailableError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadKeyText(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read key file ", path));
  std::stringstream text;
  text << in.rdbuf();
  std::string key(absl::StripAsciiWhitespace(text.str()));
  if (key.size() != kZ85KeyLength) {
    return absl::InvalidArgumentError(absl::StrCat(
        "key file ", path, ": expected a ", kZ85KeyLength, "-character Z85 key, got ", key.size(),
        " characters"));
  }
  uint8_t raw[32];
  if (zmq_z85_decode(raw, key.c_str()) == nullptr)
    return absl::InvalidArgumentError(absl::StrCat("key file ", path, ": not Z85 text"));
  return key;
}

}  // namespace

const char* KeyRoleName(KeyRole role) {
  switch (role) {
    case kCoordinator:
      return "coordinator";
    case kTarget:
      return "target";
    case kDraft:
      return "draft";
    case kClient:
      return "client";
    case kAdmin:
      return "admin";
  }
  return "unknown";
}

std::string KeyRolesString(uint32_t roles) {
  std::vector<std::string> names;
  for (KeyRole role : {kCoordinator, kTarget, kDraft, kClient, kAdmin})
    if (roles & role) names.push_back(KeyRoleName(role));
  return names.empty() ? "none" : absl::StrJoin(names, "|");
}

uint32_t ChannelSecurity::RolesOf(absl::string_view peer_key) const {
  if (!curve || peer_key.empty()) return kAllRoles;
  auto it = authorized.find(std::string(peer_key));
  return it == authorized.end() ? 0 : it->second;
}

void SetDefaultChannelSecurity(const ChannelSecurity& security) {
  MutexLock lock(&default_mu);
  DefaultSecurityLocked() = security;
  default_generation.fetch_add(1, std::memory_order_release);
}

ChannelSecurity DefaultChannelSecurity() {
  MutexLock lock(&default_mu);
  return DefaultSecurityLocked();
}

absl::StatusOr<CurveKeyPair> GenerateCurveKeyPair() {
  char public_key[kZ85KeyLength + 1];
  char secret_key[kZ85KeyLength + 1];
  if (zmq_curve_keypair(public_key, secret_key) != 0) {
    return absl::InternalError(
        absl::StrCat("zmq_curve_keypair failed (libzmq without CURVE?): ", zmq_strerror(errno)));
  }
  return CurveKeyPair{public_key, secret_key};
}

absl::StatusOr<std::string> CurvePublicKey(absl::string_view secret_key) {
  const std::string secret(secret_key);
  uint8_t raw[32];
  if (secret.size() != kZ85KeyLength || zmq_z85_decode(raw, secret.c_str()) == nullptr)
    return absl::InvalidArgumentError("not a 40-character Z85 CURVE secret key");
  char public_key[kZ85KeyLength + 1];
  if (zmq_curve_public(public_key, secret.c_str()) != 0)
    return absl::InternalError(absl::StrCat("zmq_curve_public failed: ", zmq_strerror(errno)));
  return std::string(public_key);
}

absl::Status WriteKeyFiles(const std::string& dir, const std::string& name,
                           const CurveKeyPair& keys) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return absl::UnavailableError(absl::StrCat("cannot create ", dir, ": ", strerror(errno)));
  RETURN_IF_ERROR(WriteFileWithMode(absl::StrCat(dir, "/", name, ".key"),
                                    keys.secret_key + "\n", 0600));
  return WriteFileWithMode(absl::StrCat(dir, "/", name, ".pub"), keys.public_key + "\n", 0644);
}

absl::StatusOr<std::string> ReadPublicKeyFile(const std::string& path) { return ReadKeyText(path); }

absl::StatusOr<CurveKeyPair> ReadKeyPairFiles(const std::string& dir, const std::string& name) {
  const std::string path = absl::StrCat(dir, "/", name, ".key");
  struct stat info;
  if (stat(path.c_str(), &info) != 0)
    return absl::NotFoundError(absl::StrCat("cannot read key file ", path));
  if ((info.st_mode & 077) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "secret key file ", path, " may be read by group or others (mode ",
        absl::StrCat(absl::Hex(info.st_mode & 0777)), "); chmod 600 it"));
  }
  ASSIGN_OR_RETURN(std::string secret, ReadKeyText(path));
  ASSIGN_OR_RETURN(std::string public_key, CurvePublicKey(secret));
  return CurveKeyPair{std::move(public_key), std::move(secret)};
}

absl::Status CheckWorkerKeyName(absl::string_view name) {
  const bool valid_chars = std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
  if (name.empty() || name.size() > 64 || name.front() == '.' || !valid_chars) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker key name '", absl::CEscape(name),
                     "' must be 1 to 64 of [A-Za-z0-9._-], not starting with '.'"));
  }
  return absl::OkStatus();
}

namespace {

// The public keys in DIR/SUBDIR/*.pub, sorted by file name.
absl::StatusOr<std::vector<std::string>> ReadWorkerPublicKeys(const std::string& dir,
                                                              const char* subdir) {
  const std::filesystem::path keys_dir = std::filesystem::path(dir) / subdir;
  std::vector<std::string> keys;
  std::error_code error;
  if (!std::filesystem::is_directory(keys_dir, error)) return keys;
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(keys_dir, error)) {
    if (entry.path().extension() == ".pub") files.push_back(entry.path().string());
  }
  if (error) {
    return absl::UnavailableError(
        absl::StrCat("cannot list ", keys_dir.string(), ": ", error.message()));
  }
  std::sort(files.begin(), files.end());
  for (const std::string& file : files) {
    ASSIGN_OR_RETURN(std::string key, ReadPublicKeyFile(file));
    keys.push_back(std::move(key));
  }
  return keys;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ReadDraftWorkerPublicKeys(const std::string& dir) {
  return ReadWorkerPublicKeys(dir, kDraftWorkerKeyDir);
}

absl::StatusOr<std::vector<std::string>> ReadTargetWorkerPublicKeys(const std::string& dir) {
  return ReadWorkerPublicKeys(dir, kTargetWorkerKeyDir);
}

std::string OwnKeyName(const std::string& dir, KeyRole role, const std::string& worker_name) {
  if ((role == kDraft || role == kTarget) && CheckWorkerKeyName(worker_name).ok()) {
    const char* subdir = role == kDraft ? kDraftWorkerKeyDir : kTargetWorkerKeyDir;
    const std::string name = absl::StrCat(subdir, "/", worker_name);
    std::error_code error;
    if (std::filesystem::exists(absl::StrCat(dir, "/", name, ".key"), error)) return name;
  }
  return KeyRoleName(role);
}

namespace {

// Adds the retiring keys of `role` (DIR/retiring/ROLE.ID.UNTIL.pub) whose
// time is after `now` to `security`; returns how many.
absl::StatusOr<int> AuthorizeRetiringKeys(const std::string& dir, KeyRole role, absl::Time now,
                                          ChannelSecurity* security) {
  const std::filesystem::path retiring = std::filesystem::path(dir) / kRetiringKeyDir;
  std::error_code error;
  if (!std::filesystem::is_directory(retiring, error)) return 0;
  int keys = 0;
  for (const auto& entry : std::filesystem::directory_iterator(retiring, error)) {
    const std::string stem = entry.path().stem().string();
    const size_t first = stem.find('.');
    const size_t last = stem.rfind('.');
    int64_t until = 0;
    if (entry.path().extension() != ".pub" || first == std::string::npos || first == last ||
        stem.substr(0, first) != KeyRoleName(role) ||
        !absl::SimpleAtoi(stem.substr(last + 1), &until) || absl::FromUnixSeconds(until) <= now) {
      continue;  // another role's, or past its grace
    }
    ASSIGN_OR_RETURN(std::string key, ReadPublicKeyFile(entry.path().string()));
    security->authorized[key] |= role;
    ++keys;
  }
  if (error) {
    return absl::UnavailableError(
        absl::StrCat("cannot list ", retiring.string(), ": ", error.message()));
  }
  return keys;
}

// Adds every key of `role` (draft or target: ROLE.pub and ROLE.d/*.pub, and
// their retiring keys) to `security`; returns how many current keys there were.
absl::StatusOr<int> AuthorizeWorkerKeys(const std::string& dir, KeyRole role, absl::Time now,
                                        ChannelSecurity* security) {
  RETURN_IF_ERROR(AuthorizeRetiringKeys(dir, role, now, security).status());
  int keys = 0;
  absl::StatusOr<std::string> shared =
      ReadPublicKeyFile(absl::StrCat(dir, "/", KeyRoleName(role), ".pub"));
  if (shared.ok()) {
    security->authorized[*shared] |= role;
    ++keys;
  } else if (!absl::IsNotFound(shared.status())) {
    return shared.status();
  }
  ASSIGN_OR_RETURN(std::vector<std::string> own_keys,
                   ReadWorkerPublicKeys(dir, role == kDraft ? kDraftWorkerKeyDir
                                                            : kTargetWorkerKeyDir));
  for (const std::string& key : own_keys) security->authorized[key] |= role;
  return keys + static_cast<int>(own_keys.size());
}

}  // namespace

absl::StatusOr<ChannelSecurity> LoadChannelSecurity(const std::string& dir, KeyRole role,
                                                    const std::string& worker_name,
                                                    absl::Time now) {
  ChannelSecurity security;
  security.curve = true;
  security.keys_dir = dir;
  security.role = role;
  security.worker_name = worker_name;
  ASSIGN_OR_RETURN(security.own, ReadKeyPairFiles(dir, OwnKeyName(dir, role, worker_name)));
  auto public_of = [&](KeyRole of) {
    return ReadPublicKeyFile(absl::StrCat(dir, "/", KeyRoleName(of), ".pub"));
  };
  if (role == kCoordinator) {
    security.coordinator_public_key = security.own.public_key;
    for (KeyRole peer : {kClient, kAdmin}) {
      absl::StatusOr<std::string> key = public_of(peer);
      if (absl::IsNotFound(key.status())) continue;  // that role cannot connect
      if (!key.ok()) return key.status();
      security.authorized[*key] |= peer;
    }
    for (KeyRole peer : {kClient, kAdmin})
      RETURN_IF_ERROR(AuthorizeRetiringKeys(dir, peer, now, &security).status());
    ASSIGN_OR_RETURN(int target_keys, AuthorizeWorkerKeys(dir, kTarget, now, &security));
    if (target_keys == 0) {
      return absl::NotFoundError(absl::StrCat("key directory ", dir, " has no target.pub and no ",
                                              kTargetWorkerKeyDir,
                                              "/*.pub: no target could register"));
    }
    RETURN_IF_ERROR(AuthorizeWorkerKeys(dir, kDraft, now, &security).status());
    security.authorized[security.own.public_key] |= kClient | kAdmin;  // its own front door
    return security;
  }
  ASSIGN_OR_RETURN(security.coordinator_public_key, public_of(kCoordinator));
  if (role == kTarget || role == kDraft) {
    // The shared target key, if any: the server key expected of a target whose
    // own key the coordinator does not name.
    absl::StatusOr<std::string> shared = public_of(kTarget);
    if (shared.ok()) {
      security.target_public_key = *shared;
    } else if (!absl::IsNotFound(shared.status())) {
      return shared.status();
    }
  }
  if (role == kTarget) {
    security.authorized[security.own.public_key] |= kTarget;
    RETURN_IF_ERROR(AuthorizeWorkerKeys(dir, kTarget, now, &security).status());
    RETURN_IF_ERROR(AuthorizeWorkerKeys(dir, kDraft, now, &security).status());
  }
  return security;
}

absl::StatusOr<std::vector<std::string>> RotateRoleKeys(const std::string& dir, KeyRole role,
                                                        absl::Duration grace, absl::Time now) {
  if (role == kCoordinator) {
    return absl::InvalidArgumentError(
        "the coordinator's key is every process's server key and cannot be rotated while the "
        "cluster runs; make a new key directory and restart the cluster instead");
  }
  if (grace <= absl::ZeroDuration())
    return absl::InvalidArgumentError("the grace period must be positive");
  std::vector<std::string> names;
  std::error_code error;
  if (std::filesystem::exists(absl::StrCat(dir, "/", KeyRoleName(role), ".pub"), error))
    names.push_back(KeyRoleName(role));
  if (role == kDraft || role == kTarget) {
    const std::filesystem::path own =
        std::filesystem::path(dir) / (role == kDraft ? kDraftWorkerKeyDir : kTargetWorkerKeyDir);
    std::vector<std::string> workers;
    if (std::filesystem::is_directory(own, error)) {
      for (const auto& entry : std::filesystem::directory_iterator(own, error)) {
        if (entry.path().extension() == ".pub")
          workers.push_back(absl::StrCat(own.filename().string(), "/",
                                         entry.path().stem().string()));
      }
    }
    std::sort(workers.begin(), workers.end());
    names.insert(names.end(), workers.begin(), workers.end());
  }
  if (names.empty()) {
    return absl::NotFoundError(absl::StrCat("key directory ", dir, " has no ", KeyRoleName(role),
                                            " key to rotate"));
  }
  const std::string retiring = absl::StrCat(dir, "/", kRetiringKeyDir);
  if (mkdir(retiring.c_str(), 0700) != 0 && errno != EEXIST)
    return absl::UnavailableError(absl::StrCat("cannot create ", retiring, ": ", strerror(errno)));
  const int64_t until = absl::ToUnixSeconds(now + grace);
  for (const std::string& name : names) {
    const std::string base = absl::StrCat(dir, "/", name);
    ASSIGN_OR_RETURN(std::string old_key, ReadPublicKeyFile(base + ".pub"));
    // The old key first keeps its role (retiring), then the new one replaces it
    // (renamed into place, so a reader sees one key file or the other, never none).
    RETURN_IF_ERROR(WriteFileWithMode(absl::StrCat(retiring, "/", KeyRoleName(role), ".",
                                                   RandomHexId128().substr(0, 12), ".", until,
                                                   ".pub"),
                                      old_key + "\n", 0644));
    ASSIGN_OR_RETURN(CurveKeyPair keys, GenerateCurveKeyPair());
    for (const auto& [ext, text, mode] :
         {std::tuple{".key", keys.secret_key, mode_t{0600}},
          std::tuple{".pub", keys.public_key, mode_t{0644}}}) {
      const std::string staged = absl::StrCat(base, ext, ".new");
      unlink(staged.c_str());  // left by an interrupted rotation
      RETURN_IF_ERROR(WriteFileWithMode(staged, text + "\n", mode));
      if (rename(staged.c_str(), (base + ext).c_str()) != 0) {
        return absl::UnavailableError(
            absl::StrCat("cannot replace ", base, ext, ": ", strerror(errno)));
      }
    }
  }
  return names;
}

absl::StatusOr<bool> RefreshProcessSecurity(absl::Time now) {
  // One at a time (a service's loop and the ZAP handler's thread), so that every
  // listener's table moves from the default to the next default.
  static Mutex refresh_mu;
  MutexLock lock(&refresh_mu);
  const ChannelSecurity current = DefaultChannelSecurity();
  if (!current.curve || current.keys_dir.empty()) return false;
  ASSIGN_OR_RETURN(ChannelSecurity loaded, LoadChannelSecurity(current.keys_dir, current.role,
                                                               current.worker_name, now));
  ChannelSecurity updated = current;  // its own keypair and server keys stay
  updated.authorized = std::move(loaded.authorized);
  if (current.role == kTarget) updated.authorized[current.own.public_key] |= kTarget;
  if (current.role == kCoordinator) updated.authorized[current.own.public_key] |= kClient | kAdmin;
  if (updated.authorized == current.authorized) return false;
  ReplaceZapAuthorizedKeys(current.authorized, updated.authorized);
  SetDefaultChannelSecurity(updated);
  SPLITSPEC_LOG(INFO) << "keys in " << current.keys_dir << " changed: " << updated.authorized.size()
                      << " key(s) authorized now (" << current.authorized.size() << " before)";
  return true;
}

bool SecurityRefresher::Poll(absl::Time now) {
  if (now >= next_) {
    next_ = now + period_;
    absl::StatusOr<bool> changed = RefreshProcessSecurity(now);
    if (!changed.ok() && std::string(changed.status().message()) != last_error_) {
      last_error_ = std::string(changed.status().message());
      SPLITSPEC_LOG(WARNING) << "keeping the keys loaded before: " << changed.status();
    }
    if (changed.ok()) last_error_.clear();
  }
  // Changed here, or by the ZAP handler's refresh on an unknown key.
  const uint64_t generation = default_generation.load(std::memory_order_acquire);
  if (generation == seen_generation_) return false;
  seen_generation_ = generation;
  return true;
}

absl::Status ConfigureProcessSecurity(KeyRole role, const std::string& worker_name) {
  const char* keys = std::getenv("SPLITSPEC_KEYS");
  const char* mode = std::getenv("SPLITSPEC_SECURITY");
  const bool has_keys = keys != nullptr && *keys != '\0';
  const bool plaintext = mode != nullptr && std::string(mode) == "none";
  if (mode != nullptr && *mode != '\0' && !plaintext && std::string(mode) != "curve") {
    return absl::InvalidArgumentError(
        absl::StrCat("SPLITSPEC_SECURITY=", mode, ": must be \"curve\" or \"none\""));
  }
  if (has_keys && plaintext) {
    return absl::InvalidArgumentError(
        "SPLITSPEC_KEYS and SPLITSPEC_SECURITY=none are both set; choose one");
  }
  if (!has_keys) {
    if (mode != nullptr && std::string(mode) == "curve") {
      return absl::InvalidArgumentError(
          "SPLITSPEC_SECURITY=curve needs SPLITSPEC_KEYS=DIR (see `splitspec keygen`)");
    }
    // Services warn; tools (client, status, scale) only note it.
    const bool service = role == kCoordinator || role == kTarget || role == kDraft;
    const LogLevel level = service ? LogLevel::kWarning : LogLevel::kInfo;
    if (LogEnabled(level)) {
      LogMessage(level, __FILE__, __LINE__).stream()
          << "INSECURE: no CURVE keys ("
          << (plaintext ? "SPLITSPEC_SECURITY=none" : "SPLITSPEC_KEYS unset")
          << "): cluster sockets are plaintext and unauthenticated; anyone who reaches a port "
             "can control the cluster";
    }
    SetDefaultChannelSecurity(ChannelSecurity{});
    return absl::OkStatus();
  }
  absl::StatusOr<ChannelSecurity> security = LoadChannelSecurity(keys, role, worker_name);
  if (!security.ok()) {
    return absl::Status(security.status().code(),
                        absl::StrCat("SPLITSPEC_KEYS=", keys, ": ", security.status().message()));
  }
  SetDefaultChannelSecurity(*security);
  // A key its process was started with right after it was written (`splitspec
  // scale`) is looked for again before the handshake is refused.
  SetZapRefreshHook([] { (void)RefreshProcessSecurity(); });
  SPLITSPEC_LOG(INFO) << "CURVE on: " << KeyRoleName(role) << " key " << security->own.public_key
                      << " from " << keys << "/" << OwnKeyName(keys, role, worker_name) << ".key";
  return absl::OkStatus();
}

absl::Status WriteEphemeralClusterKeys(const std::string& dir,
                                       const std::vector<std::string>& draft_workers,
                                       const std::vector<std::string>& target_workers) {
  for (KeyRole role : {kCoordinator, kTarget, kDraft, kClient, kAdmin}) {
    ASSIGN_OR_RETURN(CurveKeyPair keys, GenerateCurveKeyPair());
    RETURN_IF_ERROR(WriteKeyFiles(dir, KeyRoleName(role), keys));
  }
  for (const auto& [subdir, names] : {std::pair{kDraftWorkerKeyDir, &draft_workers},
                                      std::pair{kTargetWorkerKeyDir, &target_workers}}) {
    for (const std::string& name : *names) {
      RETURN_IF_ERROR(CheckWorkerKeyName(name));
      ASSIGN_OR_RETURN(CurveKeyPair keys, GenerateCurveKeyPair());
      RETURN_IF_ERROR(WriteKeyFiles(absl::StrCat(dir, "/", subdir), name, keys));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ChannelSecurity> SingleKeySecurity() {
  ChannelSecurity security;
  security.curve = true;
  ASSIGN_OR_RETURN(security.own, GenerateCurveKeyPair());
  security.coordinator_public_key = security.own.public_key;
  security.target_public_key = security.own.public_key;
  security.authorized[security.own.public_key] = kAllRoles;
  return security;
}

uint64_t RefusedMessages() { return refused_messages.load(std::memory_order_relaxed); }
void CountRefusedMessage() { refused_messages.fetch_add(1, std::memory_order_relaxed); }

namespace {

uint64_t Rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

// SipHash-2-4 of the 8-byte little-endian message `m` under key (k0, k1).
uint64_t SipHash24(uint64_t k0, uint64_t k1, uint64_t m) {
  uint64_t v0 = k0 ^ 0x736f6d6570736575ull, v1 = k1 ^ 0x646f72616e646f6dull;
  uint64_t v2 = k0 ^ 0x6c7967656e657261ull, v3 = k1 ^ 0x7465646279746573ull;
  auto round = [&] {
    v0 += v1, v1 = Rotl(v1, 13), v1 ^= v0, v0 = Rotl(v0, 32);
    v2 += v3, v3 = Rotl(v3, 16), v3 ^= v2;
    v0 += v3, v3 = Rotl(v3, 21), v3 ^= v0;
    v2 += v1, v1 = Rotl(v1, 17), v1 ^= v2, v2 = Rotl(v2, 32);
  };
  auto absorb = [&](uint64_t block) {
    v3 ^= block;
    round();
    round();
    v0 ^= block;
  };
  absorb(m);
  absorb(uint64_t{8} << 56);  // the length byte of an 8-byte message
  v2 ^= 0xff;
  for (int i = 0; i < 4; ++i) round();
  return v0 ^ v1 ^ v2 ^ v3;
}

void FillRandom(void* out, size_t size) {
  size_t filled = 0;
  while (filled < size) {
    const ssize_t got = getrandom(static_cast<char*>(out) + filled, size - filled, 0);
    if (got > 0) filled += static_cast<size_t>(got);
  }
}

}  // namespace

UnguessableIds::UnguessableIds() { FillRandom(keys_, sizeof(keys_)); }

std::string UnguessableIds::For(uint64_t n) const {
  const uint64_t halves[2] = {SipHash24(keys_[0], keys_[1], n), SipHash24(keys_[2], keys_[3], n)};
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(halves), sizeof(halves)));
}

std::string RandomHexId128() {
  char bytes[16];
  FillRandom(bytes, sizeof(bytes));
  return absl::BytesToHexString(absl::string_view(bytes, sizeof(bytes)));
}

}  // namespace splitspec::net
