// Fuzz target: the JSON guard and the OpenAI request parser of the front door
// (coordinator/http/json_guard.h, openai_request.h), through their public
// functions only. The input is a request body.
// Properties, beyond "no crash, no memory error, no hang":
//   - a body ParseCompletionRequest accepts passed CheckJsonText (the guard
//     runs before protobuf's parser);
//   - an accepted request holds what openai_request.h promises (temperature in
//     [0, 2], top_p in (0, 1], top_k >= -1, min_p in [0, 1], at most 16 stop
//     strings, none empty, guidance_scale in [0, 100]);
//   - it turns into a SubmitRequest that serializes.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "coordinator/http/json_guard.h"
#include "coordinator/http/openai_request.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace http = splitspec::coordinator::http;
  const absl::string_view body(reinterpret_cast<const char*>(data), size);
  const bool well_formed = http::CheckJsonText(body).ok();
  for (const auto kind : {http::CompletionRequest::kCompletion, http::CompletionRequest::kChat}) {
    const auto request = http::ParseCompletionRequest(body, kind);
    if (!request.ok()) {
      FUZZ_CHECK(!request.status().message().empty(), "refusal without a message");
      continue;
    }
    FUZZ_CHECK(well_formed, "a body the JSON guard refuses was parsed");
    FUZZ_CHECK(request->temperature >= 0 && request->temperature <= 2, "temperature out of range");
    FUZZ_CHECK(request->top_p > 0 && request->top_p <= 1, "top_p out of range");
    FUZZ_CHECK(request->top_k >= -1, "top_k out of range");
    FUZZ_CHECK(request->min_p >= 0 && request->min_p <= 1, "min_p out of range");
    FUZZ_CHECK(request->stop.size() <= 16, "more than 16 stop strings");
    for (const std::string& stop : request->stop) FUZZ_CHECK(!stop.empty(), "an empty stop string");
    FUZZ_CHECK(request->guidance_scale >= 0 && request->guidance_scale <= 100,
               "guidance_scale out of range");
    const int32_t prompt[] = {1, 2, 3};
    const int32_t stop[] = {0};
    const auto submit = http::MakeSubmitRequest(*request, prompt, "fuzz-1", stop);
    std::string wire;
    FUZZ_CHECK(submit.SerializeToString(&wire), "SubmitRequest does not serialize");
  }
  return 0;
}
