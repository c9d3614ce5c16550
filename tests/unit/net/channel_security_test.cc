// Key files, the roles a key directory grants, the environment a process's
// security comes from, CURVE on a channel pair, and unguessable ids.
#include "runtime/net/channel_security.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/net/channel.h"
#include "runtime/net/wire_format.h"

namespace splitspec::net {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

std::string FreshDir(const std::string& name) {
  const std::string dir = absl::StrCat(::testing::TempDir(), "/", getpid(), "-", name);
  std::string command = "rm -rf '" + dir + "'";
  EXPECT_EQ(system(command.c_str()), 0);
  return dir;
}

mode_t ModeOf(const std::string& path) {
  struct stat info;
  EXPECT_EQ(stat(path.c_str(), &info), 0) << path;
  return info.st_mode & 0777;
}

TEST(ChannelSecurityTest, KeyFilesRoundTripWithASecretOnlyTheOwnerReads) {
  const std::string dir = FreshDir("keys-roundtrip");
  absl::StatusOr<CurveKeyPair> keys = GenerateCurveKeyPair();
  ASSERT_TRUE(keys.ok()) << keys.status();
  ASSERT_TRUE(WriteKeyFiles(dir, "draft", *keys).ok());
  EXPECT_EQ(ModeOf(dir + "/draft.key"), 0600u);
  EXPECT_EQ(ModeOf(dir + "/draft.pub"), 0644u);
  EXPECT_EQ(ModeOf(dir), 0700u);
  absl::StatusOr<CurveKeyPair> read = ReadKeyPairFiles(dir, "draft");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->public_key, keys->public_key);
  EXPECT_EQ(read->secret_key, keys->secret_key);
  absl::StatusOr<std::string> pub = ReadPublicKeyFile(dir + "/draft.pub");
  ASSERT_TRUE(pub.ok());
  EXPECT_EQ(*pub, keys->public_key);

  const absl::Status again = WriteKeyFiles(dir, "draft", *keys);
  EXPECT_TRUE(absl::IsAlreadyExists(again)) << again;
  EXPECT_THAT(again.message(), HasSubstr("never overwritten"));
}

TEST(ChannelSecurityTest, ASecretKeyOthersMayReadIsRefused) {
  const std::string dir = FreshDir("keys-readable");
  ASSERT_TRUE(WriteKeyFiles(dir, "target", *GenerateCurveKeyPair()).ok());
  ASSERT_EQ(chmod((dir + "/target.key").c_str(), 0644), 0);
  const absl::StatusOr<CurveKeyPair> read = ReadKeyPairFiles(dir, "target");
  EXPECT_TRUE(absl::IsInvalidArgument(read.status())) << read.status();
  EXPECT_THAT(read.status().message(), HasSubstr("target.key may be read by group or others"));
}

TEST(ChannelSecurityTest, AMalformedKeyFileIsNamed) {
  const std::string dir = FreshDir("keys-malformed");
  ASSERT_TRUE(WriteKeyFiles(dir, "admin", *GenerateCurveKeyPair()).ok());
  std::ofstream(dir + "/coordinator.pub") << "too-short\n";
  const absl::StatusOr<ChannelSecurity> security = LoadChannelSecurity(dir, kAdmin);
  EXPECT_THAT(security.status().message(), HasSubstr("coordinator.pub: expected a 40-character"));
}

TEST(ChannelSecurityTest, TheCoordinatorAuthorizesEachRolesKeyForThatRole) {
  const std::string dir = FreshDir("keys-roles");
  ASSERT_TRUE(WriteEphemeralClusterKeys(dir).ok());
  absl::StatusOr<ChannelSecurity> coordinator = LoadChannelSecurity(dir, kCoordinator);
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  auto public_of = [&](const char* role) {
    return *ReadPublicKeyFile(absl::StrCat(dir, "/", role, ".pub"));
  };
  EXPECT_EQ(coordinator->RolesOf(public_of("target")), static_cast<uint32_t>(kTarget));
  EXPECT_EQ(coordinator->RolesOf(public_of("draft")), static_cast<uint32_t>(kDraft));
  EXPECT_EQ(coordinator->RolesOf(public_of("client")), static_cast<uint32_t>(kClient));
  EXPECT_EQ(coordinator->RolesOf(public_of("admin")), static_cast<uint32_t>(kAdmin));
  EXPECT_EQ(coordinator->RolesOf(public_of("coordinator")),
            static_cast<uint32_t>(kClient | kAdmin));  // its own HTTP front door
  EXPECT_EQ(coordinator->RolesOf(GenerateCurveKeyPair()->public_key), 0u);
  EXPECT_EQ(coordinator->RolesOf(""), kAllRoles);  // inproc://: this process

  absl::StatusOr<ChannelSecurity> draft = LoadChannelSecurity(dir, kDraft);
  ASSERT_TRUE(draft.ok()) << draft.status();
  EXPECT_EQ(draft->coordinator_public_key, public_of("coordinator"));
  EXPECT_EQ(draft->target_public_key, public_of("target"));
  absl::StatusOr<ChannelSecurity> target = LoadChannelSecurity(dir, kTarget);
  ASSERT_TRUE(target.ok()) << target.status();
  EXPECT_EQ(target->RolesOf(public_of("draft")), static_cast<uint32_t>(kDraft));
  EXPECT_EQ(target->RolesOf(public_of("client")), 0u);  // nobody else on the data port
}

// Draft workers' own keys (draft.d/NAME): a draft worker named NAME loads its
// own; one without (or with a name that cannot name a file) loads the shared
// draft key; the coordinator and targets grant every one of them the draft role.
TEST(ChannelSecurityTest, DraftWorkersLoadTheirOwnKeysAndEveryOneIsADraftKey) {
  const std::string dir = FreshDir("keys-workers");
  ASSERT_TRUE(WriteEphemeralClusterKeys(dir, {"draft-0", "draft-1"}).ok());
  auto public_of = [&](const std::string& name) {
    return *ReadPublicKeyFile(absl::StrCat(dir, "/", name, ".pub"));
  };
  EXPECT_EQ(ModeOf(dir + "/draft.d/draft-1.key"), 0600u);
  EXPECT_NE(public_of("draft.d/draft-0"), public_of("draft.d/draft-1"));
  absl::StatusOr<ChannelSecurity> own = LoadChannelSecurity(dir, kDraft, "draft-1");
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_EQ(own->own.public_key, public_of("draft.d/draft-1"));
  EXPECT_EQ(OwnKeyName(dir, kDraft, "draft-1"), "draft.d/draft-1");
  absl::StatusOr<ChannelSecurity> unnamed = LoadChannelSecurity(dir, kDraft, "draft-9");
  ASSERT_TRUE(unnamed.ok()) << unnamed.status();
  EXPECT_EQ(unnamed->own.public_key, public_of("draft"));
  EXPECT_EQ(OwnKeyName(dir, kDraft, "../draft.d/draft-0"), "draft");
  EXPECT_EQ(OwnKeyName(dir, kTarget, "draft-0"), "target");  // no target.d/draft-0
  EXPECT_THAT(CheckWorkerKeyName("../x").message(), HasSubstr("worker key name '../x'"));
  EXPECT_THAT(
      *ReadDraftWorkerPublicKeys(dir),
      ::testing::UnorderedElementsAre(public_of("draft.d/draft-0"), public_of("draft.d/draft-1")));

  for (KeyRole role : {kCoordinator, kTarget}) {
    absl::StatusOr<ChannelSecurity> server = LoadChannelSecurity(dir, role);
    ASSERT_TRUE(server.ok()) << server.status();
    for (const std::string name : {"draft", "draft.d/draft-0", "draft.d/draft-1"}) {
      EXPECT_EQ(server->RolesOf(public_of(name)), static_cast<uint32_t>(kDraft))
          << KeyRoleName(role) << " " << name;
    }
  }
}

// Target ranks' own keys (target.d/NAME), as draft workers have: each rank
// named NAME loads its own, so no two targets share a key; the coordinator
// and every target grant each of them the target role (tensor-parallel peers),
// and a directory with target.d keys but no shared target.pub still serves.
TEST(ChannelSecurityTest, EachTargetWorkerLoadsAKeyOfItsOwn) {
  const std::string dir = FreshDir("keys-targets");
  ASSERT_TRUE(WriteEphemeralClusterKeys(dir, {"draft-0"}, {"target-0", "target-1"}).ok());
  auto public_of = [&](const std::string& name) {
    return *ReadPublicKeyFile(absl::StrCat(dir, "/", name, ".pub"));
  };
  EXPECT_EQ(ModeOf(dir + "/target.d/target-1.key"), 0600u);
  absl::StatusOr<ChannelSecurity> t0 = LoadChannelSecurity(dir, kTarget, "target-0");
  absl::StatusOr<ChannelSecurity> t1 = LoadChannelSecurity(dir, kTarget, "target-1");
  ASSERT_TRUE(t0.ok()) << t0.status();
  ASSERT_TRUE(t1.ok()) << t1.status();
  EXPECT_EQ(t0->own.public_key, public_of("target.d/target-0"));
  EXPECT_EQ(t1->own.public_key, public_of("target.d/target-1"));
  EXPECT_NE(t0->own.public_key, t1->own.public_key);
  EXPECT_NE(t0->own.public_key, public_of("target"));
  EXPECT_EQ(OwnKeyName(dir, kTarget, "target-1"), "target.d/target-1");
  EXPECT_EQ(OwnKeyName(dir, kDraft, "target-1"), "draft");  // no draft.d/target-1
  EXPECT_THAT(*ReadTargetWorkerPublicKeys(dir),
              ::testing::UnorderedElementsAre(public_of("target.d/target-0"),
                                              public_of("target.d/target-1")));
  for (KeyRole role : {kCoordinator, kTarget}) {
    absl::StatusOr<ChannelSecurity> server = LoadChannelSecurity(dir, role);
    ASSERT_TRUE(server.ok()) << server.status();
    for (const std::string name : {"target", "target.d/target-0", "target.d/target-1"}) {
      EXPECT_EQ(server->RolesOf(public_of(name)), static_cast<uint32_t>(kTarget))
          << KeyRoleName(role) << " " << name;
    }
  }
  EXPECT_EQ(t0->RolesOf(public_of("target.d/target-1")), static_cast<uint32_t>(kTarget));

  ASSERT_EQ(unlink((dir + "/target.pub").c_str()), 0);
  ASSERT_EQ(unlink((dir + "/target.key").c_str()), 0);
  absl::StatusOr<ChannelSecurity> coordinator = LoadChannelSecurity(dir, kCoordinator);
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  EXPECT_EQ(coordinator->RolesOf(public_of("target.d/target-0")), static_cast<uint32_t>(kTarget));
  absl::StatusOr<ChannelSecurity> draft = LoadChannelSecurity(dir, kDraft, "draft-0");
  ASSERT_TRUE(draft.ok()) << draft.status();
  EXPECT_EQ(draft->target_public_key, "");  // the coordinator names each target's key
  const std::string none = FreshDir("keys-no-targets");
  ASSERT_TRUE(WriteEphemeralClusterKeys(none).ok());
  ASSERT_EQ(unlink((none + "/target.pub").c_str()), 0);
  EXPECT_THAT(LoadChannelSecurity(none, kCoordinator).status().message(),
              HasSubstr("has no target.pub and no target.d/*.pub"));
}

// `keygen --rotate ROLE`: the role's keys (shared and own) are replaced, the old
// public keys keep the role until the grace period ends, and a running process
// that re-reads its key directory admits the new keys (keeping its own keypair).
TEST(ChannelSecurityTest, RotatedKeysRetireAfterTheirGracePeriod) {
  const std::string dir = FreshDir("keys-rotate");
  ASSERT_TRUE(WriteEphemeralClusterKeys(dir, {"draft-0"}, {"target-0"}).ok());
  auto public_of = [&](const std::string& name) {
    return *ReadPublicKeyFile(absl::StrCat(dir, "/", name, ".pub"));
  };
  const std::string old_shared = public_of("draft"), old_own = public_of("draft.d/draft-0");
  const absl::Time now = absl::Now();
  absl::StatusOr<std::vector<std::string>> rotated =
      RotateRoleKeys(dir, kDraft, absl::Seconds(60), now);
  ASSERT_TRUE(rotated.ok()) << rotated.status();
  EXPECT_THAT(*rotated, ::testing::ElementsAre("draft", "draft.d/draft-0"));
  EXPECT_NE(public_of("draft"), old_shared);
  EXPECT_NE(public_of("draft.d/draft-0"), old_own);
  EXPECT_EQ(ModeOf(dir + "/draft.d/draft-0.key"), 0600u);
  EXPECT_EQ(LoadChannelSecurity(dir, kDraft, "draft-0")->own.public_key,
            public_of("draft.d/draft-0"));
  for (KeyRole role : {kCoordinator, kTarget}) {
    absl::StatusOr<ChannelSecurity> during = LoadChannelSecurity(dir, role, "", now + absl::Seconds(30));
    absl::StatusOr<ChannelSecurity> after = LoadChannelSecurity(dir, role, "", now + absl::Seconds(61));
    ASSERT_TRUE(during.ok() && after.ok()) << during.status() << after.status();
    for (const std::string& key : {old_shared, old_own, public_of("draft"),
                                   public_of("draft.d/draft-0")}) {
      EXPECT_EQ(during->RolesOf(key), static_cast<uint32_t>(kDraft)) << KeyRoleName(role);
    }
    EXPECT_EQ(after->RolesOf(old_shared), 0u) << KeyRoleName(role);
    EXPECT_EQ(after->RolesOf(old_own), 0u) << KeyRoleName(role);
    EXPECT_EQ(after->RolesOf(public_of("draft.d/draft-0")), static_cast<uint32_t>(kDraft));
  }
  EXPECT_THAT(RotateRoleKeys(dir, kCoordinator, absl::Seconds(60)).status().message(),
              HasSubstr("cannot be rotated while the cluster runs"));

  // A running coordinator re-reads its directory: a rotated client key is admitted,
  // the old one too until its time, and its own keypair stays.
  absl::StatusOr<ChannelSecurity> coordinator = LoadChannelSecurity(dir, kCoordinator);
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  SetDefaultChannelSecurity(*coordinator);
  absl::StatusOr<bool> unchanged = RefreshProcessSecurity();
  ASSERT_TRUE(unchanged.ok()) << unchanged.status();
  EXPECT_FALSE(*unchanged);
  const std::string old_client = public_of("client");
  ASSERT_TRUE(RotateRoleKeys(dir, kClient, absl::Seconds(60)).ok());
  absl::StatusOr<bool> changed = RefreshProcessSecurity();
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  const ChannelSecurity refreshed = DefaultChannelSecurity();
  EXPECT_EQ(refreshed.RolesOf(public_of("client")), static_cast<uint32_t>(kClient));
  EXPECT_EQ(refreshed.RolesOf(old_client), static_cast<uint32_t>(kClient));
  EXPECT_EQ(refreshed.own.public_key, coordinator->own.public_key);
  absl::StatusOr<bool> retired = RefreshProcessSecurity(absl::Now() + absl::Seconds(61));
  ASSERT_TRUE(retired.ok()) << retired.status();
  EXPECT_TRUE(*retired);
  EXPECT_EQ(DefaultChannelSecurity().RolesOf(old_client), 0u);
  SetDefaultChannelSecurity(ChannelSecurity{});
}

TEST(ChannelSecurityTest, TheEnvironmentChoosesTheProcessSecurity) {
  const std::string dir = FreshDir("keys-env");
  ASSERT_TRUE(WriteEphemeralClusterKeys(dir).ok());
  setenv("SPLITSPEC_KEYS", dir.c_str(), 1);
  unsetenv("SPLITSPEC_SECURITY");
  ASSERT_TRUE(ConfigureProcessSecurity(kClient).ok());
  EXPECT_TRUE(DefaultChannelSecurity().curve);
  EXPECT_EQ(DefaultChannelSecurity().own.public_key, *ReadPublicKeyFile(dir + "/client.pub"));

  setenv("SPLITSPEC_SECURITY", "none", 1);
  const absl::Status both = ConfigureProcessSecurity(kClient);
  EXPECT_THAT(both.message(), HasSubstr("both set"));
  unsetenv("SPLITSPEC_KEYS");
  ASSERT_TRUE(ConfigureProcessSecurity(kClient).ok());
  EXPECT_FALSE(DefaultChannelSecurity().curve);

  setenv("SPLITSPEC_KEYS", (dir + "/missing").c_str(), 1);
  unsetenv("SPLITSPEC_SECURITY");
  const absl::Status missing = ConfigureProcessSecurity(kTarget);
  EXPECT_THAT(missing.message(), HasSubstr("missing/target.key"));
  unsetenv("SPLITSPEC_KEYS");
  SetDefaultChannelSecurity(ChannelSecurity{});
}

TEST(ChannelSecurityTest, CurveFramesCarryTheSendersKeyAndAddress) {
  absl::StatusOr<ChannelSecurity> server = SingleKeySecurity();
  ASSERT_TRUE(server.ok());
  const CurveKeyPair client_keys = *GenerateCurveKeyPair();
  server->authorized[client_keys.public_key] = kClient;
  auto listener = ListenChannel("tcp://127.0.0.1:*", *server);
  ASSERT_TRUE(listener.ok()) << listener.status();
  ChannelSecurity client;
  client.curve = true;
  client.own = client_keys;
  auto connector = ConnectChannel((*listener)->endpoint(), "client-1", client,
                                  server->own.public_key);
  ASSERT_TRUE(connector.ok()) << connector.status();
  proto::Envelope hello = NewEnvelope();
  hello.mutable_status_request();
  ASSERT_TRUE((*connector)->Send("", hello).ok());
  absl::StatusOr<Frame> frame = (*listener)->Receive(absl::Seconds(10));
  ASSERT_TRUE(frame.ok()) << frame.status();
  EXPECT_EQ(frame->peer, "client-1");
  EXPECT_EQ(frame->peer_key, client_keys.public_key);
  EXPECT_EQ(frame->peer_address, "127.0.0.1");
}

TEST(ChannelSecurityTest, ConnectingWithCurveButNoServerKeyIsAnError) {
  ChannelSecurity client;
  client.curve = true;
  client.own = *GenerateCurveKeyPair();
  auto connector = ConnectChannel("tcp://127.0.0.1:1", "c", client);
  EXPECT_THAT(connector.status().message(), HasSubstr("server's public key is not known"));
}

TEST(ChannelSecurityTest, UnguessableIdsAreStablePerNumberAndUnrelatedAcrossObjects) {
  const UnguessableIds ids;
  const UnguessableIds other;
  std::set<std::string> seen;
  for (uint64_t n = 0; n < 1000; ++n) {
    const std::string id = ids.For(n);
    EXPECT_THAT(id, MatchesRegex("[0-9a-f]{32}"));
    EXPECT_EQ(ids.For(n), id);
    EXPECT_NE(other.For(n), id);
    seen.insert(id);
  }
  EXPECT_EQ(seen.size(), 1000u);
  EXPECT_NE(RandomHexId128(), RandomHexId128());
}

}  // namespace
}  // namespace splitspec::net
