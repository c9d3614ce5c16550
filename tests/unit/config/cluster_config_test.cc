#include "runtime/config/cluster_config.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace splitspec::config {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<ClusterConfig> Parse(const std::string& text) {
  return ParseClusterConfig(text, "c.toml", "/base");
}

std::string ErrorOf(const std::string& text) {
  absl::StatusOr<ClusterConfig> c = Parse(text);
  EXPECT_FALSE(c.ok()) << "accepted:\n" << text;
  if (c.ok()) return "";
  EXPECT_TRUE(absl::IsInvalidArgument(c.status())) << c.status();
  return std::string(c.status().message());
}

TEST(ClusterConfigTest, EmptyFileGivesTheDocumentedDefaults) {
  absl::StatusOr<ClusterConfig> c = Parse("");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->coordinator.host, "localhost");
  EXPECT_EQ(c->coordinator.control, "tcp://127.0.0.1:5555");
  EXPECT_EQ(c->coordinator.WorkerEndpoint(), "tcp://127.0.0.1:5555");
  EXPECT_EQ(c->coordinator.http, "127.0.0.1:8000");
  EXPECT_EQ(c->coordinator.api_key_env, "SPLITSPEC_API_KEY");
  EXPECT_EQ(c->coordinator.limits, CoordinatorLimits{});
  EXPECT_EQ(c->coordinator.limits.max_queued_requests, 256);
  ASSERT_EQ(c->target_groups.size(), 1u);
  EXPECT_EQ(c->target_groups[0].name, "target");
  EXPECT_EQ(c->target_groups[0].tp, 1);
  EXPECT_THAT(c->target_groups[0].devices, ::testing::ElementsAre("cpu"));
  ASSERT_EQ(c->draft_pools.size(), 1u);
  EXPECT_EQ(c->draft_pools[0].name, "draft");
  EXPECT_EQ(c->draft_pools[0].count, 1);
  EXPECT_EQ(c->draft_pools[0].drafter, "lookup");
  EXPECT_EQ(c->draft_pools[0].k, 4);
  EXPECT_EQ(c->draft_pools[0].lookahead, 2);
  EXPECT_EQ(c->security.mode, "curve");  // authenticated unless asked otherwise
  EXPECT_EQ(c->security.keys_dir, "");
  EXPECT_EQ(c->security.tp_network, "untrusted");  // Gloo's plaintext needs a word from the user
}

TEST(ClusterConfigTest, SecurityTableNamesTheModeAndTheKeyDirectory) {
  absl::StatusOr<ClusterConfig> c = Parse("[security]\nmode = \"none\"\nkeys_dir = \"keys\"\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->security.mode, "none");
  EXPECT_THAT(c->security.keys_dir, ::testing::EndsWith("/keys"));  // against the file's folder
  EXPECT_EQ(Parse("[security]\ntp_network = \"trusted\"\n")->security.tp_network, "trusted");
  EXPECT_THAT(ErrorOf("[security]\nmode = \"plain\"\n"),
              HasSubstr("c.toml:2: security.mode: \"plain\" must be \"curve\" or \"none\""));
  EXPECT_THAT(ErrorOf("[security]\nkey_dir = \"keys\"\n"),
              HasSubstr("c.toml:2: security.key_dir: unknown key"));
}

TEST(ClusterConfigTest, ReadsEveryField) {
  absl::StatusOr<ClusterConfig> c = Parse(R"(
[cluster]
run_dir = "runs"
[coordinator]
host = "node1"
control = "tcp://0.0.0.0:6000"
advertise = "tcp://10.0.0.1:6000"
http = "none"
api_key_env = "MY_KEY"
[coordinator.limits]
max_queued_requests = 8
max_new_tokens = 100
context_length = 200
[models]
target = "/abs/t.gguf"
draft = "models/d.gguf"
[[target_group]]
name = "g0"
tp = 2
devices = ["cuda:0", "cuda:1"]
threads = 3
host = "node2"
data_endpoint = "tcp://10.0.0.2:7000"
[[target_group]]
name = "g1"
host = "node3"
data_endpoint = "tcp://10.0.0.3:*"
[[draft_pool]]
name = "p"
count = 3
drafter = "model"
draft_model = "../d2.gguf"
k = 6
lookahead = 1
devices = ["cuda:0", "cuda:1"]
threads = 2
host = "node1"
)");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->run_dir, "/base/runs");
  EXPECT_EQ(c->coordinator.host, "node1");
  EXPECT_EQ(c->coordinator.WorkerEndpoint(), "tcp://10.0.0.1:6000");
  EXPECT_EQ(c->coordinator.http, "none");
  EXPECT_EQ(c->coordinator.api_key_env, "MY_KEY");
  EXPECT_EQ(c->coordinator.limits.max_queued_requests, 8);
  EXPECT_EQ(c->coordinator.limits.max_new_tokens, 100);
  EXPECT_EQ(c->coordinator.limits.context_length, 200);
  EXPECT_EQ(c->models.target, "/abs/t.gguf");
  EXPECT_EQ(c->models.draft, "/base/models/d.gguf");  // relative to the config's folder
  ASSERT_EQ(c->target_groups.size(), 2u);
  EXPECT_EQ(c->target_groups[0].tp, 2);
  EXPECT_EQ(c->target_groups[0].DeviceOfRank(1), "cuda:1");
  EXPECT_EQ(c->target_groups[0].threads, 3);
  EXPECT_EQ(c->target_groups[1].name, "g1");
  EXPECT_EQ(c->target_groups[1].tp, 1);
  EXPECT_EQ(c->target_groups[1].DeviceOfRank(0), "cpu");
  ASSERT_EQ(c->draft_pools.size(), 1u);
  EXPECT_EQ(c->draft_pools[0].draft_model, "/d2.gguf");
  EXPECT_EQ(c->draft_pools[0].count, 3);
  EXPECT_EQ(c->draft_pools[0].k, 6);
  EXPECT_EQ(c->origins.at("target_group[0].tp"), "c.toml:19");
}

struct ErrorCase {
  std::string text;
  std::string message;
};

TEST(ClusterConfigTest, EachErrorNamesFileLineAndField) {
  const std::vector<ErrorCase> cases = {
      {"[coordinator]\nport = 1\n", "c.toml:2: coordinator.port: unknown key in coordinator"},
      {"bogus = 1\n", "c.toml:1: bogus: unknown key at the top level"},
      {"[[target_group]]\nname = \"g\"\ntpp = 2\n",
       "c.toml:3: target_group[0].tpp: unknown key in target_group[0]"},
      {"[coordinator.limit]\nx = 1\n", "c.toml:1: coordinator.limit: unknown key"},
      {"[coordinator]\ncontrol = 5555\n",
       "c.toml:2: coordinator.control: expected a string, found an integer"},
      {"[[target_group]]\ntp = \"2\"\n",
       "c.toml:2: target_group[0].tp: expected an integer, found a string"},
      {"[[target_group]]\ntp = 2.0\n",
       "c.toml:2: target_group[0].tp: expected an integer, found a float"},
      {"[[target_group]]\ndevices = \"cpu\"\n",
       "c.toml:2: target_group[0].devices: expected an array, found a string"},
      {"[[target_group]]\ndevices = [0, 1]\n",
       "c.toml:2: target_group[0].devices: expected an array of strings, found an integer"},
      {"coordinator = 1\n", "c.toml:1: coordinator: expected a [table], found a value"},
      {"[target_group]\nname = \"x\"\n",
       "c.toml:1: target_group: expected [[target_group]] (an array of tables), found "
       "[target_group]"},
      {"[[coordinator]]\n", "c.toml:1: coordinator: expected [coordinator], found [[coordinator]]"},
      {"[[target_group]]\ntp = 3\n", "c.toml:2: target_group[0].tp: 3 is not one of 1, 2, 4, 8"},
      {"[[target_group]]\ntp = 99999999999\n",
       "c.toml:2: target_group[0].tp: 99999999999 is out of range"},
      {"[[target_group]]\ntp = 2\ndevices = [\"cuda:0\"]\n",
       "c.toml:3: target_group[0].devices: [\"cuda:0\"] has 1 GPU(s) for tp = 2 ranks"},
      {"[[target_group]]\ndevices = [\"gpu0\"]\n",
       "c.toml:2: target_group[0].devices: \"gpu0\" is not \"cpu\" or \"cuda:N\""},
      {"[[target_group]]\ntp = 2\ndevices = [\"cuda:1\", \"cuda:1\"]\n",
       "target_group[0].devices: \"cuda:1\" is listed twice"},
      {"[[target_group]]\ntp = 2\ndevices = [\"cpu\", \"cuda:1\"]\n", "cannot be mixed with GPUs"},
      {"[[target_group]]\ndevices = []\n",
       "c.toml:2: target_group[0].devices: must name at least one device"},
      {"[[target_group]]\nname = \"a\"\n[[target_group]]\nname = \"a\"\n",
       "c.toml:4: target_group[1].name: \"a\" is used twice"},
      {"[[target_group]]\nname = \"x\"\n[[draft_pool]]\nname = \"x\"\n",
       "c.toml:4: draft_pool[0].name: \"x\" is used twice"},
      {"[[target_group]]\nname = \"a b\"\n", "c.toml:2: target_group[0].name: \"a b\" must be"},
      {"[[target_group]]\nthreads = -1\n",
       "c.toml:2: target_group[0].threads: -1 must be in [0, 1024]"},
      {"[[target_group]]\nhost = \"a;rm\"\n",
       "c.toml:2: target_group[0].host: \"a;rm\" is not a host name"},
      {"[[target_group]]\ndata_endpoint = \"tcp://*:*\"\n",
       "c.toml:2: target_group[0].data_endpoint: \"tcp://*:*\" must be"},
      {"[coordinator]\ncontrol = \"tcp://127.0.0.1:*\"\n",
       "c.toml:2: coordinator.control: \"tcp://127.0.0.1:*\" must be tcp://HOST:PORT"},
      {"[coordinator]\ncontrol = \"udp://x:1\"\n",
       "c.toml:2: coordinator.control: \"udp://x:1\" must be"},
      {"[coordinator]\ncontrol = \"tcp://0.0.0.0:5555\"\n",
       "c.toml:2: coordinator.control: \"tcp://0.0.0.0:5555\" binds every interface; set "
       "coordinator.advertise"},
      {"[coordinator]\nhttp = \"8000\"\n",
       "c.toml:2: coordinator.http: \"8000\" must be HOST:PORT"},
      {"[coordinator]\napi_key_env = \"MY-KEY\"\n",
       "c.toml:2: coordinator.api_key_env: \"MY-KEY\" is not an environment variable name"},
      {"[coordinator.limits]\nmax_queued_requests = 0\n",
       "c.toml:2: coordinator.limits.max_queued_requests: 0 must be >= 1"},
      {"[coordinator.limits]\nmax_new_tokens = 9000\n",
       "c.toml:2: coordinator.limits.max_new_tokens: 9000 must be in [1, context_length = 8192]"},
      {"[[draft_pool]]\ncount = 65\n", "c.toml:2: draft_pool[0].count: 65 must be in [0, 64]"},
      {"[[draft_pool]]\ndrafter = \"eagle\"\n",
       "c.toml:2: draft_pool[0].drafter: \"eagle\" is not \"ngram\", \"lookup\", \"model\", "
       "\"layerskip:L\" or \"none\""},
      {"[[draft_pool]]\nvocab_mapping = \"tokens\"\n",
       "c.toml:2: draft_pool[0].vocab_mapping: \"tokens\" is not \"auto\", \"intersection\" or "
       "\"string\""},
      {"[[draft_pool]]\nplacement = \"gpu\"\n",
       "c.toml:2: draft_pool[0].placement: \"gpu\" is not \"auto\", \"target\" or \"workers\""},
      {"[[draft_pool]]\ndrafter = \"layerskip:2\"\nplacement = \"target\"\n",
       "c.toml:3: draft_pool[0].placement: \"target\" runs only model-free drafters"},
      {"[[draft_pool]]\ndrafter = \"sim:alpha=0.8,ratio=10\"\n",
       "c.toml:2: draft_pool[0].drafter: \"sim:alpha=0.8,ratio=10\" is the simulated drafter of "
       "`splitspec bench spec` only; serve cannot use it"},
      {"[[draft_pool]]\ndrafter = \"layerskip:0\"\n",
       "c.toml:2: draft_pool[0].drafter: \"layerskip:0\": layerskip:L needs"},
      {"[[draft_pool]]\ndrafter = \"model\"\n",
       "c.toml:2: draft_pool[0].drafter: \"model\" needs draft_model here or models.draft"},
      {"[[draft_pool]]\ndraft_model = \"/d.gguf\"\n",
       "c.toml:2: draft_pool[0].draft_model: \"/d.gguf\" is set but drafter is \"lookup\""},
      {"[[draft_pool]]\nk = 0\n", "c.toml:2: draft_pool[0].k: 0 must be in [1, 64]"},
      {"[[draft_pool]]\nlookahead = 0\n",
       "c.toml:2: draft_pool[0].lookahead: 0 must be in [1, 64]"},
      {"[[draft_pool]]\nthreads = 0\n", "c.toml:2: draft_pool[0].threads: 0 must be in [1, 1024]"},
      {"[[target_group]]\nhost = \"node2\"\n",
       "c.toml: coordinator.control: \"tcp://127.0.0.1:5555\" is reachable from one host only, but "
       "processes run on localhost, node2"},
      {"[coordinator]\nhost = \"n1\"\ncontrol = \"tcp://10.0.0.1:5555\"\n[[target_group]]\nhost = "
       "\"n2\"\n[[draft_pool]]\nhost = \"n1\"\n",
       "c.toml: target_group[0].data_endpoint: \"tcp://127.0.0.1:*\" is reachable from one host "
       "only"},
      {"[coordinator]\nhost = \"n1\"\ncontrol = \"tcp://0.0.0.0:5555\"\nadvertise = "
       "\"ipc:///tmp/x\"\n[[draft_pool]]\nhost = \"n2\"\n",
       "c.toml:4: coordinator.advertise: \"ipc:///tmp/x\" is reachable from one host only"},
      {"[[target_group]]\ntp = 2\nhosts = [\"n1\"]\n",
       "c.toml:3: target_group[0].hosts: [\"n1\"] has 1 host(s) for tp = 2 ranks"},
      {"[[target_group]]\ntp = 2\nhosts = [\"n1\", \"n 2\"]\n",
       "c.toml:3: target_group[0].hosts: \"n 2\" is not a host name"},
      {"[[target_group]]\ntp = 2\nhosts = [\"localhost\", \"n2\"]\n",
       "c.toml: coordinator.control: \"tcp://127.0.0.1:5555\" is reachable from one host only, but "
       "processes run on localhost, n2"},
      {"[security]\ntp_network = \"private\"\n",
       "c.toml:2: security.tp_network: \"private\" must be \"trusted\" or \"untrusted\""},
      {"a = [\n", "c.toml:1: unterminated array"},  // TOML errors come through unchanged
  };
  for (const ErrorCase& c : cases) {
    EXPECT_THAT(ErrorOf(c.text), HasSubstr(c.message)) << "config:\n" << c.text;
  }
}

TEST(ClusterConfigTest, KvCacheMemoryIsPerGroupAndPoolAndCheckedAsAMemoryAmount) {
  absl::StatusOr<ClusterConfig> c = Parse(
      "[[target_group]]\nkv_cache_memory = \"256MiB\"\n"
      "[[draft_pool]]\nkv_cache_memory = \"40%\"\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->target_groups[0].kv_cache_memory, "256MiB");
  EXPECT_EQ(c->draft_pools[0].kv_cache_memory, "40%");
  EXPECT_EQ(Parse("").value().target_groups[0].kv_cache_memory, "") << "the worker's default";
  EXPECT_THAT(ErrorOf("[[target_group]]\nkv_cache_memory = \"lots\"\n"),
              HasSubstr("c.toml:2: target_group[0].kv_cache_memory: memory amount 'lots'"));
  EXPECT_THAT(ErrorOf("[[draft_pool]]\nkv_cache_memory = \"120%\"\n"),
              HasSubstr("draft_pool[0].kv_cache_memory: memory amount '120%'"));
}

TEST(ClusterConfigTest, KvCacheTypeIsPerGroupAndQ8_0OnlyForOneCpuRank) {
  absl::StatusOr<ClusterConfig> c = Parse("[[target_group]]\nkv_cache_type = \"q8_0\"\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->target_groups[0].kv_cache_type, "q8_0");
  EXPECT_EQ(Parse("").value().target_groups[0].kv_cache_type, "f16") << "the default";
  EXPECT_THAT(ErrorOf("[[target_group]]\nkv_cache_type = \"q4_0\"\n"),
              HasSubstr("target_group[0].kv_cache_type: \"q4_0\" is not f16 or q8_0"));
  EXPECT_THAT(ErrorOf("[[target_group]]\ntp = 2\nkv_cache_type = \"q8_0\"\n"),
              HasSubstr("target_group[0].kv_cache_type: q8_0 needs tp = 1 on the CPU"));
  EXPECT_THAT(ErrorOf("[[target_group]]\ndevices = [\"cuda:0\"]\nkv_cache_type = \"q8_0\"\n"),
              HasSubstr("target_group[0].kv_cache_type: q8_0 needs tp = 1 on the CPU"));
}

TEST(ClusterConfigTest, OneHostNeedsNoReachableEndpoints) {
  // localhost and 127.0.0.1 are the same host.
  EXPECT_TRUE(
      Parse("[coordinator]\nhost = \"127.0.0.1\"\n[[draft_pool]]\nhost = \"localhost\"\n").ok());
  // A pool of 0 workers on another host starts nothing there.
  EXPECT_TRUE(Parse("[[draft_pool]]\ncount = 0\nhost = \"elsewhere\"\n").ok());
  EXPECT_TRUE(Parse("[coordinator]\ncontrol = \"ipc:///tmp/splitspec.sock\"\n").ok());
}

TEST(ClusterConfigTest, ValidationAfterAnOverrideNamesTheFlag) {
  absl::StatusOr<ClusterConfig> c =
      Parse("[[target_group]]\nname = \"g\"\ndevices = [\"cuda:0\", \"cuda:1\"]\ntp = 2\n");
  ASSERT_TRUE(c.ok()) << c.status();
  c->target_groups[0].tp = 4;
  SetFieldOrigin(&*c, "target_group[0].tp", "--target-tp");
  // The device count is checked against the new tp; the devices field keeps its line.
  absl::Status s = ValidateClusterConfig(*c);
  EXPECT_THAT(std::string(s.message()), HasSubstr("c.toml:3: target_group[0].devices:"));
  c->target_groups[0].devices = {"cpu"};
  c->target_groups[0].tp = 3;
  s = ValidateClusterConfig(*c);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("--target-tp: target_group[0].tp: 3 is not one of 1, 2, 4, 8"));
}

TEST(ClusterConfigTest, LoadResolvesRelativePathsAgainstTheConfigFolder) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("splitspec_cluster_config_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir / "sub");
  const std::string path = (dir / "sub" / "c.toml").string();
  std::ofstream(path) << "[models]\ntarget = \"../m.gguf\"\n";
  absl::StatusOr<ClusterConfig> c = LoadClusterConfig(path);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->models.target, (dir / "m.gguf").string());
  EXPECT_EQ(c->source, path);
  std::filesystem::remove_all(dir);
  EXPECT_TRUE(absl::IsNotFound(LoadClusterConfig(path).status()));
}

// Every config the repository ships (deploy/**/*.toml) loads cleanly.
TEST(ClusterConfigTest, ShippedConfigsLoad) {
  int loaded = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(
           std::string(SPLITSPEC_SOURCE_DIR) + "/deploy")) {
    if (entry.path().extension() != ".toml") continue;
    absl::StatusOr<ClusterConfig> c = LoadClusterConfig(entry.path().string());
    EXPECT_TRUE(c.ok()) << entry.path() << ": " << c.status();
    ++loaded;
  }
  EXPECT_GE(loaded, 3);  // cluster.toml and the examples at least
}

// deploy/cluster.toml spells out the defaults: loading it gives what an empty file gives.
TEST(ClusterConfigTest, DefaultConfigFileEqualsTheBuiltInDefaults) {
  absl::StatusOr<ClusterConfig> file =
      LoadClusterConfig(std::string(SPLITSPEC_SOURCE_DIR) + "/deploy/cluster.toml");
  absl::StatusOr<ClusterConfig> empty = Parse("");
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(file->run_dir, empty->run_dir);
  EXPECT_EQ(file->coordinator.host, empty->coordinator.host);
  EXPECT_EQ(file->coordinator.control, empty->coordinator.control);
  EXPECT_EQ(file->coordinator.advertise, empty->coordinator.advertise);
  EXPECT_EQ(file->coordinator.http, empty->coordinator.http);
  EXPECT_EQ(file->coordinator.api_key_env, empty->coordinator.api_key_env);
  EXPECT_EQ(file->coordinator.limits, empty->coordinator.limits);
  EXPECT_EQ(file->models.target, empty->models.target);
  EXPECT_EQ(file->models.draft, empty->models.draft);
  EXPECT_EQ(file->security.mode, empty->security.mode);
  EXPECT_EQ(file->security.keys_dir, empty->security.keys_dir);
  ASSERT_EQ(file->target_groups.size(), 1u);
  const TargetGroupConfig& g = file->target_groups[0];
  const TargetGroupConfig& dg = empty->target_groups[0];
  EXPECT_EQ(
      std::tie(g.name, g.tp, g.devices, g.threads, g.host, g.data_endpoint, g.kv_cache_memory,
               g.kv_cache_type),
      std::tie(dg.name, dg.tp, dg.devices, dg.threads, dg.host, dg.data_endpoint,
               dg.kv_cache_memory, dg.kv_cache_type));
  ASSERT_EQ(file->draft_pools.size(), 1u);
  const DraftPoolConfig& p = file->draft_pools[0];
  const DraftPoolConfig& dp = empty->draft_pools[0];
  EXPECT_EQ(std::tie(p.name, p.count, p.drafter, p.draft_model, p.vocab_mapping, p.k, p.lookahead,
                     p.devices, p.threads, p.host, p.kv_cache_memory, p.placement),
            std::tie(dp.name, dp.count, dp.drafter, dp.draft_model, dp.vocab_mapping, dp.k,
                     dp.lookahead, dp.devices, dp.threads, dp.host, dp.kv_cache_memory,
                     dp.placement));
  // Every key is written out in the file.
  EXPECT_EQ(file->origins.size(), 33u);
}

}  // namespace
}  // namespace splitspec::config
