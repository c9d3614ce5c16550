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
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/base/logging.h"
#include "runtime/base/mutex.h"
#include "runtime/base/status_macros.h"

namespace splitspec::net {
namespace {

constexpr size_t kZ85KeyLength = 40;

Mutex default_mu;
ChannelSecurity& DefaultSecurityLocked() {
  static ChannelSecurity* security = new ChannelSecurity();
  return *security;
}

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

absl::StatusOr<std::vector<std::string>> ReadDraftWorkerPublicKeys(const std::string& dir) {
  const std::filesystem::path keys_dir = std::filesystem::path(dir) / kDraftWorkerKeyDir;
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

std::string OwnKeyName(const std::string& dir, KeyRole role, const std::string& worker_name) {
  if (role == kDraft && CheckWorkerKeyName(worker_name).ok()) {
    const std::string name = absl::StrCat(kDraftWorkerKeyDir, "/", worker_name);
    std::error_code error;
    if (std::filesystem::exists(absl::StrCat(dir, "/", name, ".key"), error)) return name;
  }
  return KeyRoleName(role);
}

namespace {

// Adds every key of the draft role (draft.pub, draft.d/*.pub) to `security`.
absl::Status AuthorizeDraftKeys(const std::string& dir, ChannelSecurity* security) {
  absl::StatusOr<std::string> shared = ReadPublicKeyFile(absl::StrCat(dir, "/draft.pub"));
  if (shared.ok()) {
    security->authorized[*shared] |= kDraft;
  } else if (!absl::IsNotFound(shared.status())) {
    return shared.status();
  }
  ASSIGN_OR_RETURN(std::vector<std::string> own_keys, ReadDraftWorkerPublicKeys(dir));
  for (const std::string& key : own_keys) security->authorized[key] |= kDraft;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ChannelSecurity> LoadChannelSecurity(const std::string& dir, KeyRole role,
                                                    const std::string& worker_name) {
  ChannelSecurity security;
  security.curve = true;
  ASSIGN_OR_RETURN(security.own, ReadKeyPairFiles(dir, OwnKeyName(dir, role, worker_name)));
  auto public_of = [&](KeyRole of) {
    return ReadPublicKeyFile(absl::StrCat(dir, "/", KeyRoleName(of), ".pub"));
  };
  if (role == kCoordinator) {
    security.coordinator_public_key = security.own.public_key;
    bool any_worker = false;
    for (KeyRole peer : {kTarget, kClient, kAdmin}) {
      absl::StatusOr<std::string> key = public_of(peer);
      if (absl::IsNotFound(key.status())) continue;  // that role cannot connect
      if (!key.ok()) return key.status();
      security.authorized[*key] |= peer;
      any_worker = any_worker || peer == kTarget;
    }
    if (!any_worker) {
      return absl::NotFoundError(
          absl::StrCat("key directory ", dir, " has no target.pub: no target could register"));
    }
    RETURN_IF_ERROR(AuthorizeDraftKeys(dir, &security));
    security.authorized[security.own.public_key] |= kClient | kAdmin;  // its own front door
    return security;
  }
  ASSIGN_OR_RETURN(security.coordinator_public_key, public_of(kCoordinator));
  if (role == kTarget || role == kDraft) {
    ASSIGN_OR_RETURN(security.target_public_key, public_of(kTarget));
  }
  if (role == kTarget) {
    security.authorized[security.own.public_key] |= kTarget;
    RETURN_IF_ERROR(AuthorizeDraftKeys(dir, &security));
  }
  return security;
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
  SPLITSPEC_LOG(INFO) << "CURVE on: " << KeyRoleName(role) << " key " << security->own.public_key
                      << " from " << keys << "/" << OwnKeyName(keys, role, worker_name) << ".key";
  return absl::OkStatus();
}

absl::Status WriteEphemeralClusterKeys(const std::string& dir,
                                       const std::vector<std::string>& draft_workers) {
  for (KeyRole role : {kCoordinator, kTarget, kDraft, kClient, kAdmin}) {
    ASSIGN_OR_RETURN(CurveKeyPair keys, GenerateCurveKeyPair());
    RETURN_IF_ERROR(WriteKeyFiles(dir, KeyRoleName(role), keys));
  }
  for (const std::string& name : draft_workers) {
    RETURN_IF_ERROR(CheckWorkerKeyName(name));
    ASSIGN_OR_RETURN(CurveKeyPair keys, GenerateCurveKeyPair());
    RETURN_IF_ERROR(WriteKeyFiles(absl::StrCat(dir, "/", kDraftWorkerKeyDir), name, keys));
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
