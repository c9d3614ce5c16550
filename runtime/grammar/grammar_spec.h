// What a request asks its output to match: the kinds of structured output of OpenAI's
// `response_format` (json_object, json_schema) and vLLM's `structured_outputs` (json, regex,
// choice, grammar), as plain data. GrammarCompiler (grammar_compiler.h) turns a spec into a
// CompiledGrammar; CacheKey() is what its cache is keyed by.
//
//   GrammarSpec spec = GrammarSpec::JsonSchema(R"({"type": "object", ...})", /*strict=*/true);
//   GrammarSpec yes_no = GrammarSpec::Choice({"yes", "no"});
//
// Thread safety: plain values.
#ifndef SPLITSPEC_RUNTIME_GRAMMAR_GRAMMAR_SPEC_H_
#define SPLITSPEC_RUNTIME_GRAMMAR_GRAMMAR_SPEC_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace splitspec::grammar {

enum class GrammarKind {
  kJsonObject,  // any JSON object (OpenAI {"type": "json_object"})
  kJsonSchema,  // a JSON value matching `text`, a JSON Schema
  kRegex,       // a string matching `text` (xgrammar's regex dialect: ECMAScript-like)
  kChoice,      // exactly one of `choices`
  kEbnf,        // `text` in xgrammar's EBNF (GBNF-like); the start rule is named "root"
};

// The request-facing name of a kind: "json_object", "json_schema", "regex", "choice", "grammar".
absl::string_view GrammarKindName(GrammarKind kind);

struct GrammarSpec {
  GrammarKind kind = GrammarKind::kJsonObject;
  // The schema (kJsonSchema), pattern (kRegex) or grammar (kEbnf); empty for the other kinds.
  std::string text;
  // kChoice only: the accepted strings (UTF-8), at least one.
  std::vector<std::string> choices;
  // kJsonSchema only: OpenAI's `strict`. True: an object admits only the properties its schema
  // lists and an array only its listed items (additionalProperties / unevaluated* default to
  // false). False: JSON Schema's own defaults (unlisted properties are allowed).
  bool strict = true;

  static GrammarSpec JsonObject();
  static GrammarSpec JsonSchema(std::string schema, bool strict);
  static GrammarSpec Regex(std::string pattern);
  static GrammarSpec Choice(std::vector<std::string> choices);
  static GrammarSpec Ebnf(std::string grammar);

  // Equal for specs that compile to the same grammar: kind, strict (json_schema) and the text
  // (the choices, for kChoice). A repeated schema hits the compiler's cache by this key.
  std::string CacheKey() const;
};

// The EBNF grammar `root ::= "c1" | "c2" | ...` whose language is exactly `choices`; quotes,
// backslashes and control characters are escaped.
std::string ChoiceEbnf(absl::Span<const std::string> choices);

}  // namespace splitspec::grammar

#endif  // SPLITSPEC_RUNTIME_GRAMMAR_GRAMMAR_SPEC_H_
