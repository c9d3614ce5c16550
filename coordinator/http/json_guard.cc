#include "coordinator/http/json_guard.h"

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace splitspec::coordinator::http {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsHexDigit(char c) { return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// One pass over the text; `stack_` holds the open containers ('[' or '{').
class JsonChecker {
 public:
  JsonChecker(absl::string_view text, const JsonLimits& limits) : text_(text), limits_(limits) {}

  absl::Status Run() {
    bool want_value = true;
    while (true) {
      if (want_value) {
        if (absl::Status value = Value(&want_value); !value.ok()) return value;
        continue;
      }
      SkipWhitespace();
      if (stack_.empty()) {
        if (pos_ != text_.size()) return Malformed("unexpected data after the JSON value");
        return absl::OkStatus();
      }
      const char close = stack_.back() == '[' ? ']' : '}';
      if (AtEnd())
        return Malformed(absl::StrCat("unterminated ", stack_.back() == '[' ? "array" : "object"));
      if (text_[pos_] == close) {
        ++pos_;
        stack_.pop_back();
        continue;
      }
      if (text_[pos_] != ',')
        return Malformed(absl::StrCat("expected ',' or '", std::string(1, close), "'"));
      ++pos_;
      SkipWhitespace();
      if (!AtEnd() && text_[pos_] == close) return Malformed("trailing comma");
      if (stack_.back() == '{') {
        if (absl::Status key = Key(); !key.ok()) return key;
      }
      want_value = true;
    }
  }

 private:
  bool AtEnd() const { return pos_ >= text_.size(); }

  absl::Status Malformed(absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed JSON body: ", what, " at byte ", pos_));
  }

  void SkipWhitespace() {
    while (!AtEnd() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' ||
                        text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  // An object member's name and its ':'.
  absl::Status Key() {
    SkipWhitespace();
    if (AtEnd() || text_[pos_] != '"') return Malformed("expected a member name in double quotes");
    if (absl::Status name = String(); !name.ok()) return name;
    SkipWhitespace();
    if (AtEnd() || text_[pos_] != ':') return Malformed("expected ':' after a member name");
    ++pos_;
    return absl::OkStatus();
  }

  // One value; a container is only opened here (Run reads its members).
  // *first_member_next: a non-empty container was opened and its first
  // member's value comes next (an object's first name and ':' are read here).
  absl::Status Value(bool* first_member_next) {
    *first_member_next = false;
    SkipWhitespace();
    if (AtEnd()) return Malformed("expected a value, found the end of the body");
    const char c = text_[pos_];
    if (c == '[' || c == '{') {
      if (static_cast<int>(stack_.size()) >= limits_.max_depth) {
        return absl::InvalidArgumentError(absl::StrCat("JSON body nests deeper than the limit of ",
                                                       limits_.max_depth,
                                                       " arrays and objects at byte ", pos_));
      }
      stack_.push_back(c);
      ++pos_;
      SkipWhitespace();
      const char close = c == '[' ? ']' : '}';
      if (!AtEnd() && text_[pos_] == close) return absl::OkStatus();  // empty: Run closes it
      if (c == '{') {
        if (absl::Status key = Key(); !key.ok()) return key;
      }
      *first_member_next = true;
      return absl::OkStatus();
    }
    if (c == '"') return String();
    if (c == '-' || IsDigit(c)) return Number();
    for (absl::string_view literal : {"true", "false", "null"}) {
      if (text_.substr(pos_, literal.size()) == literal) {
        pos_ += literal.size();
        return absl::OkStatus();
      }
    }
    return Malformed("expected a value");
  }

  absl::Status String() {
    ++pos_;  // the opening quote
    while (!AtEnd()) {
      const unsigned char c = static_cast<unsigned char>(text_[pos_]);
      if (c == '"') {
        ++pos_;
        return absl::OkStatus();
      }
      if (c < 0x20) return Malformed("raw control character in a string");
      if (c == '\\') {
        if (absl::Status escape = Escape(); !escape.ok()) return escape;
        continue;
      }
      const size_t length = Utf8SequenceLength(text_, pos_);
      if (length == 0) return Malformed("invalid UTF-8 in a string");
      pos_ += length;
    }
    return Malformed("unterminated string");
  }

  absl::Status Escape() {
    if (pos_ + 1 >= text_.size()) return Malformed("unterminated escape");
    const char kind = text_[pos_ + 1];
    if (kind == 'u') {
      for (size_t i = 2; i < 6; ++i) {
        if (pos_ + i >= text_.size() || !IsHexDigit(text_[pos_ + i]))
          return Malformed("malformed \\u escape");
      }
      pos_ += 6;
      return absl::OkStatus();
    }
    switch (kind) {
      case '"':
      case '\\':
      case '/':
      case 'b':
      case 'f':
      case 'n':
      case 'r':
      case 't':
        pos_ += 2;
        return absl::OkStatus();
      default:
        return Malformed("unknown escape");
    }
  }

  absl::Status Number() {
    if (text_[pos_] == '-') ++pos_;
    if (AtEnd() || !IsDigit(text_[pos_])) return Malformed("malformed number");
    if (text_[pos_] == '0') {
      ++pos_;
    } else {
      while (!AtEnd() && IsDigit(text_[pos_])) ++pos_;
    }
    if (!AtEnd() && text_[pos_] == '.') {
      ++pos_;
      if (AtEnd() || !IsDigit(text_[pos_]))
        return Malformed("malformed number (digits must follow '.')");
      while (!AtEnd() && IsDigit(text_[pos_])) ++pos_;
    }
    if (!AtEnd() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      if (!AtEnd() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (AtEnd() || !IsDigit(text_[pos_]))
        return Malformed("malformed number (digits must follow the exponent)");
      while (!AtEnd() && IsDigit(text_[pos_])) ++pos_;
    }
    return absl::OkStatus();
  }

  const absl::string_view text_;
  const JsonLimits limits_;
  size_t pos_ = 0;
  std::vector<char> stack_;
};

}  // namespace

absl::Status CheckJsonText(absl::string_view json, const JsonLimits& limits) {
  return JsonChecker(json, limits).Run();
}

namespace {

size_t SkipSpace(absl::string_view json, size_t pos) {
  while (pos < json.size() &&
         (json[pos] == ' ' || json[pos] == '\t' || json[pos] == '\n' || json[pos] == '\r')) {
    ++pos;
  }
  return pos;
}

// The end of the string that opens at json[pos] (a '"'): one past its closing quote.
size_t SkipString(absl::string_view json, size_t pos) {
  for (++pos; pos < json.size() && json[pos] != '"'; ++pos) {
    if (json[pos] == '\\') ++pos;
  }
  return pos + 1;
}

// The end of the value that starts at json[pos] (valid JSON, by REQUIRES).
size_t SkipValue(absl::string_view json, size_t pos) {
  if (json[pos] == '"') return SkipString(json, pos);
  if (json[pos] != '{' && json[pos] != '[') {
    while (pos < json.size() && json[pos] != ',' && json[pos] != '}' && json[pos] != ']' &&
           json[pos] != ' ' && json[pos] != '\t' && json[pos] != '\n' && json[pos] != '\r') {
      ++pos;
    }
    return pos;
  }
  int depth = 0;
  while (pos < json.size()) {
    const char c = json[pos];
    if (c == '"') {
      pos = SkipString(json, pos);
      continue;
    }
    if (c == '{' || c == '[') ++depth;
    if ((c == '}' || c == ']') && --depth == 0) return pos + 1;
    ++pos;
  }
  return pos;
}

}  // namespace

std::optional<absl::string_view> RawJsonValue(absl::string_view json,
                                              std::initializer_list<absl::string_view> path) {
  size_t begin = SkipSpace(json, 0);
  size_t end = begin < json.size() ? SkipValue(json, begin) : begin;
  for (absl::string_view name : path) {
    if (begin >= end || json[begin] != '{') return std::nullopt;
    std::optional<std::pair<size_t, size_t>> found;
    size_t pos = SkipSpace(json, begin + 1);
    while (pos < end && json[pos] == '"') {
      const size_t key_end = SkipString(json, pos);
      const absl::string_view key = json.substr(pos + 1, key_end - pos - 2);
      pos = SkipSpace(json, SkipSpace(json, key_end) + 1);  // past ':'
      const size_t value_end = SkipValue(json, pos);
      if (key == name) found = std::make_pair(pos, value_end);
      pos = SkipSpace(json, value_end);
      if (pos < end && json[pos] == ',') pos = SkipSpace(json, pos + 1);
    }
    if (!found.has_value()) return std::nullopt;
    begin = found->first;
    end = found->second;
  }
  return json.substr(begin, end - begin);
}

}  // namespace splitspec::coordinator::http
