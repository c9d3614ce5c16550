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
    plan_->batch[plan_->token_seq[t]].cache->WriteRow(layer, plan_->token_pos[t], &k_[t * kv_dim_],
                                                      &v_[t * kv_dim_]);
  }
}

void CpuBackend::PlanAttentionTasks() {
  attention_tasks_.clear();
  merge_tasks_.clear();
  const int kv_heads = static_cast<int>(shard_.kv_heads.size());
  const int64_t t_count = tokens();
  const bool llama_cpp = ActiveCpuAttentionOrder() == CpuAttentionOrder::kLlamaCpp;
  int64_t partials = 0;  // floats of partials_ planned so far
  int64_t begin = 0;
  while (begin < t_count) {  // one run: consecutive tokens of one sequence
    int64_t end = begin + 1;
    while (end < t_count && plan_->token_seq[end] == plan_->token_seq[begin]) ++end;
    const int64_t run = end - begin;
    if (llama_cpp) {
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
                                      std::min(blocks, b + kBlocksPerTask), partials});
        }
        merge_tasks_.push_back({AttentionTask::kMerge, begin, end, kv, 0, blocks, partials});
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

// The queries of this rank's heads sharing KV head `kv_head` for tokens [begin, end), in
// (token, head) order, with their output rows.
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
  for (int64_t t = begin; t < end; ++t) {
    for (int64_t h = h_begin; h < h_end; ++h) {
      queries->push_back(
          {&q_[t * q_dim_ + h * head_dim], plan_->token_pos[t], &attn_[t * q_dim_ + h * head_dim]});
    }
  }
}

// Partials of the queries (token, head order) against block b, written to out: the
// queries whose attended positions [WindowStart, pos] reach into the block. Positions
// increase along the queries and so do their window starts, so these are a range;
// returns it as [first, last) (empty when first == last). prefetch_next: the caller
// attends block + 1 next (the kernel fetches it while it computes this one).
std::pair<int, int> CpuBackend::AttendBlock(int layer, int kv_head, const KvCache& cache, int block,
                                            const std::vector<internal::AttentionQuery>& queries,
                                            int thread, float* out, bool prefetch_next) {
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
  kernels::KvBlockPrefetch next;
  if (prefetch_next) {
    // Rows of the next block that the last query attends to (the block exists: the
    // caches store whole blocks up to the last position).
    next = {cache.key_block(layer, block + 1) + offset * kBlock,
            cache.value_row(layer, block_begin + kBlock) + offset,
            std::min(kBlock, queries[count - 1].pos + 1 - (block_begin + kBlock))};
  }
  kernels::AttendKvBlock(block_queries.data(), static_cast<int>(block_queries.size()),
                         cache.key_block(layer, block) + offset * kBlock,
                         cache.value_row(layer, block_begin) + offset, kv_dim_, head_dim,
                         config_.AttentionScale(),
                         out + first * kernels::KvBlockPartialFloats(head_dim), next);
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
      GroupQueries(task.kv_head, task.token_begin, task.token_end, &queries);
      const int count = static_cast<int>(queries.size());
      // Partials of a split run: [block][kv head][token][head of the group].
      const int64_t run = task.token_end - task.token_begin;
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
        case AttentionTask::kBlocks:
          for (int b = task.block_begin; b < task.block_end; ++b) {
            AttendBlock(layer, task.kv_head, cache, b, queries, thread, block_partials(b),
                        b + 1 < task.block_end);
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
            const auto [first, last] =
                AttendBlock(layer, task.kv_head, cache, b, queries, thread, next, b + 1 < blocks);
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
  // Float copies of the KV head's rows [0, last position], head_dim apart.
  const int n = plan_->token_pos[task.token_end - 1] + 1;
  std::vector<float>& rows = thread_rows_[thread];
  rows.resize(2 * static_cast<size_t>(n) * head_dim);
  float* keys = rows.data();
  float* values = keys + static_cast<size_t>(n) * head_dim;
  const int64_t offset = static_cast<int64_t>(task.kv_head) * head_dim;
  for (int j = 0; j < n; ++j) {
    const uint16_t* kt = cache.key_block(layer, j / kBlock) + offset * kBlock + j % kBlock;
    const uint16_t* v = cache.value_row(layer, j) + offset;
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
