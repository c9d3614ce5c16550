#include "tools/serve_plan.h"

#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/net/channel_security.h"

namespace splitspec::tools {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsSupersetOf;
using ::testing::Not;

class ServePlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("splitspec_serve_plan_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    env_ = {
        .bin_dir = "/bin-dir", .repo_root = "/repo", .default_model = "/repo/models/default.gguf"};
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string WriteConfig(const std::string& text) {
    const std::string path = (dir_ / "cluster.toml").string();
    std::ofstream(path) << text;
    return path;
  }

  absl::StatusOr<std::vector<PlannedProcess>> Plan(const CommandArgs& args) {
    absl::StatusOr<ServeOptions> options = ParseServeOptions(args, env_);
    if (!options.ok()) return options.status();
    return PlanCluster(options->config, env_, options->coordinator_flags, options->drafting_flags);
  }

  std::filesystem::path dir_;
  ServeEnvironment env_;
};

const char kTp2Config[] = R"(
[cluster]
run_dir = "runs"
[models]
target = "t.gguf"
[[target_group]]
name = "g"
tp = 2
devices = ["cuda:0", "cuda:1"]
threads = 3
[[draft_pool]]
name = "d"
count = 2
placement = "workers"
)";

TEST_F(ServePlanTest, Tp2GroupStartsTwoRanksWithTheirFlags) {
  absl::StatusOr<std::vector<PlannedProcess>> plan = Plan({"--config", WriteConfig(kTp2Config)});
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->size(), 5u);  // coordinator, 2 ranks, 2 drafts
  const std::string model = (dir_ / "t.gguf").string();
  const PlannedProcess& coordinator = (*plan)[0];
  EXPECT_EQ(coordinator.role, "coordinator");
  EXPECT_THAT(coordinator.argv,
              ElementsAre("/bin-dir/splitspec-coordinator", "--control", "tcp://127.0.0.1:5555",
                          "--http", "127.0.0.1:8000", "--model", model));
  EXPECT_THAT(coordinator.env_from,
              ElementsAre(std::make_pair("SPLITSPEC_API_KEY", "SPLITSPEC_API_KEY")));
  const PlannedProcess& r0 = (*plan)[1];
  const PlannedProcess& r1 = (*plan)[2];
  EXPECT_EQ(r0.name, "g-rank0");
  EXPECT_EQ(r0.log, (dir_ / "runs" / "g-rank0.log").string());
  EXPECT_EQ(r0.tp_rank, 0);
  EXPECT_EQ(r1.tp_rank, 1);
  EXPECT_EQ(r1.tp_size, 2);
  EXPECT_THAT(r0.argv,
              ElementsAre("/bin-dir/splitspec-target-worker", "--coordinator",
                          "tcp://127.0.0.1:5555", "--name", "g-rank0", "--model", model,
                          "--tp-group", "g", "--tp-rank", "0", "--tp-size", "2", "--data-endpoint",
                          "tcp://127.0.0.1:*", "--tp-address", "127.0.0.1", "--threads", "3",
                          "--device", "cuda:0"));
  EXPECT_THAT(r1.argv, ElementsAre("/bin-dir/splitspec-target-worker", "--coordinator",
                                   "tcp://127.0.0.1:5555", "--name", "g-rank1", "--model", model,
                                   "--tp-group", "g", "--tp-rank", "1", "--tp-size", "2",
                                   "--tp-address", "127.0.0.1", "--threads", "3", "--device",
                                   "cuda:0"));
  EXPECT_THAT(r0.env, ElementsAre(std::make_pair("CUDA_VISIBLE_DEVICES", "0")));
  EXPECT_THAT(r1.env, ElementsAre(std::make_pair("CUDA_VISIBLE_DEVICES", "1")));
  EXPECT_EQ((*plan)[3].name, "d-0");
  EXPECT_THAT((*plan)[4].argv, ElementsAre("/bin-dir/splitspec-draft-worker", "--coordinator",
                                           "tcp://127.0.0.1:5555", "--name", "d-1", "--drafter",
                                           "lookup", "--target-model", model, "--k", "4",
                                           "--lookahead", "2", "--threads", "1"));
  EXPECT_TRUE((*plan)[4].env.empty());
}

TEST_F(ServePlanTest, KvCacheTypeReachesTheTargetWorkerOnlyWhenNotTheDefault) {
  const std::string config = WriteConfig(R"(
[models]
target = "t.gguf"
[[target_group]]
name = "g"
)");
  absl::StatusOr<std::vector<PlannedProcess>> plan = Plan({"--config", config});
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_GE(plan->size(), 2u);  // coordinator, the target
  EXPECT_THAT((*plan)[1].argv, Not(::testing::Contains("--kv-cache-type")));
  plan = Plan({"--config", config, "--kv-cache-type", "q8_0"});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT((*plan)[1].argv, IsSupersetOf({"--kv-cache-type", "q8_0"}));
  EXPECT_THAT((*plan)[0].argv, Not(::testing::Contains("--kv-cache-type")));
  plan = Plan({"--config", config, "--kv-cache-type", "q4"});
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(std::string(plan.status().message()), HasSubstr("kv_cache_type"));
}

TEST_F(ServePlanTest, KvCacheMemoryReachesEachRankAndPoolWorkerAndTheFlagOverridesTheGroups) {
  const std::string config = WriteConfig(R"(
[models]
target = "t.gguf"
[[target_group]]
name = "g"
tp = 2
kv_cache_memory = "40%"
[[draft_pool]]
name = "d"
placement = "workers"
kv_cache_memory = "64MiB"
)");
  absl::StatusOr<std::vector<PlannedProcess>> plan = Plan({"--config", config});
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->size(), 4u);  // coordinator, 2 ranks, 1 draft
  EXPECT_THAT((*plan)[1].argv, IsSupersetOf({"--kv-cache-memory", "40%"}));
  EXPECT_THAT((*plan)[2].argv, IsSupersetOf({"--kv-cache-memory", "40%"})) << "per rank";
  EXPECT_THAT((*plan)[3].argv, IsSupersetOf({"--kv-cache-memory", "64MiB"}));
  EXPECT_THAT((*plan)[0].argv, Not(::testing::Contains("--kv-cache-memory")));
  plan = Plan({"--config", config, "--kv-cache-memory", "256MiB"});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT((*plan)[1].argv, IsSupersetOf({"--kv-cache-memory", "256MiB"}));
  EXPECT_THAT((*plan)[3].argv, IsSupersetOf({"--kv-cache-memory", "64MiB"})) << "pools keep theirs";
  absl::StatusOr<std::vector<PlannedProcess>> bad =
      Plan({"--config", config, "--kv-cache-memory", "lots"});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(
      std::string(bad.status().message()),
      HasSubstr("--kv-cache-memory: target_group[0].kv_cache_memory: memory amount 'lots'"));
}

TEST_F(ServePlanTest, CudaDevicesReachEachWorkerAsItsOnlyGpu) {
  absl::StatusOr<std::vector<PlannedProcess>> plan = Plan({"--config", WriteConfig(R"(
[models]
target = "t.gguf"
[[target_group]]
name = "a"
devices = ["cuda:1"]
[[target_group]]
name = "b"
data_endpoint = "tcp://127.0.0.1:6001"
[[draft_pool]]
name = "d"
count = 3
placement = "workers"
devices = ["cuda:0", "cuda:2"]
)")});
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->size(), 6u);  // coordinator, 2 targets, 3 drafts
  const PlannedProcess& a = (*plan)[1];
  EXPECT_THAT(a.env, ElementsAre(std::make_pair("CUDA_VISIBLE_DEVICES", "1")));
  EXPECT_THAT(a.argv, ::testing::IsSupersetOf({"--device", "cuda:0"}));
  EXPECT_EQ(a.argv[a.argv.size() - 2], "--device");  // the flag and its value, in order
  EXPECT_EQ(a.argv.back(), "cuda:0");
  const PlannedProcess& b = (*plan)[2];  // devices = ["cpu"] by default: nothing added
  EXPECT_TRUE(b.env.empty());
  EXPECT_THAT(b.argv, ::testing::Not(::testing::Contains("--device")));
  const char* visible[] = {"0", "2", "0"};  // worker i uses devices[i % 2]
  for (int i = 0; i < 3; ++i) {
    const PlannedProcess& d = (*plan)[3 + i];
    EXPECT_THAT(d.env, ElementsAre(std::make_pair("CUDA_VISIBLE_DEVICES", visible[i]))) << i;
    EXPECT_EQ(d.argv[d.argv.size() - 2], "--device") << i;
    EXPECT_EQ(d.argv.back(), "cuda:0") << i;
  }
}

TEST_F(ServePlanTest, DecodingChoicesNameThreadsDrafterAndKAuto) {
  env_.repo_root = SPLITSPEC_SOURCE_DIR;
  absl::StatusOr<ServeOptions> shipped = ParseServeOptions({}, env_);
  ASSERT_TRUE(shipped.ok()) << shipped.status();
  EXPECT_EQ(DecodingChoices(shipped->config, 2),
            "target: threads 2 (all cores); draft: drafter lookup, in the target leaders, k auto, "
            "sequential");
  absl::StatusOr<ServeOptions> flagged = ParseServeOptions(
      {"--threads", "1", "--drafter", "ngram", "--draft-placement", "workers"}, env_);
  ASSERT_TRUE(flagged.ok()) << flagged.status();
  EXPECT_EQ(DecodingChoices(flagged->config, 2),
            "target: threads 1 (--threads); draft: drafter ngram (--drafter), 1 worker(s), k auto, "
            "lookahead 2");
  absl::StatusOr<ServeOptions> off = ParseServeOptions({"--drafts", "0"}, env_);
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_EQ(
      DecodingChoices(off->config, 2),
      "target: threads 2 (all cores); draft: drafter lookup, off (plain decoding) (--drafts)");
}

TEST_F(ServePlanTest, GroupHostsPutEachRankOnItsHost) {
  absl::StatusOr<std::vector<PlannedProcess>> plan = Plan({"--config", WriteConfig(R"(
[coordinator]
host = "n1"
control = "tcp://10.0.0.1:5555"
[security]
tp_network = "trusted"
[[target_group]]
name = "g"
tp = 2
hosts = ["n2", "n3"]
data_endpoint = "tcp://10.0.0.2:*"
[[draft_pool]]
host = "n1"
placement = "workers"
)")});
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->size(), 4u);
  EXPECT_EQ((*plan)[1].host, "n2");
  EXPECT_EQ((*plan)[2].host, "n3");
  EXPECT_EQ((*plan)[3].host, "n1");
  // Each rank binds its collectives to its own host's address, not every interface.
  EXPECT_THAT((*plan)[1].argv, ::testing::IsSupersetOf({"--tp-address", "n2"}));
  EXPECT_THAT((*plan)[2].argv, ::testing::IsSupersetOf({"--tp-address", "n3"}));
}

// A group's Gloo collectives are plaintext TCP: serve refuses a group whose ranks
// span hosts unless [security] tp_network = "trusted", saying why; a group on one
// host binds them to loopback, where they never leave it.
TEST_F(ServePlanTest, AMultiHostGroupNeedsATrustedNetwork) {
  const std::string untrusted = WriteConfig(R"(
[coordinator]
host = "n1"
control = "tcp://10.0.0.1:5555"
[[target_group]]
name = "g"
tp = 2
hosts = ["n2", "n3"]
data_endpoint = "tcp://10.0.0.2:*"
[[draft_pool]]
host = "n1"
)");
  absl::StatusOr<std::vector<PlannedProcess>> plan = Plan({"--config", untrusted});
  EXPECT_TRUE(absl::IsFailedPrecondition(plan.status())) << plan.status();
  EXPECT_THAT(plan.status().message(), HasSubstr(":8: target group 'g' spans hosts n2, n3"));
  EXPECT_THAT(plan.status().message(), HasSubstr("plaintext, unauthenticated TCP"));
  EXPECT_THAT(plan.status().message(), HasSubstr("set tp_network = \"trusted\" in [security]"));

  const std::string one_host = WriteConfig(
      "[[target_group]]\nname = \"g\"\ntp = 2\n[[draft_pool]]\ncount = 0\n");
  plan = Plan({"--config", one_host});
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->size(), 3u);
  for (int rank : {1, 2}) {
    EXPECT_THAT((*plan)[rank].argv, ::testing::IsSupersetOf({"--tp-address", "127.0.0.1"}));
  }
}

// The CLI end to end: `serve --dry-run` refuses the untrusted multi-host group with
// the reason on stderr and exit status 2, printing no plan for a launcher to start.
TEST_F(ServePlanTest, DryRunRefusesAnUntrustedMultiHostGroupSayingWhy) {
  const std::string config = WriteConfig(R"(
[coordinator]
host = "n1"
control = "tcp://10.0.0.1:5555"
[[target_group]]
name = "wide"
tp = 2
hosts = ["n2", "n3"]
data_endpoint = "tcp://10.0.0.2:*"
[[draft_pool]]
host = "n1"
)");
  const std::string command = std::string(SPLITSPEC_BIN_DIR) + "/splitspec serve --config " +
                              config + " --dry-run 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof(buffer), pipe)) out.append(buffer, n);
  const int status = pclose(pipe);
  EXPECT_EQ(WEXITSTATUS(status), 2) << out;
  EXPECT_THAT(out, HasSubstr("splitspec serve: "));
  EXPECT_THAT(out, HasSubstr("target group 'wide' spans hosts n2, n3"));
  EXPECT_THAT(out, HasSubstr("Gloo has no encrypted transport"));
  EXPECT_THAT(out, ::testing::Not(HasSubstr("\"role\":\"coordinator\"")));
}

TEST_F(ServePlanTest, WithoutConfigUsesTheShippedDefaultConfig) {
  env_.repo_root = SPLITSPEC_SOURCE_DIR;
  absl::StatusOr<std::vector<PlannedProcess>> plan = Plan({});
  ASSERT_TRUE(plan.ok()) << plan.status();
  // The default drafter (lookup) runs inside the target: no draft worker.
  ASSERT_EQ(plan->size(), 2u);
  EXPECT_EQ((*plan)[1].name, "target");
  EXPECT_THAT((*plan)[1].argv, ::testing::Contains("/repo/models/default.gguf"));
  EXPECT_THAT((*plan)[1].argv, IsSupersetOf({"--drafter", "lookup"}));
  EXPECT_EQ((*plan)[1].log, std::string(SPLITSPEC_SOURCE_DIR) + "/build/cluster/target.log");
}

// --tree auto reaches every drafting process: draft workers and the leaders that run
// a pool's drafter; --tree off (the default) passes nothing (the workers' default).
TEST_F(ServePlanTest, TreeAutoReachesEveryDraftingProcess) {
  const std::string config = WriteConfig(
      "[[target_group]]\nname = \"g\"\ntp = 2\n[[draft_pool]]\nname = \"d\"\ncount = 2\n");
  auto trees_of = [](const PlannedProcess& p) {
    return std::count(p.argv.begin(), p.argv.end(), "--tree");
  };
  absl::StatusOr<std::vector<PlannedProcess>> local = Plan({"--config", config, "--tree", "auto"});
  ASSERT_TRUE(local.ok()) << local.status();
  ASSERT_EQ(local->size(), 3u);  // coordinator, 2 ranks: lookup in the leader
  EXPECT_THAT((*local)[1].argv, IsSupersetOf({"--drafter", "lookup", "--tree", "auto"}));
  EXPECT_EQ(trees_of((*local)[2]), 0) << "followers draft nothing";
  absl::StatusOr<std::vector<PlannedProcess>> workers =
      Plan({"--config", config, "--draft-placement", "workers", "--tree", "auto"});
  ASSERT_TRUE(workers.ok()) << workers.status();
  ASSERT_EQ(workers->size(), 5u);
  EXPECT_THAT((*workers)[3].argv, IsSupersetOf({"--tree", "auto"}));
  EXPECT_THAT((*workers)[4].argv, IsSupersetOf({"--tree", "auto"}));
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--config", config},
        std::vector<std::string>{"--config", config, "--tree", "off"}}) {
    absl::StatusOr<std::vector<PlannedProcess>> chains = Plan(args);
    ASSERT_TRUE(chains.ok()) << chains.status();
    for (const PlannedProcess& p : *chains) EXPECT_EQ(trees_of(p), 0) << p.name;
  }
  EXPECT_THAT(std::string(Plan({"--config", config, "--tree", "on"}).status().message()),
              HasSubstr("--tree must be auto or off, got 'on'"));
}

// Where each pool's drafter runs: model-free ones inside the target leaders
// (rank 0 only) unless the config asks for workers; model drafters in workers;
// --drafter none and --drafts 0 start no drafter anywhere.
TEST_F(ServePlanTest, ModelFreeDraftersRunInTheTargetLeadersUnlessWorkersAreAskedFor) {
  const std::string config = WriteConfig(
      "[models]\ndraft = \"/d.gguf\"\n[[target_group]]\nname = \"g\"\ntp = 2\n"
      "[[draft_pool]]\nname = \"d\"\ncount = 2\n");
  auto drafters_of = [](const PlannedProcess& p) {
    int n = 0;
    for (const std::string& a : p.argv) n += a == "--drafter";
    return n;
  };
  absl::StatusOr<std::vector<PlannedProcess>> local = Plan({"--config", config});
  ASSERT_TRUE(local.ok()) << local.status();
  ASSERT_EQ(local->size(), 3u);  // coordinator, 2 ranks
  EXPECT_THAT((*local)[1].argv, IsSupersetOf({"--drafter", "lookup"}));
  EXPECT_EQ(drafters_of((*local)[2]), 0) << "followers draft nothing";
  for (const char* ngram : {"ngram"}) {
    absl::StatusOr<std::vector<PlannedProcess>> p = Plan({"--config", config, "--drafter", ngram});
    ASSERT_TRUE(p.ok()) << p.status();
    ASSERT_EQ(p->size(), 3u);
    EXPECT_THAT((*p)[1].argv, IsSupersetOf({"--drafter", ngram}));
  }
  absl::StatusOr<std::vector<PlannedProcess>> workers =
      Plan({"--config", config, "--draft-placement", "workers"});
  ASSERT_TRUE(workers.ok()) << workers.status();
  ASSERT_EQ(workers->size(), 5u);  // coordinator, 2 ranks, 2 draft workers
  EXPECT_EQ(drafters_of((*workers)[1]), 0);
  EXPECT_EQ((*workers)[3].role, "draft");
  absl::StatusOr<std::vector<PlannedProcess>> model =
      Plan({"--config", config, "--drafter", "model"});
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_EQ(model->size(), 5u);
  EXPECT_EQ(drafters_of((*model)[1]), 0);
  EXPECT_THAT((*model)[4].argv, IsSupersetOf({"--drafter", "model", "--draft", "/d.gguf",
                                               "--vocab-mapping", "auto"}));
  for (const CommandArgs& off : {CommandArgs{"--drafter", "none"}, CommandArgs{"--drafts", "0"}}) {
    CommandArgs args = {"--config", config};
    args.insert(args.end(), off.begin(), off.end());
    absl::StatusOr<std::vector<PlannedProcess>> p = Plan(args);
    ASSERT_TRUE(p.ok()) << p.status();
    ASSERT_EQ(p->size(), 3u) << off[0];
    EXPECT_EQ(drafters_of((*p)[1]), 0) << off[0];
    EXPECT_EQ(drafters_of((*p)[2]), 0) << off[0];
  }
  EXPECT_THAT(
      std::string(Plan({"--config", config, "--drafter", "model", "--draft-placement", "target"})
                      .status()
                      .message()),
      HasSubstr("draft_pool[0].placement: \"target\" runs only model-free drafters"));
  EXPECT_THAT(
      std::string(Plan({"--config", config, "--draft-placement", "gpu"}).status().message()),
      HasSubstr("--draft-placement: draft_pool[0].placement: \"gpu\" is not \"auto\""));
}

TEST_F(ServePlanTest, FlagsOverrideTheConfig) {
  const std::string config = WriteConfig(
      "[coordinator]\ncontrol = \"tcp://127.0.0.1:7000\"\nhttp = \"127.0.0.1:9000\"\n"
      "[[target_group]]\nname = \"g\"\ntp = 2\nthreads = 2\n[[draft_pool]]\nname = \"d\"\ncount = "
      "1\nk = 8\n");
  absl::StatusOr<ServeOptions> options =
      ParseServeOptions({"--config", config,        "--control", "ipc:///tmp/x", "--http",
                         "none",     "--target-tp", "4",         "--threads",    "5",
                         "--drafts", "3",           "--drafter", "layerskip:2",  "--model",
                         "/m.gguf",  "--log-dir",   "/logs",     "--targets",    "2",
                         "--dry-run"},
                        env_);
  ASSERT_TRUE(options.ok()) << options.status();
  const config::ClusterConfig& c = options->config;
  EXPECT_TRUE(options->dry_run);
  EXPECT_EQ(c.coordinator.control, "ipc:///tmp/x");
  EXPECT_EQ(c.coordinator.http, "none");
  EXPECT_EQ(c.models.target, "/m.gguf");
  EXPECT_EQ(c.run_dir, "/logs");
  ASSERT_EQ(c.target_groups.size(), 2u);
  EXPECT_EQ(c.target_groups[1].name, "g-1");
  EXPECT_EQ(c.target_groups[1].tp, 4);
  EXPECT_EQ(c.target_groups[1].threads, 5);
  EXPECT_EQ(c.draft_pools[0].count, 3);
  EXPECT_EQ(c.draft_pools[0].drafter, "layerskip:2");
  EXPECT_EQ(c.draft_pools[0].k, 8);  // not overridden: the file's value
  absl::StatusOr<std::vector<PlannedProcess>> plan = PlanCluster(c, env_);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->size(), 1u + 8u + 3u);
  EXPECT_THAT((*plan)[0].argv,
              ElementsAre("/bin-dir/splitspec-coordinator", "--control", "ipc:///tmp/x"));
  EXPECT_EQ((*plan)[8].name, "g-1-rank3");
  EXPECT_EQ((*plan)[8].log, "/logs/g-1-rank3.log");
}

TEST_F(ServePlanTest, CoordinatorFlagsArePassedOnInTableOrder) {
  absl::StatusOr<std::vector<PlannedProcess>> plan =
      Plan({"--config", WriteConfig(""), "--metrics-open", "--queue-timeout-ms", "5000",
            "--http-max-connections-per-client", "8", "--heartbeat-ms", "100"});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT((*plan)[0].argv,
              ElementsAre("/bin-dir/splitspec-coordinator", "--control", "tcp://127.0.0.1:5555",
                          "--http", "127.0.0.1:8000", "--model", "/repo/models/default.gguf",
                          "--heartbeat-ms", "100", "--queue-timeout-ms", "5000",
                          "--http-max-connections-per-client", "8", "--metrics-open"));
  // Workers get none of them.
  for (size_t i = 1; i < plan->size(); ++i)
    EXPECT_THAT((*plan)[i].argv, Not(Contains("--queue-timeout-ms")));
}

TEST_F(ServePlanTest, ForwardedFlagsLeaveOutWhatServeSetsAndTheApiKey) {
  std::vector<std::string> names;
  for (const cli::Flag& flag : ForwardedCoordinatorFlags()) {
    names.push_back(flag.name);
    EXPECT_THAT(flag.help, HasSubstr("passed to splitspec-coordinator"));
  }
  EXPECT_THAT(names,
              IsSupersetOf({"heartbeat-ms", "dead-after", "queue-timeout-ms", "drain-timeout-ms",
                            "served-model-name", "http-max-connections", "http-max-connections-per-client",
                            "http-parse-threads", "metrics-open"}));
  for (const char* own : {"control", "endpoint-file", "http", "model", "api-key"})
    EXPECT_THAT(names, Not(Contains(own)));
  // A secret never goes onto a command line: serve refuses the flag.
  EXPECT_THAT(std::string(Plan({"--api-key", "k"}).status().message()),
              HasSubstr("unknown flag --api-key"));
}

TEST_F(ServePlanTest, SupervisionFlagsAndBadForwardedValuesAreChecked) {
  absl::StatusOr<ServeOptions> options = ParseServeOptions(
      {"--config", WriteConfig(""), "--max-restarts", "2", "--restart-window-s", "30"}, env_);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->restart.max_restarts, 2);
  EXPECT_EQ(options->restart.window, absl::Seconds(30));
  EXPECT_EQ(ParseServeOptions({"--config", WriteConfig("")}, env_)->restart.max_restarts, 5);
  EXPECT_THAT(std::string(Plan({"--max-restarts", "-1"}).status().message()),
              HasSubstr("--max-restarts must be >= 0"));
  EXPECT_THAT(std::string(Plan({"--restart-window-s", "0"}).status().message()),
              HasSubstr("--restart-window-s"));
  EXPECT_THAT(std::string(Plan({"--queue-timeout-ms", "soon"}).status().message()),
              HasSubstr("--queue-timeout-ms"));
}

// Before typed switches, `--dry-run=false` did a dry run and `--metrics-open=false` opened
// /metrics (any value of a switch meant true); an int flag was narrowed (2^32 + 1 -> 1).
TEST_F(ServePlanTest, SwitchesSetFalseAreOffAndIntegersAreNotNarrowed) {
  absl::StatusOr<ServeOptions> options =
      ParseServeOptions({"--config", WriteConfig(""), "--dry-run=false"}, env_);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_FALSE(options->dry_run);
  EXPECT_TRUE(ParseServeOptions({"--config", WriteConfig(""), "--dry-run=1"}, env_)->dry_run);
  absl::StatusOr<std::vector<PlannedProcess>> plan =
      Plan({"--config", WriteConfig(""), "--metrics-open=false"});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT((*plan)[0].argv, Not(Contains("--metrics-open")));
  EXPECT_THAT(std::string(Plan({"--config", WriteConfig(""), "--dry-run=no"}).status().message()),
              HasSubstr("switch --dry-run takes true, false, 1 or 0, got 'no'"));
  EXPECT_THAT(
      std::string(Plan({"--config", WriteConfig(""), "--http-max-connections", "4294967297"})
                      .status()
                      .message()),
      HasSubstr("--http-max-connections 4294967297 is out of range"));
  EXPECT_THAT(
      std::string(
          Plan({"--config", WriteConfig(""), "--targets", "4294967298"}).status().message()),
      HasSubstr("--targets 4294967298 is out of range"));
}

TEST_F(ServePlanTest, RegisterTimeoutTakesADurationOrSeconds) {
  auto timeout = [&](const std::vector<std::string>& flags) {
    CommandArgs args = {"--config", WriteConfig("")};
    args.insert(args.end(), flags.begin(), flags.end());
    return ParseServeOptions(args, env_);
  };
  EXPECT_EQ(timeout({})->register_timeout, absl::Seconds(60));
  EXPECT_EQ(timeout({"--register-timeout", "90s"})->register_timeout, absl::Seconds(90));
  EXPECT_EQ(timeout({"--register-timeout", "2m"})->register_timeout, absl::Minutes(2));
  EXPECT_EQ(timeout({"--register-timeout", "2.5"})->register_timeout, absl::Milliseconds(2500));
  EXPECT_EQ(timeout({"--register-timeout", "0"})->register_timeout, absl::InfiniteDuration());
  for (const char* bad : {"soon", "-1s", "inf"}) {
    EXPECT_THAT(std::string(timeout({"--register-timeout", bad}).status().message()),
                HasSubstr(absl::StrCat("--register-timeout '", bad, "'")));
  }
}

TEST_F(ServePlanTest, DraftFlagSelectsTheModelDrafter) {
  absl::StatusOr<std::vector<PlannedProcess>> plan =
      Plan({"--config", WriteConfig(""), "--draft", "/d.gguf"});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(plan->back().argv,
              ::testing::IsSupersetOf({"--drafter", "model", "--draft", "/d.gguf"}));
}

TEST_F(ServePlanTest, OverrideErrorsNameTheFlag) {
  const std::string two_groups =
      WriteConfig("[[target_group]]\nname = \"a\"\n[[target_group]]\nname = \"b\"\n");
  EXPECT_THAT(std::string(Plan({"--config", two_groups, "--targets", "2"}).status().message()),
              HasSubstr("--targets needs a config with one [[target_group]]"));
  EXPECT_THAT(std::string(Plan({"--config", two_groups, "--target-tp", "3"}).status().message()),
              HasSubstr("--target-tp: target_group[0].tp: 3 is not one of 1, 2, 4, 8"));
  EXPECT_THAT(std::string(Plan({"--config", two_groups, "--drafts", "99"}).status().message()),
              HasSubstr("--drafts: draft_pool[0].count: 99 must be in [0, 64]"));
  EXPECT_THAT(
      std::string(
          Plan({"--config", two_groups, "--drafter", "ngram", "--draft", "/d"}).status().message()),
      HasSubstr("--draft: draft_pool[0].draft_model: \"/d\" is set but drafter is \"ngram\""));
  EXPECT_THAT(std::string(Plan({"--config", two_groups, "--bogus", "1"}).status().message()),
              HasSubstr("unknown flag --bogus"));
  EXPECT_TRUE(absl::IsNotFound(Plan({"--config", (dir_ / "missing.toml").string()}).status()));
}

TEST_F(ServePlanTest, GpuDevicesMustFollowTpOverride) {
  const std::string config =
      WriteConfig("[[target_group]]\ntp = 2\ndevices = [\"cuda:0\", \"cuda:1\"]\n");
  EXPECT_THAT(std::string(Plan({"--config", config, "--target-tp", "4"}).status().message()),
              HasSubstr("cluster.toml:3: target_group[0].devices: [\"cuda:0\", \"cuda:1\"] has 2 "
                        "GPU(s) for tp = 4"));
}

TEST_F(ServePlanTest, NonDefaultLimitsAreRefusedUntilTheCoordinatorTakesThem) {
  absl::StatusOr<std::vector<PlannedProcess>> plan =
      Plan({"--config", WriteConfig("[coordinator.limits]\nmax_queued_requests = 10\n")});
  EXPECT_TRUE(absl::IsUnimplemented(plan.status())) << plan.status();
  EXPECT_THAT(std::string(plan.status().message()),
              HasSubstr("cluster.toml:2: coordinator.limits.max_queued_requests = 10: "
                        "splitspec-coordinator has no flag"));
}

TEST_F(ServePlanTest, ProcessNamesMustBeUnique) {
  absl::StatusOr<std::vector<PlannedProcess>> plan = Plan(
      {"--config", WriteConfig("[[target_group]]\nname = \"d-0\"\n[[draft_pool]]\nname = \"d\"\n"
                               "placement = \"workers\"\n")});
  EXPECT_THAT(std::string(plan.status().message()),
              HasSubstr("two processes would be named 'd-0'"));
}

TEST_F(ServePlanTest, SecurityReachesEveryProcessThroughItsEnvironment) {
  absl::StatusOr<std::vector<PlannedProcess>> keyed =
      Plan({"--config", WriteConfig("[security]\nkeys_dir = \"/etc/splitspec/keys\"\n")});
  ASSERT_TRUE(keyed.ok()) << keyed.status();
  for (const PlannedProcess& p : *keyed) {
    EXPECT_THAT(p.env, ::testing::Contains(std::make_pair(std::string("SPLITSPEC_KEYS"),
                                                          std::string("/etc/splitspec/keys"))))
        << p.name;
  }
  absl::StatusOr<std::vector<PlannedProcess>> plain =
      Plan({"--config", WriteConfig("[security]\nmode = \"none\"\n")});
  ASSERT_TRUE(plain.ok()) << plain.status();
  for (const PlannedProcess& p : *plain) {
    EXPECT_THAT(p.env, ::testing::Contains(std::make_pair(std::string("SPLITSPEC_SECURITY"),
                                                          std::string("none"))))
        << p.name;
  }
}

TEST_F(ServePlanTest, ServeMakesFreshKeysForALocalCluster) {
  absl::StatusOr<ServeOptions> options =
      ParseServeOptions({"--config", WriteConfig(""), "--log-dir", (dir_ / "run").string()}, env_);
  ASSERT_TRUE(options.ok()) << options.status();
  // Draft workers (a pool of model-free drafters otherwise runs in the targets).
  for (config::DraftPoolConfig& pool : options->config.draft_pools) pool.placement = "workers";
  ASSERT_TRUE(PrepareEphemeralKeys(&options->config, env_).ok());
  const std::string keys = (dir_ / "run" / "keys").string();
  EXPECT_EQ(options->config.security.keys_dir, keys);
  EXPECT_TRUE(std::filesystem::exists(keys + "/coordinator.key"));
  EXPECT_EQ(std::filesystem::status(keys + "/draft.key").permissions(),
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  // Each draft worker serve starts (--name draft-I) has a key of its own.
  int draft_workers = 0;
  for (const config::DraftPoolConfig& pool : options->config.draft_pools) {
    for (int i = 0; i < pool.count; ++i, ++draft_workers) {
      const std::string own = absl::StrCat(keys, "/draft.d/", pool.name, "-", i, ".key");
      EXPECT_TRUE(std::filesystem::exists(own)) << own;
    }
  }
  EXPECT_GE(draft_workers, 1);
  // So has each target rank (--name NAME: target.d/NAME), distinct from the others.
  std::set<std::string> target_keys;
  for (const config::TargetGroupConfig& group : options->config.target_groups) {
    ASSERT_EQ(group.tp, 1);
    absl::StatusOr<std::string> own =
        net::ReadPublicKeyFile(absl::StrCat(keys, "/target.d/", group.name, ".pub"));
    ASSERT_TRUE(own.ok()) << own.status();
    target_keys.insert(*own);
  }
  target_keys.insert(*net::ReadPublicKeyFile(keys + "/target.pub"));
  EXPECT_EQ(target_keys.size(), options->config.target_groups.size() + 1);
  std::ifstream old_key(keys + "/coordinator.pub");
  std::string old_public;
  old_key >> old_public;
  // The next start replaces them.
  options->config.security.keys_dir.clear();
  ASSERT_TRUE(PrepareEphemeralKeys(&options->config, env_).ok());
  std::ifstream new_key(keys + "/coordinator.pub");
  std::string new_public;
  new_key >> new_public;
  EXPECT_NE(new_public, old_public);
}

TEST_F(ServePlanTest, JsonLineHasEveryField) {
  PlannedProcess p{.name = "g-rank1",
                   .role = "target",
                   .host = "n2",
                   .log = "/r/g-rank1.log",
                   .group = "g",
                   .tp_rank = 1,
                   .tp_size = 2};
  p.env = {{"CUDA_VISIBLE_DEVICES", "1"}};
  p.argv = {"/b/splitspec-target-worker", "--name", "a \"q\""};
  EXPECT_EQ(PlannedProcessJson(p),
            "{\"name\":\"g-rank1\",\"role\":\"target\",\"host\":\"n2\",\"log\":\"/r/"
            "g-rank1.log\",\"group\":\"g\","
            "\"tp_rank\":1,\"tp_size\":2,\"env\":{\"CUDA_VISIBLE_DEVICES\":\"1\"},\"env_from\":{},"
            "\"argv\":[\"/b/splitspec-target-worker\",\"--name\",\"a \\\"q\\\"\"]}");
}

// The CLI end to end: `splitspec serve --config F --target-tp 2 --dry-run`
// prints one JSON object per process and starts nothing.
TEST_F(ServePlanTest, DryRunPrintsThePlanAsJsonLines) {
  const std::string config = WriteConfig(
      "[[target_group]]\nname = \"grp\"\n[[draft_pool]]\ncount = 1\n"
      "placement = \"workers\"\n");
  const std::string command = std::string(SPLITSPEC_BIN_DIR) + "/splitspec serve --config " +
                              config + " --target-tp 2 --dry-run 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof(buffer), pipe)) out.append(buffer, n);
  ASSERT_EQ(pclose(pipe), 0) << out;
  std::vector<std::string> lines;
  for (size_t start = 0, end; start < out.size(); start = end + 1) {
    end = out.find('\n', start);
    if (end == std::string::npos) end = out.size();
    lines.push_back(out.substr(start, end - start));
  }
  ASSERT_EQ(lines.size(), 4u) << out;
  EXPECT_THAT(lines[0], HasSubstr("\"role\":\"coordinator\""));
  EXPECT_THAT(lines[1], HasSubstr("\"name\":\"grp-rank0\",\"role\":\"target\""));
  EXPECT_THAT(lines[1], HasSubstr("\"tp_rank\":0,\"tp_size\":2"));
  EXPECT_THAT(lines[1],
              HasSubstr("\"--tp-group\",\"grp\",\"--tp-rank\",\"0\",\"--tp-size\",\"2\""));
  EXPECT_THAT(lines[2],
              HasSubstr("\"--tp-group\",\"grp\",\"--tp-rank\",\"1\",\"--tp-size\",\"2\""));
  EXPECT_THAT(lines[2], HasSubstr("\"tp_rank\":1,\"tp_size\":2"));
  EXPECT_THAT(lines[2], ::testing::Not(HasSubstr("--data-endpoint")));  // followers serve no drafts
  EXPECT_THAT(lines[3], HasSubstr("\"name\":\"draft-0\",\"role\":\"draft\""));
  for (const std::string& line : lines) {
    EXPECT_EQ(line.front(), '{');
    EXPECT_EQ(line.back(), '}');
  }
}

// `splitspec keygen --draft-workers N --draft-worker NAME`: keys of their own
// for draft workers in DIR/draft.d (beside the role keys of --name), never
// overwritten; a name that cannot name a file is refused.
TEST_F(ServePlanTest, KeygenWritesDraftWorkersOwnKeys) {
  const std::string keys = (dir_ / "made-keys").string();
  auto run = [](const std::string& args) {
    const std::string command =
        std::string(SPLITSPEC_BIN_DIR) + "/splitspec keygen " + args + " 2>&1";
    FILE* pipe = popen(command.c_str(), "r");
    std::string out;
    char buffer[4096];
    while (size_t n = fread(buffer, 1, sizeof(buffer), pipe)) out.append(buffer, n);
    const int status = pclose(pipe);
    return std::make_pair(WEXITSTATUS(status), out);
  };
  auto [status, out] =
      run("--out " + keys + " --name all --draft-workers 2 --draft-worker spare-a");
  ASSERT_EQ(status, 0) << out;
  for (const char* name :
       {"coordinator", "draft", "draft.d/draft-0", "draft.d/draft-1", "draft.d/spare-a"}) {
    EXPECT_TRUE(std::filesystem::exists(keys + "/" + name + ".key")) << name;
    EXPECT_THAT(out, HasSubstr(keys + "/" + name + ".pub ")) << name;
  }
  EXPECT_FALSE(std::filesystem::exists(keys + "/draft.d/draft-2.key"));
  EXPECT_EQ(std::filesystem::status(keys + "/draft.d/draft-1.key").permissions(),
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  std::tie(status, out) = run("--out " + keys + " --draft-workers 1");
  EXPECT_EQ(status, 1) << out;
  EXPECT_THAT(out, HasSubstr("draft-0.key exists; keys are never overwritten"));
  std::tie(status, out) = run("--out " + keys + " --draft-worker ../evil");
  EXPECT_EQ(status, 2) << out;
  EXPECT_THAT(out, HasSubstr("--draft-worker: worker key name '../evil'"));
  std::tie(status, out) = run("--out " + keys);
  EXPECT_EQ(status, 2) << out;
  EXPECT_THAT(out, HasSubstr("--name ROLE (or --draft-workers N, --target-workers N) is required"));
}

// `splitspec keygen --target-workers N --target-worker NAME`: keys of their own
// for target ranks in DIR/target.d, each different, never overwritten.
TEST_F(ServePlanTest, KeygenWritesTargetWorkersOwnKeys) {
  const std::string keys = (dir_ / "target-keys").string();
  auto run = [](const std::string& args) {
    const std::string command =
        std::string(SPLITSPEC_BIN_DIR) + "/splitspec keygen " + args + " 2>&1";
    FILE* pipe = popen(command.c_str(), "r");
    std::string out;
    char buffer[4096];
    while (size_t n = fread(buffer, 1, sizeof(buffer), pipe)) out.append(buffer, n);
    const int status = pclose(pipe);
    return std::make_pair(WEXITSTATUS(status), out);
  };
  auto [status, out] = run("--out " + keys + " --target-workers 2 --target-worker g-rank1");
  ASSERT_EQ(status, 0) << out;
  std::set<std::string> publics;
  for (const char* name : {"target.d/target-0", "target.d/target-1", "target.d/g-rank1"}) {
    EXPECT_THAT(out, HasSubstr(keys + "/" + name + ".pub ")) << name;
    absl::StatusOr<std::string> key = net::ReadPublicKeyFile(keys + "/" + name + ".pub");
    ASSERT_TRUE(key.ok()) << key.status();
    publics.insert(*key);
  }
  EXPECT_EQ(publics.size(), 3u);
  EXPECT_EQ(std::filesystem::status(keys + "/target.d/g-rank1.key").permissions(),
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  std::tie(status, out) = run("--out " + keys + " --target-worker g-rank1");
  EXPECT_EQ(status, 1) << out;
  EXPECT_THAT(out, HasSubstr("g-rank1.key exists; keys are never overwritten"));
  std::tie(status, out) = run("--out " + keys + " --target-worker a/b");
  EXPECT_EQ(status, 2) << out;
  EXPECT_THAT(out, HasSubstr("--target-worker: worker key name 'a/b'"));
}

}  // namespace
}  // namespace splitspec::tools
