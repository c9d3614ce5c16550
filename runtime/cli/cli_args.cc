#include "runtime/cli/cli_args.h"

#include <cstdio>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace splitspec::cli {
namespace {

constexpr size_t kHelpColumn = 30;  // where a flag's meaning starts in Help()

bool IsHelp(const std::string& arg) { return arg == "--help" || arg == "-h"; }

// `text` as an integer in `range`; InvalidArgument naming --`name` otherwise.
absl::StatusOr<int64_t> ParseInteger(const std::string& name, const std::string& text,
                                     IntRange range) {
  absl::string_view digits = text;
  if (!absl::ConsumePrefix(&digits, "-")) absl::ConsumePrefix(&digits, "+");
  if (digits.empty() || digits.find_first_not_of("0123456789") != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " must be an integer, got '", text, "'"));
  }
  // An integer SimpleAtoi cannot hold is beyond int64: out of range too.
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || !range.Contains(value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " ", text, " is out of range [", range.min, ", ", range.max, "]"));
  }
  return value;
}

// A switch's value: "true"/"1" (and a bare switch) true, "false"/"0" false.
absl::StatusOr<bool> ParseSwitch(const std::string& name, const std::string& text) {
  if (text == "true" || text == "1") return true;
  if (text == "false" || text == "0") return false;
  return absl::InvalidArgumentError(
      absl::StrCat("switch --", name, " takes true, false, 1 or 0, got '", text, "'"));
}

void AppendHelpLine(const std::string& left, const std::string& meaning, std::string* out) {
  std::string line = absl::StrCat("  ", left);
  if (line.size() + 2 > kHelpColumn) {
    absl::StrAppend(out, line, "\n");
    line.clear();
  }
  line.resize(kHelpColumn, ' ');
  absl::StrAppend(out, line, meaning, "\n");
}

}  // namespace

const Flag* FlagTable::Find(const std::string& name) const {
  for (const Flag& flag : flags) {
    if (flag.name == name) return &flag;
  }
  return nullptr;
}

std::string Help(const FlagTable& table) {
  std::string out =
      absl::StrCat("usage: ", table.command, " [flags]\n\n", table.summary, "\n\nflags:\n");
  for (const Flag& flag : table.flags) {
    const std::string left = flag.value.empty() ? absl::StrCat("--", flag.name)
                                                : absl::StrCat("--", flag.name, " ", flag.value);
    std::string meaning = flag.help;
    if (!flag.default_value.empty())
      absl::StrAppend(&meaning, " (default: ", flag.default_value, ")");
    AppendHelpLine(left, meaning, &out);
  }
  AppendHelpLine("-h, --help", "print this help and exit", &out);
  if (!table.details.empty()) absl::StrAppend(&out, "\n", table.details, "\n");
  return out;
}

absl::StatusOr<CliArgs> CliArgs::Parse(const std::vector<std::string>& args,
                                       const FlagTable& table) {
  CliArgs parsed;
  for (size_t i = 0; i < args.size(); ++i) {
    if (IsHelp(args[i])) {
      parsed.help_requested_ = true;
      return parsed;
    }
    absl::string_view arg = args[i];
    if (!absl::ConsumePrefix(&arg, "--")) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", args[i], "'"));
    }
    std::string name(arg);
    std::string value;
    bool has_inline_value = false;
    if (const size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_inline_value = true;
    }
    const Flag* flag = table.Find(name);
    if (flag == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag --", name, " (", table.command, " --help lists the flags)"));
    }
    if (flag->value.empty()) {
      absl::StatusOr<bool> on = ParseSwitch(name, has_inline_value ? value : "true");
      if (!on.ok()) return on.status();
      if (*on) {
        parsed.values_[name] = "true";
      } else {
        parsed.values_.erase(name);  // false: as if absent (a later --name=false undoes one)
      }
      continue;
    }
    if (!has_inline_value) {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(absl::StrCat("flag --", name, " needs a value"));
      }
      value = args[++i];
    }
    if (flag->int_range.has_value()) {
      absl::Status in_range = ParseInteger(name, value, *flag->int_range).status();
      if (!in_range.ok()) return in_range;
    }
    parsed.values_[name] = value;
  }
  return parsed;
}

std::string CliArgs::GetString(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

absl::StatusOr<int64_t> CliArgs::GetIntIn(const std::string& name, int64_t fallback,
                                          IntRange range) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  return ParseInteger(name, it->second, range);
}

absl::StatusOr<double> CliArgs::GetDouble(const std::string& name, double fallback) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  double value;
  if (!absl::SimpleAtod(it->second, &value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " must be a number, got '", it->second, "'"));
  }
  return value;
}

absl::StatusOr<std::vector<int32_t>> CliArgs::GetIntList(const std::string& name) const {
  std::vector<int32_t> out;
  auto it = values_.find(name);
  if (it == values_.end()) return out;
  for (absl::string_view piece : absl::StrSplit(it->second, ',', absl::SkipWhitespace())) {
    int32_t value;
    if (!absl::SimpleAtoi(piece, &value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, ": '", piece, "' is not an integer"));
    }
    out.push_back(value);
  }
  return out;
}

bool HelpRequested(const std::vector<std::string>& args, const FlagTable& table) {
  absl::StatusOr<CliArgs> parsed = CliArgs::Parse(args, table);
  return parsed.ok() && parsed->help_requested();
}

int RunMain(int argc, char** argv, const FlagTable& table,
            absl::FunctionRef<absl::Status(const CliArgs&)> body) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  absl::Status status;
  absl::StatusOr<CliArgs> parsed = CliArgs::Parse(args, table);
  if (parsed.ok() && parsed->help_requested()) {
    std::fputs(Help(table).c_str(), stdout);
    return 0;
  }
  status = parsed.ok() ? body(*parsed) : parsed.status();
  if (status.ok()) return 0;
  std::fprintf(stderr, "%s: %s\n", table.command.c_str(), std::string(status.message()).c_str());
  return absl::IsInvalidArgument(status) ? 2 : 1;
}

}  // namespace splitspec::cli
