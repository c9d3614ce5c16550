// An HTTP client for an OpenAI-compatible server's streamed completions (the
// front door of `splitspec serve`, or any other), over libcurl: it posts a
// request with "stream": true, reads the server-sent events as they arrive and
// times them, for `splitspec bench serve`.
//
//   ASSIGN_OR_RETURN(StreamedCompletion c,
//                    PostStreamingCompletion("http://127.0.0.1:8000", "/v1/chat/completions",
//                                            body, api_key, absl::Minutes(10)));
//   c.text, c.completion_tokens, c.timing.ttft_s ...
//
// Events read: "data: {json}" lines. A chunk's text is choices[0].delta.content
// (chat) or choices[0].text (completion); usage.completion_tokens is read from
// whichever chunk carries usage (the request should set
// stream_options.include_usage); an {"error": {"message": ..}} event fails the
// request; "data: [DONE]" ends it.
//
// Thread safety: every function may be called from many threads at once (one
// curl handle per call; libcurl's global state is set up once, thread-safely).
#ifndef SPLITSPEC_TOOLS_HTTP_STREAM_CLIENT_H_
#define SPLITSPEC_TOOLS_HTTP_STREAM_CLIENT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tools/bench_serve_stats.h"

namespace splitspec::tools {

struct StreamedCompletion {
  std::string text;               // the text events, concatenated
  int64_t completion_tokens = 0;  // from usage; -1 when no chunk carried usage
  std::string finish_reason;      // the last one a chunk carried
  RequestTiming timing;           // timing.tokens = completion_tokens
};

// POSTs the JSON `body` to `base_url` + `path` with "Authorization: Bearer
// `api_key`" when the key is not empty, and reads the stream to its end.
// Errors: Unavailable naming the URL when the connection fails or times out
// (`timeout` for the whole request); Internal with the status and the body's
// text for an HTTP status other than 200; Internal quoting an error event, or
// naming a chunk that is not JSON, or a stream that ended without [DONE].
absl::StatusOr<StreamedCompletion> PostStreamingCompletion(const std::string& base_url,
                                                           const std::string& path,
                                                           const std::string& body,
                                                           const std::string& api_key,
                                                           absl::Duration timeout);

// The HTTP status of GET `base_url` + `path`; Unavailable when nothing answers
// within `timeout`.
absl::StatusOr<int> HttpGetStatus(const std::string& base_url, const std::string& path,
                                  absl::Duration timeout);

}  // namespace splitspec::tools

#endif  // SPLITSPEC_TOOLS_HTTP_STREAM_CLIENT_H_
