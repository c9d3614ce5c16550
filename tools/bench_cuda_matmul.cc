// Micro-benchmark of the CUDA matvec (kernels/cuda/quant_matmul.h) on one device:
// per weight type, real model shape and token count, the kernel time of one launch
// and the weight bandwidth it reaches, so that "each weight is read once for 1..16
// tokens" shows as a flat time over the token counts.
//
//   splitspec_bench_cuda_matmul [--device 0] [--types q4_0,q8_0] [--tokens 1,2,5,8,16,17]
//                               [--repeats 50]
//
// Shapes (rows x cols, random weights): Llama-3.2-1B's ffn gate 8192 x 2048, down
// 2048 x 8192 and output head 128256 x 2048; Llama-3-8B's gate 14336 x 4096. Per
// case: the median over --repeats launches (after 3 untimed), each timed with CUDA
// events around the matmul alone (activations quantized once before), and
//   GB/s = rows * RowBytes(type, cols) / median time   (weights only)
//   x1   = median time / the same shape's 1-token median time
// Also the device-to-device copy bandwidth (MeasureCudaCopyBandwidth), the bound of GB/s.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "kernels/cpu/ggml_types.h"
#include "kernels/cpu/quantize_weights.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_info.h"
#include "kernels/cuda/quant_matmul.h"
#include "runtime/base/status_macros.h"
#include "runtime/cli/cli_args.h"

namespace splitspec::kernels {
namespace {

struct Shape {
  const char* name;
  int64_t rows, cols;
};

constexpr Shape kShapes[] = {{"1B ffn gate", 8192, 2048},
                             {"1B ffn down", 2048, 8192},
                             {"1B output head", 128256, 2048},
                             {"8B ffn gate", 14336, 4096}};

const cli::FlagTable& FlagTable() {
  static const cli::FlagTable* const table = new cli::FlagTable{
      .command = "splitspec_bench_cuda_matmul",
      .summary =
          "kernel time and weight bandwidth of the CUDA matvec per type, shape and "
          "token count",
      .flags = {{"device", "N", "0", "the CUDA device ordinal", cli::IntRangeOf<int>()},
                {"types", "LIST", "q4_0,q8_0,q4_K,q6_K,f16", "weight types to time"},
                {"tokens", "LIST", "1,2,3,5,8,9,16,17", "token counts per launch"},
                {"repeats", "N", "50", "timed launches per case (the median is printed)",
                 cli::IntRangeOf<int>()}}};
  return *table;
}

absl::StatusOr<GgmlType> TypeNamed(const std::string& name) {
  for (uint32_t raw = 0; raw < 64; ++raw) {
    const GgmlTypeTraits* t = LookupGgmlType(raw);
    if (t != nullptr && name == t->name && CudaSupportsWeightType(t->type)) return t->type;
  }
  return absl::InvalidArgumentError(absl::StrCat("--types: no CUDA matmul for '", name, "'"));
}

// Device memory freed on scope exit.
struct DeviceBytes {
  void* p = nullptr;
  ~DeviceBytes() { cudaFree(p); }
};

absl::Status Allocate(DeviceBytes* b, size_t bytes) {
  CUDA_RETURN_IF_ERROR(cudaMalloc(&b->p, std::max<size_t>(bytes, 4)));
  return absl::OkStatus();
}

absl::StatusOr<double> MedianLaunchUs(const DeviceMatrix& w, const float* x,
                                      const DeviceQ8Activations& xq, int64_t tokens, float* y,
                                      int repeats) {
  cudaEvent_t start, stop;
  CUDA_RETURN_IF_ERROR(cudaEventCreate(&start));
  CUDA_RETURN_IF_ERROR(cudaEventCreate(&stop));
  std::vector<double> us;
  absl::Status status;
  for (int rep = -3; rep < repeats && status.ok(); ++rep) {
    cudaEventRecord(start);
    status = LaunchMatMul(w, x, &xq, tokens, y, w.rows, nullptr);
    cudaEventRecord(stop);
    if (status.ok())
      status = CudaStatus(cudaEventSynchronize(stop), "cudaEventSynchronize", __FILE__, __LINE__);
    float ms = 0;
    if (status.ok()) cudaEventElapsedTime(&ms, start, stop);
    if (rep >= 0) us.push_back(1e3 * ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (!status.ok()) return status;
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

absl::Status Run(const cli::CliArgs& args) {
  ASSIGN_OR_RETURN(const int device, args.GetInt<int>("device", 0));
  ASSIGN_OR_RETURN(const int repeats, args.GetInt<int>("repeats", 50));
  if (repeats < 1 || device < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--repeats ", repeats, " must be >= 1 and --device ", device, " >= 0"));
  }
  std::vector<GgmlType> types;
  const std::vector<std::string> names =
      absl::StrSplit(args.GetString("types", "q4_0,q8_0,q4_K,q6_K,f16"), ',');
  for (const std::string& name : names) {
    ASSIGN_OR_RETURN(const GgmlType t, TypeNamed(name));
    types.push_back(t);
  }
  std::vector<int32_t> tokens = {1, 2, 3, 5, 8, 9, 16, 17};
  if (args.Has("tokens")) {
    ASSIGN_OR_RETURN(tokens, args.GetIntList("tokens"));
  }
  if (tokens.empty() || *std::min_element(tokens.begin(), tokens.end()) < 1) {
    return absl::InvalidArgumentError("--tokens: counts must be >= 1");
  }
  const int max_tokens = *std::max_element(tokens.begin(), tokens.end());
  ASSIGN_OR_RETURN(const CudaDeviceMemory memory, QueryCudaDeviceMemory(static_cast<int>(device)));
  ASSIGN_OR_RETURN(const double copy_gb_s,
                   MeasureCudaCopyBandwidth(static_cast<int>(device), uint64_t{512} << 20, 10));
  std::printf("device: cuda:%lld %s; device-to-device copy %.1f GB/s (read + written)\n",
              static_cast<long long>(device), memory.name.c_str(), copy_gb_s);
  std::mt19937 rng(36);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (GgmlType type : types) {
    for (const Shape& s : kShapes) {
      if (s.cols % GetGgmlTypeTraits(type).block_size != 0) continue;
      const size_t row_bytes = RowBytes(type, s.cols);
      std::vector<float> row(s.cols);
      std::vector<uint8_t> w(row_bytes * s.rows);
      for (int64_t r = 0; r < s.rows;
           ++r) {  // a few distinct rows, repeated: the speed is the same
        if (r < 64) {
          for (float& v : row) v = 0.02f * normal(rng);
          QuantizeRow(type, row.data(), w.data() + r * row_bytes, s.cols);
        } else {
          std::copy_n(w.data() + (r % 64) * row_bytes, row_bytes, w.data() + r * row_bytes);
        }
      }
      std::vector<float> x(static_cast<size_t>(max_tokens) * s.cols);
      for (float& v : x) v = normal(rng);
      DeviceBytes d_w, d_x, d_y, qs, d, d_sum, sum;
      const std::pair<DeviceBytes*, size_t> buffers[] = {
          {&d_w, w.size()}, {&d_x, x.size() * 4}, {&d_y, size_t{4} * max_tokens * s.rows},
          {&qs, x.size()},  {&d, x.size()},       {&d_sum, x.size()},
          {&sum, x.size()}};
      for (const auto& [b, bytes] : buffers) RETURN_IF_ERROR(Allocate(b, bytes));
      CUDA_RETURN_IF_ERROR(cudaMemcpy(d_w.p, w.data(), w.size(), cudaMemcpyHostToDevice));
      CUDA_RETURN_IF_ERROR(cudaMemcpy(d_x.p, x.data(), x.size() * 4, cudaMemcpyHostToDevice));
      const DeviceQ8Activations xq{static_cast<int8_t*>(qs.p), static_cast<float*>(d.p),
                                   static_cast<float*>(d_sum.p), static_cast<float*>(sum.p)};
      RETURN_IF_ERROR(LaunchQuantizeActivations(CudaMatMulActivationLayout(type),
                                                static_cast<float*>(d_x.p), max_tokens, s.cols, xq,
                                                nullptr));
      const DeviceMatrix m{type, d_w.p, s.rows, s.cols};
      double one_token_us = 0;
      for (int32_t t : tokens) {
        ASSIGN_OR_RETURN(const double us,
                         MedianLaunchUs(m, static_cast<float*>(d_x.p), xq, t,
                                        static_cast<float*>(d_y.p), static_cast<int>(repeats)));
        if (one_token_us == 0) one_token_us = us;
        std::printf("%-5s %-15s %6lld x %-5lld tokens %2d: %8.2f us  %7.1f GB/s  x1 %.2f\n",
                    GetGgmlTypeTraits(type).name, s.name, static_cast<long long>(s.rows),
                    static_cast<long long>(s.cols), t, us,
                    static_cast<double>(w.size()) / (us * 1e-6) / 1e9, us / one_token_us);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace splitspec::kernels

int main(int argc, char** argv) {
  return splitspec::cli::RunMain(argc, argv, splitspec::kernels::FlagTable(),
                                 splitspec::kernels::Run);
}
