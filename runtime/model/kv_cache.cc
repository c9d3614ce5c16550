#include "runtime/model/kv_cache.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/quant_blocks.h"
#include "runtime/base/logging.h"

namespace splitspec::model {
namespace {
constexpr int kBlock = kernels::kKvBlockPositions;
}  // namespace

KvCache::KvCache(int n_layers, int kv_dim, int max_tokens)
    : n_layers_(n_layers), kv_dim_(kv_dim), max_tokens_(max_tokens) {
  SPLITSPEC_CHECK(n_layers >= 1 && kv_dim >= 1 && max_tokens >= 1)
      << "n_layers=" << n_layers << " kv_dim=" << kv_dim << " max_tokens=" << max_tokens;
  keys_.resize(n_layers);
  values_.resize(n_layers);
}

absl::Status KvCache::Truncate(int new_length) {
  if (new_length < 0 || new_length > length_) {
    return absl::InvalidArgumentError(
        absl::StrCat("KV cache truncate to ", new_length, " outside [0, ", length_, "]"));
  }
  length_ = new_length;
  return absl::OkStatus();
}

absl::Status KvCache::KeepPath(int base, absl::Span<const int32_t> nodes) {
  if (base < 0 || base > length_) {
    return absl::InvalidArgumentError(
        absl::StrCat("KV cache keep path: base ", base, " outside [0, ", length_, "]"));
  }
  for (size_t j = 0; j < nodes.size(); ++j) {
    const int lowest = j == 0 ? 0 : nodes[j - 1] + 1;
    if (nodes[j] < lowest || base + static_cast<int64_t>(nodes[j]) >= length_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "KV cache keep path: nodes[", j, "] = ", nodes[j], " not in [", lowest, ", ",
          length_ - base, ") (strictly increasing, below the ", length_ - base,
          " slots after base ", base, ")"));
    }
  }
  for (size_t j = 0; j < nodes.size(); ++j) {
    if (nodes[j] == static_cast<int32_t>(j)) continue;
    const int from = base + nodes[j];
    const int to = base + static_cast<int>(j);
    for (int l = 0; l < n_layers_; ++l) {
      uint16_t* keys = keys_[l].data();
      const uint16_t* from_key = keys + static_cast<size_t>(from / kBlock) * kv_dim_ * kBlock;
      uint16_t* to_key = keys + static_cast<size_t>(to / kBlock) * kv_dim_ * kBlock;
      for (int c = 0; c < kv_dim_; ++c) {
        to_key[static_cast<size_t>(c) * kBlock + to % kBlock] =
            from_key[static_cast<size_t>(c) * kBlock + from % kBlock];
      }
      uint16_t* values = values_[l].data();
      std::copy_n(values + static_cast<size_t>(from) * kv_dim_, kv_dim_,
                  values + static_cast<size_t>(to) * kv_dim_);
    }
  }
  length_ = base + static_cast<int>(nodes.size());
  return absl::OkStatus();
}

absl::Status KvCache::Reserve(int new_length) {
  if (new_length > max_tokens_) {
    return absl::OutOfRangeError(absl::StrCat(
        "sequence of ", new_length, " tokens exceeds the KV cache limit of ", max_tokens_));
  }
  if (new_length <= capacity_) return absl::OkStatus();
  const int capacity = ReservedAfter(new_length);
  const absl::Status grown = GrowStorage(capacity);
  if (grown.ok()) capacity_ = capacity;
  return grown;
}

namespace {
// Positions stored for a capacity: whole blocks (the keys' layout needs them; resizing
// keeps earlier blocks in place because a block's offset does not depend on capacity).
size_t StoredPositions(int capacity) {
  return static_cast<size_t>((capacity + kBlock - 1) / kBlock) * kBlock;
}
}  // namespace

absl::Status KvCache::GrowStorage(int capacity) {
  for (int l = 0; l < n_layers_; ++l) {
    keys_[l].resize(StoredPositions(capacity) * kv_dim_);
    values_[l].resize(StoredPositions(capacity) * kv_dim_);
  }
  return absl::OkStatus();
}

int KvCache::ReservedAfter(int new_length) const {
  if (new_length <= capacity_) return capacity_;
  return std::min(max_tokens_, std::max({new_length, 2 * capacity_, 64}));
}

void KvCache::WriteRow(int layer, int pos, const float* key, const float* value) {
  uint16_t* kt = &keys_[layer][static_cast<size_t>(pos / kBlock) * kv_dim_ * kBlock + pos % kBlock];
  uint16_t* v = &values_[layer][static_cast<size_t>(pos) * kv_dim_];
  for (int c = 0; c < kv_dim_; ++c) {
    kt[static_cast<size_t>(c) * kBlock] = kernels::FloatToFp16(key[c]);
    v[c] = kernels::FloatToFp16(value[c]);
  }
}

float KvCache::KeyAt(int layer, int pos, int c) const {
  return kernels::Fp16ToFloat(key_block(layer, pos / kBlock)[c * kBlock + pos % kBlock]);
}

float KvCache::ValueAt(int layer, int pos, int c) const {
  return kernels::Fp16ToFloat(value_row(layer, pos)[c]);
}

uint64_t KvCache::bytes_per_position() const {
  using StoredValue = decltype(keys_)::value_type::value_type;  // follows the storage type
  return static_cast<uint64_t>(kv_dim_) * sizeof(StoredValue) * 2 * n_layers_;
}

uint64_t KvCache::StorageBytes(int positions) const {
  return positions == 0 ? 0 : bytes_per_position() * StoredPositions(positions);
}

uint64_t KvCache::memory_bytes() const { return StorageBytes(capacity_); }

}  // namespace splitspec::model
