#include "runtime/base/memory_amount.h"

#include <cmath>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace splitspec {
namespace {

constexpr double kMaxBytes = 4611686018427387904.0;  // 2^62

// The multiplier of a lower-cased size suffix, or 0 if unknown.
double SuffixMultiplier(absl::string_view suffix) {
  constexpr std::pair<absl::string_view, double> kSuffixes[] = {{"", 1.0},
                                                                {"b", 1.0},
                                                                {"k", 1024.0},
                                                                {"kb", 1024.0},
                                                                {"kib", 1024.0},
                                                                {"m", 1048576.0},
                                                                {"mb", 1048576.0},
                                                                {"mib", 1048576.0},
                                                                {"g", 1073741824.0},
                                                                {"gb", 1073741824.0},
                                                                {"gib", 1073741824.0},
                                                                {"t", 1099511627776.0},
                                                                {"tb", 1099511627776.0},
                                                                {"tib", 1099511627776.0}};
  for (const auto& [name, multiplier] : kSuffixes) {
    if (suffix == name) return multiplier;
  }
  return 0.0;
}

}  // namespace

uint64_t MemoryAmount::Resolve(uint64_t available) const {
  if (!is_percent()) return bytes;
  return static_cast<uint64_t>(static_cast<double>(available) * percent / 100.0);
}

std::string MemoryAmount::ToString() const {
  if (is_percent()) return absl::StrCat(percent, "% of the available memory");
  return absl::StrCat(bytes, " bytes (", FormatBytes(bytes), ")");
}

absl::StatusOr<MemoryAmount> ParseMemoryAmount(absl::string_view text) {
  const std::string lowered = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  auto refuse = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("memory amount '", text, "': ", why,
                     " (write bytes, a size such as 256MiB or 2GiB, or a percentage such as 40%)"));
  };
  if (lowered.empty()) return refuse("empty");
  size_t number_end = 0;
  while (number_end < lowered.size() &&
         (absl::ascii_isdigit(lowered[number_end]) || lowered[number_end] == '.')) {
    ++number_end;
  }
  double number = 0;
  if (number_end == 0 || !absl::SimpleAtod(lowered.substr(0, number_end), &number)) {
    return refuse("not a number");
  }
  const absl::string_view suffix =
      absl::StripLeadingAsciiWhitespace(absl::string_view(lowered).substr(number_end));
  MemoryAmount amount;
  if (suffix == "%") {
    if (!(number > 0.0 && number <= 100.0)) return refuse("a percentage must be in (0, 100]");
    amount.percent = number;
    return amount;
  }
  const double multiplier = SuffixMultiplier(suffix);
  if (multiplier == 0.0) return refuse(absl::StrCat("unknown unit '", suffix, "'"));
  const double bytes = std::floor(number * multiplier);
  if (!(bytes >= 1.0)) return refuse("must be at least one byte");
  if (bytes > kMaxBytes) return refuse("more than 2^62 bytes");
  amount.bytes = static_cast<uint64_t>(bytes);
  return amount;
}

std::string FormatBytes(uint64_t bytes) {
  constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return absl::StrCat(bytes, " bytes");
  double value = static_cast<double>(bytes) / 1024.0;
  int unit = 0;
  while (value >= 1024.0 && unit < 3) {
    value /= 1024.0;
    ++unit;
  }
  return absl::StrFormat("%.*f %s", value < 10 ? 2 : 1, value, kUnits[unit]);
}

}  // namespace splitspec
