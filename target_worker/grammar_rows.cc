#include "target_worker/grammar_rows.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"

namespace splitspec::target {

absl::StatusOr<GrammarRows> GrammarRowMasks(grammar::GrammarMatcher& matcher,
                                            absl::Span<const int32_t> drafted, int rows) {
  const int n = static_cast<int>(drafted.size());
  if (rows < 1 || rows > n + 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("grammar masks for ", rows, " rows after ", n, " drafted tokens"));
  }
  const int words = matcher.bitmask_words();
  std::vector<int32_t> all(static_cast<size_t>(n + 1) * words, 0);
  ASSIGN_OR_RETURN(const int valid, matcher.FillDraftBitmasks(drafted, absl::MakeSpan(all)));
  GrammarRows out;
  out.words = words;
  const int skipped = n + 1 - rows;  // positions before the first row
  out.masks.assign(all.begin() + static_cast<ptrdiff_t>(skipped) * words, all.end());
  out.masked.assign(rows, false);
  for (int r = 0; r < rows; ++r) {
    const int before = skipped + r;  // drafted tokens before row r
    if (before > valid) break;       // after a refused drafted token
    const auto row = absl::MakeConstSpan(out.masks).subspan(static_cast<size_t>(r) * words, words);
    out.masked[r] = std::any_of(row.begin(), row.end(), [](int32_t w) { return w != 0; });
  }
  return out;
}

}  // namespace splitspec::target
