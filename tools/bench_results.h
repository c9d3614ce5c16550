// The GPU routine's results file: one JSON line per (engine, shape, measure),
// written by the benchmarks from their own measurements (never typed by hand).
//
//   ASSIGN_OR_RETURN(std::string line, BenchResultJson({"splitspec", "NVIDIA H200",
//       "llama-3.2-1b-q4_0", DecodeMeasure(1), 438.2, "splitspec bench decode ..."}));
//   RETURN_IF_ERROR(AppendBenchResults("bench/results/gpu/2026-11-27-nvidia-h200.jsonl", results));
//
// Fields: engine (splitspec, llama.cpp, hf), gpu (the device's name, "cpu" for a
// CPU run), shape (the model shape's label), measure, value, command (the command
// line that measured it). Measures and their units:
//   decode_b1, decode_bB   tok/s (aggregate over the B sequences)
//   prefill_N              tok/s of one N-token forward
//   verify_kK              T(k) / T(1), forward time of a k-token verify block over one token's
// The file is the source of the README's GPU table (issue 36 item 5).
#ifndef SPLITSPEC_TOOLS_BENCH_RESULTS_H_
#define SPLITSPEC_TOOLS_BENCH_RESULTS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "runtime/model/device.h"

namespace splitspec::tools {

struct BenchResult {
  std::string engine;
  std::string gpu;
  std::string shape;
  std::string measure;
  double value = 0;
  std::string command;
};

std::string DecodeMeasure(int batch);    // "decode_b8"
std::string PrefillMeasure(int tokens);  // "prefill_512"
std::string VerifyMeasure(int k);        // "verify_k5"

// One JSON object on one line (no newline), strings escaped by protobuf's JSON
// printer. InvalidArgument naming the field when a string field is empty or the
// value is not finite.
absl::StatusOr<std::string> BenchResultJson(const BenchResult& result);

// Appends one line per result to `path`, creating it and its folders when missing.
// All lines are formed before the file is touched: on an invalid result nothing is
// written. Errors: InvalidArgument (BenchResultJson), Internal naming the path when
// it cannot be opened or written.
absl::Status AppendBenchResults(const std::string& path, absl::Span<const BenchResult> results);

// The routine's file name for a run on `day` (UTC) on `gpu`:
// "bench/results/gpu/2026-11-27-nvidia-h200.jsonl" (the name lower-cased, runs of
// other characters than letters and digits as one '-').
std::string GpuResultsPath(absl::Time day, const std::string& gpu);

// The gpu field for a run on `device`: the CUDA device's name, or "cpu".
// Errors: the device probe's (Internal naming the ordinal).
absl::StatusOr<std::string> DeviceLabel(const model::DeviceSpec& device);

// The label of a model file for the shape field: its file name without the folder
// and the ".gguf" suffix.
std::string ShapeLabel(const std::string& model_path);

}  // namespace splitspec::tools

#endif  // SPLITSPEC_TOOLS_BENCH_RESULTS_H_
