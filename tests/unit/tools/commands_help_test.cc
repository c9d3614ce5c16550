// Every `splitspec` subcommand answers --help and -h from the flag table its
// parser uses: the help lists every flag with its meaning and default, and the
// subcommand's own parser accepts every flag the help lists.
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/commands.h"

namespace splitspec::tools {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

struct Leaf {
  std::string path;    // "serve", "bench decode"
  CommandArgs prefix;  // what comes before the flags in the group's run
  const Subcommand* command;
  int (*run)(const CommandArgs&);
};

std::vector<Leaf> Leaves() {
  std::vector<Leaf> leaves;
  for (const Subcommand& c : Subcommands()) {
    if (c.flags != nullptr) leaves.push_back({c.name, {}, &c, c.run});
    for (const Subcommand& child : c.children) {
      leaves.push_back({c.name + " " + child.name, {child.name}, &child, c.run});
    }
  }
  return leaves;
}

std::string HelpOutput(const CommandArgs& args, int* exit_code) {
  ::testing::internal::CaptureStdout();
  *exit_code = RunSplitspec(args);
  return ::testing::internal::GetCapturedStdout();
}

TEST(CommandsHelpTest, EverySubcommandIsListed) {
  int code = -1;
  const std::string help = HelpOutput({"--help"}, &code);
  EXPECT_EQ(code, 0);
  for (const char* name :
       {"serve", "client", "status", "scale", "generate", "logits", "bench", "plan", "keygen"}) {
    EXPECT_THAT(help, HasSubstr(std::string("  ") + name)) << name;
  }
  EXPECT_EQ(HelpOutput({"-h"}, &code), help);
  EXPECT_EQ(code, 0);
}

TEST(CommandsHelpTest, HelpListsEveryFlagItsMeaningAndDefault) {
  std::vector<Leaf> leaves = Leaves();
  ASSERT_EQ(leaves.size(), 12u);  // 8 commands and bench's decode, spec, verify and serve
  for (const Leaf& leaf : leaves) {
    ASSERT_NE(leaf.command->flags, nullptr) << leaf.path;
    for (const char* help_flag : {"--help", "-h"}) {
      CommandArgs args = absl::StrSplit(leaf.path, ' ');
      args.push_back(help_flag);
      int code = -1;
      const std::string help = HelpOutput(args, &code);
      EXPECT_EQ(code, 0) << leaf.path << " " << help_flag;
      EXPECT_THAT(help, HasSubstr("usage: splitspec " + leaf.path)) << leaf.path;
      EXPECT_THAT(help, Not(HasSubstr("unknown flag")));
      ASSERT_FALSE(leaf.command->flags->flags.empty()) << leaf.path;
      for (const cli::Flag& flag : leaf.command->flags->flags) {
        EXPECT_THAT(help, HasSubstr("--" + flag.name)) << leaf.path;
        EXPECT_THAT(help, HasSubstr(flag.help)) << leaf.path << " --" << flag.name;
        if (!flag.default_value.empty()) {
          EXPECT_THAT(help, HasSubstr("(default: " + flag.default_value + ")"))
              << leaf.path << " --" << flag.name;
        }
      }
    }
  }
}

// The subcommand's own parser (not only the table) accepts each listed flag:
// given the flag and then an unknown one, it fails on the unknown one, before
// doing anything (parsing comes first in every subcommand).
TEST(CommandsHelpTest, EachSubcommandsParserAcceptsEveryListedFlag) {
  for (const Leaf& leaf : Leaves()) {
    for (const cli::Flag& flag : leaf.command->flags->flags) {
      CommandArgs args = leaf.prefix;
      args.push_back("--" + flag.name);
      if (!flag.value.empty()) args.push_back("1");
      args.push_back("--zz-not-a-flag");
      ::testing::internal::CaptureStderr();
      const int code = leaf.run(args);
      const std::string err = ::testing::internal::GetCapturedStderr();
      EXPECT_EQ(code, 2) << leaf.path << " --" << flag.name << ": " << err;
      EXPECT_THAT(err, HasSubstr("unknown flag --zz-not-a-flag"))
          << leaf.path << " --" << flag.name;
    }
  }
}

TEST(CommandsHelpTest, UnknownFlagsStillFailNamingTheFlag) {
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(RunSplitspec({"serve", "--bogus", "1"}), 2);
  EXPECT_THAT(::testing::internal::GetCapturedStderr(), HasSubstr("unknown flag --bogus"));
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(RunSplitspec({"no-such-command"}), 2);
  EXPECT_THAT(::testing::internal::GetCapturedStderr(),
              HasSubstr("unknown command 'no-such-command'"));
}

}  // namespace
}  // namespace splitspec::tools
