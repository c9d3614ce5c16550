// ToolCallStream: the reply side of tool calling. It sits between the detokenized, stop-checked
// text of a chat reply (completion_text.h) and the response: it passes on the content that is
// surely content as it comes, holds back what may become a tool call, and at the end reads the
// calls out of the whole text with the request's parser (chat_tools.h's ToolPlan).
//
//   ToolCallStream calls(plan, "call_" + request_id + "_");
//   for (each text delta) SendContent(calls.Push(delta));
//   ToolCallStream::Result result = calls.Finish(text_tail, "stop");
//   SendContent(result.content_tail); SendCalls(result.tool_calls); finish with result.finish_reason
//
// The streamed content and the calls are those of the non-streamed reply by construction: both
// come from one parse of the whole text at Finish, and what Push passed on before is always a
// prefix of the final content:
//   - not parsing (no tools, tool_choice "none"): everything passes at once;
//   - forced (tool_choice "required" / named): everything is held; the reply is the calls
//     (ParseForcedToolCalls), or, when the output is not a complete array (cut by max_tokens),
//     the text as content;
//   - hermes: the text passes up to where "<tool_call>" begins or may begin, less trailing
//     whitespace (the parser strips it before the first call);
//   - llama3_json: held while the text, less leading whitespace, may still be a call (empty, a
//     prefix of "<|python_tag|>", or starting with "{" or "<|python_tag|>"); once it cannot,
//     everything passes.
// Calls come at Finish, whole (OpenAI's delta shape allows arguments in pieces; one piece is
// one valid split). With parallel_tool_calls false, an auto reply keeps its first call only.
// finish_reason is "tool_calls" when the reply has calls, else the generation's.
//
// Thread safety: not thread-safe; one per reply.
#ifndef SPLITSPEC_COORDINATOR_HTTP_TOOL_CALL_STREAM_H_
#define SPLITSPEC_COORDINATOR_HTTP_TOOL_CALL_STREAM_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "coordinator/http/chat_tools.h"
#include "coordinator/http/tool_calls.h"

namespace splitspec::coordinator::http {

class ToolCallStream {
 public:
  // A stream that passes everything on (no tool parsing).
  ToolCallStream() = default;
  ToolCallStream(const ToolPlan& plan, std::string id_prefix);

  // Appends `delta` to the reply's text; returns the content that may be sent now.
  std::string Push(absl::string_view delta);

  struct Result {
    std::string content;       // the whole reply's content (what Push passed on + content_tail)
    std::string content_tail;  // content not passed on by Push yet
    std::vector<ToolCall> tool_calls;
    std::string finish_reason;
  };
  // Appends `tail` (CompletionText::Finish's), reads the calls, and says how the reply ends.
  // `finish_reason` is the generation's ("stop", "length"). Call once, last.
  Result Finish(absl::string_view tail, absl::string_view finish_reason);

 private:
  // The length of the prefix of text_ that is surely content.
  size_t SafeContentLength() const;

  ToolPlan plan_;
  std::string id_prefix_;
  std::string text_;  // the reply so far
  size_t sent_ = 0;   // text_[0, sent_) was passed on as content
};

}  // namespace splitspec::coordinator::http

#endif  // SPLITSPEC_COORDINATOR_HTTP_TOOL_CALL_STREAM_H_
