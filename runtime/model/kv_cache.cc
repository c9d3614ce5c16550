#include "runtime/model/kv_cache.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/quant_blocks.h"
#include "runtime/base/logging.h"

namespace splitspec::model {
namespace {
constexpr int kBlock = kernels::kKvBlockPositions;
constexpr int kQ8 = kernels::kQ8BlockValues;

// q8_0 layout (kv_cache.h): where element c of position p's key quant and the scale of
// its block c / 32 sit in a layer's arrays.
size_t KeyQuantIndex(int kv_dim, int pos, int c) {
  return (static_cast<size_t>(pos / kBlock) * (kv_dim / 4) + c / 4) * (4 * kBlock) +
         (pos % kBlock) * 4 + c % 4;
}
size_t KeyScaleIndex(int kv_dim, int pos, int scale) {
  return (static_cast<size_t>(pos / kBlock) * (kv_dim / kQ8) + scale) * kBlock + pos % kBlock;
}
}  // namespace

const char* KvCacheTypeName(KvCacheType type) {
  return type == KvCacheType::kQ8_0 ? "q8_0" : "f16";
}

absl::StatusOr<KvCacheType> ParseKvCacheType(absl::string_view text) {
  if (text == "f16") return KvCacheType::kF16;
  if (text == "q8_0") return KvCacheType::kQ8_0;
  return absl::InvalidArgumentError(
      absl::StrCat("--kv-cache-type '", text, "': not f16 or q8_0"));
}

KvCache::KvCache(int n_layers, int kv_dim, int max_tokens, KvCacheType type)
    : n_layers_(n_layers), kv_dim_(kv_dim), max_tokens_(max_tokens), type_(type) {
  SPLITSPEC_CHECK(n_layers >= 1 && kv_dim >= 1 && max_tokens >= 1 &&
                  (type != KvCacheType::kQ8_0 || kv_dim % kQ8 == 0))
      << "n_layers=" << n_layers << " kv_dim=" << kv_dim << " max_tokens=" << max_tokens
      << " type=" << KvCacheTypeName(type);
  keys_.resize(n_layers);
  values_.resize(n_layers);
  if (type == KvCacheType::kQ8_0) {
    key_quants_.resize(n_layers);
    value_quants_.resize(n_layers);
  }
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
      if (type_ == KvCacheType::kQ8_0) {
        MoveQ8Row(l, from, to);
        continue;
      }
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
  const size_t positions = StoredPositions(capacity);
  for (int l = 0; l < n_layers_; ++l) {
    if (type_ == KvCacheType::kQ8_0) {
      key_quants_[l].resize(positions * kv_dim_);
      value_quants_[l].resize(positions * kv_dim_);
      keys_[l].resize(positions * (kv_dim_ / kQ8));
      values_[l].resize(positions * (kv_dim_ / kQ8));
    } else {
      keys_[l].resize(positions * kv_dim_);
      values_[l].resize(positions * kv_dim_);
    }
  }
  return absl::OkStatus();
}

void KvCache::MoveQ8Row(int layer, int from, int to) {
  int8_t* kq = key_quants_[layer].data();
  uint16_t* kd = keys_[layer].data();
  for (int c = 0; c < kv_dim_; ++c) kq[KeyQuantIndex(kv_dim_, to, c)] = kq[KeyQuantIndex(kv_dim_, from, c)];
  for (int b = 0; b < kv_dim_ / kQ8; ++b) {
    kd[KeyScaleIndex(kv_dim_, to, b)] = kd[KeyScaleIndex(kv_dim_, from, b)];
  }
  int8_t* vq = value_quants_[layer].data();
  uint16_t* vd = values_[layer].data();
  std::copy_n(vq + static_cast<size_t>(from) * kv_dim_, kv_dim_, vq + static_cast<size_t>(to) * kv_dim_);
  std::copy_n(vd + static_cast<size_t>(from) * (kv_dim_ / kQ8), kv_dim_ / kQ8,
              vd + static_cast<size_t>(to) * (kv_dim_ / kQ8));
}

int KvCache::ReservedAfter(int new_length) const {
  if (new_length <= capacity_) return capacity_;
  return std::min(max_tokens_, std::max({new_length, 2 * capacity_, 64}));
}

void KvCache::WriteRow(int layer, int pos, const float* key, const float* value) {
  if (type_ == KvCacheType::kQ8_0) {
    int8_t quants[kMaxQ8Row];
    uint16_t scales[kMaxQ8Row / kQ8];
    for (int start = 0; start < kv_dim_; start += kMaxQ8Row) {  // kMaxQ8Row values at a time
      const int n = std::min(kMaxQ8Row, kv_dim_ - start);
      kernels::QuantizeRowQ8_0(key + start, n, quants, scales);
      int8_t* kq = key_quants_[layer].data();
      uint16_t* kd = keys_[layer].data();
      for (int c = 0; c < n; ++c) kq[KeyQuantIndex(kv_dim_, pos, start + c)] = quants[c];
      for (int b = 0; b < n / kQ8; ++b) kd[KeyScaleIndex(kv_dim_, pos, start / kQ8 + b)] = scales[b];
      kernels::QuantizeRowQ8_0(value + start, n,
                               &value_quants_[layer][static_cast<size_t>(pos) * kv_dim_ + start],
                               &values_[layer][static_cast<size_t>(pos) * (kv_dim_ / kQ8) +
                                               start / kQ8]);
    }
    return;
  }
  uint16_t* kt = &keys_[layer][static_cast<size_t>(pos / kBlock) * kv_dim_ * kBlock + pos % kBlock];
  kernels::FloatsToFp16(value, kv_dim_, &values_[layer][static_cast<size_t>(pos) * kv_dim_]);
  // Keys are stored by channel, kBlock positions apart: converted together, then placed.
  constexpr int kChunk = 256;
  uint16_t halves[kChunk];
  for (int start = 0; start < kv_dim_; start += kChunk) {
    const int n = std::min(kChunk, kv_dim_ - start);
    kernels::FloatsToFp16(key + start, n, halves);
    for (int c = 0; c < n; ++c) kt[static_cast<size_t>(start + c) * kBlock] = halves[c];
  }
}

float KvCache::KeyAt(int layer, int pos, int c) const {
  if (type_ == KvCacheType::kQ8_0) {
    return kernels::Fp16ToFloat(keys_[layer][KeyScaleIndex(kv_dim_, pos, c / kQ8)]) *
           static_cast<float>(key_quants_[layer][KeyQuantIndex(kv_dim_, pos, c)]);
  }
  return kernels::Fp16ToFloat(key_block(layer, pos / kBlock)[c * kBlock + pos % kBlock]);
}

float KvCache::ValueAt(int layer, int pos, int c) const {
  if (type_ == KvCacheType::kQ8_0) {
    return kernels::Fp16ToFloat(values_[layer][static_cast<size_t>(pos) * (kv_dim_ / kQ8) + c / kQ8]) *
           static_cast<float>(value_quants_[layer][static_cast<size_t>(pos) * kv_dim_ + c]);
  }
  return kernels::Fp16ToFloat(value_row(layer, pos)[c]);
}

kernels::KvBlockQ8Rows KvCache::q8_block(int layer, int block, int offset) const {
  const int pos = block * kBlock;
  kernels::KvBlockQ8Rows rows;
  rows.kq = &key_quants_[layer][KeyQuantIndex(kv_dim_, pos, offset)];
  rows.kd = &keys_[layer][KeyScaleIndex(kv_dim_, pos, offset / kQ8)];
  rows.vq = &value_quants_[layer][static_cast<size_t>(pos) * kv_dim_ + offset];
  rows.vd = &values_[layer][static_cast<size_t>(pos) * (kv_dim_ / kQ8) + offset / kQ8];
  rows.vq_stride = kv_dim_;
  rows.vd_stride = kv_dim_ / kQ8;
  return rows;
}

uint64_t KvCache::bytes_per_position() const {
  const uint64_t per_layer =
      type_ == KvCacheType::kQ8_0
          ? 2 * (static_cast<uint64_t>(kv_dim_) * sizeof(int8_t) +
                 static_cast<uint64_t>(kv_dim_ / kQ8) * sizeof(uint16_t))
          : 2 * static_cast<uint64_t>(kv_dim_) * sizeof(uint16_t);
  return per_layer * n_layers_;
}

uint64_t KvCache::StorageBytes(int positions) const {
  return positions == 0 ? 0 : bytes_per_position() * StoredPositions(positions);
}

uint64_t KvCache::memory_bytes() const { return StorageBytes(capacity_); }

}  // namespace splitspec::model
