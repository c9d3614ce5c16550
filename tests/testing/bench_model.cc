#include "tests/testing/bench_model.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/cpu/ggml_types.h"

namespace splitspec::model {
namespace {

using kernels::GgmlType;

struct Shape {
  const char* name;
  int n_layers;
  int n_embd;
  int n_ff;
  int n_heads;
  int n_kv_heads;
  int vocab_rows;
  float rope_freq_base;
  bool tied_output;
};

// The real models' hyperparameters (their config.json / GGUF metadata). The context
// length is the benchmarks' (8192), not the models' 128k: it only bounds the KV caches.
constexpr Shape kShapes[] = {
    {"smollm2", 30, 576, 1536, 9, 3, 49152, 100000.f, true},
    {"llama3-1b", 16, 2048, 8192, 32, 8, 128256, 500000.f, true},
    {"llama3-8b", 32, 4096, 14336, 32, 8, 128256, 500000.f, false},
};

constexpr GgmlType kTypes[] = {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ8_0, GgmlType::kQ4_K};

}  // namespace

const std::vector<std::string>& BenchModelShapes() {
  static const auto* names = [] {
    auto* v = new std::vector<std::string>;
    for (const Shape& s : kShapes) v->push_back(s.name);
    return v;
  }();
  return *names;
}

const std::vector<std::string>& BenchModelTypes() {
  static const auto* names = [] {
    auto* v = new std::vector<std::string>;
    for (GgmlType t : kTypes) v->push_back(kernels::GetGgmlTypeTraits(t).name);
    return v;
  }();
  return *names;
}

absl::StatusOr<TinyModelOptions> BenchModelOptions(absl::string_view shape_name,
                                                   absl::string_view type_name) {
  const Shape* shape = nullptr;
  for (const Shape& s : kShapes) {
    if (shape_name == s.name) shape = &s;
  }
  if (shape == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown shape '", shape_name, "'; known: ", absl::StrJoin(BenchModelShapes(), ", ")));
  }
  const GgmlType* type = nullptr;
  for (const GgmlType& t : kTypes) {
    if (type_name == kernels::GetGgmlTypeTraits(t).name) type = &t;
  }
  if (type == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown type '", type_name, "'; known: ", absl::StrJoin(BenchModelTypes(), ", ")));
  }
  const int block = kernels::GetGgmlTypeTraits(*type).block_size;
  if (shape->n_embd % block != 0 || shape->n_ff % block != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("type ", type_name, " needs rows of a multiple of ", block, " elements; ",
                     shape_name, " has n_embd ", shape->n_embd, " and n_ff ", shape->n_ff));
  }
  TinyModelOptions o;
  o.name = absl::StrCat("bench-", shape_name, "-", type_name, " (random weights)");
  o.n_layers = shape->n_layers;
  o.n_embd = shape->n_embd;
  o.n_ff = shape->n_ff;
  o.n_heads = shape->n_heads;
  o.n_kv_heads = shape->n_kv_heads;
  o.context_length = 8192;
  o.rope_freq_base = shape->rope_freq_base;
  o.vocab_rows = shape->vocab_rows;
  o.weight_type = *type;
  o.embedding_type = GgmlType::kQ8_0;
  o.tied_output = shape->tied_output;
  return o;
}

}  // namespace splitspec::model
