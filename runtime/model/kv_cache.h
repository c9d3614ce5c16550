// The attention key/value cache of one sequence.
//
//   KvCache cache(config.n_layers, config.kv_dim(), /*max_tokens=*/config.context_length);
//   RETURN_IF_ERROR(model.Forward({{&cache, prompt, LogitsMode::kLast}}, &out));
//   ...                                    // verification rejected the last 3 tokens:
//   RETURN_IF_ERROR(cache.Truncate(cache.length() - 3));
//
// Storage: half precision (IEEE fp16, as llama.cpp's default F16 cache). The
// transformer rounds K and V to half before storing them, so storing halves loses
// nothing and a recomputed position still matches bitwise; it halves the bytes every
// attention step reads. Per layer, in blocks of kernels::kKvBlockPositions positions
// (the attention kernels' layout, kernels/cpu/attention.h):
//   keys   [capacity / 64][kv_dim][64]: transposed per block, element c of position
//          p at ((p / 64) * kv_dim + c) * 64 + p % 64
//   values [capacity][kv_dim]: row by row
// grown by doubling up to max_tokens (capacity rounded up to whole blocks). Keys are
// stored after RoPE. Memory per token: bytes_per_position() = n_layers * 2 * kv_dim * 2
// bytes (SmolLM2-135M: 23 KB).
//
// KvCacheType::kQ8_0 (--kv-cache-type q8_0, llama.cpp's -ctk/-ctv q8_0; CPU only): K
// and V quantized to GGUF's Q8_0 when a position is written (blocks of 32 values along
// kv_dim, kernels::QuantizeRowQ8_0: ggml's rule), which changes the model's numerics
// (the user's choice). Per layer, in the layout of kernels/cpu/attention_q8.h:
//   key quants  [capacity / 64][kv_dim / 4][64][4] int8: element c of position p at
//               ((p / 64) * kv_dim / 4 + c / 4) * 256 + (p % 64) * 4 + c % 4
//   key scales  [capacity / 64][kv_dim / 32][64] halves
//   value quants [capacity][kv_dim] int8, value scales [capacity][kv_dim / 32] halves
// bytes_per_position() = n_layers * 2 * kv_dim * 34 / 32 (SmolLM2-135M: 12 KB).
// REQUIRES for q8_0: kv_dim and the head dimension multiples of 32 (the model layer
// checks the head dimension and refuses by name).
//
// Positions [0, length()) are valid. The transformer appends new positions with
// Reserve + the row accessors + Commit; KeepPath moves rows of a tree forward's
// accepted path down; nothing else writes to the cache.
// Thread safety: none; one sequence is used by one forward call at a time
// (concurrent reads of distinct rows during a forward are fine).
#ifndef SPLITSPEC_RUNTIME_MODEL_KV_CACHE_H_
#define SPLITSPEC_RUNTIME_MODEL_KV_CACHE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/attention_q8.h"

namespace splitspec::model {

// How the cache stores K and V (--kv-cache-type).
enum class KvCacheType {
  kF16,   // half precision: exact for the transformer's (half-rounded) rows; the default
  kQ8_0,  // GGUF Q8_0: about half the bytes of f16; changes the numerics
};
// "f16" / "q8_0".
const char* KvCacheTypeName(KvCacheType type);
// "f16" or "q8_0"; else InvalidArgument naming --kv-cache-type and the value.
absl::StatusOr<KvCacheType> ParseKvCacheType(absl::string_view text);
// The --kv-cache-type flag's help text (the same for every binary that takes it).
inline constexpr const char* kKvCacheTypeFlagHelp =
    "how the CPU KV cache stores K and V: f16 (exact, the default) or q8_0 (llama.cpp's "
    "-ctk/-ctv q8_0: ~half the bytes per token, changes the model's numerics)";

// Where a backend's activation buffers and KV caches live (backend.h).
enum class MemorySpace {
  kHost,    // ordinary CPU memory
  kDevice,  // memory of the backend's accelerator
};

class KvCache {
 public:
  // REQUIRES: n_layers >= 1, kv_dim >= 1, max_tokens >= 1; kv_dim % 32 == 0 for
  // kQ8_0. Allocates lazily.
  KvCache(int n_layers, int kv_dim, int max_tokens, KvCacheType type = KvCacheType::kF16);
  // Virtual so that a wrapper model can hand out caches that report their
  // release (target_worker/group_leader_model.h mirrors caches on other ranks).
  virtual ~KvCache() = default;
  KvCache(const KvCache&) = default;
  KvCache& operator=(const KvCache&) = default;
  KvCache(KvCache&&) = default;
  KvCache& operator=(KvCache&&) = default;

  int n_layers() const { return n_layers_; }
  int kv_dim() const { return kv_dim_; }
  int max_tokens() const { return max_tokens_; }
  KvCacheType type() const { return type_; }
  // Number of valid positions.
  int length() const { return length_; }

  // Drops positions [new_length, length()) so that the next token goes to
  // position new_length. Errors: InvalidArgument if new_length < 0 or
  // new_length > length(); the cache is unchanged then. Keeps the memory.
  absl::Status Truncate(int new_length);
  // Truncate(0).
  void Clear() { length_ = 0; }

  // After a tree forward (SequenceInput::tree_parents) that appended the nodes of
  // a tree at slots base, base + 1, ...: keeps the accepted path. Moves the rows
  // of slots base + nodes[j] to slot base + j for every layer, in increasing j
  // (safe in place: nodes[j] >= j), then sets length = base + nodes.size(). The
  // path is usually root first (nodes[0] == 0) and any strictly increasing list
  // of nodes is accepted; an empty one is Truncate(base). Cost: the rows that
  // move (nodes[j] != j) x n_layers; nothing else is touched. Afterwards the rows
  // equal bitwise those a chain forward of the path's tokens would have stored
  // (the tree forward computes each node as its chain does).
  // Errors (the cache unchanged): InvalidArgument naming the value at fault when
  // base is outside [0, length()], or nodes are not strictly increasing from >= 0
  // with base + nodes.back() < length(); Unimplemented where the rows live
  // elsewhere (a CUDA cache, a tensor-parallel group's mirrored cache).
  virtual absl::Status KeepPath(int base, absl::Span<const int32_t> nodes);

  // --- used by the transformer ---
  // Makes room for positions [0, new_length). Errors: OutOfRange naming both
  // numbers if new_length > max_tokens (cache unchanged).
  absl::Status Reserve(int new_length);
  // Stores position `pos` of layer `layer`: key and value are kv_dim floats each,
  // rounded to half precision (exact for values already rounded, as the
  // transformer's are), or quantized to q8_0 (kQ8_0). REQUIRES: pos < the capacity
  // reserved; 0 <= layer < n_layers.
  void WriteRow(int layer, int pos, const float* key, const float* value);
  // Element c of the stored key / value of position pos, as a float (tests, fakes).
  float KeyAt(int layer, int pos, int c) const;
  float ValueAt(int layer, int pos, int c) const;
  // f16 only: block `block` of the keys of a layer: [kv_dim][kKvBlockPositions]
  // halves, for the positions block * kKvBlockPositions onwards (the header's layout).
  const uint16_t* key_block(int layer, int block) const {
    return &keys_[layer][static_cast<size_t>(block) * kv_dim_ * kernels::kKvBlockPositions];
  }
  // The value row of position pos: kv_dim halves; rows follow each other.
  const uint16_t* value_row(int layer, int pos) const {
    return &values_[layer][static_cast<size_t>(pos) * kv_dim_];
  }
  // q8_0 only: the rows of block `block` of a layer, starting at element `offset` of
  // kv_dim (a multiple of 32: a head's first element), in attention_q8.h's layout (vq /
  // vd point at the block's first position).
  kernels::KvBlockQ8Rows q8_block(int layer, int block, int offset) const;
  // Marks positions [0, new_length) valid. REQUIRES: new_length <= reserved capacity.
  void Commit(int new_length) { length_ = new_length; }

  // Bytes held (capacity, not length): StorageBytes(reserved_positions()).
  virtual uint64_t memory_bytes() const;

  // --- memory accounting (runtime/model/kv_budget.h sums these) ---
  // Bytes one position takes: n_layers x (K and V) x kv_dim x the bytes of one
  // stored value, whatever the storage type (ask the cache; never assume 4).
  virtual uint64_t bytes_per_position() const;
  // Bytes the storage takes when it holds `positions` positions (a device cache
  // may round its allocation up).
  // (the host cache stores whole blocks of kernels::kKvBlockPositions positions).
  virtual uint64_t StorageBytes(int positions) const;
  // Positions the storage holds now (>= length(); grown by Reserve, kept by
  // Truncate): what memory_bytes() counts.
  int reserved_positions() const { return capacity_; }
  // The positions Reserve(new_length) would leave reserved: unchanged if they
  // suffice, else max(new_length, 2 x reserved, 64) capped at max_tokens (the
  // doubling growth). REQUIRES: new_length <= max_tokens().
  int ReservedAfter(int new_length) const;
  // memory_bytes() after Reserve(new_length). REQUIRES: new_length <= max_tokens().
  uint64_t BytesAfterReserve(int new_length) const {
    return StorageBytes(ReservedAfter(new_length));
  }

  // Where the rows live. A device cache (a device backend's NewCache) keeps them
  // in device memory: key() and value() must not be called on it; the backend
  // reaches its rows through its own type.
  virtual MemorySpace memory_space() const { return MemorySpace::kHost; }

 protected:
  // Positions the storage holds (>= length()).
  int capacity() const { return capacity_; }
  // Grows the storage to `capacity` positions (> capacity(), <= max_tokens()),
  // keeping rows [0, length()) (the valid ones; rows past them may be dropped). The
  // host cache resizes its vectors (keeping every row); a device cache reallocates
  // device memory and copies the valid rows. Errors leave the cache unchanged.
  virtual absl::Status GrowStorage(int capacity);

 private:
  // Values quantized per WriteRow step (a stack buffer; a multiple of 32).
  static constexpr int kMaxQ8Row = 1024;
  // q8_0: copies position from's rows of a layer to position to.
  void MoveQ8Row(int layer, int from, int to);

  int n_layers_;
  int kv_dim_;
  int max_tokens_;
  KvCacheType type_;
  int length_ = 0;
  int capacity_ = 0;
  std::vector<std::vector<uint16_t>> keys_;    // [n_layers][blocks * kv_dim * 64] halves
  std::vector<std::vector<uint16_t>> values_;  // [n_layers][capacity * kv_dim] halves
  // kQ8_0 (the header's layout); keys_ / values_ then hold the scales.
  std::vector<std::vector<int8_t>> key_quants_;    // [n_layers][capacity * kv_dim]
  std::vector<std::vector<int8_t>> value_quants_;  // [n_layers][capacity * kv_dim]
};

}  // namespace splitspec::model

#endif  // SPLITSPEC_RUNTIME_MODEL_KV_CACHE_H_
