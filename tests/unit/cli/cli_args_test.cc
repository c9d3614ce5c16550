// The flag table parser and its --help (runtime/cli/cli_args.h), and the worker
// binaries' table (runtime/cli/worker_flags.h).
#include "runtime/cli/cli_args.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/cli/worker_flags.h"

namespace splitspec::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const FlagTable kTable = {.command = "splitspec demo",
                          .summary = "a demonstration",
                          .flags = {{"model", "PATH", "", "the model's GGUF"},
                                    {"threads", "N", "4", "compute threads"},
                                    {"json", "", "", "print JSON"}},
                          .details = "More words."};

TEST(CliArgsTest, ParsesValuesSwitchesAndInlineValues) {
  absl::StatusOr<CliArgs> args =
      CliArgs::Parse({"--model", "m.gguf", "--threads=8", "--json"}, kTable);
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_FALSE(args->help_requested());
  EXPECT_EQ(args->GetString("model", ""), "m.gguf");
  EXPECT_EQ(*args->GetInt<int>("threads", 4), 8);
  EXPECT_TRUE(args->Has("json"));
  EXPECT_EQ(args->GetString("json", ""), "true");
}

TEST(CliArgsTest, UnknownFlagIsRefusedByName) {
  absl::StatusOr<CliArgs> args = CliArgs::Parse({"--model", "m", "--modle", "x"}, kTable);
  ASSERT_FALSE(args.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(args.status()));
  EXPECT_THAT(std::string(args.status().message()), HasSubstr("unknown flag --modle"));
  EXPECT_THAT(std::string(args.status().message()), HasSubstr("splitspec demo --help"));
}

TEST(CliArgsTest, PositionalArgumentAndMissingValueAreRefused) {
  EXPECT_THAT(std::string(CliArgs::Parse({"stray"}, kTable).status().message()),
              HasSubstr("unexpected argument 'stray'"));
  EXPECT_THAT(std::string(CliArgs::Parse({"--model"}, kTable).status().message()),
              HasSubstr("flag --model needs a value"));
}

TEST(CliArgsTest, HelpAndShortHelpAreRecognizedWhereAFlagStands) {
  for (const char* help : {"--help", "-h"}) {
    absl::StatusOr<CliArgs> args = CliArgs::Parse({"--json", help, "--ignored-after-help"}, kTable);
    ASSERT_TRUE(args.ok()) << args.status();
    EXPECT_TRUE(args->help_requested()) << help;
    EXPECT_TRUE(HelpRequested({help}, kTable));
  }
  // As the value of a flag, "-h" is a value.
  absl::StatusOr<CliArgs> args = CliArgs::Parse({"--model", "-h"}, kTable);
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_FALSE(args->help_requested());
  EXPECT_EQ(args->GetString("model", ""), "-h");
  EXPECT_FALSE(HelpRequested({"--model", "m"}, kTable));
}

TEST(CliArgsTest, HelpListsEveryFlagWithPlaceholderMeaningAndDefault) {
  const std::string help = Help(kTable);
  EXPECT_THAT(help, HasSubstr("usage: splitspec demo [flags]"));
  EXPECT_THAT(help, HasSubstr("a demonstration"));
  EXPECT_THAT(help, HasSubstr("--model PATH"));
  EXPECT_THAT(help, HasSubstr("the model's GGUF"));
  EXPECT_THAT(help, HasSubstr("--threads N"));
  EXPECT_THAT(help, HasSubstr("compute threads (default: 4)"));
  EXPECT_THAT(help, HasSubstr("--json"));
  EXPECT_THAT(help, Not(HasSubstr("print JSON (default")));
  EXPECT_THAT(help, HasSubstr("-h, --help"));
  EXPECT_THAT(help, HasSubstr("More words."));
}

TEST(CliArgsTest, GettersNameTheFlagOfABadValue) {
  absl::StatusOr<CliArgs> args = CliArgs::Parse({"--threads", "many"}, kTable);
  ASSERT_TRUE(args.ok());
  EXPECT_THAT(std::string(args->GetInt<int>("threads", 1).status().message()),
              HasSubstr("--threads must be an integer, got 'many'"));
}

// Before typed switches, any value of a switch meant true (`--json=false` turned JSON on).
TEST(CliArgsTest, SwitchTakesTrueFalseOneOrZeroAndFalseIsAbsent) {
  for (const char* on : {"--json", "--json=true", "--json=1"}) {
    absl::StatusOr<CliArgs> args = CliArgs::Parse({on}, kTable);
    ASSERT_TRUE(args.ok()) << on << ": " << args.status();
    EXPECT_TRUE(args->Has("json")) << on;
  }
  for (const char* off : {"--json=false", "--json=0"}) {
    absl::StatusOr<CliArgs> args = CliArgs::Parse({off}, kTable);
    ASSERT_TRUE(args.ok()) << off << ": " << args.status();
    EXPECT_FALSE(args->Has("json")) << off;
  }
  absl::StatusOr<CliArgs> last_wins = CliArgs::Parse({"--json", "--json=false"}, kTable);
  ASSERT_TRUE(last_wins.ok());
  EXPECT_FALSE(last_wins->Has("json"));
  for (const char* bad : {"--json=yes", "--json=", "--json=off", "--json=TRUE"}) {
    absl::StatusOr<CliArgs> args = CliArgs::Parse({bad}, kTable);
    EXPECT_EQ(args.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(args.status().message()),
                HasSubstr("switch --json takes true, false, 1 or 0"))
        << bad;
  }
  // A switch never takes the next word as its value.
  EXPECT_THAT(std::string(CliArgs::Parse({"--json", "false"}, kTable).status().message()),
              HasSubstr("unexpected argument 'false'"));
}

const FlagTable kTypedTable = {
    .command = "splitspec typed",
    .summary = "integer flags",
    .flags = {{"connections", "N", "512", "an int field", IntRangeOf<int>()},
              {"count", "N", "0", "a uint32 field", IntRangeOf<uint32_t>()},
              {"seed", "S", "0", "an int64 >= 0", IntRange{0, INT64_MAX}},
              {"text", "N", "", "no int_range: read with GetInt<T>"}}};

// Before, GetInt returned int64 and callers narrowed it: 4294967297 in an int was 1.
TEST(CliArgsTest, IntegerFlagOutsideTheRangeOfItsFieldIsRefusedByName) {
  EXPECT_THAT(
      std::string(CliArgs::Parse({"--connections", "4294967297"}, kTypedTable).status().message()),
      HasSubstr("--connections 4294967297 is out of range [-2147483648, 2147483647]"));
  EXPECT_THAT(std::string(CliArgs::Parse({"--count=-1"}, kTypedTable).status().message()),
              HasSubstr("--count -1 is out of range [0, 4294967295]"));
  EXPECT_THAT(std::string(CliArgs::Parse({"--seed=-5"}, kTypedTable).status().message()),
              HasSubstr("--seed -5 is out of range [0, 9223372036854775807]"));
  EXPECT_THAT(
      std::string(CliArgs::Parse({"--seed=9223372036854775808"}, kTypedTable).status().message()),
      HasSubstr("--seed 9223372036854775808 is out of range"));
  for (const char* bad : {"12x", "-", "+-5", " 5", ""}) {
    EXPECT_THAT(
        std::string(
            CliArgs::Parse({std::string("--connections=") + bad}, kTypedTable).status().message()),
        HasSubstr(std::string("--connections must be an integer, got '") + bad + "'"));
  }
  absl::StatusOr<CliArgs> edges = CliArgs::Parse(
      {"--connections=2147483647", "--count=4294967295", "--seed=9223372036854775807"},
      kTypedTable);
  ASSERT_TRUE(edges.ok()) << edges.status();
  EXPECT_EQ(*edges->GetInt<int>("connections", 0), 2147483647);
  EXPECT_EQ(*edges->GetInt<uint32_t>("count", 0), 4294967295u);
  EXPECT_EQ(*edges->GetInt<int64_t>("seed", 0), INT64_MAX);
}

TEST(CliArgsTest, GetIntChecksTheRangeOfTheFieldBeforeNarrowing) {
  absl::StatusOr<CliArgs> args = CliArgs::Parse({"--text", "4294967297"}, kTypedTable);
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_THAT(std::string(args->GetInt<int32_t>("text", 0).status().message()),
              HasSubstr("--text 4294967297 is out of range [-2147483648, 2147483647]"));
  EXPECT_EQ(*args->GetInt<int64_t>("text", 0), 4294967297);
  EXPECT_EQ(*args->GetInt<int16_t>("absent", 7), 7);
  absl::StatusOr<CliArgs> negative = CliArgs::Parse({"--text=-1"}, kTypedTable);
  ASSERT_TRUE(negative.ok());
  EXPECT_THAT(std::string(negative->GetInt<uint16_t>("text", 0).status().message()),
              HasSubstr("--text -1 is out of range [0, 65535]"));
}

TEST(WorkerFlagsTest, EachRoleAcceptsExactlyItsTable) {
  for (proto::Role role : {proto::ROLE_TARGET_WORKER, proto::ROLE_DRAFT_WORKER}) {
    const FlagTable& table = WorkerFlagTable(role);
    const std::string help = Help(table);
    for (const Flag& flag : table.flags) {
      EXPECT_THAT(help, HasSubstr("--" + flag.name)) << table.command;
      std::vector<std::string> args = {"--" + flag.name};
      if (!flag.value.empty()) args.push_back(flag.name == "tp-group" ? "g" : "1");
      absl::StatusOr<CliArgs> parsed = CliArgs::Parse(args, table);
      EXPECT_TRUE(parsed.ok()) << table.command << " --" << flag.name << ": " << parsed.status();
    }
  }
  // A target worker's flag is unknown to a draft worker, and the reverse.
  EXPECT_THAT(
      std::string(
          ParseWorkerFlags({"--step-tokens", "8"}, proto::ROLE_DRAFT_WORKER).status().message()),
      HasSubstr("unknown flag --step-tokens"));
  EXPECT_THAT(
      std::string(
          ParseWorkerFlags({"--lookahead", "1"}, proto::ROLE_TARGET_WORKER).status().message()),
      HasSubstr("unknown flag --lookahead"));
}

TEST(WorkerFlagsTest, ReadsValuesAndChecksRanges) {
  absl::StatusOr<WorkerFlags> flags =
      ParseWorkerFlags({"--name", "t1", "--tp-group", "g", "--tp-size", "2", "--tp-rank", "1",
                        "--step-tokens", "64"},
                       proto::ROLE_TARGET_WORKER);
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->identity.name, "t1");
  EXPECT_EQ(flags->identity.tp_size, 2);
  EXPECT_EQ(flags->identity.tp_rank, 1);
  EXPECT_EQ(flags->step_tokens, 64);
  EXPECT_EQ(flags->coordinator, "tcp://127.0.0.1:5555");
  EXPECT_THAT(
      std::string(
          ParseWorkerFlags({"--tp-size", "3"}, proto::ROLE_TARGET_WORKER).status().message()),
      HasSubstr("--tp-size must be 1, 2, 4 or 8, got 3"));
  EXPECT_THAT(
      std::string(ParseWorkerFlags({"--k", "65"}, proto::ROLE_DRAFT_WORKER).status().message()),
      HasSubstr("--k must be in [1, 64], got 65"));
}

TEST(WorkerFlagsTest, ReadsTheKvCacheTypeAndRefusesWhatQ8_0DoesNotImplement) {
  absl::StatusOr<WorkerFlags> defaults = ParseWorkerFlags({}, proto::ROLE_TARGET_WORKER);
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->kv_cache_type, model::KvCacheType::kF16);
  absl::StatusOr<WorkerFlags> q8 =
      ParseWorkerFlags({"--kv-cache-type", "q8_0"}, proto::ROLE_TARGET_WORKER);
  ASSERT_TRUE(q8.ok()) << q8.status();
  EXPECT_EQ(q8->kv_cache_type, model::KvCacheType::kQ8_0);
  EXPECT_THAT(std::string(ParseWorkerFlags({"--kv-cache-type", "q4"}, proto::ROLE_TARGET_WORKER)
                              .status()
                              .message()),
              HasSubstr("--kv-cache-type 'q4': not f16 or q8_0"));
  EXPECT_THAT(std::string(ParseWorkerFlags({"--kv-cache-type", "q8_0", "--tp-group", "g",
                                            "--tp-size", "2"},
                                           proto::ROLE_TARGET_WORKER)
                              .status()
                              .message()),
              HasSubstr("--kv-cache-type q8_0 is not implemented for a tensor-parallel group"));
  EXPECT_THAT(std::string(ParseWorkerFlags({"--kv-cache-type", "q8_0", "--tree", "auto"},
                                           proto::ROLE_TARGET_WORKER)
                              .status()
                              .message()),
              HasSubstr("--tree auto with --kv-cache-type q8_0"));
  EXPECT_THAT(std::string(ParseWorkerFlags({"--kv-cache-type", "q8_0"}, proto::ROLE_DRAFT_WORKER)
                              .status()
                              .message()),
              HasSubstr("unknown flag --kv-cache-type"));
}

TEST(WorkerFlagsTest, ReadsTheDeviceAndRefusesABadOneByName) {
  for (proto::Role role : {proto::ROLE_TARGET_WORKER, proto::ROLE_DRAFT_WORKER}) {
    absl::StatusOr<WorkerFlags> cpu = ParseWorkerFlags({}, role);
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    EXPECT_FALSE(cpu->device.is_cuda());
    absl::StatusOr<WorkerFlags> cuda = ParseWorkerFlags({"--device", "cuda:2"}, role);
    ASSERT_TRUE(cuda.ok()) << cuda.status();
    EXPECT_TRUE(cuda->device.is_cuda());
    EXPECT_EQ(cuda->device.ordinal, 2);
    const absl::StatusOr<WorkerFlags> bad = ParseWorkerFlags({"--device=gpu0"}, role);
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(bad.status().message()),
                HasSubstr("--device: device 'gpu0' is not cpu or cuda:N"));
    EXPECT_THAT(Help(WorkerFlagTable(role)), HasSubstr("--device DEV"));
  }
}

TEST(WorkerFlagsTest, ReadsTheTpCommAndRefusesAnUnknownOneByName) {
  absl::StatusOr<WorkerFlags> defaults = ParseWorkerFlags({}, proto::ROLE_TARGET_WORKER);
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->tp_comm, net::TpComm::kAuto);
  for (net::TpComm comm : {net::TpComm::kNccl, net::TpComm::kGloo, net::TpComm::kAuto}) {
    absl::StatusOr<WorkerFlags> flags =
        ParseWorkerFlags({"--tp-comm", net::TpCommName(comm)}, proto::ROLE_TARGET_WORKER);
    ASSERT_TRUE(flags.ok()) << flags.status();
    EXPECT_EQ(flags->tp_comm, comm);
  }
  const absl::StatusOr<WorkerFlags> bad =
      ParseWorkerFlags({"--tp-comm", "mpi"}, proto::ROLE_TARGET_WORKER);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("--tp-comm: tp comm 'mpi'"));
  EXPECT_THAT(Help(WorkerFlagTable(proto::ROLE_TARGET_WORKER)),
              HasSubstr("--tp-comm auto|nccl|gloo"));
  EXPECT_THAT(
      std::string(
          ParseWorkerFlags({"--tp-comm", "nccl"}, proto::ROLE_DRAFT_WORKER).status().message()),
      HasSubstr("unknown flag --tp-comm"));
}

}  // namespace
}  // namespace splitspec::cli
