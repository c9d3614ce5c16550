#include "runtime/model/cuda_kv_cache.h"

#include <cuda_runtime_api.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_check.h"
#include "runtime/model/device_memory.h"

namespace splitspec::model {

CudaKvCache::CudaKvCache(int n_layers, int kv_dim, int max_tokens, int device, cudaStream_t stream)
    : KvCache(n_layers, kv_dim, max_tokens), device_(device), stream_(stream) {}

CudaKvCache::~CudaKvCache() {
  if (rows_ != nullptr) {
    kernels::IgnoreCudaError(cudaSetDevice(device_));
    kernels::IgnoreCudaError(cudaFree(rows_));
  }
}

uint64_t CudaKvCache::bytes_per_position() const {
  return static_cast<uint64_t>(n_layers()) * 2 * kv_dim() * sizeof(uint16_t);
}

uint64_t CudaKvCache::StorageBytes(int positions) const {
  return DeviceKvCacheBytes(n_layers(), kv_dim(), positions);
}

absl::Status CudaKvCache::KeepPath(int /*base*/, absl::Span<const int32_t> /*nodes*/) {
  return absl::UnimplementedError(absl::StrCat(
      "tree drafts (KV cache keep path) are not implemented on the CUDA backend (cuda:", device_,
      "); verify chains there"));
}

absl::Status CudaKvCache::GrowStorage(int new_capacity) {
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  const uint64_t bytes = DeviceKvCacheBytes(n_layers(), kv_dim(), new_capacity);
  void* fresh = nullptr;
  if (cudaMalloc(&fresh, bytes) != cudaSuccess) {
    cudaGetLastError();
    return absl::ResourceExhaustedError(absl::StrCat("cuda:", device_,
                                                     ": no room for a KV cache of ", new_capacity,
                                                     " positions (", bytes, " bytes)"));
  }
  auto* rows = static_cast<uint16_t*>(fresh);
  const int old_capacity = capacity();
  // Only the valid positions move: rows past length() were never written, or hold a
  // truncated sequence's leftovers that no kernel reads again (copying them read
  // uninitialized device memory: compute-sanitizer initcheck, the first H100 run).
  const int kept = std::min(length(), old_capacity);
  if (rows_ != nullptr && kept > 0) {
    // Each (layer, K or V) plane keeps its first `kept` rows at the new stride.
    const size_t row_bytes = static_cast<size_t>(kv_dim()) * sizeof(uint16_t);
    const size_t old_plane = static_cast<size_t>(old_capacity) * row_bytes;
    const size_t new_plane = static_cast<size_t>(new_capacity) * row_bytes;
    const size_t kept_bytes = static_cast<size_t>(kept) * row_bytes;
    // On the backend's stream: after the kernels that wrote the old rows, before those
    // that read the new ones (a legacy-stream copy orders nothing with a non-blocking
    // stream). The old rows are freed only when the copy is done.
    absl::Status copied =
        kernels::CudaStatus(cudaMemcpy2DAsync(rows, new_plane, rows_, old_plane, kept_bytes,
                                              2 * n_layers(), cudaMemcpyDeviceToDevice, stream_),
                            "cudaMemcpy2DAsync(KV cache growth)", __FILE__, __LINE__);
    if (copied.ok()) {
      copied = kernels::CudaStatus(cudaStreamSynchronize(stream_),
                                   "cudaStreamSynchronize(KV cache growth)", __FILE__, __LINE__);
    }
    if (!copied.ok()) {
      kernels::IgnoreCudaError(cudaFree(rows));
      return copied;
    }
  }
  if (rows_ != nullptr) kernels::IgnoreCudaError(cudaFree(rows_));
  rows_ = rows;
  return absl::OkStatus();
}

}  // namespace splitspec::model
