#include "coordinator/http/tool_calls.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "coordinator/http/json_guard.h"
#include "google/protobuf/util/json_util.h"
#include "runtime/base/json_string.h"
#include "runtime/base/status_macros.h"

namespace splitspec::coordinator::http {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

constexpr absl::string_view kHermesOpen = "<tool_call>";
constexpr absl::string_view kHermesClose = "</tool_call>";
constexpr absl::string_view kLlama3PythonTag = "<|python_tag|>";

const Value* Field(const Struct& object, const std::string& name) {
  auto it = object.fields().find(name);
  return it == object.fields().end() ? nullptr : &it->second;
}

bool IsNonEmptyString(const Value* value) {
  return value != nullptr && value->kind_case() == Value::kStringValue &&
         !value->string_value().empty();
}

// `json` (already checked by CheckJsonText) as a protobuf Value.
absl::StatusOr<Value> ParseJsonValue(absl::string_view json) {
  RETURN_IF_ERROR(CheckJsonText(json));
  Value value;
  const auto status =
      google::protobuf::util::JsonStringToMessage(std::string(json), &value);
  if (!status.ok()) return absl::InvalidArgumentError(std::string(status.message()));
  return value;
}

// Appends `value` as JSON with object keys sorted: the same schema text for the same tools on
// every request (protobuf's printer follows its maps' unspecified order, which would make
// every request's schema a new cache entry). Compact, or with tojson's ", " and ": " when
// `spaced`. Integral numbers within 2^53 are written as integers, others with 17 significant
// digits (exact for a double).
void AppendCanonicalJson(const Value& value, std::string* out, bool spaced = false) {
  const absl::string_view comma = spaced ? ", " : ",";
  const absl::string_view colon = spaced ? ": " : ":";
  switch (value.kind_case()) {
    case Value::kStructValue: {
      std::vector<const std::string*> keys;
      for (const auto& [key, unused] : value.struct_value().fields()) keys.push_back(&key);
      std::sort(keys.begin(), keys.end(),
                [](const std::string* a, const std::string* b) { return *a < *b; });
      out->push_back('{');
      for (size_t i = 0; i < keys.size(); ++i) {
        absl::StrAppend(out, i == 0 ? "" : comma, JsonQuote(*keys[i]), colon);
        AppendCanonicalJson(value.struct_value().fields().at(*keys[i]), out, spaced);
      }
      out->push_back('}');
      return;
    }
    case Value::kListValue:
      out->push_back('[');
      for (int i = 0; i < value.list_value().values_size(); ++i) {
        if (i > 0) absl::StrAppend(out, comma);
        AppendCanonicalJson(value.list_value().values(i), out, spaced);
      }
      out->push_back(']');
      return;
    case Value::kStringValue:
      absl::StrAppend(out, JsonQuote(value.string_value()));
      return;
    case Value::kNumberValue: {
      constexpr double kExactIntegers = 9007199254740992.0;  // 2^53
      const double number = value.number_value();
      if (std::isfinite(number) && number == std::floor(number) &&
          std::fabs(number) <= kExactIntegers) {
        absl::StrAppend(out, static_cast<int64_t>(number));
      } else if (std::isfinite(number)) {
        absl::StrAppend(out, absl::StrFormat("%.17g", number));
      } else {
        absl::StrAppend(out, "null");
      }
      return;
    }
    case Value::kBoolValue:
      absl::StrAppend(out, value.bool_value() ? "true" : "false");
      return;
    default:
      absl::StrAppend(out, "null");
      return;
  }
}

std::string CanonicalJson(const Value& value, bool spaced = false) {
  std::string json;
  AppendCanonicalJson(value, &json, spaced);
  return json;
}

// One past the end of the JSON value that starts at text[pos]. REQUIRES: `text` passed
// CheckJsonText and a value starts at pos.
size_t ValueEnd(absl::string_view text, size_t pos) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = pos; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
        if (depth == 0) return i + 1;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (depth == 0) return i;  // the end of a scalar directly inside a container
      if (--depth == 0) return i + 1;
    } else if (depth == 0 && (c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r')) {
      return i;
    }
  }
  return text.size();
}

size_t SkipSpace(absl::string_view text, size_t pos) {
  while (pos < text.size() && absl::ascii_isspace(static_cast<unsigned char>(text[pos]))) ++pos;
  return pos;
}

// The text of member `key` of the JSON object `object` exactly as written (keys compared as
// written, escapes not decoded); nullopt when absent. REQUIRES: `object` passed CheckJsonText.
std::optional<absl::string_view> RawMember(absl::string_view object, absl::string_view key) {
  size_t pos = SkipSpace(object, 0);
  if (pos >= object.size() || object[pos] != '{') return std::nullopt;
  pos = SkipSpace(object, pos + 1);
  while (pos < object.size() && object[pos] == '"') {
    const size_t key_end = ValueEnd(object, pos);
    const absl::string_view name = object.substr(pos + 1, key_end - pos - 2);
    pos = SkipSpace(object, SkipSpace(object, key_end) + 1);  // past ':'
    const size_t value_end = ValueEnd(object, pos);
    if (name == key) return object.substr(pos, value_end - pos);
    pos = SkipSpace(object, value_end);
    if (pos < object.size() && object[pos] == ',') pos = SkipSpace(object, pos + 1);
  }
  return std::nullopt;
}

Value StringValue(const std::string& s) {
  Value value;
  value.set_string_value(s);
  return value;
}

// A call {"name": N, <arguments_key>: A}, given as its JSON text `json` and parsed `object`, as
// (name, arguments JSON); nullopt when it is not one. The arguments are the text the model
// wrote (key order and number spelling kept); arguments given as a JSON string are taken as
// the JSON text the string holds.
std::optional<std::pair<std::string, std::string>> ReadCall(
    absl::string_view json, const Value& object,
    std::initializer_list<const char*> argument_keys) {
  if (object.kind_case() != Value::kStructValue) return std::nullopt;
  const Value* name = Field(object.struct_value(), "name");
  if (!IsNonEmptyString(name)) return std::nullopt;
  for (const char* key : argument_keys) {
    const Value* arguments = Field(object.struct_value(), key);
    if (arguments == nullptr) continue;
    if (arguments->kind_case() == Value::kStringValue) {
      return std::make_pair(name->string_value(), arguments->string_value());
    }
    std::optional<absl::string_view> raw = RawMember(json, key);
    if (!raw.has_value()) return std::nullopt;  // the key was written with escapes
    return std::make_pair(name->string_value(), std::string(*raw));
  }
  return std::make_pair(name->string_value(), std::string("{}"));
}

ToolCall MakeCall(absl::string_view id_prefix, size_t index,
                  std::pair<std::string, std::string> call) {
  return ToolCall{absl::StrCat(id_prefix, index), std::move(call.first), std::move(call.second)};
}

// `text` split at each top-level `separator` (outside JSON strings, objects and arrays).
std::vector<absl::string_view> SplitTopLevel(absl::string_view text, char separator) {
  std::vector<absl::string_view> parts;
  int depth = 0;
  bool in_string = false;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      --depth;
    } else if (c == separator && depth == 0) {
      parts.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  parts.push_back(text.substr(start));
  return parts;
}

ParsedToolCalls ContentOnly(absl::string_view text) { return ParsedToolCalls{std::string(text), {}}; }

ParsedToolCalls ParseHermes(absl::string_view text, absl::string_view id_prefix) {
  const size_t first = text.find(kHermesOpen);
  if (first == absl::string_view::npos) return ContentOnly(text);
  ParsedToolCalls parsed;
  parsed.content = std::string(absl::StripTrailingAsciiWhitespace(text.substr(0, first)));
  size_t pos = first;
  while (pos != absl::string_view::npos) {
    const size_t body = pos + kHermesOpen.size();
    const size_t close = text.find(kHermesClose, body);
    const absl::string_view inner = absl::StripAsciiWhitespace(
        text.substr(body, close == absl::string_view::npos ? absl::string_view::npos : close - body));
    absl::StatusOr<Value> call_json = ParseJsonValue(inner);
    if (!call_json.ok()) return ContentOnly(text);
    std::optional<std::pair<std::string, std::string>> call =
        ReadCall(inner, *call_json, {"arguments"});
    if (!call.has_value()) return ContentOnly(text);
    parsed.tool_calls.push_back(MakeCall(id_prefix, parsed.tool_calls.size(), std::move(*call)));
    if (close == absl::string_view::npos) break;
    pos = text.find(kHermesOpen, close + kHermesClose.size());
  }
  return parsed;
}

ParsedToolCalls ParseLlama3Json(absl::string_view text, absl::string_view id_prefix) {
  absl::string_view rest = absl::StripAsciiWhitespace(text);
  if (absl::StartsWith(rest, kLlama3PythonTag)) {
    rest = absl::StripLeadingAsciiWhitespace(rest.substr(kLlama3PythonTag.size()));
  }
  if (!absl::StartsWith(rest, "{")) return ContentOnly(text);
  ParsedToolCalls parsed;
  for (absl::string_view part : SplitTopLevel(rest, ';')) {
    part = absl::StripAsciiWhitespace(part);
    if (part.empty()) continue;
    absl::StatusOr<Value> call_json = ParseJsonValue(part);
    if (!call_json.ok()) return ContentOnly(text);
    std::optional<std::pair<std::string, std::string>> call =
        ReadCall(part, *call_json, {"parameters", "arguments"});
    if (!call.has_value()) return ContentOnly(text);
    parsed.tool_calls.push_back(MakeCall(id_prefix, parsed.tool_calls.size(), std::move(*call)));
  }
  if (parsed.tool_calls.empty()) return ContentOnly(text);
  return parsed;
}

}  // namespace

absl::StatusOr<ToolChoice> ReadToolChoice(const Value& tool_choice) {
  if (tool_choice.kind_case() == Value::kStringValue) {
    const std::string& mode = tool_choice.string_value();
    if (mode == "none") return ToolChoice{ToolChoice::kNone, ""};
    if (mode == "auto") return ToolChoice{ToolChoice::kAuto, ""};
    if (mode == "required") return ToolChoice{ToolChoice::kRequired, ""};
    return absl::InvalidArgumentError(absl::StrCat(
        "tool_choice must be \"none\", \"auto\", \"required\" or a function, not \"", mode,
        "\""));
  }
  if (tool_choice.kind_case() == Value::kStructValue) {
    const Value* type = Field(tool_choice.struct_value(), "type");
    const Value* function = Field(tool_choice.struct_value(), "function");
    if (type == nullptr || type->string_value() != "function") {
      return absl::InvalidArgumentError("tool_choice.type must be \"function\"");
    }
    if (function == nullptr || function->kind_case() != Value::kStructValue ||
        !IsNonEmptyString(Field(function->struct_value(), "name"))) {
      return absl::InvalidArgumentError("tool_choice.function.name must be a non-empty string");
    }
    return ToolChoice{ToolChoice::kNamed,
                      Field(function->struct_value(), "name")->string_value()};
  }
  return absl::InvalidArgumentError("tool_choice must be a string or an object");
}

absl::StatusOr<std::vector<ToolDefinition>> ReadTools(const Value& tools) {
  if (tools.kind_case() != Value::kListValue) {
    return absl::InvalidArgumentError("tools must be an array");
  }
  std::vector<ToolDefinition> definitions;
  absl::flat_hash_set<std::string> names;
  for (int i = 0; i < tools.list_value().values_size(); ++i) {
    const std::string where = absl::StrCat("tools[", i, "]");
    const Value& tool = tools.list_value().values(i);
    if (tool.kind_case() != Value::kStructValue) {
      return absl::InvalidArgumentError(absl::StrCat(where, " must be an object"));
    }
    const Value* type = Field(tool.struct_value(), "type");
    if (type == nullptr || type->string_value() != "function") {
      return absl::InvalidArgumentError(absl::StrCat(where, ".type must be \"function\""));
    }
    const Value* function = Field(tool.struct_value(), "function");
    if (function == nullptr || function->kind_case() != Value::kStructValue) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".function must be an object"));
    }
    const Value* name = Field(function->struct_value(), "name");
    if (!IsNonEmptyString(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".function.name must be a non-empty string"));
    }
    if (!names.insert(name->string_value()).second) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".function.name \"",
                                                     name->string_value(), "\" is given twice"));
    }
    ToolDefinition definition{name->string_value(), "", {}};
    const Value* description = Field(function->struct_value(), "description");
    if (description != nullptr && description->kind_case() != Value::kNullValue) {
      if (description->kind_case() != Value::kStringValue) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ".function.description must be a string"));
      }
      definition.description = description->string_value();
    }
    const Value* parameters = Field(function->struct_value(), "parameters");
    if (parameters != nullptr && parameters->kind_case() != Value::kNullValue) {
      if (parameters->kind_case() != Value::kStructValue) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ".function.parameters must be a JSON Schema object"));
      }
      definition.parameters = *parameters;
    } else {
      (*definition.parameters.mutable_struct_value()->mutable_fields())["type"] =
          StringValue("object");
    }
    definitions.push_back(std::move(definition));
  }
  return definitions;
}

absl::StatusOr<std::string> ForcedToolCallSchema(const std::vector<ToolDefinition>& tools,
                                                 const ToolChoice& choice,
                                                 bool parallel_tool_calls) {
  if (choice.mode != ToolChoice::kRequired && choice.mode != ToolChoice::kNamed) {
    return absl::InvalidArgumentError(
        "only tool_choice \"required\" or a named function is enforced by a schema");
  }
  if (tools.empty()) {
    return absl::InvalidArgumentError("tool_choice requires a call but tools is empty");
  }
  // Written by hand rather than through CanonicalJson, whose sorted keys would put
  // "arguments" before "name".
  std::vector<std::string> alternatives;
  for (const ToolDefinition& tool : tools) {
    if (choice.mode == ToolChoice::kNamed && tool.name != choice.function_name) continue;
    alternatives.push_back(absl::StrCat(
        R"({"type":"object","properties":{"name":{"const":)", JsonQuote(tool.name),
        R"(},"arguments":)", CanonicalJson(tool.parameters),
        R"(},"required":["name","arguments"],"additionalProperties":false})"));
  }
  if (alternatives.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tool_choice names the function '", choice.function_name, "', which is not in tools"));
  }
  const bool one_call = choice.mode == ToolChoice::kNamed || !parallel_tool_calls;
  return absl::StrCat(R"({"type":"array","items":{"anyOf":[)", absl::StrJoin(alternatives, ","),
                      R"(]},"minItems":1)", one_call ? R"(,"maxItems":1})" : "}");
}

std::string ToolPromptJson(const ToolDefinition& tool) {
  std::string json = absl::StrCat(R"({"type": "function", "function": {"name": )",
                                  JsonQuote(tool.name));
  if (!tool.description.empty()) {
    absl::StrAppend(&json, R"(, "description": )", JsonQuote(tool.description));
  }
  absl::StrAppend(&json, R"(, "parameters": )", CanonicalJson(tool.parameters, /*spaced=*/true),
                  "}}");
  return json;
}

absl::StatusOr<ParsedToolCalls> ParseForcedToolCalls(absl::string_view text,
                                                     absl::string_view id_prefix) {
  absl::StatusOr<Value> calls = ParseJsonValue(text);
  if (!calls.ok() || calls->kind_case() != Value::kListValue) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the constrained tool-call output is not a JSON array of calls (cut by max_tokens?)",
        calls.ok() ? "" : ": ", calls.ok() ? "" : calls.status().message()));
  }
  ParsedToolCalls parsed;
  size_t pos = SkipSpace(text, SkipSpace(text, 0) + 1);  // past '['
  for (const Value& item : calls->list_value().values()) {
    const size_t item_end = ValueEnd(text, pos);
    const absl::string_view item_json = text.substr(pos, item_end - pos);
    pos = SkipSpace(text, item_end);
    if (pos < text.size() && text[pos] == ',') pos = SkipSpace(text, pos + 1);
    std::optional<std::pair<std::string, std::string>> call =
        ReadCall(item_json, item, {"arguments"});
    if (!call.has_value()) {
      return absl::InvalidArgumentError(
          "the constrained tool-call output has an item without a \"name\"");
    }
    parsed.tool_calls.push_back(MakeCall(id_prefix, parsed.tool_calls.size(), std::move(*call)));
  }
  return parsed;
}

absl::StatusOr<ToolCallFormat> ToolCallFormatByName(absl::string_view name) {
  if (name == "hermes") return ToolCallFormat::kHermes;
  if (name == "llama3_json") return ToolCallFormat::kLlama3Json;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown tool-call parser \"", name, "\" (known: hermes, llama3_json)"));
}

ParsedToolCalls ParseToolCalls(ToolCallFormat format, absl::string_view text,
                               absl::string_view id_prefix) {
  switch (format) {
    case ToolCallFormat::kHermes:
      return ParseHermes(text, id_prefix);
    case ToolCallFormat::kLlama3Json:
      return ParseLlama3Json(text, id_prefix);
  }
  return ContentOnly(text);
}

}  // namespace splitspec::coordinator::http
