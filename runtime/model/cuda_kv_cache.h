// CudaKvCache: one sequence's KV cache in device memory (CUDA builds only),
// what CudaBackend::NewCache returns.
//
// Per-sequence, not paged: one allocation of fp16 rows [n_layers][2 (K, V)]
// [capacity][kv_dim] (kernels/cuda/transformer_kernels.h), grown by doubling
// (at least 64 positions, at most max_tokens) through KvCache::GrowStorage with
// a device-to-device copy of the rows on the backend's stream (ordered with the
// kernels that wrote the rows and those that read them next; the old rows are
// freed once the copy is done); the values are stored already rounded to
// half precision (backend.h), so fp16 storage is exact. Lengths are KvCache's
// host metadata: Truncate is O(1) and touches no device memory.
#ifndef SPLITSPEC_RUNTIME_MODEL_CUDA_KV_CACHE_H_
#define SPLITSPEC_RUNTIME_MODEL_CUDA_KV_CACHE_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/model/kv_cache.h"

namespace splitspec::model {

class CudaKvCache final : public KvCache {
 public:
  // Allocates nothing until the first Reserve; `device` is the CUDA ordinal, `stream`
  // the backend's stream (it must outlive every Reserve that grows the cache).
  CudaKvCache(int n_layers, int kv_dim, int max_tokens, int device, cudaStream_t stream);
  ~CudaKvCache() override;
  CudaKvCache(const CudaKvCache&) = delete;
  CudaKvCache& operator=(const CudaKvCache&) = delete;

  MemorySpace memory_space() const override { return MemorySpace::kDevice; }
  // Half-precision rows: n_layers x 2 x kv_dim x 2 bytes per position; an
  // allocation is rounded up to kDeviceAlignment (DeviceKvCacheBytes).
  uint64_t bytes_per_position() const override;
  uint64_t StorageBytes(int positions) const override;
  // Unimplemented, by name: tree drafts do not run on the CUDA backend yet.
  absl::Status KeepPath(int base, absl::Span<const int32_t> nodes) override;

  // The rows (fp16 bits) and the positions they hold; null / 0 before the first Reserve.
  uint16_t* device_rows() const { return rows_; }
  int storage_positions() const { return capacity(); }

 protected:
  // Errors: ResourceExhausted naming the bytes when cudaMalloc fails; Internal
  // for a failed copy. The old rows stay in place on error.
  absl::Status GrowStorage(int capacity) override;

 private:
  int device_;
  cudaStream_t stream_;
  uint16_t* rows_ = nullptr;
};

}  // namespace splitspec::model

#endif  // SPLITSPEC_RUNTIME_MODEL_CUDA_KV_CACHE_H_
