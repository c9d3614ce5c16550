#include "runtime/spec/cuda_verifier.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/logits_rows_types.h"
#include "kernels/cpu/verify_types.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/sampling.h"
#include "kernels/cuda/verify.h"
#include "runtime/base/status_macros.h"

namespace splitspec::spec {
namespace {

// Arrays laid out back to back in one buffer, each at a 16-byte boundary, so
// that one copy moves them all.
class Layout {
 public:
  template <typename T>
  size_t Add(std::vector<T>& array) {
    const size_t offset = (size_ + 15) / 16 * 16;
    size_ = offset + array.size() * sizeof(T);
    slices_.push_back({array.data(), offset, array.size() * sizeof(T)});
    return offset;
  }
  size_t size() const { return size_; }
  void Gather(unsigned char* buffer) const {
    for (const Slice& s : slices_) std::memcpy(buffer + s.offset, s.host, s.bytes);
  }
  void Scatter(const unsigned char* buffer) const {
    for (const Slice& s : slices_) std::memcpy(s.host, buffer + s.offset, s.bytes);
  }

 private:
  struct Slice {
    void* host;
    size_t offset;
    size_t bytes;
  };
  size_t size_ = 0;
  std::vector<Slice> slices_;
};

template <typename T>
T* At(unsigned char* base, size_t offset) {
  return reinterpret_cast<T*>(base + offset);
}

// A fresh buffer is zeroed on `stream`: the one copy of the outputs moves the 16-byte
// padding between arrays and the committed slots a sequence did not fill, which the
// kernels never write (compute-sanitizer initcheck counts reading them as an error).
absl::Status Grow(void** buffer, size_t* capacity, size_t bytes, int device,
                  cudaStream_t stream) {
  if (bytes <= *capacity) return absl::OkStatus();
  if (*buffer != nullptr) CUDA_RETURN_IF_ERROR(cudaFree(*buffer));
  *buffer = nullptr;
  *capacity = 0;
  if (cudaMalloc(buffer, bytes) != cudaSuccess) {
    (void)cudaGetLastError();  // clear it, or the next launch check would report it
    *buffer = nullptr;
    return absl::ResourceExhaustedError(
        absl::StrCat("cuda:", device, ": cannot allocate ", bytes, " bytes for verification"));
  }
  *capacity = bytes;
  CUDA_RETURN_IF_ERROR(cudaMemsetAsync(*buffer, 0, bytes, stream));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<CudaVerifier>> CudaVerifier::Create(int device) {
  int count = 0;
  kernels::IgnoreCudaError(cudaGetDeviceCount(&count));  // no driver reads as no device
  if (device < 0 || device >= count) {
    return absl::FailedPreconditionError(
        absl::StrCat("cuda:", device, " does not exist (", count, " CUDA devices visible)"));
  }
  return std::unique_ptr<CudaVerifier>(new CudaVerifier(device));
}

CudaVerifier::~CudaVerifier() {
  kernels::IgnoreCudaError(cudaSetDevice(device_));
  kernels::IgnoreCudaError(cudaFree(inputs_));
  kernels::IgnoreCudaError(cudaFree(probs_));
  kernels::IgnoreCudaError(cudaFree(outputs_));
}

absl::Status CudaVerifier::Reserve(size_t inputs, size_t probs_floats, size_t outputs,
                                   cudaStream_t stream) {
  RETURN_IF_ERROR(
      Grow(reinterpret_cast<void**>(&inputs_), &inputs_capacity_, inputs, device_, stream));
  RETURN_IF_ERROR(Grow(reinterpret_cast<void**>(&probs_), &probs_capacity_,
                       probs_floats * sizeof(float), device_, stream));
  return Grow(reinterpret_cast<void**>(&outputs_), &outputs_capacity_, outputs, device_, stream);
}

absl::StatusOr<std::vector<absl::StatusOr<VerifyOutcome>>> CudaVerifier::Verify(
    absl::Span<const DeviceVerifyRequest> requests, const float* d_logits, int64_t num_logit_rows,
    int64_t row_stride, int32_t vocab, cudaStream_t stream) {
  if (row_stride < vocab) {
    return absl::InvalidArgumentError(
        absl::StrCat("row_stride ", row_stride, " is less than vocab ", vocab));
  }
  std::vector<absl::StatusOr<VerifyOutcome>> outcomes;
  ASSIGN_OR_RETURN(VerifyUpload up, PlanDeviceVerify(requests, vocab, num_logit_rows, &outcomes));
  last_transfer_ = {};
  if (up.num_sequences() == 0) return outcomes;
  VerifyDownload down = VerifyDownload::For(up);

  Layout in;
  const size_t modes = in.Add(up.modes), offsets = in.Add(up.draft_offsets),
               seeds = in.Add(up.seeds), starts = in.Add(up.start_positions),
               bonus = in.Add(up.want_bonus), tokens = in.Add(up.draft_tokens),
               q_offsets = in.Add(up.q_offsets), q_ids = in.Add(up.q_ids),
               q_probs = in.Add(up.q_probs), sources = in.Add(up.row_sources),
               params = in.Add(up.row_params);
  Layout out;
  const size_t accepted = out.Add(down.accepted), committed_count = out.Add(down.num_committed),
               rejected = out.Add(down.rejected), error = out.Add(down.error),
               error_index = out.Add(down.error_index), committed = out.Add(down.committed),
               row_error = out.Add(down.row_error), row_error_index = out.Add(down.row_error_index);
  const size_t rows = up.num_rows(), sequences = up.num_sequences();
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  RETURN_IF_ERROR(Reserve(in.size(), (rows + sequences) * vocab, out.size(), stream));
  staging_.resize(std::max(in.size(), out.size()));
  in.Gather(staging_.data());
  CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(inputs_, staging_.data(), in.size(), cudaMemcpyHostToDevice, stream));

  kernels::LogitsToProbsView rows_view;
  rows_view.num_rows = static_cast<int32_t>(rows);
  rows_view.vocab = vocab;
  rows_view.logits = d_logits;
  rows_view.logits_row_stride = row_stride;
  rows_view.row_sources = At<const int64_t>(inputs_, sources);
  rows_view.params = At<const kernels::RowSamplingParams>(inputs_, params);
  rows_view.probs = probs_;
  rows_view.out_error = At<int32_t>(outputs_, row_error);
  rows_view.out_error_index = At<int32_t>(outputs_, row_error_index);
  RETURN_IF_ERROR(kernels::LaunchLogitsToProbs(rows_view, stream));

  kernels::VerifyBatchView view;
  view.num_sequences = static_cast<int32_t>(sequences);
  view.vocab = vocab;
  view.modes = At<const int32_t>(inputs_, modes);
  view.draft_offsets = At<const int32_t>(inputs_, offsets);
  view.seeds = At<const uint64_t>(inputs_, seeds);
  view.start_positions = At<const int64_t>(inputs_, starts);
  view.want_bonus = At<const uint8_t>(inputs_, bonus);
  view.draft_tokens = At<const int32_t>(inputs_, tokens);
  view.probs = probs_;
  view.q_format = up.q_format;
  view.q_offsets = At<const int32_t>(inputs_, q_offsets);
  view.q_ids = At<const int32_t>(inputs_, q_ids);
  view.q_probs = At<const float>(inputs_, q_probs);
  view.scratch = probs_ + rows * vocab;
  view.out_accepted = At<int32_t>(outputs_, accepted);
  view.out_num_committed = At<int32_t>(outputs_, committed_count);
  view.out_rejected = At<uint8_t>(outputs_, rejected);
  view.out_error = At<int32_t>(outputs_, error);
  view.out_error_index = At<int32_t>(outputs_, error_index);
  view.out_committed = At<int32_t>(outputs_, committed);
  RETURN_IF_ERROR(kernels::LaunchVerifyBatch(view, stream));

  CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(staging_.data(), outputs_, out.size(), cudaMemcpyDeviceToHost, stream));
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  out.Scatter(staging_.data());
  last_transfer_ = {up.Bytes(), down.Bytes()};
  CollectOutcomes(requests, up, down, &outcomes);
  return outcomes;
}

}  // namespace splitspec::spec
