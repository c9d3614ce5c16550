// The grammar masks of the rows one forward gives a structured-output request
// (runtime/spec/logits_pipeline.h, step 1): row r of a verification block
// follows the drafted tokens before it, so its mask is the matcher's after the
// committed tokens and those drafted tokens. One FillDraftBitmasks per forward.
//
//   ASSIGN_OR_RETURN(GrammarRows masks, GrammarRowMasks(matcher, drafted, rows));
//   if (masks.masked[r]) context.allowed = masks.Row(r);
//
// Rows after the first drafted token the grammar refuses are left unmasked:
// verification never reaches them, because that token has p = 0 in the row
// before it (a masked row), so the block is cut there (greedy, rejection and
// coupled verification alike). A row after an end-of-generation token is left
// unmasked too (the matcher allows nothing there; the request stops at that token).
#ifndef SPLITSPEC_TARGET_WORKER_GRAMMAR_ROWS_H_
#define SPLITSPEC_TARGET_WORKER_GRAMMAR_ROWS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/grammar/grammar_matcher.h"

namespace splitspec::target {

struct GrammarRows {
  int words = 0;                // bitmask words per row
  std::vector<int32_t> masks;   // [rows * words]
  std::vector<bool> masked;     // [rows]: apply Row(r)
  absl::Span<const uint32_t> Row(int r) const {
    return absl::MakeConstSpan(reinterpret_cast<const uint32_t*>(masks.data()) +
                                   static_cast<size_t>(r) * words,
                               words);
  }
};

// The masks of the last `rows` positions of a forward that fed `drafted`
// tokens past the frontier (the last row follows all of them, so row r follows
// the first drafted.size() - (rows - 1 - r)). `matcher` holds the committed
// tokens and is left as it was. Errors: InvalidArgument when rows < 1 or
// rows > drafted.size() + 1.
absl::StatusOr<GrammarRows> GrammarRowMasks(grammar::GrammarMatcher& matcher,
                                            absl::Span<const int32_t> drafted, int rows);

}  // namespace splitspec::target

#endif  // SPLITSPEC_TARGET_WORKER_GRAMMAR_ROWS_H_
