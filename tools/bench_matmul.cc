// Micro-benchmark of the matmul kernels on one thread: for each weight type, shape
// and token count, the scalar reference and every vector path this CPU runs.
//
//   splitspec_bench_matmul [--types q4_1,q8_0] [--tokens 1,4,8] [--min-ms 200] [--no-scalar]
//   splitspec_bench_matmul --decode-model [--tokens 1,5,9]
//
// Shapes: 1536 x 576 (the default model's FFN up/gate) and 49152 x 576 (its output
// head); K-quants need cols % 256 == 0 and use 512 columns instead of 576.
// Timings are the best of 5 rounds (see TimeCalls). Two per line:
//   hot:  the same matrix every call (it stays in cache when it fits);
//   cold: the call cycles over copies of the matrix totalling >= 256 MiB, so weights
//         stream from DRAM, as in a decode step over a whole model.
// Derived figures (printed formulas):  GB/s = rows * RowBytes(type, cols) / ns_per_call,
// from wall-clock time and from this thread's CPU time (the two differ when other
// processes share the cores; the CPU-time figure is the kernel's own speed).
// The activation packing (PackActivations) is timed separately (pack_ns).
//
// --decode-model times, on one thread with the dispatched path, every matmul of one
// forward step of the default model (SmolLM2-135M: 30 layers of Q4_1 q/k/v/o
// 576x576, 192x576, 192x576, 576x576, gate/up 1536x576, down 576x1536, then the tied
// Q8_0 49152x576 head), ~96 MB of weights that stream from DRAM every step.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/cli/cli_args.h"

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/quantize_weights.h"

namespace splitspec::kernels {
namespace {

using RowsFn = void (*)(GgmlType, const void*, int64_t, const PackedActivations&, int64_t, int64_t,
                        float*, int64_t);

struct Path {
  const char* name;
  RowsFn fn;
};

struct Options {
  std::vector<GgmlType> types = {GgmlType::kF32,  GgmlType::kF16,  GgmlType::kBF16,
                                 GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1,
                                 GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K};
  std::vector<int> tokens = {1, 4, 8};
  double min_ms = 200;
  bool scalar = true;
  bool decode_model = false;
};

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t comma = std::min(s.find(',', start), s.size());
    parts.push_back(s.substr(start, comma - start));
    start = comma + 1;
  }
  return parts;
}

const cli::FlagTable& FlagTable() {
  static const cli::FlagTable* const table = new cli::FlagTable{
      .command = "splitspec_bench_matmul",
      .summary =
          "one-thread micro-benchmark of the matmul kernels: the scalar reference and "
          "every vector path this CPU runs, per weight type, shape and token count",
      .flags = {
          {"types", "LIST", "f32,f16,bf16,q8_0,q4_0,q4_1,q4_K,q5_K,q6_K", "weight types to time"},
          {"tokens", "LIST", "1,4,8", "token counts per call"},
          {"min-ms", "MS", "200", "time each case for at least this long"},
          {"no-scalar", "", "", "skip the scalar reference"},
          {"decode-model", "", "", "time every matmul of one decode step of the default model"}}};
  return *table;
}

absl::StatusOr<GgmlType> WeightType(const std::string& name) {
  for (uint32_t raw = 0; raw < 64; ++raw) {
    const GgmlTypeTraits* t = LookupGgmlType(raw);
    if (t != nullptr && name == t->name && IsSupportedWeightType(t->type)) return t->type;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--types: unknown or unsupported weight type '", name, "'"));
}

absl::StatusOr<Options> ParseOptions(const cli::CliArgs& args) {
  Options options;
  options.scalar = !args.Has("no-scalar");
  options.decode_model = args.Has("decode-model");
  if (args.Has("types")) {
    options.types.clear();
    for (const std::string& name : Split(args.GetString("types", ""))) {
      absl::StatusOr<GgmlType> type = WeightType(name);
      if (!type.ok()) return type.status();
      options.types.push_back(*type);
    }
  }
  if (args.Has("tokens")) {
    absl::StatusOr<std::vector<int32_t>> tokens = args.GetIntList("tokens");
    if (!tokens.ok()) return tokens.status();
    options.tokens.clear();
    for (int32_t n : *tokens) options.tokens.push_back(std::max(1, n));
  }
  absl::StatusOr<double> min_ms = args.GetDouble("min-ms", options.min_ms);
  if (!min_ms.ok()) return min_ms.status();
  options.min_ms = *min_ms;
  return options;
}

std::vector<Path> Paths(bool scalar) {
  std::vector<Path> paths;
  if (scalar) paths.push_back({"scalar", MatMulRowsReference});
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    paths.push_back({"avx2", internal::MatMulRowsAvx2});
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  if (avx512) paths.push_back({"avx512", internal::MatMulRowsAvx512});
  if (avx512 && __builtin_cpu_supports("avx512vnni"))
    paths.push_back({"avx512-vnni", internal::MatMulRowsAvx512Vnni});
  return paths;
}

double ThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

struct Timing {
  double wall_ns;  // mean wall-clock ns per call
  double cpu_ns;   // mean ns per call this thread actually ran (excludes time preempted)
};

// ns per call of `call(i)`: the best of 5 rounds, each the mean over at least
// min_ms / 5 of wall time and 2 calls (the best round is the one least disturbed by
// other processes on the machine).
template <class Call>
Timing TimeCalls(double min_ms, Call call) {
  call(0);  // warm-up
  using Clock = std::chrono::steady_clock;
  Timing best = {1e300, 1e300};
  int64_t i = 1;
  for (int round = 0; round < 5; ++round) {
    const auto start = Clock::now();
    const double cpu_start = ThreadCpuNs();
    int64_t calls = 0;
    double elapsed_ns = 0;
    while (calls < 2 || elapsed_ns < min_ms * 1e6 / 5) {
      call(i++);
      ++calls;
      elapsed_ns = std::chrono::duration<double, std::nano>(Clock::now() - start).count();
    }
    best.wall_ns = std::min(best.wall_ns, elapsed_ns / static_cast<double>(calls));
    best.cpu_ns = std::min(best.cpu_ns, (ThreadCpuNs() - cpu_start) / static_cast<double>(calls));
  }
  return best;
}

uint8_t* Align64(uint8_t* p) { return p + (64 - reinterpret_cast<uintptr_t>(p) % 64) % 64; }

// The dispatching path on the interleaved copy the CPU model runs on (matmul.h,
// "Interleaved rows"); GB/s counts the same bytes as the raw rows.
void BenchInterleaved(const Options& options, GgmlType type, int64_t rows, int64_t cols,
                      const std::vector<uint8_t>& matrix, const PackedActivations& packed) {
  const size_t bytes = (InterleavedBytes(type, rows, cols) + 63) / 64 * 64;
  const double matrix_bytes = static_cast<double>(matrix.size());
  const size_t copies = std::max<size_t>(2, (256u << 20) / bytes + 1);
  std::vector<uint8_t> storage(bytes * copies + 64);
  uint8_t* cold_copies = Align64(storage.data());  // as the CPU model keeps them
  for (size_t c = 0; c < copies; ++c) {
    InterleaveRows(type, matrix.data(), rows, cols, cold_copies + c * bytes);
  }
  std::vector<float> y(static_cast<size_t>(packed.tokens) * rows);
  const Timing hot = TimeCalls(options.min_ms, [&](int64_t) {
    MatMulRowsInterleaved(type, cold_copies, cols, packed, 0, rows, y.data(), rows);
  });
  const Timing cold = TimeCalls(options.min_ms, [&](int64_t i) {
    MatMulRowsInterleaved(type, cold_copies + (i % copies) * bytes, cols, packed, 0, rows, y.data(),
                          rows);
  });
  std::printf(
      "%-5s %5lldx%-4lld t=%d %-11s | hot %10.0f ns %6.2f GB/s (cpu %10.0f ns %6.2f GB/s) | "
      "cold %10.0f ns %6.2f GB/s (cpu %10.0f ns %6.2f GB/s)\n",
      GetGgmlTypeTraits(type).name, static_cast<long long>(rows), static_cast<long long>(cols),
      static_cast<int>(packed.tokens), "interleaved", hot.wall_ns, matrix_bytes / hot.wall_ns,
      hot.cpu_ns, matrix_bytes / hot.cpu_ns, cold.wall_ns, matrix_bytes / cold.wall_ns, cold.cpu_ns,
      matrix_bytes / cold.cpu_ns);
  std::fflush(stdout);
}

void BenchShape(const Options& options, const std::vector<Path>& paths, GgmlType type, int64_t rows,
                int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const size_t matrix_bytes = RowBytes(type, cols) * rows;
  std::vector<uint8_t> matrix(matrix_bytes);
  std::vector<float> row(cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : row) v = normal(rng);
    QuantizeRow(type, row.data(), matrix.data() + r * RowBytes(type, cols), cols);
  }
  const size_t copies = std::max<size_t>(2, (size_t{256} << 20) / matrix_bytes + 1);
  std::vector<uint8_t> cold_copies(matrix_bytes * copies);
  for (size_t c = 0; c < copies; ++c)
    std::memcpy(cold_copies.data() + c * matrix_bytes, matrix.data(), matrix_bytes);

  for (int tokens : options.tokens) {
    std::vector<float> x(tokens * cols);
    for (float& v : x) v = normal(rng);
    PackedActivations packed;
    const Timing pack =
        TimeCalls(20, [&](int64_t) { PackActivations(type, x.data(), tokens, cols, &packed); });
    std::vector<float> y(static_cast<size_t>(tokens) * rows);
    for (const Path& path : paths) {
      const Timing hot = TimeCalls(options.min_ms, [&](int64_t) {
        path.fn(type, matrix.data(), cols, packed, 0, rows, y.data(), rows);
      });
      const Timing cold = TimeCalls(options.min_ms, [&](int64_t i) {
        path.fn(type, cold_copies.data() + (i % copies) * matrix_bytes, cols, packed, 0, rows,
                y.data(), rows);
      });
      std::printf(
          "%-5s %5lldx%-4lld t=%d %-11s | hot %10.0f ns %6.2f GB/s (cpu %10.0f ns %6.2f GB/s) | "
          "cold %10.0f ns %6.2f GB/s (cpu %10.0f ns %6.2f GB/s) | pack %6.0f ns\n",
          GetGgmlTypeTraits(type).name, static_cast<long long>(rows), static_cast<long long>(cols),
          tokens, path.name, hot.wall_ns, matrix_bytes / hot.wall_ns, hot.cpu_ns,
          matrix_bytes / hot.cpu_ns, cold.wall_ns, matrix_bytes / cold.wall_ns, cold.cpu_ns,
          matrix_bytes / cold.cpu_ns, pack.wall_ns);
      std::fflush(stdout);
    }
    if (HasInterleavedLayout(type)) BenchInterleaved(options, type, rows, cols, matrix, packed);
  }
}

struct ModelMatrix {
  GgmlType type;
  int64_t rows, cols;
  std::vector<uint8_t> bytes;
  std::vector<uint8_t> interleaved;  // as the CPU model keeps Q4_1 and Q8_0 (matmul.h)
  uint8_t* interleaved_aligned = nullptr;
};

void BenchDecodeModel(const Options& options, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<ModelMatrix> matrices;
  const int64_t layer_shapes[7][2] = {{576, 576},  {192, 576},  {192, 576}, {576, 576},
                                      {1536, 576}, {1536, 576}, {576, 1536}};
  for (int layer = 0; layer < 30; ++layer) {
    for (const auto& shape : layer_shapes)
      matrices.push_back({GgmlType::kQ4_1, shape[0], shape[1], {}, {}, nullptr});
  }
  matrices.push_back({GgmlType::kQ8_0, 49152, 576, {}, {}, nullptr});
  size_t total_bytes = 0;
  std::vector<float> row(1536);
  for (ModelMatrix& m : matrices) {
    m.bytes.resize(RowBytes(m.type, m.cols) * m.rows);
    for (int64_t r = 0; r < m.rows; ++r) {
      for (int64_t c = 0; c < m.cols; ++c) row[c] = normal(rng);
      QuantizeRow(m.type, row.data(), m.bytes.data() + r * RowBytes(m.type, m.cols), m.cols);
    }
    total_bytes += m.bytes.size();
    if (HasInterleavedLayout(m.type)) {
      m.interleaved.resize(InterleavedBytes(m.type, m.rows, m.cols) + 64);
      m.interleaved_aligned = Align64(m.interleaved.data());
      InterleaveRows(m.type, m.bytes.data(), m.rows, m.cols, m.interleaved_aligned);
    }
  }
  std::printf("# decode step of SmolLM2-135M shapes: %zu matmuls, %.1f MB of weights, path '%s'\n",
              matrices.size(), total_bytes / 1e6, MatMulPathName());
  for (int tokens : options.tokens) {
    std::vector<float> x(static_cast<size_t>(tokens) * 1536),
        y(static_cast<size_t>(tokens) * 49152);
    for (float& v : x) v = normal(rng);
    PackedActivations packed;
    const Timing step = TimeCalls(std::max(options.min_ms, 500.0), [&](int64_t) {
      for (const ModelMatrix& m : matrices) {
        PackActivations(m.type, x.data(), tokens, m.cols, &packed);
        if (!m.interleaved.empty()) {
          MatMulRowsInterleaved(m.type, m.interleaved_aligned, m.cols, packed, 0, m.rows, y.data(),
                                m.rows);
        } else {
          MatMulRows(m.type, m.bytes.data(), m.cols, packed, 0, m.rows, y.data(), m.rows);
        }
      }
    });
    std::printf(
        "tokens %d: %.2f ms per step (cpu %.2f ms), %.2f GB/s (cpu %.2f GB/s) = weight bytes / "
        "step time\n",
        tokens, step.wall_ns / 1e6, step.cpu_ns / 1e6, total_bytes / step.wall_ns,
        total_bytes / step.cpu_ns);
    std::fflush(stdout);
  }
}

absl::Status Run(const cli::CliArgs& args) {
  absl::StatusOr<Options> parsed = ParseOptions(args);
  if (!parsed.ok()) return parsed.status();
  const Options& options = *parsed;
  std::mt19937 rng(12345);
  if (options.decode_model) {
    BenchDecodeModel(options, rng);
    return absl::OkStatus();
  }
  const std::vector<Path> paths = Paths(options.scalar);
  std::printf("# one thread; MatMulRows dispatches to '%s' here\n", MatMulPathName());
  std::printf(
      "# GB/s = rows * RowBytes(type, cols) / ns_per_call (weight bytes streamed per call)\n");
  for (GgmlType type : options.types) {
    const int64_t cols = GetGgmlTypeTraits(type).block_size == 256 ? 512 : 576;
    for (int64_t rows : {1536, 49152}) BenchShape(options, paths, type, rows, cols, rng);
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace splitspec::kernels

int main(int argc, char** argv) {
  return splitspec::cli::RunMain(argc, argv, splitspec::kernels::FlagTable(),
                                 splitspec::kernels::Run);
}
