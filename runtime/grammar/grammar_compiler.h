// Structured outputs: compiles what a request asks its output to match (grammar_spec.h) into a
// CompiledGrammar for one model's vocabulary, and caches it so a repeated schema costs nothing.
// GrammarMatcher (grammar_matcher.h) then walks one request's tokens through it.
//
// Why a library: the engine underneath is xgrammar's C++ core (Apache-2.0; built by
// deploy/build_xgrammar.sh), the one vLLM, SGLang and TensorRT-LLM use. Turning JSON Schema,
// regexes and EBNF into token masks over a 50k-token vocabulary, fast enough to run per token,
// is a research-grade engine (pushdown automata, per-rule adaptive token-mask caches); writing
// one by hand would be the largest and least-tested part of this repository. This folder only
// adapts it: our tokenizer's vocabulary in, absl::Status out (xgrammar reports errors by
// exception; none escapes this folder).
//
//   ASSIGN_OR_RETURN(std::unique_ptr<GrammarCompiler> compiler,
//                    GrammarCompiler::Create(tokenizer, {.vocab_size = model_vocab_size}));
//   ASSIGN_OR_RETURN(std::shared_ptr<const CompiledGrammar> grammar,
//                    compiler->Compile(GrammarSpec::JsonSchema(schema, /*strict=*/true)));
//   GrammarMatcher matcher(grammar);  // one per request
//
// The vocabulary: token t stands for exactly the bytes the detokenizer appends for it
// (Tokenizer::Piece: GPT-2 byte-level text decoded to bytes, SentencePiece "▁" as a space and
// <0xAB> byte-fallback tokens as their byte), so the grammar constrains the text the user
// receives. Control and unknown tokens stand for nothing and are never allowed, except the
// end-of-generation tokens (Tokenizer::IsEndOfGeneration), which are allowed exactly when the
// output is complete. Ids in [tokenizer.vocab_size(), vocab_size) (a model's padded logits
// row) are never allowed.
//
// Thread safety: Compile may be called concurrently (the cache has its own lock); two threads
// compiling the same new spec at once may both compile it, and both get the cached one.
#ifndef SPLITSPEC_RUNTIME_GRAMMAR_GRAMMAR_COMPILER_H_
#define SPLITSPEC_RUNTIME_GRAMMAR_GRAMMAR_COMPILER_H_

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "runtime/base/mutex.h"
#include "runtime/grammar/grammar_spec.h"
#include "runtime/tokenizer/tokenizer.h"

namespace splitspec::grammar {

// A grammar compiled against one vocabulary; immutable, shared by the cache and every
// matcher built from it.
class CompiledGrammar {
 public:
  struct Impl;  // xgrammar's compiled grammar (grammar_internal.h)
  explicit CompiledGrammar(std::unique_ptr<Impl> impl);
  ~CompiledGrammar();
  CompiledGrammar(const CompiledGrammar&) = delete;
  CompiledGrammar& operator=(const CompiledGrammar&) = delete;

  // The width of the token bitmask and of the logits rows it masks.
  int32_t vocab_size() const;
  // xgrammar's estimate of the memory the compiled grammar holds.
  size_t memory_bytes() const;
  const Impl& impl() const { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

struct GrammarCompilerOptions {
  // Width of the logits rows to mask: the model's vocabulary size, which may exceed the
  // tokenizer's (padded embeddings). 0 (default) means tokenizer.vocab_size().
  int32_t vocab_size = 0;
  // Threads xgrammar may use to compile one grammar. Default 1: compiling runs on the request's
  // own thread (a thread pool inside an uninstrumented library would be invisible to TSan).
  int max_threads = 1;
  // The cache's bound, by xgrammar's memory estimate; least recently used grammars go first.
  // Default 256 MiB.
  size_t cache_bytes = size_t{256} << 20;
};

struct GrammarCacheStats {
  int64_t hits = 0;
  int64_t misses = 0;  // compilations, failed ones included
  int64_t entries = 0;
  size_t bytes = 0;
};

class GrammarCompiler {
 public:
  // Errors: InvalidArgument when options.vocab_size is below tokenizer.vocab_size() (naming
  // both), or when xgrammar refuses the vocabulary (its message).
  static absl::StatusOr<std::unique_ptr<GrammarCompiler>> Create(
      const model::Tokenizer& tokenizer, const GrammarCompilerOptions& options = {});
  ~GrammarCompiler();

  // The compiled grammar of `spec`: from the cache (the same object each time) or compiled and
  // cached. Errors: InvalidArgument naming the kind and quoting the start of the text, with
  // xgrammar's reason: a schema that is not JSON or not a satisfiable JSON Schema, a regex or
  // EBNF that does not parse, an empty choice list. Failures are not cached.
  absl::StatusOr<std::shared_ptr<const CompiledGrammar>> Compile(const GrammarSpec& spec);

  GrammarCacheStats cache_stats() const;
  int32_t vocab_size() const { return vocab_size_; }

 private:
  struct Engine;  // xgrammar's compiler (grammar_internal.h)
  GrammarCompiler(std::unique_ptr<Engine> engine, int32_t vocab_size, size_t cache_bytes);
  absl::StatusOr<std::shared_ptr<const CompiledGrammar>> CompileUncached(const GrammarSpec& spec);

  struct CacheEntry {
    std::shared_ptr<const CompiledGrammar> grammar;
    std::list<std::string>::iterator recency;  // into recency_
  };

  const std::unique_ptr<Engine> engine_;  // xgrammar's compiler is thread-safe
  const int32_t vocab_size_;
  const size_t cache_bytes_;

  mutable Mutex mu_;
  // State below is protected by mu_.
  absl::flat_hash_map<std::string, CacheEntry> cache_ ABSL_GUARDED_BY(mu_);
  std::list<std::string> recency_ ABSL_GUARDED_BY(mu_);  // cache keys, most recent first
  GrammarCacheStats stats_ ABSL_GUARDED_BY(mu_);
};

// The bytes token t stands for, for every t of `tokenizer` (see the header comment): what
// xgrammar is given as its vocabulary. Exposed for tests.
std::vector<std::string> GrammarTokenBytes(const model::Tokenizer& tokenizer);

}  // namespace splitspec::grammar

#endif  // SPLITSPEC_RUNTIME_GRAMMAR_GRAMMAR_COMPILER_H_
