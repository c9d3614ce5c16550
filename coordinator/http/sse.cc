#include "coordinator/http/sse.h"

namespace splitspec::coordinator::http {

std::string SseEvent(absl::string_view data) {
  std::string out = "data: ";
  for (size_t i = 0; i < data.size(); ++i) {
    const char c = data[i];
    if (c == '\r' || c == '\n') {
      if (c == '\r' && i + 1 < data.size() && data[i + 1] == '\n') ++i;
      out += "\ndata: ";
    } else {
      out += c;
    }
  }
  out += "\n\n";
  return out;
}

std::string SseDone() { return "data: [DONE]\n\n"; }

}  // namespace splitspec::coordinator::http
