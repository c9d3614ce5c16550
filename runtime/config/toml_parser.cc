#include "runtime/config/toml_parser.h"

#include <cmath>
#include <limits>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "runtime/base/status_macros.h"
#include "runtime/base/utf8.h"

namespace splitspec::config {
namespace {

// Arrays nest at most this deep: bounds the recursion whatever the input.
constexpr int kMaxArrayDepth = 32;

bool IsBareKeyChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
}

// A byte for a message: 'x' when printable, else its hex value.
std::string Describe(char c) {
  const unsigned char u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7f) return absl::StrCat("'", std::string(1, c), "'");
  return absl::StrFormat("byte 0x%02x", u);
}

bool IsControl(char c) {
  const unsigned char u = static_cast<unsigned char>(c);
  return (u < 0x20 && c != '\t') || u == 0x7f;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xc0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xe0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else {
    out->push_back(static_cast<char>(0xf0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
}

class Parser {
 public:
  Parser(absl::string_view text, const std::string& source) : text_(text), source_(source) {}

  absl::Status Run(TomlTable* root) {
    RETURN_IF_ERROR(CheckUtf8());
    TomlTable* current = root;
    while (true) {
      SkipSpaces();
      if (AtEnd()) return absl::OkStatus();
      const char c = Peek();
      if (c == '[') {
        RETURN_IF_ERROR(ParseHeader(root, &current));
      } else if (c != '#' && c != '\n' && c != '\r') {
        RETURN_IF_ERROR(ParseKeyValue(current));
      }
      RETURN_IF_ERROR(ExpectLineEnd());
    }
  }

 private:
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }
  absl::Status ErrorAt(int line, absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(source_, ":", line, ": ", what));
  }
  absl::Status Error(absl::string_view what) const { return ErrorAt(line_, what); }

  // TOML documents are UTF-8; checked once so that strings need no check.
  absl::Status CheckUtf8() const {
    int line = 1;
    for (size_t i = 0; i < text_.size();) {
      const size_t len = ValidUtf8Length(std::string_view(text_.data(), text_.size()), i);
      if (len == 0)
        return ErrorAt(line, absl::StrFormat("invalid UTF-8 (byte 0x%02x)",
                                             static_cast<unsigned char>(text_[i])));
      if (text_[i] == '\n') ++line;
      i += len;
    }
    return absl::OkStatus();
  }

  void SkipSpaces() {
    while (!AtEnd() && (Peek() == ' ' || Peek() == '\t')) ++pos_;
  }

  // At '#': skips to (not past) the end of the line.
  absl::Status SkipComment() {
    while (!AtEnd() && Peek() != '\n') {
      if (IsControl(Peek()) && !(Peek() == '\r' && Peek(1) == '\n')) {
        return Error(absl::StrCat("control character ", Describe(Peek()), " in a comment"));
      }
      ++pos_;
    }
    return absl::OkStatus();
  }

  // Consumes trailing spaces, a comment, and the newline (or the end of input).
  absl::Status ExpectLineEnd() {
    SkipSpaces();
    if (Peek() == '#') RETURN_IF_ERROR(SkipComment());
    if (AtEnd()) return absl::OkStatus();
    if (Peek() == '\n') {
      ++pos_;
    } else if (Peek() == '\r' && Peek(1) == '\n') {
      pos_ += 2;
    } else {
      return Error(absl::StrCat("unexpected ", Describe(Peek()), "; expected the end of the line"));
    }
    ++line_;
    return absl::OkStatus();
  }

  // Inside arrays: spaces, newlines and comments.
  absl::Status SkipBlank() {
    while (!AtEnd()) {
      SkipSpaces();
      if (Peek() == '#') {
        RETURN_IF_ERROR(SkipComment());
      } else if (Peek() == '\n') {
        ++pos_;
        ++line_;
      } else if (Peek() == '\r' && Peek(1) == '\n') {
        pos_ += 2;
        ++line_;
      } else {
        break;
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> ParseKey() {
    if (Peek() == '"') return ParseBasicString();
    if (Peek() == '\'') return ParseLiteralString();
    const size_t start = pos_;
    while (!AtEnd() && IsBareKeyChar(Peek())) ++pos_;
    if (pos_ == start) {
      return Error(AtEnd() ? std::string("expected a key, found the end of the input")
                           : absl::StrCat("expected a key, found ", Describe(Peek())));
    }
    return std::string(text_.substr(start, pos_ - start));
  }

  absl::Status ParseKeyValue(TomlTable* table) {
    const int key_line = line_;
    ASSIGN_OR_RETURN(std::string key, ParseKey());
    SkipSpaces();
    if (Peek() == '.')
      return Error(absl::StrCat("dotted key '", key, ".…' is not supported; use a [table] header"));
    if (Peek() != '=') {
      return Error(absl::StrCat("expected '=' after the key '", key, "', found ",
                                AtEnd() ? std::string("the end of the input") : Describe(Peek())));
    }
    ++pos_;
    SkipSpaces();
    ASSIGN_OR_RETURN(TomlValue value, ParseValue(0));
    if (table->Has(key)) return ErrorAt(key_line, absl::StrCat("duplicate key '", key, "'"));
    table->values.emplace(std::move(key), std::move(value));
    return absl::OkStatus();
  }

  absl::Status ParseHeader(TomlTable* root, TomlTable** current) {
    const int header_line = line_;
    const bool is_array = Peek(1) == '[';
    pos_ += is_array ? 2 : 1;
    std::vector<std::string> path;
    while (true) {
      SkipSpaces();
      ASSIGN_OR_RETURN(std::string key, ParseKey());
      path.push_back(std::move(key));
      SkipSpaces();
      if (Peek() != '.') break;
      ++pos_;
    }
    const std::string name = absl::StrJoin(path, ".");
    if (is_array ? (Peek() != ']' || Peek(1) != ']') : Peek() != ']') {
      return Error(
          absl::StrCat("expected '", is_array ? "]]" : "]", "' to close the header [", name));
    }
    pos_ += is_array ? 2 : 1;
    TomlTable* table = root;
    for (size_t i = 0; i + 1 < path.size(); ++i) {
      ASSIGN_OR_RETURN(table, Descend(table, path[i], header_line));
    }
    const std::string& last = path.back();
    if (table->values.contains(last))
      return Error(absl::StrCat("'", name, "' is already a value, not a table"));
    if (is_array) {
      if (table->tables.contains(last))
        return Error(absl::StrCat("'", name, "' is already a table, not an array of tables"));
      auto& array = table->table_arrays[last];
      array.push_back(std::make_unique<TomlTable>());
      array.back()->line = header_line;
      *current = array.back().get();
      return absl::OkStatus();
    }
    if (table->table_arrays.contains(last))
      return Error(absl::StrCat("'", name, "' is already an array of tables"));
    auto [it, inserted] = table->tables.try_emplace(last);
    if (inserted) it->second = std::make_unique<TomlTable>();
    if (!defined_.insert(it->second.get()).second)
      return Error(absl::StrCat("table [", name, "] is defined twice"));
    it->second->line = header_line;
    *current = it->second.get();
    return absl::OkStatus();
  }

  // One segment of a dotted header: an existing table, the last element of an
  // array of tables, or a new (implicitly defined) table.
  absl::StatusOr<TomlTable*> Descend(TomlTable* table, const std::string& key, int line) {
    if (table->values.contains(key))
      return Error(absl::StrCat("'", key, "' is already a value, not a table"));
    if (auto it = table->table_arrays.find(key); it != table->table_arrays.end())
      return it->second.back().get();
    auto [it, inserted] = table->tables.try_emplace(key);
    if (inserted) {
      it->second = std::make_unique<TomlTable>();
      it->second->line = line;
    }
    return it->second.get();
  }

  absl::StatusOr<TomlValue> ParseValue(int depth) {
    TomlValue value;
    value.line = line_;
    const char c = Peek();
    if (AtEnd() || c == '\n' || c == '\r' || c == '#') return Error("expected a value after '='");
    if (c == '"' || c == '\'') {
      if (Peek(1) == c && Peek(2) == c) return Error("multi-line strings are not supported");
      value.kind = TomlValue::Kind::kString;
      ASSIGN_OR_RETURN(value.string_value, c == '"' ? ParseBasicString() : ParseLiteralString());
      return value;
    }
    if (c == '[') return ParseArray(depth);
    if (c == '{') return Error("inline tables {...} are not supported; use a [table] header");
    return ParseScalarToken();
  }

  absl::StatusOr<TomlValue> ParseArray(int depth) {
    if (depth >= kMaxArrayDepth)
      return Error(absl::StrCat("arrays nested deeper than ", kMaxArrayDepth));
    TomlValue array;
    array.kind = TomlValue::Kind::kArray;
    array.line = line_;
    ++pos_;  // '['
    while (true) {
      RETURN_IF_ERROR(SkipBlank());
      if (AtEnd()) return ErrorAt(array.line, "unterminated array (no closing ']')");
      if (Peek() == ']') break;
      ASSIGN_OR_RETURN(TomlValue element, ParseValue(depth + 1));
      array.elements.push_back(std::move(element));
      RETURN_IF_ERROR(SkipBlank());
      if (Peek() == ',') {
        ++pos_;
        continue;
      }
      if (AtEnd()) return ErrorAt(array.line, "unterminated array (no closing ']')");
      if (Peek() != ']')
        return Error(absl::StrCat("expected ',' or ']' in an array, found ", Describe(Peek())));
    }
    ++pos_;  // ']'
    return array;
  }

  absl::StatusOr<std::string> ParseBasicString() {
    ++pos_;  // '"'
    std::string out;
    while (true) {
      if (AtEnd() || Peek() == '\n') return Error("unterminated string");
      const char c = text_[pos_++];
      if (c == '"') return out;
      if (IsControl(c))
        return Error(absl::StrCat("control character ", Describe(c), " in a string"));
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      RETURN_IF_ERROR(ParseEscape(&out));
    }
  }

  // After a backslash in a basic string.
  absl::Status ParseEscape(std::string* out) {
    if (AtEnd()) return Error("unterminated string");
    const char e = text_[pos_++];
    switch (e) {
      case '"':
        out->push_back('"');
        return absl::OkStatus();
      case '\\':
        out->push_back('\\');
        return absl::OkStatus();
      case 'b':
        out->push_back('\b');
        return absl::OkStatus();
      case 't':
        out->push_back('\t');
        return absl::OkStatus();
      case 'n':
        out->push_back('\n');
        return absl::OkStatus();
      case 'f':
        out->push_back('\f');
        return absl::OkStatus();
      case 'r':
        out->push_back('\r');
        return absl::OkStatus();
      case 'u':
      case 'U': {
        const size_t digits = e == 'u' ? 4 : 8;
        uint32_t cp = 0;
        for (size_t i = 0; i < digits; ++i) {
          const char h = Peek();
          if (!absl::ascii_isxdigit(static_cast<unsigned char>(h)))
            return Error(absl::StrCat("\\", std::string(1, e), " needs ", digits, " hex digits"));
          cp = cp * 16 + static_cast<uint32_t>(
                             absl::ascii_isdigit(static_cast<unsigned char>(h))
                                 ? h - '0'
                                 : absl::ascii_tolower(static_cast<unsigned char>(h)) - 'a' + 10);
          ++pos_;
        }
        if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
          return Error(absl::StrFormat("\\%c%0*X is not a Unicode scalar value", e,
                                       static_cast<int>(digits), cp));
        AppendUtf8(cp, out);
        return absl::OkStatus();
      }
      default:
        return Error(absl::StrCat("unknown escape \\", Describe(e)));
    }
  }

  absl::StatusOr<std::string> ParseLiteralString() {
    ++pos_;  // '\''
    const size_t start = pos_;
    while (true) {
      if (AtEnd() || Peek() == '\n') return Error("unterminated string");
      if (Peek() == '\'') break;
      if (IsControl(Peek()))
        return Error(absl::StrCat("control character ", Describe(Peek()), " in a string"));
      ++pos_;
    }
    std::string out(text_.substr(start, pos_ - start));
    ++pos_;
    return out;
  }

  // true, false, integers and floats: a token up to the next delimiter.
  absl::StatusOr<TomlValue> ParseScalarToken() {
    const size_t start = pos_;
    while (!AtEnd()) {
      const char c = Peek();
      if (c == ' ' || c == '\t' || c == ',' || c == ']' || c == '#' || c == '\n' || c == '\r')
        break;
      ++pos_;
    }
    const std::string token(text_.substr(start, pos_ - start));
    TomlValue value;
    value.line = line_;
    if (token == "true" || token == "false") {
      value.kind = TomlValue::Kind::kBoolean;
      value.boolean_value = token == "true";
      return value;
    }
    return ParseNumber(token, value);
  }

  absl::StatusOr<TomlValue> ParseNumber(const std::string& token, TomlValue value) {
    const std::string bad = absl::StrCat("'", token, "' is not a value (strings need quotes)");
    std::string_view body = token;
    const bool negative = !body.empty() && body[0] == '-';
    if (!body.empty() && (body[0] == '+' || body[0] == '-')) body.remove_prefix(1);
    if (body == "inf" || body == "nan") {
      value.kind = TomlValue::Kind::kFloat;
      value.float_value = body == "inf" ? std::numeric_limits<double>::infinity()
                                        : std::numeric_limits<double>::quiet_NaN();
      if (negative) value.float_value = -value.float_value;
      return value;
    }
    if (body.size() > 1 && body[0] == '0' && (body[1] == 'x' || body[1] == 'o' || body[1] == 'b')) {
      return Error(
          absl::StrCat("'", token, "': hexadecimal, octal and binary integers are not supported"));
    }
    // sign? int ('.' digits)? ([eE] sign? digits)?, '_' only between digits.
    std::string digits;  // the token without '_'
    size_t i = 0;
    auto digit_run = [&](bool allow_sign) -> bool {
      if (allow_sign && i < body.size() && (body[i] == '+' || body[i] == '-'))
        digits.push_back(body[i++]);
      const size_t run_start = i;
      while (i < body.size()) {
        if (absl::ascii_isdigit(static_cast<unsigned char>(body[i]))) {
          digits.push_back(body[i++]);
        } else if (body[i] == '_' && i > run_start && i + 1 < body.size() &&
                   absl::ascii_isdigit(static_cast<unsigned char>(body[i + 1]))) {
          ++i;
        } else {
          break;
        }
      }
      return i > run_start;
    };
    if (!digit_run(false)) return Error(bad);
    if (body[0] == '0' && digits.size() > 1)
      return Error(absl::StrCat("'", token, "': leading zeros are not allowed"));
    bool is_float = false;
    if (i < body.size() && body[i] == '.') {
      digits.push_back(body[i++]);
      if (!digit_run(false)) return Error(bad);
      is_float = true;
    }
    if (i < body.size() && (body[i] == 'e' || body[i] == 'E')) {
      digits.push_back(body[i++]);
      if (!digit_run(true)) return Error(bad);
      is_float = true;
    }
    if (i != body.size()) {
      if (body[i] == '-' || body[i] == ':')
        return Error(absl::StrCat("'", token, "': dates and times are not supported"));
      return Error(bad);
    }
    const std::string text = absl::StrCat(negative ? "-" : "", digits);
    if (is_float) {
      value.kind = TomlValue::Kind::kFloat;
      if (!absl::SimpleAtod(text, &value.float_value) || !std::isfinite(value.float_value)) {
        return Error(absl::StrCat("'", token, "' is out of range for a float"));
      }
      return value;
    }
    value.kind = TomlValue::Kind::kInteger;
    if (!absl::SimpleAtoi(text, &value.integer_value)) {
      return Error(absl::StrCat("'", token, "' is out of range for a 64-bit integer"));
    }
    return value;
  }

  absl::string_view text_;
  std::string source_;
  size_t pos_ = 0;
  int line_ = 1;
  std::set<const TomlTable*> defined_;  // tables with their own [header]
};

}  // namespace

const char* TomlKindName(TomlValue::Kind kind) {
  switch (kind) {
    case TomlValue::Kind::kString:
      return "string";
    case TomlValue::Kind::kInteger:
      return "integer";
    case TomlValue::Kind::kFloat:
      return "float";
    case TomlValue::Kind::kBoolean:
      return "boolean";
    case TomlValue::Kind::kArray:
      return "array";
  }
  return "?";
}

const TomlValue* TomlTable::FindValue(const std::string& key) const {
  auto it = values.find(key);
  return it == values.end() ? nullptr : &it->second;
}

const TomlTable* TomlTable::FindTable(const std::string& name) const {
  auto it = tables.find(name);
  return it == tables.end() ? nullptr : it->second.get();
}

const std::vector<std::unique_ptr<TomlTable>>& TomlTable::FindTableArray(
    const std::string& name) const {
  static const auto* const kEmpty = new std::vector<std::unique_ptr<TomlTable>>();
  auto it = table_arrays.find(name);
  return it == table_arrays.end() ? *kEmpty : it->second;
}

std::vector<std::string> TomlTable::Keys() const {
  std::set<std::string> keys;
  for (const auto& [k, v] : values) keys.insert(k);
  for (const auto& [k, v] : tables) keys.insert(k);
  for (const auto& [k, v] : table_arrays) keys.insert(k);
  return {keys.begin(), keys.end()};
}

bool TomlTable::Has(const std::string& key) const {
  return values.contains(key) || tables.contains(key) || table_arrays.contains(key);
}

absl::StatusOr<TomlTable> ParseToml(absl::string_view text, const std::string& source) {
  TomlTable root;
  Parser parser(text, source);
  RETURN_IF_ERROR(parser.Run(&root));
  return root;
}

}  // namespace splitspec::config
