#include "tools/cli_args.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace splitspec::tools {

absl::StatusOr<CliArgs> CliArgs::Parse(const std::vector<std::string>& args,
                                       const std::set<std::string>& flags_with_values,
                                       const std::set<std::string>& switches) {
  CliArgs parsed;
  for (size_t i = 0; i < args.size(); ++i) {
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
    if (switches.contains(name)) {
      parsed.values_[name] = has_inline_value ? value : "true";
      continue;
    }
    if (!flags_with_values.contains(name)) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    }
    if (!has_inline_value) {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(absl::StrCat("flag --", name, " needs a value"));
      }
      value = args[++i];
    }
    parsed.values_[name] = value;
  }
  return parsed;
}

std::string CliArgs::GetString(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

absl::StatusOr<int64_t> CliArgs::GetInt(const std::string& name, int64_t fallback) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  int64_t value;
  if (!absl::SimpleAtoi(it->second, &value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " must be an integer, got '", it->second, "'"));
  }
  return value;
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

}  // namespace splitspec::tools
