// Server-sent events framing (WHATWG HTML, "Server-sent events") for streamed
// completions: one `data:` event per JSON chunk, then OpenAI's terminator.
//
//   server.StreamWrite(id, SseEvent(chunk_json));   // "data: {...}\n\n"
//   server.StreamWrite(id, SseDone()); // "data: [DONE]\n\n"
//
// Thread safety: pure functions.
#ifndef SPLITSPEC_COORDINATOR_HTTP_SSE_H_
#define SPLITSPEC_COORDINATOR_HTTP_SSE_H_

#include <string>

#include "absl/strings/string_view.h"

namespace splitspec::coordinator::http {

// One event whose data is `data`. A line break inside `data` (CR, LF or CRLF)
// starts another "data: " line, so a client reassembles `data` with LF.
std::string SseEvent(absl::string_view data);

// "data: [DONE]\n\n": the end of an OpenAI stream.
std::string SseDone();

// Content-Type and Cache-Control headers of an event stream.
inline constexpr char kSseContentType[] = "text/event-stream";

}  // namespace splitspec::coordinator::http

#endif  // SPLITSPEC_COORDINATOR_HTTP_SSE_H_
