#include "coordinator/http/json_integers.h"

#include <cstdint>

#include "runtime/tokenizer/unicode.h"

namespace splitspec::coordinator::http {
namespace {

// A cursor over JSON text that CheckJsonText accepted: no error paths, only
// the end of the text is guarded.
class Scanner {
 public:
  explicit Scanner(absl::string_view text) : text_(text) {}

  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return AtEnd() ? '\0' : text_[pos_]; }
  void Advance() { ++pos_; }

  void SkipSpace() {
    while (!AtEnd() && (Peek() == ' ' || Peek() == '\t' || Peek() == '\n' || Peek() == '\r'))
      ++pos_;
  }

  // At a '"': the string's decoded contents; the cursor moves past it.
  std::string ReadString() {
    std::string out;
    ++pos_;  // the opening quote
    while (!AtEnd() && Peek() != '"') {
      if (Peek() != '\\') {
        out.push_back(text_[pos_++]);
        continue;
      }
      ++pos_;
      const char escape = AtEnd() ? '\0' : text_[pos_++];
      switch (escape) {
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'u':
          model::unicode::AppendUtf8(ReadUnicodeEscape(), &out);
          break;
        default:  // '"', '\\', '/'
          out.push_back(escape);
      }
    }
    ++pos_;  // the closing quote
    return out;
  }

  // At a number: its text; the cursor moves past it.
  absl::string_view ReadNumber() {
    const size_t start = pos_;
    while (!AtEnd() && (IsDigit(Peek()) || Peek() == '-' || Peek() == '+' || Peek() == '.' ||
                        Peek() == 'e' || Peek() == 'E'))
      ++pos_;
    return text_.substr(start, pos_ - start);
  }

  // Skips one value of any kind (containers whole: strings inside are read so
  // that brackets in them do not count).
  void SkipValue() {
    int depth = 0;
    do {
      SkipSpace();
      const char c = Peek();
      if (c == '"') {
        ReadString();
      } else if (c == '{' || c == '[') {
        ++depth;
        Advance();
      } else if (c == '}' || c == ']') {
        --depth;
        Advance();
      } else {
        Advance();  // ',', ':', a digit or a letter of true/false/null
      }
    } while (depth > 0 && !AtEnd());
    // A scalar: the loop above took its first character; take the rest.
    while (!AtEnd() &&
           (IsDigit(Peek()) || IsLetter(Peek()) || Peek() == '.' || Peek() == '-' || Peek() == '+'))
      Advance();
  }

 private:
  static bool IsDigit(char c) { return c >= '0' && c <= '9'; }
  static bool IsLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

  uint32_t ReadHex4() {
    uint32_t value = 0;
    for (int i = 0; i < 4 && !AtEnd(); ++i) {
      const char c = text_[pos_++];
      value = value * 16 + static_cast<uint32_t>(IsDigit(c) ? c - '0' : (c | 0x20) - 'a' + 10);
    }
    return value;
  }

  // After "\u": the code point, a UTF-16 surrogate pair joined (a lone
  // surrogate becomes U+FFFD, as the JSON parser's output must be UTF-8).
  uint32_t ReadUnicodeEscape() {
    const uint32_t unit = ReadHex4();
    if (unit >= 0xD800 && unit <= 0xDBFF && pos_ + 1 < text_.size() && text_[pos_] == '\\' &&
        text_[pos_ + 1] == 'u') {
      const size_t mark = pos_;
      pos_ += 2;
      const uint32_t low = ReadHex4();
      if (low >= 0xDC00 && low <= 0xDFFF) return 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
      pos_ = mark;
    }
    return unit >= 0xD800 && unit <= 0xDFFF ? 0xFFFD : unit;
  }

  const absl::string_view text_;
  size_t pos_ = 0;
};

bool IsIntegerLiteral(absl::string_view number) {
  return number.find_first_of(".eE") == absl::string_view::npos;
}

}  // namespace

JsonMemberIntegers JsonMemberIntegers::Index(absl::string_view json) {
  JsonMemberIntegers index;
  Scanner scan(json);
  scan.SkipSpace();
  if (scan.Peek() != '{') return index;
  scan.Advance();
  while (true) {
    scan.SkipSpace();
    if (scan.Peek() != '"') return index;  // '}' (or the end)
    const std::string name = scan.ReadString();
    scan.SkipSpace();
    scan.Advance();  // ':'
    scan.SkipSpace();
    std::optional<absl::string_view> literal;
    const char c = scan.Peek();
    if (c == '-' || (c >= '0' && c <= '9')) {
      const absl::string_view number = scan.ReadNumber();
      if (IsIntegerLiteral(number)) literal = number;
    } else {
      scan.SkipValue();
    }
    index.members_[name] = literal;
    scan.SkipSpace();
    if (scan.Peek() != ',') return index;
    scan.Advance();
  }
}

std::optional<absl::string_view> JsonMemberIntegers::Find(const std::string& name) const {
  auto it = members_.find(name);
  return it == members_.end() ? std::nullopt : it->second;
}

}  // namespace splitspec::coordinator::http
