// The xgrammar objects behind CompiledGrammar and GrammarCompiler, and the one place that
// turns xgrammar's exceptions into absl::Status. Included only by this folder's .cc files:
// nothing outside runtime/grammar/ sees an xgrammar type.
#ifndef SPLITSPEC_RUNTIME_GRAMMAR_GRAMMAR_INTERNAL_H_
#define SPLITSPEC_RUNTIME_GRAMMAR_GRAMMAR_INTERNAL_H_

#include <cstdint>
#include <exception>
#include <string>
#include <utility>

#include <xgrammar/xgrammar.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "runtime/grammar/grammar_compiler.h"

namespace splitspec::grammar {

struct CompiledGrammar::Impl {
  xgrammar::CompiledGrammar compiled;
  int32_t vocab_size;
};

struct GrammarCompiler::Engine {
  xgrammar::TokenizerInfo tokenizer_info;
  xgrammar::GrammarCompiler compiler;
};

namespace grammar_internal {

// Runs `fn` (which calls xgrammar), turning an exception into InvalidArgument
// "<context>: <what()>". xgrammar throws for bad input (schemas, regexes, grammars) and for
// violated preconditions alike.
template <typename Fn>
auto CallXgrammar(const std::string& context, Fn&& fn) -> absl::StatusOr<decltype(fn())> {
  try {
    return std::forward<Fn>(fn)();
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(context, ": ", e.what()));
  }
}

}  // namespace grammar_internal
}  // namespace splitspec::grammar

#endif  // SPLITSPEC_RUNTIME_GRAMMAR_GRAMMAR_INTERNAL_H_
