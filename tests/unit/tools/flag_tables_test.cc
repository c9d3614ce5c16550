// Walks every flag table of the product (the `splitspec` subcommands, both
// worker binaries, the coordinator): each switch given `=false` is off and a
// value other than true/false/1/0 is refused naming it; each integer flag
// given a value just outside the range of the field it fills is refused naming
// it. A scan of the sources checks that no table is left out of the walk.
#include <filesystem>
#include <fstream>
#include <limits>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/coordinator_flags.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/cli/worker_flags.h"
#include "tools/commands.h"

namespace splitspec::tools {
namespace {

using ::testing::HasSubstr;

// One table and how its command parses a command line: the real entry point
// where there is one (a subcommand's run, the workers' ParseWorkerFlags), so
// that a command which reads its flags some other way would fail the walk.
struct Walked {
  const cli::FlagTable* table;
  // The error of parsing `args` the way the command does ("" when it parsed);
  // a subcommand reports through its exit status and stderr.
  std::string (*parse_error)(const Walked&, const CommandArgs& args);
  int (*run)(const CommandArgs&) = nullptr;  // subcommands
  CommandArgs prefix = {};                   // `bench decode`: the child's name
  proto::Role role = proto::ROLE_UNSPECIFIED;
};

std::string RunError(const Walked& w, const CommandArgs& args) {
  CommandArgs argv = w.prefix;
  argv.insert(argv.end(), args.begin(), args.end());
  ::testing::internal::CaptureStderr();
  const int code = w.run(argv);
  const std::string err = ::testing::internal::GetCapturedStderr();
  return code == 2 ? err : absl::StrCat("exit ", code, ": ", err);
}

std::string WorkerError(const Walked& w, const CommandArgs& args) {
  return std::string(cli::ParseWorkerFlags(args, w.role).status().message());
}

std::string TableError(const Walked& w, const CommandArgs& args) {
  return std::string(cli::CliArgs::Parse(args, *w.table).status().message());
}

std::vector<Walked> AllTables() {
  std::vector<Walked> walked;
  for (const Subcommand& c : Subcommands()) {
    if (c.flags != nullptr) walked.push_back({c.flags, RunError, c.run});
    for (const Subcommand& child : c.children)
      walked.push_back({child.flags, RunError, c.run, {child.name}});
  }
  for (proto::Role role : {proto::ROLE_TARGET_WORKER, proto::ROLE_DRAFT_WORKER})
    walked.push_back({&cli::WorkerFlagTable(role), WorkerError, nullptr, {}, role});
  static const cli::FlagTable* const coordinator =
      new cli::FlagTable(coordinator::CoordinatorFlagTable());
  walked.push_back({coordinator, TableError});
  return walked;
}

// A value outside `range` (beyond int64 when the range is all of int64).
std::string OutOfRange(const cli::IntRange& range) {
  if (range.max < std::numeric_limits<int64_t>::max()) return absl::StrCat(range.max + 1);
  if (range.min > std::numeric_limits<int64_t>::min()) return absl::StrCat(range.min - 1);
  return "9223372036854775808";
}

TEST(FlagTablesTest, EverySwitchTakesFalseAndRefusesOtherWords) {
  int switches = 0;
  for (const Walked& w : AllTables()) {
    for (const cli::Flag& flag : w.table->flags) {
      if (!flag.value.empty()) continue;
      ++switches;
      const std::string where = absl::StrCat(w.table->command, " --", flag.name);
      for (const char* off : {"=false", "=0"}) {
        absl::StatusOr<cli::CliArgs> args =
            cli::CliArgs::Parse({absl::StrCat("--", flag.name, off)}, *w.table);
        ASSERT_TRUE(args.ok()) << where << off << ": " << args.status();
        EXPECT_FALSE(args->Has(flag.name)) << where << off;
      }
      // The command itself accepts `=false` (it fails on the unknown flag after it).
      EXPECT_THAT(w.parse_error(w, {absl::StrCat("--", flag.name, "=false"), "--zz-not-a-flag"}),
                  HasSubstr("unknown flag --zz-not-a-flag"))
          << where;
      EXPECT_THAT(w.parse_error(w, {absl::StrCat("--", flag.name, "=maybe")}),
                  HasSubstr(absl::StrCat("switch --", flag.name,
                                         " takes true, false, 1 or 0, got 'maybe'")))
          << where;
    }
  }
  EXPECT_GE(switches, 10);  // the walk reached the tables' switches
}

TEST(FlagTablesTest, EveryIntegerFlagRefusesAValueOutsideItsFieldByName) {
  int integers = 0;
  for (const Walked& w : AllTables()) {
    for (const cli::Flag& flag : w.table->flags) {
      const std::string where = absl::StrCat(w.table->command, " --", flag.name);
      // A count ("N") is always an integer: it must say the range of its field.
      if (flag.value == "N") {
        EXPECT_TRUE(flag.int_range.has_value()) << where;
      }
      if (!flag.int_range.has_value()) continue;
      ++integers;
      const std::string value = OutOfRange(*flag.int_range);
      EXPECT_THAT(w.parse_error(w, {absl::StrCat("--", flag.name), value}),
                  HasSubstr(absl::StrCat("--", flag.name, " ", value, " is out of range")))
          << where;
      EXPECT_THAT(w.parse_error(w, {absl::StrCat("--", flag.name, "=12x")}),
                  HasSubstr(absl::StrCat("--", flag.name, " must be an integer, got '12x'")))
          << where;
    }
  }
  EXPECT_GE(integers, 50);
}

// Every `.command = "..."` table in the product's sources is one the walk
// reaches, so a new binary's table cannot skip it.
TEST(FlagTablesTest, TheWalkReachesEveryTableInTheSources) {
  std::set<std::string> walked;
  for (const Walked& w : AllTables()) walked.insert(w.table->command);
  // Benchmark binaries and the bench-model writer, not services: their tables
  // are private to their main() files; they parse with the same CliArgs::Parse
  // (typed switches and int_range), which the tests of runtime/cli check.
  const std::set<std::string> benchmarks = {"splitspec_bench_matmul", "splitspec_bench_collectives",
                                            "splitspec_bench_cuda_matmul",
                                            "splitspec_write_bench_model"};
  // `.command = "NAME"` on a line that is not a comment.
  const std::regex command_line(
      R"re(^\s*[^/\s].*\.command = "([^"]+)"|^\s*\.command = "([^"]+)")re");
  int found = 0;
  for (const char* dir :
       {"tools", "runtime", "coordinator", "draft_worker", "target_worker", "tests/bench"}) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(
             std::filesystem::path(SPLITSPEC_SOURCE_DIR) / dir)) {
      if (entry.path().extension() != ".cc" && entry.path().extension() != ".h") continue;
      std::ifstream in(entry.path());
      std::string line;
      std::smatch match;
      while (std::getline(in, line)) {
        if (!std::regex_search(line, match, command_line)) continue;
        ++found;
        const std::string command = match[1].matched ? match[1] : match[2];
        EXPECT_TRUE(walked.contains(command) || benchmarks.contains(command))
            << entry.path() << ": the flag table of '" << command << "' is not walked";
      }
    }
  }
  EXPECT_GE(found, 12);
}

}  // namespace
}  // namespace splitspec::tools
