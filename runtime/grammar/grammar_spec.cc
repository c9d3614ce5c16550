#include "runtime/grammar/grammar_spec.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace splitspec::grammar {

absl::string_view GrammarKindName(GrammarKind kind) {
  switch (kind) {
    case GrammarKind::kJsonObject:
      return "json_object";
    case GrammarKind::kJsonSchema:
      return "json_schema";
    case GrammarKind::kRegex:
      return "regex";
    case GrammarKind::kChoice:
      return "choice";
    case GrammarKind::kEbnf:
      return "grammar";
  }
  return "unknown";
}

GrammarSpec GrammarSpec::JsonObject() { return GrammarSpec{}; }

GrammarSpec GrammarSpec::JsonSchema(std::string schema, bool strict) {
  GrammarSpec spec;
  spec.kind = GrammarKind::kJsonSchema;
  spec.text = std::move(schema);
  spec.strict = strict;
  return spec;
}

GrammarSpec GrammarSpec::Regex(std::string pattern) {
  GrammarSpec spec;
  spec.kind = GrammarKind::kRegex;
  spec.text = std::move(pattern);
  return spec;
}

GrammarSpec GrammarSpec::Choice(std::vector<std::string> choices) {
  GrammarSpec spec;
  spec.kind = GrammarKind::kChoice;
  spec.choices = std::move(choices);
  return spec;
}

GrammarSpec GrammarSpec::Ebnf(std::string grammar) {
  GrammarSpec spec;
  spec.kind = GrammarKind::kEbnf;
  spec.text = std::move(grammar);
  return spec;
}

std::string GrammarSpec::CacheKey() const {
  // The kind name first, then a separator no kind name contains: keys of different kinds differ.
  std::string key = absl::StrCat(GrammarKindName(kind), "\n");
  switch (kind) {
    case GrammarKind::kJsonObject:
      break;
    case GrammarKind::kJsonSchema:
      absl::StrAppend(&key, strict ? "strict\n" : "lax\n", text);
      break;
    case GrammarKind::kRegex:
    case GrammarKind::kEbnf:
      absl::StrAppend(&key, text);
      break;
    case GrammarKind::kChoice:
      absl::StrAppend(&key, ChoiceEbnf(choices));
      break;
  }
  return key;
}

std::string ChoiceEbnf(absl::Span<const std::string> choices) {
  std::string ebnf = "root ::=";
  for (size_t i = 0; i < choices.size(); ++i) {
    absl::StrAppend(&ebnf, i == 0 ? " \"" : " | \"");
    for (const char c : choices[i]) {
      const auto byte = static_cast<unsigned char>(c);
      if (c == '"' || c == '\\') {
        absl::StrAppend(&ebnf, "\\", std::string(1, c));
      } else if (byte < 0x20 || byte == 0x7f) {
        absl::StrAppend(&ebnf, absl::StrFormat("\\x%02x", byte));
      } else {
        ebnf.push_back(c);  // printable ASCII, or a byte of a UTF-8 sequence
      }
    }
    ebnf.push_back('"');
  }
  return ebnf;
}

}  // namespace splitspec::grammar
