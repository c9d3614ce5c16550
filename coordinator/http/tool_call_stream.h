// ToolCallStream: the reply side of tool calling. It sits between the detokenized, stop-checked
// text of a chat reply (completion_text.h) and the response: it passes on the content that is
// surely content as it comes, holds back what may become a tool call, streams the calls in
// pieces as the model writes them, and at the end reads the calls out of the whole text with
// the request's parser (chat_tools.h's ToolPlan).
//
//   ToolCallStream calls(plan, "call_" + request_id + "_");
//   for (each text delta) { Piece piece = calls.Push(delta); Send(piece.content, piece.calls); }
//   ToolCallStream::Result result = calls.Finish(text_tail, "stop");
//   Send(result.content_tail, result.call_tail); finish with result.finish_reason
//
// The reply (Result's content, tool_calls, finish_reason) is one parse of the whole text at
// Finish, streamed or not. The streamed content is always that content: what Push passed on
// is a prefix of it, and content_tail the rest:
//   - not parsing (no tools, tool_choice "none"): everything passes at once;
//   - forced (tool_choice "required" / named): everything is held; the reply is the calls
//     (ParseForcedToolCalls), or, when the output is not a complete array (cut by max_tokens),
//     the text as content;
//   - hermes: the text passes up to where "<tool_call>" begins or may begin, less trailing
//     whitespace (the parser strips it before the first call);
//   - llama3_json: held while the text, less leading whitespace, may still be a call (empty, a
//     prefix of "<|python_tag|>", or starting with "{" or "<|python_tag|>"); once it cannot,
//     everything passes.
// Calls stream in pieces (ToolCallDelta), as vLLM's hermes / llama3_json / required-tool
// parsers send them: a call's first piece (index, id, name, arguments "") once its object
// opens with a whole "name" member, then the raw text of its "arguments" (llama3_json:
// "parameters" too) value as it grows, while that value is an object or an array; each call
// after the one before it is whole. Anything else (a string or scalar value, "arguments"
// before "name", an escape in the name) waits for Finish. There, when the reply's calls begin
// with what was streamed (same names, streamed arguments a prefix), call_tail holds the rest:
// the pieces then concatenate to the reply's calls exactly. A reply that ends not holding
// them (cut by max_tokens inside the forced array or a call, or a call that turns out
// malformed) keeps in the stream the pieces already sent, as vLLM's do; call_tail is then
// empty, and its content (the text, whole) still follows as content_tail.
// With parallel_tool_calls false, an auto reply keeps its first call only (and streams only
// it). finish_reason is "tool_calls" when the reply has calls, else the generation's.
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

  // What may be sent now: content, then pieces of calls.
  struct Piece {
    std::string content;
    std::vector<ToolCallDelta> calls;
  };
  // Appends `delta` to the reply's text; returns what of it may be sent now.
  Piece Push(absl::string_view delta);

  struct Result {
    std::string content;       // the whole reply's content (what Push passed on + content_tail)
    std::string content_tail;  // content not passed on by Push yet
    std::vector<ToolCall> tool_calls;
    std::vector<ToolCallDelta> call_tail;  // pieces of tool_calls not passed on by Push yet
    std::string finish_reason;
  };
  // Appends `tail` (CompletionText::Finish's), reads the calls, and says how the reply ends.
  // `finish_reason` is the generation's ("stop", "length"). Call once, last.
  Result Finish(absl::string_view tail, absl::string_view finish_reason);

 private:
  // The length of the prefix of text_ that is surely content.
  size_t SafeContentLength() const;
  // The pieces of calls that may be sent now (appended to `out`).
  void StreamCalls(std::vector<ToolCallDelta>* out);
  // The pieces that complete the streamed calls into `calls`; empty when the streamed calls
  // are not how `calls` begin.
  std::vector<ToolCallDelta> CallTail(const std::vector<ToolCall>& calls) const;

  struct StreamedCall {
    std::string name;
    std::string arguments;  // passed on so far
  };

  ToolPlan plan_;
  std::string id_prefix_;
  std::string text_;  // the reply so far
  size_t sent_ = 0;   // text_[0, sent_) was passed on as content
  std::vector<StreamedCall> streamed_;  // the calls Push began, in order
};

}  // namespace splitspec::coordinator::http

#endif  // SPLITSPEC_COORDINATOR_HTTP_TOOL_CALL_STREAM_H_
