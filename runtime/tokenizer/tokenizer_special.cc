#include "runtime/tokenizer/tokenizer_special.h"

#include <algorithm>

namespace splitspec::model {

SpecialTokenSplitter::SpecialTokenSplitter(const std::vector<std::string>& tokens,
                                           const std::vector<TokenType>& types) {
  for (size_t id = 0; id < types.size() && id < tokens.size(); ++id) {
    const TokenType t = types[id];
    if (tokens[id].empty()) continue;
    if (t == TokenType::kControl || t == TokenType::kUnknown || t == TokenType::kUserDefined) {
      specials_.push_back({static_cast<TokenId>(id), tokens[id], t == TokenType::kUserDefined});
    }
  }
  std::stable_sort(specials_.begin(), specials_.end(), [](const Special& a, const Special& b) {
    return a.text.size() > b.text.size();
  });
}

std::vector<TextFragment> SpecialTokenSplitter::Split(std::string_view text,
                                                      bool parse_special) const {
  std::vector<TextFragment> fragments;
  if (text.empty()) return fragments;
  fragments.push_back({kNoToken, 0, text.size()});
  for (const Special& special : specials_) {
    if (!special.always && !parse_special) continue;
    std::vector<TextFragment> next;
    next.reserve(fragments.size());
    for (const TextFragment& f : fragments) {
      if (f.is_token()) {
        next.push_back(f);
        continue;
      }
      size_t pos = f.offset;
      const size_t end = f.offset + f.length;
      while (pos < end) {
        const size_t match = text.substr(0, end).find(special.text, pos);
        if (match == std::string_view::npos) break;
        if (match > pos) next.push_back({kNoToken, pos, match - pos});
        next.push_back({special.id, match, special.text.size()});
        pos = match + special.text.size();
      }
      if (pos < end) next.push_back({kNoToken, pos, end - pos});
    }
    fragments = std::move(next);
  }
  return fragments;
}

}  // namespace splitspec::model
