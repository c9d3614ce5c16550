// CpuBackend's attention: the tasks of a forward call over the half-precision caches.
//
// Default order (kernels/cpu/attention.h): each query's partial results over fixed
// blocks of 64 cached positions, merged in increasing block order. Two ways to split
// the work, chosen per run of one sequence's tokens, with the same bits:
//   - a few tokens (decode, a verification block: at most kBlockSplitTokens): tasks are
//     (KV head, range of blocks); every query of the run and of the KV head's group is
//     evaluated against each block while it is in cache (each K and V row read once
//     per call); the partials land in partials_ and a second pass merges them per query.
//   - a prefill chunk: tasks are (KV head, tile of kPrefillTileTokens tokens); a task
//     walks the blocks up to its last token's position (causal: later blocks are never
//     touched, a block's later positions are masked) and merges as it goes.
// SPLITSPEC_ATTENTION_ORDER=llama.cpp runs llama.cpp's order instead
// (transformer_ops.h AttendHeadGroup) on float copies of the rows: the reference mode
// of the llama.cpp agreement check, slower.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/quant_blocks.h"
#include "runtime/model/cpu_backend.h"
#include "runtime/model/transformer_ops.h"

namespace splitspec::model {
namespace {

constexpr int kBlock = kernels::kKvBlockPositions;
// Runs of at most this many tokens split their blocks across threads.
constexpr int64_t kBlockSplitTokens = 16;
// Blocks per task of a split run (256 positions: a task's K and V stay in L2).
constexpr int kBlocksPerTask = 4;
// Tokens per prefill task.
constexpr int64_t kPrefillTileTokens = 16;
// Tokens per task in llama.cpp's order (its queries share each row they read).
constexpr int64_t kLlamaCppChunk = 16;

}  // namespace

CpuAttentionOrder ActiveCpuAttentionOrder() {
  static const CpuAttentionOrder order = [] {
    const char* forced = std::getenv("SPLITSPEC_ATTENTION_ORDER");
    if (forced == nullptr || std::strcmp(forced, "blocks") == 0) return CpuAttentionOrder::kBlocks;
    if (std::strcmp(forced, "llama.cpp") == 0) return CpuAttentionOrder::kLlamaCpp;
    std::fprintf(stderr, "SPLITSPEC_ATTENTION_ORDER=%s: not blocks or llama.cpp; using blocks\n",
                 forced);
    return CpuAttentionOrder::kBlocks;
  }();
  return order;
}

const char* CpuAttentionOrderName(CpuAttentionOrder order) {
  return order == CpuAttentionOrder::kLlamaCpp ? "llama.cpp" : "blocks";
}

void CpuBackend::RopeAndStore(int layer) {
  const int pairs = config_.rope_dim / 2;
  const int heads = static_cast<int>(shard_.heads.size());
  const int kv_heads = static_cast<int>(shard_.kv_heads.size());
  const bool sliding = config_.IsSlidingLayer(layer);
  const float* cos_angles = sliding ? swa_rope_cos_.data() : rope_cos_.data();
  const float* sin_angles = sliding ? swa_rope_sin_.data() : rope_sin_.data();
  for (int64_t t = 0; t < tokens(); ++t) {
    internal::PrepareAttentionInputs(config_, &cos_angles[t * pairs], &sin_angles[t * pairs], heads,
                                     kv_heads, &q_[t * q_dim_], &k_[t * kv_dim_], &v_[t * kv_dim_]);
    KvCache* cache = plan_->batch[plan_->token_seq[t]].cache;
    cache->WriteRow(layer, plan_->token_slot[t], &k_[t * kv_dim_], &v_[t * kv_dim_]);
    if (cache->type() == KvCacheType::kQ8_0) {  // its queries as the q8_0 kernel takes them
      const int64_t need = tokens() * q_dim_;
      if (static_cast<int64_t>(q8_quants_.size()) < need) {
        q8_quants_.resize(need);
        q8_scales_.resize(need / kernels::kQ8BlockValues);
      }
      for (int h = 0; h < heads; ++h) {
        const int64_t at = t * q_dim_ + static_cast<int64_t>(h) * config_.head_dim;
        kernels::QuantizeQueryQ8_0(&q_[at], config_.head_dim, &q8_quants_[at],
                                   &q8_scales_[at / kernels::kQ8BlockValues]);
      }
    }
  }
}

void CpuBackend::PlanAttentionTasks() {
  attention_tasks_.clear();
  merge_tasks_.clear();
  const int kv_heads = static_cast<int>(shard_.kv_heads.size());
  const int64_t t_count = tokens();
  const bool llama_cpp = ActiveCpuAttentionOrder() == CpuAttentionOrder::kLlamaCpp;
  int64_t partials = 0;  // floats of partials_ planned so far
  query_token_.resize(t_count);
  for (int64_t t = 0; t < t_count; ++t) query_token_[t] = t;
  int64_t begin = 0;
  while (begin < t_count) {  // one run: consecutive tokens of one sequence
    int64_t end = begin + 1;
    while (end < t_count && plan_->token_seq[end] == plan_->token_seq[begin]) ++end;
    const int64_t run = end - begin;
    if (!plan_->batch[plan_->token_seq[begin]].tree_parents.empty()) {
      PlanTreeTasks(begin, end, &partials);
    } else if (llama_cpp) {
      for (int64_t b = begin; b < end; b += kLlamaCppChunk) {
        for (int kv = 0; kv < kv_heads; ++kv) {
          attention_tasks_.push_back(
              {AttentionTask::kLlamaCpp, b, std::min(end, b + kLlamaCppChunk), kv, 0, 0, 0});
        }
      }
    } else if (run <= kBlockSplitTokens) {
      const int blocks = plan_->token_pos[end - 1] / kBlock + 1;
      for (int kv = 0; kv < kv_heads; ++kv) {
        for (int b = 0; b < blocks; b += kBlocksPerTask) {
          attention_tasks_.push_back({AttentionTask::kBlocks, begin, end, kv, b,
                                      std::min(blocks, b + kBlocksPerTask), partials, begin, end});
        }
        merge_tasks_.push_back(
            {AttentionTask::kMerge, begin, end, kv, 0, blocks, partials, begin, end});
      }
      partials += static_cast<int64_t>(blocks) * kv_heads * run *
                  (config_.n_heads / config_.n_kv_heads) *
                  kernels::KvBlockPartialFloats(config_.head_dim);
    } else {
      // Latest tiles first: they walk the most blocks (balance across threads).
      for (int64_t e = end; e > begin; e -= kPrefillTileTokens) {
        for (int kv = 0; kv < kv_heads; ++kv) {
          attention_tasks_.push_back(
              {AttentionTask::kPrefill, std::max(begin, e - kPrefillTileTokens), e, kv, 0, 0, 0});
        }
      }
    }
    begin = end;
  }
  if (static_cast<int64_t>(partials_.size()) < partials) partials_.resize(partials);
}

// A tree sequence's tokens (language_model.h, tree_parents). Node i sits at position
// p = L + depth(i) and must attend exactly as the chain root..i does (bitwise: the block
// order of kernels/cpu/attention.h puts position p in block p / 64 at lane p % 16, so
// where a row sits decides the sums). The committed blocks [0, L / 64) are the same for
// every node and the chain: every node attends them through the cache together (kBlocks
// tasks over all the tree's queries, ordered by position so that AttendBlock's ranges
// hold). The blocks from L / 64 to p / 64 differ per node: one kTreeTail task per node
// gathers them, laid out at the chain's positions (the committed rows [64 (L / 64), L)
// and the node's ancestors' rows), into scratch and runs the unchanged kernel on it; a
// node whose ancestors sit at slots L, L + 1, ... (the first branch of a depth-first
// tree, a chain) reads the cache directly. The gather is what keeps the kernels and
// their bits untouched; it copies (L % 64 + depth + 1) rows per node and layer, small
// beside the node's matmuls. The merge tasks are a split run's.
void CpuBackend::PlanTreeTasks(int64_t begin, int64_t end, int64_t* partials) {
  std::stable_sort(query_token_.begin() + begin, query_token_.begin() + end,
                   [&](int64_t a, int64_t b) { return plan_->token_pos[a] < plan_->token_pos[b]; });
  const int kv_heads = static_cast<int>(shard_.kv_heads.size());
  if (ActiveCpuAttentionOrder() == CpuAttentionOrder::kLlamaCpp) {
    for (int64_t k = begin; k < end; ++k) {  // one node: its own rows (TreePathSlots)
      for (int kv = 0; kv < kv_heads; ++kv) {
        attention_tasks_.push_back({AttentionTask::kLlamaCpp, k, k + 1, kv, 0, 0, 0});
      }
    }
    return;
  }
  const int tail_block = plan_->token_slot[begin] / kBlock;  // the root's: L / 64
  const int blocks = plan_->token_pos[query_token_[end - 1]] / kBlock + 1;
  for (int kv = 0; kv < kv_heads; ++kv) {
    for (int b = 0; b < tail_block; b += kBlocksPerTask) {
      attention_tasks_.push_back({AttentionTask::kBlocks, begin, end, kv, b,
                                  std::min(tail_block, b + kBlocksPerTask), *partials, begin,
                                  end});
    }
    merge_tasks_.push_back(
        {AttentionTask::kMerge, begin, end, kv, 0, blocks, *partials, begin, end});
  }
  for (int64_t k = begin; k < end; ++k) {
    attention_tasks_.push_back({AttentionTask::kTreeTail, k, k + 1, -1, tail_block,
                                plan_->token_pos[query_token_[k]] / kBlock + 1, *partials, begin,
                                end});
  }
  *partials += static_cast<int64_t>(blocks) * kv_heads * (end - begin) *
               (config_.n_heads / config_.n_kv_heads) *
               kernels::KvBlockPartialFloats(config_.head_dim);
}

void CpuBackend::TreePathSlots(int64_t t, std::vector<int>* slots) const {
  slots->clear();
  const SequenceInput& in = plan_->batch[plan_->token_seq[t]];
  if (in.tree_parents.empty()) return;
  const int length = in.cache->length();  // L: the forward commits lengths at its end
  for (int i = plan_->token_slot[t] - length; i >= 0; i = in.tree_parents[i]) {
    slots->push_back(length + i);
  }
  std::reverse(slots->begin(), slots->end());
}

void CpuBackend::AttendTreeTail(int layer, const AttentionTask& task, int thread) {
  const int64_t t = query_token_[task.token_begin];
  const KvCache& cache = *plan_->batch[plan_->token_seq[t]].cache;
  std::vector<int>& path = thread_path_[thread];
  TreePathSlots(t, &path);
  const int length = path.front();
  bool in_place = true;  // the ancestors at slots L, L + 1, ...: the cache is the chain's
  for (size_t k = 0; k < path.size(); ++k) {
    in_place = in_place && path[k] == length + static_cast<int>(k);
  }
  const int first_pos = task.block_begin * kBlock;
  const int nb = task.block_end - task.block_begin;
  const size_t block_keys = static_cast<size_t>(kv_dim_) * kBlock;  // halves of a block's keys
  uint16_t* keys = nullptr;
  uint16_t* values = nullptr;
  if (!in_place) {
    std::vector<uint16_t>& rows = thread_tree_rows_[thread];
    rows.resize(2 * nb * block_keys);
    keys = rows.data();
    values = keys + nb * block_keys;
    // The committed rows of the first block (positions [first_pos, L)), then the path's.
    const int committed = length - first_pos;
    if (committed > 0) {
      const uint16_t* kt = cache.key_block(layer, task.block_begin);
      for (int64_t c = 0; c < kv_dim_; ++c) {
        std::memcpy(keys + c * kBlock, kt + c * kBlock, committed * sizeof(uint16_t));
      }
      std::memcpy(values, cache.value_row(layer, first_pos),
                  committed * kv_dim_ * sizeof(uint16_t));
    }
    for (size_t k = 0; k < path.size(); ++k) {
      const int p = length + static_cast<int>(k) - first_pos;  // in the scratch blocks
      const int slot = path[k];
      const uint16_t* from = cache.key_block(layer, slot / kBlock) + slot % kBlock;
      uint16_t* to = keys + (p / kBlock) * block_keys + p % kBlock;
      for (int64_t c = 0; c < kv_dim_; ++c) to[c * kBlock] = from[c * kBlock];
      std::memcpy(values + static_cast<int64_t>(p) * kv_dim_, cache.value_row(layer, slot),
                  kv_dim_ * sizeof(uint16_t));
    }
  }
  auto rows_of = [&](int b) -> KvBlockRows {
    if (b >= task.block_end) return {};
    if (in_place) return CacheBlockRows(cache, layer, b);
    const int v = b - task.block_begin;
    return {keys + v * block_keys, values + static_cast<int64_t>(v) * kBlock * kv_dim_};
  };
  std::vector<internal::AttentionQuery>& queries = thread_queries_[thread];
  const int64_t stride = kernels::KvBlockPartialFloats(config_.head_dim);
  const int64_t group = config_.n_heads / config_.n_kv_heads;
  const int64_t run = task.run_end - task.run_begin;
  for (int kv = 0; kv < static_cast<int>(shard_.kv_heads.size()); ++kv) {
    GroupQueries(kv, task.token_begin, task.token_end, &queries);
    // [block][kv head][token][head of the group]; this node's heads after those of the
    // run's tokens before it.
    const int64_t node_offset = (task.token_begin - task.run_begin) *
                                static_cast<int64_t>(queries.size()) * stride;
    for (int b = task.block_begin; b < task.block_end; ++b) {
      const int64_t slab = (b * static_cast<int64_t>(shard_.kv_heads.size()) + kv) * run * group;
      float* out = &partials_[task.partials + slab * stride + node_offset];
      AttendBlock(layer, kv, b, rows_of(b), rows_of(b + 1), queries, thread, out);
    }
  }
}

// The queries of this rank's heads sharing KV head `kv_head` for tokens [begin, end) of
// query_token_, in (token, head) order, with their output rows.
void CpuBackend::GroupQueries(int kv_head, int64_t begin, int64_t end,
                              std::vector<internal::AttentionQuery>* queries) {
  const int group = config_.n_heads / config_.n_kv_heads;
  const int head_dim = config_.head_dim;
  // This rank's heads h whose KV head (heads.begin + h) / group is the task's.
  const int64_t model_kv = shard_.kv_heads.begin + kv_head;
  const int64_t h_begin = std::max<int64_t>(0, model_kv * group - shard_.heads.begin);
  const int64_t h_end =
      std::min<int64_t>(shard_.heads.size(), (model_kv + 1) * group - shard_.heads.begin);
  queries->clear();
  for (int64_t k = begin; k < end; ++k) {
    const int64_t t = query_token_[k];
    for (int64_t h = h_begin; h < h_end; ++h) {
      queries->push_back(
          {&q_[t * q_dim_ + h * head_dim], plan_->token_pos[t], &attn_[t * q_dim_ + h * head_dim]});
    }
  }
}

// Partials of the queries (token, head order) against block b, written to out: the
// queries whose attended positions [WindowStart, pos] reach into the block. Positions
// increase along the queries and so do their window starts, so these are a range;
// returns it as [first, last) (empty when first == last). rows: the block's; next: those
// of block + 1 when the caller attends it next (the kernel fetches it while it computes
// this one), else none.
CpuBackend::KvBlockRows CpuBackend::CacheBlockRows(const KvCache& cache, int layer, int block) {
  if (cache.type() == KvCacheType::kQ8_0) return {nullptr, nullptr, &cache, layer, block};
  return {cache.key_block(layer, block), cache.value_row(layer, block * kBlock)};
}

std::pair<int, int> CpuBackend::AttendBlock(int layer, int kv_head, int block, KvBlockRows rows,
                                            KvBlockRows next,
                                            const std::vector<internal::AttentionQuery>& queries,
                                            int thread, float* out) {
  const int head_dim = config_.head_dim;
  const int block_begin = block * kBlock;
  std::vector<kernels::KvBlockQuery>& block_queries = thread_block_queries_[thread];
  block_queries.clear();
  const int count = static_cast<int>(queries.size());
  int first = count;
  for (int i = count - 1; i >= 0 && queries[i].pos >= block_begin; --i) first = i;
  int last = first;
  while (last < count && config_.WindowStart(layer, queries[last].pos) < block_begin + kBlock) {
    ++last;
  }
  if (first == last) return {first, last};
  for (int i = first; i < last; ++i) {
    block_queries.push_back(
        {queries[i].q, std::min(kBlock, queries[i].pos + 1 - block_begin),
         std::max(0, config_.WindowStart(layer, queries[i].pos) - block_begin)});
  }
  const int64_t offset = static_cast<int64_t>(kv_head) * head_dim;
  if (rows.q8_cache != nullptr) {  // q8_0 (kernels/cpu/attention_q8.h)
    std::vector<kernels::KvBlockQueryQ8>& q8_queries = thread_block_queries_q8_[thread];
    q8_queries.clear();
    for (const kernels::KvBlockQuery& query : block_queries) {
      const int64_t at = query.q - q_.data();  // the query's element in q_
      q8_queries.push_back({&q8_quants_[at], &q8_scales_[at / kernels::kQ8BlockValues], query.n,
                            query.first});
    }
    kernels::AttendKvBlockQ8(
        q8_queries.data(), static_cast<int>(q8_queries.size()),
        rows.q8_cache->q8_block(rows.q8_layer, rows.q8_block, static_cast<int>(offset)), head_dim,
        config_.AttentionScale(), out + first * kernels::KvBlockPartialFloats(head_dim));
    return {first, last};
  }
  kernels::KvBlockPrefetch prefetch;
  if (next.keys != nullptr) {
    // Rows of the next block that the last query attends to (the block exists: the
    // caches store whole blocks up to the last position).
    prefetch = {next.keys + offset * kBlock, next.values + offset,
                std::min(kBlock, queries[count - 1].pos + 1 - (block_begin + kBlock))};
  }
  kernels::AttendKvBlock(block_queries.data(), static_cast<int>(block_queries.size()),
                         rows.keys + offset * kBlock, rows.values + offset, kv_dim_, head_dim,
                         config_.AttentionScale(),
                         out + first * kernels::KvBlockPartialFloats(head_dim), prefetch);
  return {first, last};
}

void CpuBackend::AttendAllHeads(int layer) {
  const int head_dim = config_.head_dim;
  const int64_t stride = kernels::KvBlockPartialFloats(head_dim);
  // Queries per (token, KV head): at most the model's group (a shard may hold fewer).
  const int64_t group = config_.n_heads / config_.n_kv_heads;
  auto run_tasks = [&](const std::vector<AttentionTask>& tasks) {
    pool_.ParallelFor(static_cast<int64_t>(tasks.size()), [&](int64_t index, int thread) {
      const AttentionTask& task = tasks[index];
      const KvCache& cache = *plan_->batch[plan_->token_seq[task.token_begin]].cache;
      std::vector<internal::AttentionQuery>& queries = thread_queries_[thread];
      if (task.kind != AttentionTask::kTreeTail) {  // (which groups per KV head itself)
        GroupQueries(task.kv_head, task.token_begin, task.token_end, &queries);
      }
      const int count = static_cast<int>(queries.size());
      // Partials of a split run: [block][kv head][token][head of the group].
      const int64_t run = task.run_end - task.run_begin;
      auto block_partials = [&](int b) {
        return &partials_[task.partials +
                          ((b * static_cast<int64_t>(shard_.kv_heads.size()) + task.kv_head) * run *
                           group) *
                              stride];
      };
      switch (task.kind) {
        case AttentionTask::kLlamaCpp:
          AttendLlamaCppOrder(layer, task, queries, thread);
          break;
        case AttentionTask::kTreeTail:  // its own queries, per KV head
          AttendTreeTail(layer, task, thread);
          break;
        case AttentionTask::kBlocks:
          for (int b = task.block_begin; b < task.block_end; ++b) {
            AttendBlock(layer, task.kv_head, b, CacheBlockRows(cache, layer, b),
                        b + 1 < task.block_end ? CacheBlockRows(cache, layer, b + 1)
                                               : KvBlockRows{},
                        queries, thread, block_partials(b));
          }
          break;
        case AttentionTask::kMerge:
          for (int i = 0; i < count; ++i) {
            const int first_block = config_.WindowStart(layer, queries[i].pos) / kBlock;
            float* state = block_partials(first_block) + i * stride;
            const int blocks = queries[i].pos / kBlock + 1;
            for (int b = first_block + 1; b < blocks; ++b) {
              kernels::MergeKvBlockPartial(block_partials(b) + i * stride, head_dim, state);
            }
            kernels::FinishKvBlockPartials(state, head_dim, queries[i].out);
          }
          break;
        case AttentionTask::kPrefill: {
          std::vector<float>& states = thread_scores_[thread];
          if (static_cast<int64_t>(states.size()) < 2 * count * stride) {
            states.resize(2 * count * stride);
          }
          float* next = states.data() + count * stride;
          const int blocks = queries.back().pos / kBlock + 1;
          // Each query's first block (that of its window start) starts its state; the
          // later blocks merge into it.
          for (int b = config_.WindowStart(layer, queries.front().pos) / kBlock; b < blocks; ++b) {
            const auto [first, last] = AttendBlock(
                layer, task.kv_head, b, CacheBlockRows(cache, layer, b),
                b + 1 < blocks ? CacheBlockRows(cache, layer, b + 1) : KvBlockRows{}, queries,
                thread, next);
            for (int i = first; i < last; ++i) {
              float* state = states.data() + i * stride;
              if (config_.WindowStart(layer, queries[i].pos) / kBlock == b) {
                std::memcpy(state, next + i * stride, stride * sizeof(float));
              } else {
                kernels::MergeKvBlockPartial(next + i * stride, head_dim, state);
              }
            }
          }
          for (int i = 0; i < count; ++i) {
            kernels::FinishKvBlockPartials(states.data() + i * stride, head_dim, queries[i].out);
          }
          break;
        }
      }
    });
  };
  run_tasks(attention_tasks_);
  run_tasks(merge_tasks_);
}

void CpuBackend::AttendLlamaCppOrder(int layer, const AttentionTask& task,
                                     const std::vector<internal::AttentionQuery>& queries,
                                     int thread) {
  const int head_dim = config_.head_dim;
  const float scale = config_.AttentionScale();
  const KvCache& cache = *plan_->batch[plan_->token_seq[task.token_begin]].cache;
  // Float copies of the KV head's rows [0, last position], head_dim apart; a tree
  // node's (a task of one token) at its chain's positions.
  const int64_t last_token = query_token_[task.token_end - 1];
  const int n = plan_->token_pos[last_token] + 1;
  std::vector<int>& path = thread_path_[thread];
  TreePathSlots(last_token, &path);
  const int path_begin = path.empty() ? n : path.front();  // positions from here: path's
  std::vector<float>& rows = thread_rows_[thread];
  rows.resize(2 * static_cast<size_t>(n) * head_dim);
  float* keys = rows.data();
  float* values = keys + static_cast<size_t>(n) * head_dim;
  const int64_t offset = static_cast<int64_t>(task.kv_head) * head_dim;
  for (int j = 0; j < n; ++j) {
    const int slot = j < path_begin ? j : path[j - path_begin];
    if (cache.type() != KvCacheType::kF16) {  // q8_0: the values the cache holds, widened
      for (int d = 0; d < head_dim; ++d) {
        keys[j * head_dim + d] = cache.KeyAt(layer, slot, static_cast<int>(offset) + d);
        values[j * head_dim + d] = cache.ValueAt(layer, slot, static_cast<int>(offset) + d);
      }
      continue;
    }
    const uint16_t* kt = cache.key_block(layer, slot / kBlock) + offset * kBlock + slot % kBlock;
    const uint16_t* v = cache.value_row(layer, slot) + offset;
    for (int d = 0; d < head_dim; ++d) {
      keys[j * head_dim + d] = kernels::Fp16ToFloat(kt[d * kBlock]);
      values[j * head_dim + d] = kernels::Fp16ToFloat(v[d]);
    }
  }
  if (!config_.IsSlidingLayer(layer)) {
    internal::AttendHeadGroup(kernels::NativeGgmlOrder(), queries.data(),
                              static_cast<int>(queries.size()), keys, values, head_dim, head_dim,
                              scale, &thread_scores_[thread]);
    return;
  }
  // A sliding layer: each query over its window's rows, in llama.cpp's order from the
  // window's start (llama.cpp keeps these layers in a ring cache of its own, so there is
  // no one alignment of its lanes to match beyond the window).
  std::vector<float>& scratch = thread_scores_[thread];
  for (const internal::AttentionQuery& query : queries) {
    const int start = config_.WindowStart(layer, query.pos);
    if (static_cast<int>(scratch.size()) < query.pos + 1 - start) scratch.resize(query.pos + 1 - start);
    internal::AttendOneHead(kernels::NativeGgmlOrder(), query.q, keys + start * head_dim,
                            values + start * head_dim, head_dim, query.pos - start, head_dim, scale,
                            scratch.data(), query.out);
  }
}

}  // namespace splitspec::model
