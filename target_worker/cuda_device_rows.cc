// NewCudaDeviceRows (device_rows.h): the store in device memory, with the CUDA
// verifier (runtime/spec/cuda_verifier.h) and the CUDA guidance kernel
// (kernels/cuda/guidance.h). Written without a GPU at hand: the gpu tests
// (tests/gpu/device_verify_engine_test.cc) are what will run it first.
#include "target_worker/device_rows.h"

#include "absl/strings/str_cat.h"

#if defined(SPLITSPEC_HAVE_CUDA)
#include <cuda_runtime_api.h>

#include <algorithm>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/guidance.h"
#include "runtime/base/status_macros.h"
#include "runtime/spec/cuda_verifier.h"
#endif

namespace splitspec::target {

#if defined(SPLITSPEC_HAVE_CUDA)
namespace {

// Rows [0, slots) are the slots, rows [slots, slots + step_capacity_) the step's.
class CudaDeviceRows final : public DeviceRows {
 public:
  CudaDeviceRows(int device, int vocab, int slots)
      : device_(device), vocab_(vocab), slots_(slots) {}
  ~CudaDeviceRows() override {
    kernels::IgnoreCudaError(cudaSetDevice(device_));
    if (stream_ != nullptr) {
      kernels::IgnoreCudaError(cudaStreamSynchronize(stream_));
      kernels::IgnoreCudaError(cudaStreamDestroy(stream_));
    }
    kernels::IgnoreCudaError(cudaFree(rows_));
    kernels::IgnoreCudaError(cudaFree(scales_));
  }

  absl::Status Init() {
    ASSIGN_OR_RETURN(verifier_, spec::CudaVerifier::Create(device_));
    CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    return Grow(1);
  }

  int slots() const override { return slots_; }
  int64_t StepRow(int64_t r) const override { return slots_ + r; }
  int64_t SlotRow(int s) const override { return s; }

  absl::Status LoadStep(const model::ForwardOutput& out,
                        absl::Span<const GuidedRows> guided) override {
    error_ = absl::OkStatus();
    step_rows_ = 0;
    int64_t rows = 0;
    for (int n : out.num_rows) rows += n;
    if (rows == 0) return absl::OkStatus();
    if (out.device_logits == nullptr || out.vocab_size != vocab_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cuda:", device_, ": the forward left no device logits of vocabulary ", vocab_,
          " (vocab_size ", out.vocab_size, "); call KeepLogitsOnDevice(true) on the model"));
    }
    CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    RETURN_IF_ERROR(Grow(rows));
    step_rows_ = rows;
    // The model's Forward has finished (its stream synchronized), so its logits are complete.
    RETURN_IF_ERROR(CopyStepRows(out, rows));
    return Combine(guided);
  }

  // The forward's rows into the step rows: one copy for one block of vocab_
  // columns; for a group leader's blocks (one per rank, ForwardOutput's layout),
  // one strided copy per block into its columns of every row.
  absl::Status CopyStepRows(const model::ForwardOutput& out, int64_t rows) {
    const int parts = out.device_logit_parts;
    const int64_t part_vocab = out.device_part_vocab > 0 ? out.device_part_vocab : vocab_;
    if (parts == 1 && part_vocab == vocab_) {
      CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(Row(StepRow(0)), out.device_logits, RowBytes() * rows,
                                           cudaMemcpyDeviceToDevice, stream_));
      return absl::OkStatus();
    }
    if (parts < 1 || part_vocab * parts < vocab_) {
      return absl::InvalidArgumentError(
          absl::StrCat("cuda:", device_, ": ", parts, " logit blocks of ", part_vocab,
                       " columns do not cover the vocabulary of ", vocab_));
    }
    for (int p = 0; p < parts; ++p) {
      const int64_t begin = std::min<int64_t>(vocab_, part_vocab * p);
      const int64_t width = std::min<int64_t>(vocab_, part_vocab * (p + 1)) - begin;
      if (width == 0) continue;
      const float* block = out.device_logits + static_cast<size_t>(p) * rows * part_vocab;
      CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(Row(StepRow(0)) + begin, RowBytes(), block,
                                             part_vocab * sizeof(float), width * sizeof(float),
                                             rows, cudaMemcpyDeviceToDevice, stream_));
    }
    return absl::OkStatus();
  }

  absl::Status CopyRowsToHost(int64_t row, int64_t count, absl::Span<float> host) override {
    if (row < 0 || count < 0 || row + count > slots_ + step_rows_ ||
        host.size() != static_cast<size_t>(count) * vocab_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cuda:", device_, ": CopyRowsToHost of rows ", row, " (+", count, ") into ",
          host.size(), " floats: the store has ", slots_, " slots and ", step_rows_,
          " step rows of ", vocab_));
    }
    if (count == 0) return absl::OkStatus();
    CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    // On stream_, after LoadStep's copies and combinations of these rows.
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host.data(), Row(row), RowBytes() * count,
                                         cudaMemcpyDeviceToHost, stream_));
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<absl::StatusOr<spec::VerifyOutcome>>> Verify(
      absl::Span<const spec::DeviceVerifyRequest> requests) override {
    return verifier_->Verify(requests, rows_, slots_ + step_rows_, vocab_, vocab_, stream_);
  }

  void Keep(int64_t row, int slot) override {
    if (!error_.ok() || row == SlotRow(slot)) return;
    if (slot < 0 || slot >= slots_ || row < 0 || row >= slots_ + step_rows_) {
      error_ = absl::InvalidArgumentError(absl::StrCat("Keep: row ", row, " or slot ", slot,
                                                       " outside the store of ", slots_,
                                                       " slots and ", step_rows_, " step rows"));
      return;
    }
    error_ = kernels::CudaStatus(cudaMemcpyAsync(Row(SlotRow(slot)), Row(row), RowBytes(),
                                                 cudaMemcpyDeviceToDevice, stream_),
                                 "cudaMemcpyAsync(keep row)", __FILE__, __LINE__);
  }

  absl::Status EndStep() override {
    const absl::Status sync = kernels::CudaStatus(cudaStreamSynchronize(stream_),
                                                  "cudaStreamSynchronize", __FILE__, __LINE__);
    absl::Status first = error_.ok() ? sync : error_;
    error_ = absl::OkStatus();  // reported once
    return first;
  }

 private:
  size_t RowBytes() const { return static_cast<size_t>(vocab_) * sizeof(float); }
  float* Row(int64_t row) const { return rows_ + static_cast<size_t>(row) * vocab_; }

  // Room for `step_rows` step rows; the slots' contents are kept.
  absl::Status Grow(int64_t step_rows) {
    if (rows_ != nullptr && step_rows <= step_capacity_) return absl::OkStatus();
    const int64_t capacity = std::max(step_rows, 2 * step_capacity_);
    const size_t bytes = RowBytes() * static_cast<size_t>(slots_ + capacity);
    void* next = nullptr;
    if (cudaMalloc(&next, bytes) != cudaSuccess) {
      (void)cudaGetLastError();
      return absl::ResourceExhaustedError(
          absl::StrCat("cuda:", device_, ": cannot allocate ", bytes, " bytes for ", slots_,
                       " pending rows and ", capacity, " step rows"));
    }
    if (rows_ == nullptr) {
      // The slot rows start as zeros: a later growth copies every slot, kept or not, and
      // must not read memory never written (compute-sanitizer initcheck, the first H100 run).
      absl::Status zeroed =
          kernels::CudaStatus(cudaMemsetAsync(next, 0, RowBytes() * slots_, stream_),
                              "cudaMemsetAsync(slot rows)", __FILE__, __LINE__);
      if (!zeroed.ok()) {
        kernels::IgnoreCudaError(cudaFree(next));
        return zeroed;
      }
    } else {
      absl::Status copied = kernels::CudaStatus(
          cudaMemcpyAsync(next, rows_, RowBytes() * slots_, cudaMemcpyDeviceToDevice, stream_),
          "cudaMemcpyAsync(slot rows)", __FILE__, __LINE__);
      if (copied.ok()) {
        copied = kernels::CudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize",
                                     __FILE__, __LINE__);
      }
      if (!copied.ok()) {
        kernels::IgnoreCudaError(cudaFree(next));  // the old rows stay in place
        return copied;
      }
      CUDA_RETURN_IF_ERROR(cudaFree(rows_));
    }
    rows_ = static_cast<float*>(next);
    step_capacity_ = capacity;
    return absl::OkStatus();
  }

  // Every guided span, in place over its conditional rows; one scale upload.
  absl::Status Combine(absl::Span<const GuidedRows> guided) {
    if (guided.empty()) return absl::OkStatus();
    host_scales_.clear();
    for (const GuidedRows& g : guided) {
      if (g.rows < 0 || g.cond_row < 0 || g.uncond_row < 0 || g.cond_row + g.rows > step_rows_ ||
          g.uncond_row + g.rows > step_rows_) {
        return absl::InvalidArgumentError(
            absl::StrCat("guided rows ", g.cond_row, " and ", g.uncond_row, " (+", g.rows,
                         ") outside the forward's ", step_rows_, " rows"));
      }
      host_scales_.insert(host_scales_.end(), g.rows, g.scale);
    }
    if (host_scales_.size() > scales_capacity_) {
      kernels::IgnoreCudaError(cudaFree(scales_));
      scales_ = nullptr;
      scales_capacity_ = 0;
      CUDA_RETURN_IF_ERROR(
          cudaMalloc(reinterpret_cast<void**>(&scales_), host_scales_.size() * sizeof(float)));
      scales_capacity_ = host_scales_.size();
    }
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(scales_, host_scales_.data(),
                                         host_scales_.size() * sizeof(float),
                                         cudaMemcpyHostToDevice, stream_));
    size_t offset = 0;
    for (const GuidedRows& g : guided) {
      float* cond = Row(StepRow(g.cond_row));
      RETURN_IF_ERROR(kernels::LaunchGuidedLogitsRows(cond, Row(StepRow(g.uncond_row)),
                                                      scales_ + offset, cond,
                                                      static_cast<int>(g.rows), vocab_, stream_));
      offset += g.rows;
    }
    // host_scales_ must outlive the copy: wait here (a step has one such upload).
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    return absl::OkStatus();
  }

  const int device_;
  const int vocab_;
  const int slots_;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<spec::CudaVerifier> verifier_;
  float* rows_ = nullptr;  // [slots_ + step_capacity_, vocab_]
  int64_t step_capacity_ = 0;
  int64_t step_rows_ = 0;
  float* scales_ = nullptr;
  size_t scales_capacity_ = 0;
  std::vector<float> host_scales_;
  absl::Status error_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceRows>> NewCudaDeviceRows(int device, int vocab, int slots) {
  if (vocab < 1 || slots < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("NewCudaDeviceRows: vocab ", vocab, " and slots ", slots, " must be >= 1"));
  }
  auto rows = std::make_unique<CudaDeviceRows>(device, vocab, slots);
  RETURN_IF_ERROR(rows->Init());
  return std::unique_ptr<DeviceRows>(std::move(rows));
}

#else  // !SPLITSPEC_HAVE_CUDA

absl::StatusOr<std::unique_ptr<DeviceRows>> NewCudaDeviceRows(int device, int vocab, int slots) {
  return absl::FailedPreconditionError(
      absl::StrCat("cuda:", device,
                   ": verification on the device needs a build with CUDA (-DSPLITSPEC_CUDA=ON)"));
}

#endif  // SPLITSPEC_HAVE_CUDA

}  // namespace splitspec::target
