// JsonWriter: builds compact JSON text (RFC 8259) with keys in the order
// written, for the front door's responses.
//
//   JsonWriter w;
//   w.BeginObject().Key("id").String("cmpl-1").Key("n").Int(3).EndObject();
//   std::string text = w.Take();   // {"id":"cmpl-1","n":3}
//
// Strings are written with splitspec::JsonQuote (runtime/base/json_string.h):
// valid JSON for any bytes, invalid UTF-8 replaced by U+FFFD. Non-finite
// doubles become null.
// REQUIRES: calls nest properly (Key only inside an object, before a value).
// Thread safety: none; one writer per document.
#ifndef SPLITSPEC_COORDINATOR_HTTP_JSON_WRITER_H_
#define SPLITSPEC_COORDINATOR_HTTP_JSON_WRITER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace splitspec::coordinator::http {

class JsonWriter {
 public:
  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  JsonWriter& Key(absl::string_view key);
  JsonWriter& String(absl::string_view value);
  JsonWriter& Int(int64_t value);
  JsonWriter& Double(double value);
  // The shortest decimal that reads back as `value` (std::to_chars): exact for a
  // float, where Double writes six significant digits. Non-finite: null.
  JsonWriter& Float(float value);
  JsonWriter& Bool(bool value);
  JsonWriter& Null();

  // The document so far; the writer is then empty.
  std::string Take();

 private:
  void BeforeValue();

  std::string out_;
  std::vector<bool> first_;  // per open container: nothing written in it yet
  bool after_key_ = false;
};

}  // namespace splitspec::coordinator::http

#endif  // SPLITSPEC_COORDINATOR_HTTP_JSON_WRITER_H_
