// splitspec_write_bench_model --out PATH [--shape S] [--type T] [--layers N] [--vocab-rows N]
//
// Writes a GGUF with a real model's shapes (tests/testing/bench_model.h: smollm2, llama3-1b,
// llama3-8b) and layer matrices of type q4_0, q4_1, q8_0 or q4_K, with seeded random weights
// and the tiny test tokenizer padded with unused tokens to the embedding's rows, so that
// splitspec and llama.cpp load the same file. A forward over it costs what the real model's
// costs, so the GPU benchmarks run where the real files cannot travel
// (tools/gpu/device_session.sh); figures from it must say "random weights".
// --layers and --vocab-rows shrink a shape (tests write small files; the per-layer matrices
// keep the shape's sizes). The whole file is built in memory first: llama3-8b q4_0 is 4.8 GB.
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"
#include "runtime/cli/cli_args.h"
#include "tests/testing/bench_model.h"

namespace splitspec::model {
namespace {

const cli::FlagTable& FlagTable() {
  static const cli::FlagTable* const table = new cli::FlagTable{
      .command = "splitspec_write_bench_model",
      .summary = "write a random-weight GGUF with a real model's shapes and tensor types",
      .flags = {{"out", "PATH", "", "the GGUF to write (required)"},
                {"shape", "NAME", "smollm2", "smollm2, llama3-1b or llama3-8b"},
                {"type", "TYPE", "q4_1", "layer matrices: q4_0, q4_1, q8_0 or q4_K"},
                {"layers", "N", "", "fewer layers than the shape's (small test files)",
                 cli::IntRangeOf<int>()},
                {"vocab-rows", "N", "",
                 "fewer embedding rows than the shape's vocabulary (small test files)",
                 cli::IntRangeOf<int>()}}};
  return *table;
}

absl::Status Write(const cli::CliArgs& args) {
  const std::string out = args.GetString("out", "");
  if (out.empty()) return absl::InvalidArgumentError("--out PATH is required");
  const std::string shape = args.GetString("shape", "smollm2");
  const std::string type = args.GetString("type", "q4_1");
  ASSIGN_OR_RETURN(TinyModelOptions options, BenchModelOptions(shape, type));
  ASSIGN_OR_RETURN(int layers, args.GetInt<int>("layers", options.n_layers));
  if (layers < 1 || layers > options.n_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("--layers must be in [1, ", options.n_layers, "], got ", layers));
  }
  ASSIGN_OR_RETURN(int64_t rows, args.GetInt<int>("vocab-rows", options.vocab_rows));
  if (rows < TinyModelVocabSize() || rows > options.vocab_rows) {
    return absl::InvalidArgumentError(absl::StrCat("--vocab-rows must be in [",
                                                   TinyModelVocabSize(), ", ", options.vocab_rows,
                                                   "], got ", rows));
  }
  options.n_layers = static_cast<int>(layers);
  options.vocab_rows = static_cast<int>(rows);
  RETURN_IF_ERROR(WriteTinyModel(options, out));
  std::printf("wrote %s (%s shapes, %d layers, %d rows, %s layer matrices, random weights)\n",
              out.c_str(), shape.c_str(), options.n_layers, options.vocab_rows, type.c_str());
  return absl::OkStatus();
}

}  // namespace
}  // namespace splitspec::model

int main(int argc, char** argv) {
  return splitspec::cli::RunMain(argc, argv, splitspec::model::FlagTable(),
                                 splitspec::model::Write);
}
