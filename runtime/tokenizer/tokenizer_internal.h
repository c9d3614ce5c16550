// Internal helpers shared by the tokenizer sources; not part of any API.
#ifndef SPLITSPEC_RUNTIME_TOKENIZER_TOKENIZER_INTERNAL_H_
#define SPLITSPEC_RUNTIME_TOKENIZER_TOKENIZER_INTERNAL_H_

#include <string_view>

#include "absl/strings/string_view.h"

namespace splitspec::model::tokenizer_internal {

// Debian's Abseil has its own string_view type (not std::string_view): this
// adapts std::string_view for absl::StrCat and heterogeneous hash-map lookups.
inline absl::string_view AV(std::string_view s) { return absl::string_view(s.data(), s.size()); }

inline bool Contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

}  // namespace splitspec::model::tokenizer_internal

#endif  // SPLITSPEC_RUNTIME_TOKENIZER_TOKENIZER_INTERNAL_H_
