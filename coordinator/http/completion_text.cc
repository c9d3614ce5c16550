#include "coordinator/http/completion_text.h"

#include <algorithm>

namespace splitspec::coordinator::http {

CompletionText::CompletionText(const model::Tokenizer* tokenizer, std::vector<std::string> stop)
    : detokenizer_(tokenizer), stop_(std::move(stop)) {}

absl::StatusOr<std::string> CompletionText::Push(int32_t token) {
  if (stopped_) return std::string();
  absl::StatusOr<std::string> text = detokenizer_.Push(token);
  if (!text.ok()) return text.status();
  ++tokens_;
  pending_ += *text;
  return Release();
}

std::string CompletionText::Release() {
  // The earliest complete stop string ends the text.
  size_t cut = std::string::npos;
  for (const std::string& stop : stop_) cut = std::min(cut, pending_.find(stop));
  std::string out;
  if (cut != std::string::npos) {
    out = pending_.substr(0, cut);
    pending_.clear();
    stopped_ = true;
  } else {
    // Hold back the longest tail of pending_ that a stop string starts with.
    size_t hold = 0;
    for (const std::string& stop : stop_) {
      for (size_t k = std::min(stop.size() - 1, pending_.size()); k > hold; --k) {
        if (pending_.compare(pending_.size() - k, k, stop, 0, k) == 0) {
          hold = k;
          break;
        }
      }
    }
    out = pending_.substr(0, pending_.size() - hold);
    pending_.erase(0, pending_.size() - hold);
  }
  emitted_ += out;
  return out;
}

std::string CompletionText::Finish() {
  if (stopped_) return std::string();
  pending_ += detokenizer_.Finish();
  std::string out = Release();
  if (!stopped_) {
    out += pending_;  // a held-back prefix that never became a stop string
    emitted_ += pending_;
    pending_.clear();
  }
  return out;
}

}  // namespace splitspec::coordinator::http
