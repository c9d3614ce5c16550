// `splitspec bench verify --model PATH [--threads N] [--prompt-tokens 32] [--repeats 30]
//                         [--k 1,2,3,5,8,9,16] [--results-jsonl FILE [--shape NAME]]`
//
// The cost of a verification block: whole-model forward time of k new tokens of one
// sequence (logits of every new position, as a verifier needs them) after a prompt,
// relative to k = 1. Each repeat runs every k once, in order, and truncates the KV cache
// back to the prompt after each forward, so every forward sees the same context; the
// ks are interleaved so that load from other processes hits them alike. Per k it prints
// the median and the minimum over the repeats; the ratio is median(k) / median(1).
// Beside wall time it gives the process CPU time per forward (all threads; the pool
// polls for at most 50 us between loops), whose ratio is less disturbed when other
// processes share the cores. The final JSON line carries "verify_ms" (medians),
// "verify_cost_ratio" (wall), "verify_cpu_ms" and "verify_cost_ratio_cpu"
// (tools/bench_verify_vs_llamacpp.py reads it). --results-jsonl FILE appends
// verify_kK = T(k)/T(1) (wall medians, k > 1) as tools/bench_results.h lines. Token ids: a fixed
// pseudo-random sequence (the LCG of bench decode), so runs are comparable.
//
// --tree also times one forward over each of a fixed set of token trees
// (SequenceInput::tree_parents, in depth-first order as drafters send them): a chain of
// 5, the full 2x2x2 trie (15 nodes), a 4-wide star of 4-token chains (17), and tries
// of 16 and 32 nodes (branching 4, 2, 2, ... cut at the node count, the last level
// partly filled). Their node counts join the chain ks, so each tree row prints
// T(tree)/T(1) beside T(chain of as many tokens)/T(1); the JSON line adds "tree_ms" and
// "tree_cost_ratio" by shape (trees are not written to --results-jsonl).
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/matmul.h"
#include "runtime/base/status_macros.h"
#include "runtime/base/thread_pool.h"
#include "runtime/model/transformer.h"
#include "tools/bench_results.h"
#include "tools/bench_tokens.h"
#include "tools/commands.h"
#include "tools/median.h"

namespace splitspec::tools {
namespace {

struct VerifyFlags {
  std::string model;
  int threads = 0;
  model::DeviceSpec device = {};
  bool cuda_graphs = true;
  model::KvCacheType kv_cache_type = model::KvCacheType::kF16;  // --kv-cache-type
  int prompt_tokens = 32;
  int repeats = 30;
  std::vector<int> ks = {1, 2, 3, 5, 8, 9, 16};
  std::string results_jsonl;  // --results-jsonl: "" = no results file
  std::string shape;          // --shape: the results' shape label
  bool tree = false;          // --tree: time the tree shapes too
};

// One timed tree: parents in depth-first order.
struct TreeShape {
  std::string name;
  std::vector<int32_t> parents;
};

// The tree whose level d + 1 gives each node of level d branching[d] children (the
// last entry repeats), cut at `nodes` nodes breadth-first (the last level partly
// filled), numbered depth-first.
std::vector<int32_t> TrieParents(const std::vector<int>& branching, int nodes) {
  std::vector<std::vector<int>> children(1);  // breadth-first ids
  std::vector<int> level = {0};
  int count = 1;
  for (size_t d = 0; count < nodes; ++d) {
    const int b = branching[std::min(d, branching.size() - 1)];
    std::vector<int> next;
    for (int parent : level) {
      for (int c = 0; c < b && count < nodes; ++c, ++count) {
        children[parent].push_back(count);
        children.emplace_back();
        next.push_back(count);
      }
    }
    level = std::move(next);
  }
  std::vector<int32_t> parents;
  auto visit = [&](auto&& self, int node, int32_t parent) -> void {
    const int32_t id = static_cast<int32_t>(parents.size());
    parents.push_back(parent);
    for (int child : children[node]) self(self, child, id);
  };
  visit(visit, 0, -1);
  return parents;
}

std::vector<TreeShape> BenchTreeShapes() {
  std::vector<int32_t> star = {-1};  // 4 branches of 4-token chains
  for (int branch = 0; branch < 4; ++branch) {
    for (int k = 0; k < 4; ++k) star.push_back(k == 0 ? 0 : static_cast<int32_t>(star.size()) - 1);
  }
  return {{"chain5", TrieParents({1}, 5)},
          {"trie2x2x2", TrieParents({2}, 15)},
          {"star4x4", star},
          {"trie16", TrieParents({4, 2}, 16)},
          {"trie32", TrieParents({4, 2}, 32)}};
}

int Depth(const std::vector<int32_t>& parents) {
  std::vector<int> depth(parents.size(), 0);
  int deepest = 0;
  for (size_t i = 1; i < parents.size(); ++i) {
    depth[i] = depth[parents[i]] + 1;
    deepest = std::max(deepest, depth[i]);
  }
  return deepest;
}

absl::StatusOr<VerifyFlags> ParseVerifyFlags(const CommandArgs& argv) {
  ASSIGN_OR_RETURN(CliArgs args, CliArgs::Parse(argv, BenchVerifyFlagTable()));
  VerifyFlags f;
  f.model = args.GetString("model", "");
  if (f.model.empty()) return absl::InvalidArgumentError("--model PATH is required");
  ASSIGN_OR_RETURN(int threads, args.GetInt<int>("threads", 0));
  ASSIGN_OR_RETURN(int prompt, args.GetInt<int>("prompt-tokens", f.prompt_tokens));
  ASSIGN_OR_RETURN(int repeats, args.GetInt<int>("repeats", f.repeats));
  if (threads < 0 || threads > 1024) {
    return absl::InvalidArgumentError(absl::StrCat("--threads ", threads, " out of range"));
  }
  if (prompt < 1 || prompt > (1 << 16)) {
    return absl::InvalidArgumentError(absl::StrCat("--prompt-tokens ", prompt, " out of range"));
  }
  if (repeats < 1 || repeats > 100000) {
    return absl::InvalidArgumentError(absl::StrCat("--repeats ", repeats, " out of range"));
  }
  f.threads = static_cast<int>(threads);
  ASSIGN_OR_RETURN(f.device, ParseDeviceFlag(args));
  ASSIGN_OR_RETURN(f.cuda_graphs, ParseCudaGraphsFlag(args));
  ASSIGN_OR_RETURN(f.kv_cache_type, ParseKvCacheTypeFlag(args));
  f.prompt_tokens = static_cast<int>(prompt);
  f.repeats = static_cast<int>(repeats);
  if (!args.GetString("k", "").empty()) {
    ASSIGN_OR_RETURN(std::vector<int32_t> ks, args.GetIntList("k"));
    f.ks.assign(ks.begin(), ks.end());
  }
  f.results_jsonl = args.GetString("results-jsonl", "");
  f.shape = args.GetString("shape", ShapeLabel(f.model));
  f.tree = args.Has("tree");
  if (f.ks.empty() || f.ks[0] != 1) {
    return absl::InvalidArgumentError("--k must start with 1 (the ratios are relative to k = 1)");
  }
  for (int k : f.ks) {
    if (k < 1 || k > 4096) {
      return absl::InvalidArgumentError(absl::StrCat("--k ", k, " out of range"));
    }
  }
  if (f.tree) {  // chains of each tree's node count, to set beside it
    for (const TreeShape& tree : BenchTreeShapes()) f.ks.push_back(tree.parents.size());
    std::sort(f.ks.begin() + 1, f.ks.end());
    f.ks.erase(std::unique(f.ks.begin(), f.ks.end()), f.ks.end());
  }
  return f;
}

double ProcessCpuMs() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return 1e3 * static_cast<double>(ts.tv_sec) + 1e-6 * static_cast<double>(ts.tv_nsec);
}

// The model on --device with room for the prompt and the largest block.
model::TransformerOptions LoadOptions(const VerifyFlags& f) {
  model::TransformerOptions options;
  options.threads = f.threads;
  options.device = f.device;
  options.cuda_graphs = f.cuda_graphs;
  options.kv_cache_type = f.kv_cache_type;
  const int max_k = *std::max_element(f.ks.begin(), f.ks.end());
  options.memory.context_tokens = f.prompt_tokens + max_k;
  options.memory.step_tokens = std::max(f.prompt_tokens, max_k);
  return options;
}

absl::Status RunVerify(const VerifyFlags& f, const CommandArgs& argv) {
  const int threads = f.threads > 0 ? f.threads : ThreadPool::DefaultThreads();
  std::printf("command: splitspec bench verify %s\n", absl::StrJoin(argv, " ").c_str());
  std::printf(
      "machine: %d hardware threads, ISA path %s (matmul %s%s, Q4_1 order %s), %d threads used\n",
      ThreadPool::DefaultThreads(), kernels::CpuIsaName(), kernels::MatMulPathName(),
      kernels::InterleavedAmxNote(), kernels::MatMulOrderName(kernels::ActiveMatMulOrder()), threads);
  ASSIGN_OR_RETURN(std::unique_ptr<model::Transformer> model,
                   model::Transformer::Load(f.model, LoadOptions(f)));
  std::printf(
      "device: %s%s\n", f.device.ToString().c_str(),
      f.device.is_cuda() ? (f.cuda_graphs ? " (CUDA graphs on)" : " (CUDA graphs off)") : "");
  const model::ModelConfig& c = model->config();
  std::printf("model: %s (%s, %d layers, n_embd %d, vocab %d)\n", f.model.c_str(),
              c.architecture.c_str(), c.n_layers, c.n_embd, c.vocab_size);
  std::printf("kv cache: %s, %llu bytes/token\n", model::KvCacheTypeName(f.kv_cache_type),
              static_cast<unsigned long long>(model->NewCache(1)->bytes_per_position()));
  const int max_k = *std::max_element(f.ks.begin(), f.ks.end());
  const std::vector<int32_t> prompt = BenchTokens(f.prompt_tokens, c.vocab_size, 1);
  const std::vector<int32_t> block = BenchTokens(max_k, c.vocab_size, 3);
  std::unique_ptr<model::KvCache> cache = model->NewCache(f.prompt_tokens + max_k);
  model::ForwardOutput out;
  RETURN_IF_ERROR(model->Forward({{cache.get(), prompt, model::LogitsMode::kLast}}, &out));

  // Timed runs: the chains (k tokens), then the trees (empty parents: a chain).
  std::vector<TreeShape> runs;
  for (int k : f.ks) runs.push_back({"", std::vector<int32_t>(k)});
  if (f.tree) {
    for (TreeShape& tree : BenchTreeShapes()) runs.push_back(std::move(tree));
  }
  std::vector<std::vector<double>> ms(runs.size()), cpu_ms(runs.size());
  for (int rep = -2; rep < f.repeats; ++rep) {  // two warm-up rounds page the weights in
    for (size_t i = 0; i < runs.size(); ++i) {
      const bool tree = !runs[i].name.empty();
      const absl::Span<const int32_t> tokens(block.data(), runs[i].parents.size());
      const double cpu_start = ProcessCpuMs();
      const absl::Time start = absl::Now();
      RETURN_IF_ERROR(model->Forward(
          {{cache.get(), tokens, model::LogitsMode::kAll,
            tree ? absl::Span<const int32_t>(runs[i].parents) : absl::Span<const int32_t>()}},
          &out));
      const double elapsed_ms = absl::ToDoubleMilliseconds(absl::Now() - start);
      const double elapsed_cpu_ms = ProcessCpuMs() - cpu_start;
      RETURN_IF_ERROR(cache->Truncate(f.prompt_tokens));
      if (rep >= 0) {
        ms[i].push_back(elapsed_ms);
        cpu_ms[i].push_back(elapsed_cpu_ms);
      }
    }
  }
  std::vector<double> medians(runs.size()), cpu_medians(runs.size());
  for (size_t i = 0; i < runs.size(); ++i) {
    medians[i] = Median(ms[i]);
    cpu_medians[i] = Median(cpu_ms[i]);
  }
  std::string ms_json, ratio_json, cpu_json, cpu_ratio_json;
  const std::string command = absl::StrCat("splitspec bench verify ", absl::StrJoin(argv, " "));
  std::vector<BenchResult> results;
  for (size_t i = 0; i < f.ks.size(); ++i) {
    const double ratio = medians[i] / medians[0];
    if (f.ks[i] > 1)
      results.push_back({"splitspec", "", f.shape, VerifyMeasure(f.ks[i]), ratio, command});
    const double cpu_ratio = cpu_medians[i] / cpu_medians[0];
    std::printf(
        "k=%-3d forward %8.3f ms median, %8.3f ms min, cpu %8.3f ms median (%d repeats)"
        "  T(k)/T(1) = %.3f (cpu %.3f)\n",
        f.ks[i], medians[i], *std::min_element(ms[i].begin(), ms[i].end()), cpu_medians[i],
        f.repeats, ratio, cpu_ratio);
    const std::string key = absl::StrCat(i == 0 ? "" : ",", "\"", f.ks[i], "\":");
    absl::StrAppend(&ms_json, key, absl::StrFormat("%.4f", medians[i]));
    absl::StrAppend(&ratio_json, key, absl::StrFormat("%.4f", ratio));
    absl::StrAppend(&cpu_json, key, absl::StrFormat("%.4f", cpu_medians[i]));
    absl::StrAppend(&cpu_ratio_json, key, absl::StrFormat("%.4f", cpu_ratio));
  }
  std::string tree_json;  // ,"tree_ms":{...},"tree_cost_ratio":{...} with --tree
  if (f.tree) {
    std::string tree_ms_json, tree_ratio_json;
    for (size_t i = f.ks.size(); i < runs.size(); ++i) {
      const int nodes = static_cast<int>(runs[i].parents.size());
      const size_t chain = std::find(f.ks.begin(), f.ks.end(), nodes) - f.ks.begin();
      const double ratio = medians[i] / medians[0];
      std::printf(
          "tree %-9s %2d nodes, depth %2d: forward %8.3f ms median, %8.3f ms min, cpu %8.3f ms "
          "median  T(tree)/T(1) = %.3f (cpu %.3f); chain of %d: %.3f\n",
          runs[i].name.c_str(), nodes, Depth(runs[i].parents), medians[i],
          *std::min_element(ms[i].begin(), ms[i].end()), cpu_medians[i], ratio,
          cpu_medians[i] / cpu_medians[0], nodes, medians[chain] / medians[0]);
      const std::string key =
          absl::StrCat(i == f.ks.size() ? "" : ",", "\"", runs[i].name, "\":");
      absl::StrAppend(&tree_ms_json, key, absl::StrFormat("%.4f", medians[i]));
      absl::StrAppend(&tree_ratio_json, key, absl::StrFormat("%.4f", ratio));
    }
    tree_json = absl::StrCat(",\"tree_ms\":{", tree_ms_json, "},\"tree_cost_ratio\":{",
                             tree_ratio_json, "}");
  }
  std::printf(
      "{\"bench\":\"verify\",\"threads\":%d,\"isa\":\"%s\",\"prompt_tokens\":%d,\"repeats\":%d,"
      "\"verify_ms\":{%s},\"verify_cpu_ms\":{%s},\"verify_cost_ratio_cpu\":{%s},"
      "\"verify_cost_ratio\":{%s}%s}\n",
      threads, kernels::MatMulPathName(), f.prompt_tokens, f.repeats, ms_json.c_str(),
      cpu_json.c_str(), cpu_ratio_json.c_str(), ratio_json.c_str(), tree_json.c_str());
  if (f.results_jsonl.empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(const std::string gpu, DeviceLabel(f.device));
  for (BenchResult& r : results) r.gpu = gpu;
  RETURN_IF_ERROR(AppendBenchResults(f.results_jsonl, results));
  std::printf("results: %zu lines appended to %s\n", results.size(), f.results_jsonl.c_str());
  return absl::OkStatus();
}

}  // namespace

int RunBenchVerify(const CommandArgs& args) {
  absl::StatusOr<VerifyFlags> flags = ParseVerifyFlags(args);
  if (!flags.ok()) {
    std::fprintf(stderr, "splitspec bench verify: %s\n",
                 std::string(flags.status().message()).c_str());
    return 2;
  }
  absl::Status s = RunVerify(*flags, args);
  if (s.ok()) return 0;
  std::fprintf(stderr, "splitspec bench verify: %s\n", std::string(s.message()).c_str());
  return 1;
}

}  // namespace splitspec::tools
