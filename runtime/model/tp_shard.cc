#include "runtime/model/tp_shard.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/ggml_types.h"
#include "kernels/cpu/matmul.h"
#include "runtime/base/huge_page_memory.h"
#include "runtime/base/logging.h"
#include "runtime/base/status_macros.h"

namespace splitspec::model {
namespace {

IndexRange EvenSplit(int64_t total, int size, int rank) {
  return {total / size * rank, total / size * (rank + 1)};
}

// As even as possible: the first total % size ranks get one more.
IndexRange BalancedSplit(int64_t total, int size, int rank) {
  const int64_t base = total / size;
  const int64_t extra = total % size;
  const int64_t begin = base * rank + std::min<int64_t>(rank, extra);
  return {begin, begin + base + (rank < extra ? 1 : 0)};
}

// The KV heads the query heads [heads) read: with GQA groups of `group` query
// heads per KV head, a group cut by a rank boundary puts its KV head on both
// ranks (replicated: each computes and caches it).
IndexRange KvHeadsFor(IndexRange heads, int64_t group) {
  return {heads.begin / group, (heads.end - 1) / group + 1};
}

// Every rank's column range [unit * begin, unit * end) of `m` must start and
// end on a quantization block.
absl::Status CheckColumnSplit(const char* tensor, const WeightMatrix& m, int size, int64_t units,
                              int64_t unit) {
  const kernels::GgmlTypeTraits& traits = kernels::GetGgmlTypeTraits(m.type);
  for (int r = 0; r < size; ++r) {
    const IndexRange part = BalancedSplit(units, size, r);
    if ((part.begin * unit) % traits.block_size != 0 ||
        (part.end * unit) % traits.block_size != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor-parallel size ", size, " gives rank ", r, " columns [", part.begin * unit, ", ",
          part.end * unit, ") of the ", m.cols, " input columns of ", tensor, " (type ",
          traits.name, "): not whole ", traits.block_size,
          "-element quantization blocks, so the column split is refused"));
    }
  }
  return absl::OkStatus();
}

// Rows [range) of `m`: a contiguous part of the same bytes.
WeightMatrix RowSlice(const WeightMatrix& m, IndexRange range) {
  return WeightMatrix{m.type, m.row(range.begin), range.size(), m.cols, nullptr, m.converted};
}

// Columns [range) of `m`, copied block-row by block-row into `bytes`; all of
// them (a one-rank group) are `m` itself, borrowed like a row slice.
WeightMatrix ColumnSlice(const WeightMatrix& m, IndexRange range, std::vector<uint8_t>* bytes) {
  if (range.begin == 0 && range.end == m.cols) return m;
  const size_t offset = kernels::RowBytes(m.type, range.begin);
  const size_t row_bytes = kernels::RowBytes(m.type, range.size());
  bytes->resize(row_bytes * m.rows);
  for (int64_t r = 0; r < m.rows; ++r) {
    std::memcpy(bytes->data() + r * row_bytes, m.row(r) + offset, row_bytes);
  }
  return WeightMatrix{m.type, bytes->data(), m.rows, range.size(), nullptr, nullptr};
}

std::vector<float> VectorSlice(const std::vector<float>& v, IndexRange range) {
  if (v.empty()) return {};
  return std::vector<float>(v.begin() + range.begin, v.begin() + range.end);
}

uint64_t MatrixBytes(const WeightMatrix& m) {
  return static_cast<uint64_t>(m.rows) * kernels::RowBytes(m.type, m.cols);
}

}  // namespace

absl::StatusOr<TensorParallelShard> PlanTensorParallelShard(const ModelConfig& config,
                                                            const ModelWeights& weights, int size,
                                                            int rank) {
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(absl::StrCat("tensor-parallel rank ", rank, " of size ", size,
                                                   ": need size >= 1 and 0 <= rank < size"));
  }
  if (size > config.n_heads) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor-parallel size ", size, " exceeds the ", config.n_heads,
                     " attention heads (every rank needs at least one)"));
  }
  if (size > 1 && config.post_norms) {
    // The post-norms act on a sublayer's whole output, after the all-reduce; the
    // backends apply them inside the sublayer, which is only right on one rank.
    return absl::UnimplementedError(absl::StrCat(
        "tensor parallelism is not supported for ", config.architecture,
        " (its post-attention and post-feed-forward norms need the reduced output)"));
  }
  if (config.n_ff % size != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor-parallel size ", size, " does not divide the feed-forward size ", config.n_ff));
  }
  if (size > config.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor-parallel size ", size, " exceeds the vocabulary of ", config.vocab_size));
  }
  for (const LayerWeights& l : weights.layers) {
    RETURN_IF_ERROR(
        CheckColumnSplit("attn_output.weight", l.wo, size, config.n_heads, config.head_dim));
    RETURN_IF_ERROR(CheckColumnSplit("ffn_down.weight", l.down, size, config.n_ff, 1));
  }
  TensorParallelShard shard;
  shard.size = size;
  shard.rank = rank;
  shard.heads = BalancedSplit(config.n_heads, size, rank);
  shard.kv_heads = KvHeadsFor(shard.heads, config.n_heads / config.n_kv_heads);
  shard.ff = EvenSplit(config.n_ff, size, rank);
  shard.vocab_per_rank = (config.vocab_size + size - 1) / size;
  shard.vocab = {std::min<int64_t>(config.vocab_size, shard.vocab_per_rank * rank),
                 std::min<int64_t>(config.vocab_size, shard.vocab_per_rank * (rank + 1))};
  return shard;
}

std::unique_ptr<ShardedWeights> ShardWeights(const ModelWeights& weights,
                                             const TensorParallelShard& shard,
                                             const ModelConfig& config) {
  auto out = std::make_unique<ShardedWeights>();
  out->full = &weights;
  const int64_t hd = config.head_dim;
  const IndexRange q_rows{shard.heads.begin * hd, shard.heads.end * hd};
  const IndexRange kv_rows{shard.kv_heads.begin * hd, shard.kv_heads.end * hd};
  out->layers.resize(weights.layers.size());
  for (size_t i = 0; i < weights.layers.size(); ++i) {
    const LayerWeights& l = weights.layers[i];
    ShardedLayerWeights& s = out->layers[i];
    s.attn_norm = &l.attn_norm;
    s.wq = RowSlice(l.wq, q_rows);
    s.wk = RowSlice(l.wk, kv_rows);
    s.wv = RowSlice(l.wv, kv_rows);
    s.bq = VectorSlice(l.bq, q_rows);
    s.bk = VectorSlice(l.bk, kv_rows);
    s.bv = VectorSlice(l.bv, kv_rows);
    s.wo = ColumnSlice(l.wo, q_rows, &s.wo_bytes);
    s.ffn_norm = &l.ffn_norm;
    s.gate = RowSlice(l.gate, shard.ff);
    s.up = RowSlice(l.up, shard.ff);
    s.down = ColumnSlice(l.down, shard.ff, &s.down_bytes);
  }
  out->output = RowSlice(weights.output, shard.vocab);
  return out;
}

void InterleaveForCpu(ShardedWeights* weights) {
  std::vector<WeightMatrix*> matrices;
  for (ShardedLayerWeights& l : weights->layers) {
    for (WeightMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.gate, &l.up, &l.down}) {
      matrices.push_back(m);
    }
  }
  matrices.push_back(&weights->output);
  // Each copy 64-byte aligned, so that the kernels' 64-byte loads never straddle cache
  // lines. All in one allocation: every decode step streams them all, and together they
  // reach the 2 MiB from which the memory gets huge pages (runtime/base/
  // huge_page_memory.h: fewer TLB misses), which most single matrices do not.
  std::vector<size_t> offsets(matrices.size(), 0);
  size_t total = 0;
  for (size_t i = 0; i < matrices.size(); ++i) {
    const WeightMatrix& m = *matrices[i];
    if (!kernels::RunsOnInterleavedRows(m.type) || m.interleaved != nullptr) continue;
    offsets[i] = total;
    total += (kernels::InterleavedBytes(m.type, m.rows, m.cols) + 63) / 64 * 64;
  }
  if (total == 0) return;
  auto* arena = static_cast<uint8_t*>(AllocateHugePageAligned(total));
  const std::shared_ptr<const uint8_t> owner(arena, [total](const uint8_t* p) {
    FreeHugePageAligned(const_cast<uint8_t*>(p), total);
  });
  for (size_t i = 0; i < matrices.size(); ++i) {
    WeightMatrix* m = matrices[i];
    if (!kernels::RunsOnInterleavedRows(m->type) || m->interleaved != nullptr) continue;
    kernels::InterleaveRows(m->type, m->data, m->rows, m->cols, arena + offsets[i]);
    m->interleaved = std::shared_ptr<const uint8_t>(owner, arena + offsets[i]);  // aliasing
  }
}

uint64_t ShardedWeights::DecodeBytesPerToken() const {
  uint64_t bytes =
      kernels::RowBytes(full->token_embd.type, full->token_embd.cols) + MatrixBytes(output);
  for (const ShardedLayerWeights& l : layers) {
    for (const WeightMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.gate, &l.up, &l.down}) {
      bytes += MatrixBytes(*m);
    }
  }
  return bytes;
}

}  // namespace splitspec::model
