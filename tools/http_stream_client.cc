#include "tools/http_stream_client.h"

#include <curl/curl.h>

#include <chrono>
#include <memory>
#include <mutex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace splitspec::tools {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;
using Clock = std::chrono::steady_clock;

void InitCurlOnce() {
  // curl_global_init is not thread-safe; every later use is.
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct CurlDeleter {
  void operator()(CURL* curl) const { curl_easy_cleanup(curl); }
};
struct HeaderListDeleter {
  void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};

const Value* Field(const Struct& object, const std::string& name) {
  auto it = object.fields().find(name);
  return it == object.fields().end() ? nullptr : &it->second;
}

StreamedCompletion NoUsageYet() {
  StreamedCompletion c;
  c.completion_tokens = -1;
  return c;
}

// The stream as it arrives: bytes split into "data:" lines, each chunk read.
class SseReader {
 public:
  explicit SseReader(Clock::time_point sent) : sent_(sent), last_text_at_(sent) {}

  void Feed(const char* data, size_t size) {
    if (!status_.ok()) return;
    const Clock::time_point now = Clock::now();
    pending_.append(data, size);
    size_t start = 0;
    for (size_t end; (end = pending_.find('\n', start)) != std::string::npos; start = end + 1) {
      absl::string_view line(pending_.data() + start, end - start);
      if (absl::EndsWith(line, "\r")) line.remove_suffix(1);
      OnLine(line, now);
      if (!status_.ok()) return;
    }
    pending_.erase(0, start);
  }

  // The outcome once the transfer ended.
  absl::StatusOr<StreamedCompletion> Finish(Clock::time_point ended) {
    if (!status_.ok()) return status_;
    if (!done_) return absl::InternalError("the stream ended without 'data: [DONE]'");
    result_.timing.e2e_s = Seconds(ended);
    result_.timing.tokens = result_.completion_tokens;
    return std::move(result_);
  }

 private:
  double Seconds(Clock::time_point t) const {
    return std::chrono::duration<double>(t - sent_).count();
  }

  void OnLine(absl::string_view line, Clock::time_point now) {
    if (!absl::ConsumePrefix(&line, "data:")) return;  // blank lines, comments, other fields
    absl::ConsumePrefix(&line, " ");
    if (line == "[DONE]") {
      done_ = true;
      return;
    }
    Value chunk;
    const auto parsed = google::protobuf::util::JsonStringToMessage(
        google::protobuf::StringPiece(line.data(), line.size()), &chunk);
    if (!parsed.ok() || chunk.kind_case() != Value::kStructValue) {
      status_ = absl::InternalError(
          absl::StrCat("a streamed chunk is not a JSON object: ", line.substr(0, 200)));
      return;
    }
    const Struct& object = chunk.struct_value();
    if (const Value* error = Field(object, "error"); error != nullptr) {
      const Value* message = error->kind_case() == Value::kStructValue
                                 ? Field(error->struct_value(), "message")
                                 : nullptr;
      status_ = absl::InternalError(absl::StrCat(
          "the server sent an error event: ",
          message != nullptr ? message->string_value() : std::string(line.substr(0, 200))));
      return;
    }
    if (const Value* usage = Field(object, "usage");
        usage != nullptr && usage->kind_case() == Value::kStructValue) {
      if (const Value* tokens = Field(usage->struct_value(), "completion_tokens"))
        result_.completion_tokens = static_cast<int64_t>(tokens->number_value());
    }
    const Value* choices = Field(object, "choices");
    if (choices == nullptr || choices->kind_case() != Value::kListValue ||
        choices->list_value().values_size() == 0 ||
        choices->list_value().values(0).kind_case() != Value::kStructValue) {
      return;  // the usage-only chunk
    }
    const Struct& choice = choices->list_value().values(0).struct_value();
    if (const Value* reason = Field(choice, "finish_reason");
        reason != nullptr && reason->kind_case() == Value::kStringValue) {
      result_.finish_reason = reason->string_value();
    }
    const Value* text = Field(choice, "text");  // a completion
    if (const Value* delta = Field(choice, "delta");
        delta != nullptr && delta->kind_case() == Value::kStructValue) {
      text = Field(delta->struct_value(), "content");  // a chat completion
    }
    if (text == nullptr || text->kind_case() != Value::kStringValue ||
        text->string_value().empty()) {
      return;
    }
    if (!seen_text_) {
      seen_text_ = true;
      result_.timing.ttft_s = Seconds(now);
    } else {
      result_.timing.event_gaps_s.push_back(
          std::chrono::duration<double>(now - last_text_at_).count());
    }
    last_text_at_ = now;
    result_.text += text->string_value();
  }

  const Clock::time_point sent_;
  Clock::time_point last_text_at_;
  std::string pending_;
  bool done_ = false;
  bool seen_text_ = false;
  absl::Status status_;
  StreamedCompletion result_ = NoUsageYet();
};

size_t WriteToReader(char* data, size_t size, size_t count, void* reader) {
  static_cast<SseReader*>(reader)->Feed(data, size * count);
  return size * count;
}

size_t WriteToString(char* data, size_t size, size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

absl::StatusOr<std::unique_ptr<CURL, CurlDeleter>> NewHandle(const std::string& url,
                                                             absl::Duration timeout) {
  InitCurlOnce();
  std::unique_ptr<CURL, CurlDeleter> curl(curl_easy_init());
  if (curl == nullptr) return absl::InternalError("curl_easy_init failed");
  curl_easy_setopt(curl.get(), CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl.get(), CURLOPT_NOSIGNAL, 1L);  // threads: no SIGALRM for timeouts
  curl_easy_setopt(curl.get(), CURLOPT_TIMEOUT_MS,
                   static_cast<long>(absl::ToInt64Milliseconds(timeout)));
  return curl;
}

}  // namespace

absl::StatusOr<StreamedCompletion> PostStreamingCompletion(const std::string& base_url,
                                                           const std::string& path,
                                                           const std::string& body,
                                                           const std::string& api_key,
                                                           absl::Duration timeout) {
  const std::string url = base_url + path;
  absl::StatusOr<std::unique_ptr<CURL, CurlDeleter>> curl = NewHandle(url, timeout);
  if (!curl.ok()) return curl.status();
  curl_slist* list = curl_slist_append(nullptr, "Content-Type: application/json");
  list = curl_slist_append(list, "Expect:");  // no "100-continue" round trip before the body
  if (!api_key.empty())
    list = curl_slist_append(list, absl::StrCat("Authorization: Bearer ", api_key).c_str());
  std::unique_ptr<curl_slist, HeaderListDeleter> headers(list);
  CURL* handle = curl->get();
  curl_easy_setopt(handle, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(handle, CURLOPT_POSTFIELDS, body.c_str());
  curl_easy_setopt(handle, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  const Clock::time_point sent = Clock::now();
  SseReader reader(sent);
  std::string raw;  // the body of a response that is not a stream
  // Stream bytes to the reader while the status is 200; keep any other body for the error.
  struct Sink {
    CURL* handle;
    SseReader* reader;
    std::string* raw;
  } sink{handle, &reader, &raw};
  curl_easy_setopt(handle, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(
      handle, CURLOPT_WRITEFUNCTION,
      +[](char* data, size_t size, size_t count, void* user) -> size_t {
        Sink* s = static_cast<Sink*>(user);
        long status = 0;
        curl_easy_getinfo(s->handle, CURLINFO_RESPONSE_CODE, &status);
        if (status == 200) return WriteToReader(data, size, count, s->reader);
        return WriteToString(data, size, count, s->raw);
      });
  const CURLcode code = curl_easy_perform(handle);
  const Clock::time_point ended = Clock::now();
  if (code != CURLE_OK) {
    return absl::UnavailableError(absl::StrCat("POST ", url, ": ", curl_easy_strerror(code)));
  }
  long status = 0;
  curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &status);
  if (status != 200) {
    return absl::InternalError(
        absl::StrCat("POST ", url, ": HTTP ", status, ": ", raw.substr(0, 500)));
  }
  absl::StatusOr<StreamedCompletion> result = reader.Finish(ended);
  if (!result.ok()) {
    return absl::InternalError(absl::StrCat("POST ", url, ": ", result.status().message()));
  }
  return result;
}

absl::StatusOr<int> HttpGetStatus(const std::string& base_url, const std::string& path,
                                  absl::Duration timeout) {
  const std::string url = base_url + path;
  absl::StatusOr<std::unique_ptr<CURL, CurlDeleter>> curl = NewHandle(url, timeout);
  if (!curl.ok()) return curl.status();
  std::string ignored;
  curl_easy_setopt(curl->get(), CURLOPT_WRITEFUNCTION, WriteToString);
  curl_easy_setopt(curl->get(), CURLOPT_WRITEDATA, &ignored);
  const CURLcode code = curl_easy_perform(curl->get());
  if (code != CURLE_OK) {
    return absl::UnavailableError(absl::StrCat("GET ", url, ": ", curl_easy_strerror(code)));
  }
  long status = 0;
  curl_easy_getinfo(curl->get(), CURLINFO_RESPONSE_CODE, &status);
  return static_cast<int>(status);
}

}  // namespace splitspec::tools
