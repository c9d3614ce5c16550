#include "runtime/grammar/grammar_compiler.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"
#include "runtime/grammar/grammar_internal.h"

namespace splitspec::grammar {
namespace {

using grammar_internal::CallXgrammar;

// xgrammar's JSON-schema options. any_whitespace=false: objects come out as
// {"a": 1, "b": [2, 3]} (xgrammar's default separators); with free whitespace a small model can
// spend its whole max_tokens on spaces and newlines inside a valid but endless JSON value (the
// reason vLLM grew `disable_any_whitespace`).
constexpr bool kJsonAnyWhitespace = false;

// json_object: any object, with any properties (strict_mode off: JSON Schema's defaults).
constexpr char kAnyObjectSchema[] = R"({"type": "object"})";

// The start of a spec's text, quoted, for error messages.
std::string Quoted(const std::string& text) {
  constexpr size_t kMaxQuoted = 120;
  if (text.size() <= kMaxQuoted) return absl::StrCat("'", text, "'");
  return absl::StrCat("'", text.substr(0, kMaxQuoted), "...' (", text.size(), " bytes)");
}

}  // namespace

CompiledGrammar::CompiledGrammar(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CompiledGrammar::~CompiledGrammar() = default;
int32_t CompiledGrammar::vocab_size() const { return impl_->vocab_size; }
size_t CompiledGrammar::memory_bytes() const { return impl_->compiled.MemorySizeBytes(); }

std::vector<std::string> GrammarTokenBytes(const model::Tokenizer& tokenizer) {
  std::vector<std::string> bytes(tokenizer.vocab_size());
  for (model::TokenId id = 0; id < tokenizer.vocab_size(); ++id) {
    // Piece succeeds for every id in range; control and unknown tokens come back empty, which
    // xgrammar reads as "a special token, never part of the text".
    absl::StatusOr<std::string_view> piece = tokenizer.Piece(id, /*render_special=*/false);
    if (piece.ok()) bytes[id] = std::string(*piece);
  }
  return bytes;
}

absl::StatusOr<std::unique_ptr<GrammarCompiler>> GrammarCompiler::Create(
    const model::Tokenizer& tokenizer, const GrammarCompilerOptions& options) {
  const int32_t vocab_size = options.vocab_size == 0 ? tokenizer.vocab_size() : options.vocab_size;
  if (vocab_size < tokenizer.vocab_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("grammar compiler: vocab_size ", vocab_size,
                     " is below the tokenizer's vocabulary size ", tokenizer.vocab_size()));
  }
  std::vector<int32_t> stop_ids;
  for (model::TokenId id = 0; id < tokenizer.vocab_size(); ++id) {
    if (tokenizer.IsEndOfGeneration(id)) stop_ids.push_back(id);
  }
  const std::vector<std::string> token_bytes = GrammarTokenBytes(tokenizer);
  ASSIGN_OR_RETURN(
      std::unique_ptr<Engine> engine,
      CallXgrammar("grammar compiler: xgrammar refused the vocabulary", [&] {
        // RAW: the strings already are the tokens' bytes (no byte-level or <0xAB> decoding
        // left for xgrammar to do).
        xgrammar::TokenizerInfo info(token_bytes, xgrammar::VocabType::RAW, vocab_size,
                                     stop_ids, tokenizer.adds_space_prefix());
        // xgrammar's own cache is off: ours (keyed by GrammarSpec::CacheKey) is the one cache.
        xgrammar::GrammarCompiler compiler(info, std::max(1, options.max_threads),
                                           /*cache_enabled=*/false);
        return std::make_unique<Engine>(Engine{std::move(info), std::move(compiler)});
      }));
  return std::unique_ptr<GrammarCompiler>(
      new GrammarCompiler(std::move(engine), vocab_size, options.cache_bytes));
}

GrammarCompiler::GrammarCompiler(std::unique_ptr<Engine> engine, int32_t vocab_size,
                                 size_t cache_bytes)
    : engine_(std::move(engine)), vocab_size_(vocab_size), cache_bytes_(cache_bytes) {}

GrammarCompiler::~GrammarCompiler() = default;

absl::StatusOr<std::shared_ptr<const CompiledGrammar>> GrammarCompiler::Compile(
    const GrammarSpec& spec) {
  std::string key = spec.CacheKey();
  {
    MutexLock lock(&mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) {
      ++stats_.hits;
      recency_.splice(recency_.begin(), recency_, it->second.recency);
      return it->second.grammar;
    }
    ++stats_.misses;
  }
  // Compiled without the lock: a long compilation does not hold up cache hits.
  ASSIGN_OR_RETURN(std::shared_ptr<const CompiledGrammar> grammar, CompileUncached(spec));
  MutexLock lock(&mu_);
  auto [it, inserted] = cache_.try_emplace(key);
  if (!inserted) return it->second.grammar;  // another thread compiled it meanwhile
  recency_.push_front(key);
  it->second = CacheEntry{grammar, recency_.begin()};
  stats_.bytes += grammar->memory_bytes();
  // Evict the least recently used, never the grammar just added.
  while (stats_.bytes > cache_bytes_ && recency_.size() > 1) {
    auto victim = cache_.find(recency_.back());
    stats_.bytes -= victim->second.grammar->memory_bytes();
    cache_.erase(victim);
    recency_.pop_back();
  }
  stats_.entries = static_cast<int64_t>(cache_.size());
  return grammar;
}

absl::StatusOr<std::shared_ptr<const CompiledGrammar>> GrammarCompiler::CompileUncached(
    const GrammarSpec& spec) {
  xgrammar::GrammarCompiler& compiler = engine_->compiler;
  const absl::string_view kind = GrammarKindName(spec.kind);
  std::optional<absl::StatusOr<xgrammar::CompiledGrammar>> compiled;
  switch (spec.kind) {
    case GrammarKind::kJsonObject:
      // Not xgrammar's builtin JSON grammar: that admits any JSON value, arrays and scalars
      // included, where OpenAI's json_object promises an object.
      compiled = CallXgrammar("json_object", [&] {
        return compiler.CompileJSONSchema(kAnyObjectSchema, kJsonAnyWhitespace,
                                          /*indent=*/std::nullopt, /*separators=*/std::nullopt,
                                          /*strict_mode=*/false);
      });
      break;
    case GrammarKind::kJsonSchema:
      compiled = CallXgrammar(absl::StrCat("json_schema ", Quoted(spec.text)), [&] {
        return compiler.CompileJSONSchema(spec.text, kJsonAnyWhitespace, /*indent=*/std::nullopt,
                                          /*separators=*/std::nullopt, spec.strict);
      });
      break;
    case GrammarKind::kRegex:
      compiled = CallXgrammar(absl::StrCat("regex ", Quoted(spec.text)),
                              [&] { return compiler.CompileRegex(spec.text); });
      break;
    case GrammarKind::kEbnf:
      compiled = CallXgrammar(absl::StrCat("grammar ", Quoted(spec.text)),
                              [&] { return compiler.CompileGrammar(spec.text, "root"); });
      break;
    case GrammarKind::kChoice: {
      if (spec.choices.empty()) {
        return absl::InvalidArgumentError("choice: the list of choices is empty");
      }
      const std::string ebnf = ChoiceEbnf(spec.choices);
      compiled = CallXgrammar(absl::StrCat("choice ", Quoted(ebnf)),
                              [&] { return compiler.CompileGrammar(ebnf, "root"); });
      break;
    }
  }
  if (!compiled.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat("unknown grammar kind ", kind));
  }
  if (!compiled->ok()) return compiled->status();
  return std::make_shared<const CompiledGrammar>(std::make_unique<CompiledGrammar::Impl>(
      CompiledGrammar::Impl{std::move(**compiled), vocab_size_}));
}

GrammarCacheStats GrammarCompiler::cache_stats() const {
  MutexLock lock(&mu_);
  return stats_;
}

}  // namespace splitspec::grammar
