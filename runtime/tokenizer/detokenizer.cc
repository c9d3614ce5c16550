#include "runtime/tokenizer/detokenizer.h"

#include "runtime/base/status_macros.h"
#include "runtime/tokenizer/unicode.h"

namespace splitspec::model {

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer* tokenizer, DecodeOptions options)
    : tokenizer_(tokenizer),
      options_(options),
      strip_space_(tokenizer->adds_space_prefix() && options.strip_space_prefix) {}

absl::StatusOr<std::string> StreamingDetokenizer::Push(TokenId id) {
  ASSIGN_OR_RETURN(std::string_view piece, tokenizer_->Piece(id, options_.render_special));
  if (strip_space_ && !piece.empty()) {
    if (piece[0] == ' ') piece.remove_prefix(1);
    strip_space_ = false;
  }
  pending_.append(piece);
  std::string out;
  Drain(/*final=*/false, &out);
  return out;
}

std::string StreamingDetokenizer::Finish() {
  std::string out;
  Drain(/*final=*/true, &out);
  strip_space_ = tokenizer_->adds_space_prefix() && options_.strip_space_prefix;
  return out;
}

void StreamingDetokenizer::Drain(bool final, std::string* out) {
  size_t pos = 0;
  while (pos < pending_.size()) {
    size_t n = 0;
    const unicode::Utf8Scan scan =
        unicode::ScanUtf8Char(std::string_view(pending_).substr(pos), &n);
    if (scan == unicode::Utf8Scan::kValid) {
      out->append(pending_, pos, n);
      pos += n;
    } else if (scan == unicode::Utf8Scan::kInvalid) {
      unicode::AppendUtf8(unicode::kReplacementCharacter, out);
      pos += n;
    } else if (final) {  // unfinished character at the end of the stream
      for (size_t k = 0; k < n; ++k) unicode::AppendUtf8(unicode::kReplacementCharacter, out);
      pos += n;
    } else {
      break;  // wait for the rest of the character
    }
  }
  pending_.erase(0, pos);
}

}  // namespace splitspec::model
