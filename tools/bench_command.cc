// `splitspec bench decode --model PATH [--threads N] [--device cpu|cuda:N]
//                         [--prompt-tokens 32] [--decode-tokens 128] [--prefill-tokens 512]
//                         [--batch 1,8,32,64] [--context 512,2048,8192]
//                         [--results-jsonl FILE [--shape NAME]]`
//
// Forward-pass benchmark of one model on the CPU or a CUDA device, printed for
// humans and as a final JSON line (the one tools/bench_decode_vs_llamacpp.py reads):
//   decode   greedy 1-token steps after a prompt; tok/s = decode tokens / decode seconds
//   batch B  B sequences decoded together, one forward per step; aggregate tok/s =
//            B * decode tokens / seconds (for each B > 1 of --batch)
//   prefill  one forward over N fresh tokens;     tok/s = N / seconds
//   context C  (for each C of --context) a prefill of C fresh tokens, timed, then
//            --decode-tokens greedy steps after it: decode tok/s at that context
//   kv cache bytes per token (all layers, K and V, as --kv-cache-type stores them) and the cache's
//            bytes at the largest context
//   floor    bytes of weights read per decode token / memory bandwidth measured in
//            the same run = the memory-bound time per token. On the CPU the
//            bandwidth is a streaming read of host memory; with --device cuda:N it
//            is the device's, from device-to-device copies (MeasureCudaCopyBandwidth:
//            bytes read + written / time), and the floor is the GPU roofline
//   --results-jsonl FILE  appends decode_b1, prefill_N and decode_bB (tok/s) as
//            tools/bench_results.h lines (engine splitspec, gpu = the device's name)
//   rss      resident set after load and after the runs (/proc/self/status VmRSS)
// Token ids are a fixed pseudo-random sequence, so runs are comparable.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
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
#include "runtime/model/cpu_backend.h"
#include "runtime/model/transformer.h"
#if defined(SPLITSPEC_HAVE_CUDA)
#include "kernels/cuda/device_info.h"
#endif
#include "tools/bench_results.h"
#include "tools/bench_tokens.h"
#include "tools/commands.h"

namespace splitspec::tools {
namespace {

struct BenchFlags {
  std::string model;
  int threads = 0;
  model::DeviceSpec device = {};
  bool cuda_graphs = true;
  model::KvCacheType kv_cache_type = model::KvCacheType::kF16;  // --kv-cache-type
  int prompt_tokens = 32;
  int decode_tokens = 128;
  int prefill_tokens = 512;
  std::vector<int> batches = {1};  // --batch: sequences decoded together (1 = the decode line)
  std::string results_jsonl;       // --results-jsonl: "" = no results file
  std::string shape;               // --shape: the results' shape label
  std::vector<int> contexts;       // --context: prefill then decode at each
};

absl::StatusOr<int> PositiveInt(const CliArgs& args, const std::string& name, int fallback) {
  ASSIGN_OR_RETURN(int v, args.GetInt<int>(name, fallback));
  if (v < 1 || v > (1 << 20)) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " ", v, " out of range"));
  }
  return static_cast<int>(v);
}

absl::StatusOr<BenchFlags> ParseFlags(const CommandArgs& argv) {
  if (argv.empty() || argv[0] != "decode") {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown benchmark '", argv.empty() ? "" : argv[0], "' (available: decode, spec, verify, serve)"));
  }
  const CommandArgs rest(argv.begin() + 1, argv.end());
  ASSIGN_OR_RETURN(CliArgs args, CliArgs::Parse(rest, BenchDecodeFlagTable()));
  BenchFlags f;
  f.model = args.GetString("model", "");
  if (f.model.empty()) return absl::InvalidArgumentError("--model PATH is required");
  ASSIGN_OR_RETURN(int threads, args.GetInt<int>("threads", 0));
  if (threads < 0 || threads > 1024) {
    return absl::InvalidArgumentError(absl::StrCat("--threads ", threads, " out of range"));
  }
  f.threads = static_cast<int>(threads);
  ASSIGN_OR_RETURN(f.device, ParseDeviceFlag(args));
  ASSIGN_OR_RETURN(f.cuda_graphs, ParseCudaGraphsFlag(args));
  ASSIGN_OR_RETURN(f.kv_cache_type, ParseKvCacheTypeFlag(args));
  ASSIGN_OR_RETURN(f.prompt_tokens, PositiveInt(args, "prompt-tokens", 32));
  ASSIGN_OR_RETURN(f.decode_tokens, PositiveInt(args, "decode-tokens", 128));
  ASSIGN_OR_RETURN(f.prefill_tokens, PositiveInt(args, "prefill-tokens", 512));
  f.results_jsonl = args.GetString("results-jsonl", "");
  f.shape = args.GetString("shape", ShapeLabel(f.model));
  if (args.Has("batch")) {
    ASSIGN_OR_RETURN(std::vector<int32_t> batches, args.GetIntList("batch"));
    f.batches.assign(batches.begin(), batches.end());
    for (int b : f.batches) {
      if (b < 1 || b > 1024) {
        return absl::InvalidArgumentError(absl::StrCat("--batch ", b, " out of range [1, 1024]"));
      }
    }
  }
  if (args.Has("context")) {
    ASSIGN_OR_RETURN(std::vector<int32_t> contexts, args.GetIntList("context"));
    f.contexts.assign(contexts.begin(), contexts.end());
    for (int c : f.contexts) {
      if (c < 1 || c > (1 << 20)) {
        return absl::InvalidArgumentError(absl::StrCat("--context ", c, " out of range"));
      }
    }
  }
  return f;
}

std::string CpuModelName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "unknown CPU";
}

// VmRSS in MiB, or -1 if unavailable.
double RssMiB() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return -1;
}

// Best of three streaming reads of a 256 MiB buffer (far larger than the caches)
// with every thread of `pool`, in GB/s (1e9 bytes).
double MeasureReadBandwidth(ThreadPool& pool) {
  const size_t bytes = size_t{256} << 20;
  const size_t words = bytes / sizeof(uint64_t);
  std::vector<uint64_t> buffer(words);
  for (size_t i = 0; i < words; ++i) buffer[i] = i;
  const int64_t chunks = 64;
  std::vector<uint64_t> sums(chunks);
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const absl::Time start = absl::Now();
    pool.ParallelFor(chunks, [&](int64_t c, int) {
      const uint64_t* p = buffer.data() + c * (words / chunks);
      uint64_t acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (size_t i = 0; i < words / chunks; i += 8) {
        for (int j = 0; j < 8; ++j) acc[j] += p[i + j];
      }
      sums[c] = acc[0] + acc[1] + acc[2] + acc[3] + acc[4] + acc[5] + acc[6] + acc[7];
    });
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    best = std::max(best, bytes / seconds / 1e9);
  }
  uint64_t check = 0;
  for (uint64_t s : sums) check += s;
  if (check == 0) std::fprintf(stderr, "bench: impossible checksum\n");  // keeps the reads
  return best;
}

struct MemoryBandwidth {
  const char* kind;  // "host read" or "device"
  double gb_per_s;
  std::string how;
};

// The bandwidth that bounds a decode step on `device`: the device's memory for
// cuda:N (device-to-device copies), the host's streaming read otherwise.
absl::StatusOr<MemoryBandwidth> MeasureBandwidth(const model::DeviceSpec& device, int threads) {
  if (device.is_cuda()) {
#if defined(SPLITSPEC_HAVE_CUDA)
    constexpr uint64_t kBytes = uint64_t{512} << 20;
    ASSIGN_OR_RETURN(const double gb_s,
                     kernels::MeasureCudaCopyBandwidth(device.ordinal, kBytes, 10));
    return MemoryBandwidth{"device", gb_s,
                           "best of 10 device-to-device copies of 512 MiB, (read + written "
                           "bytes) / time"};
#else
    return absl::FailedPreconditionError("this splitspec was built without CUDA");
#endif
  }
  ThreadPool pool(threads);
  return MemoryBandwidth{
      "host read", MeasureReadBandwidth(pool),
      absl::StrCat("best of 3 streaming reads of 256 MiB, ", threads, " threads")};
}

int32_t Argmax(const float* logits, int n) {
  int32_t best = 0;
  for (int i = 1; i < n; ++i) {
    if (logits[i] > logits[best]) best = i;
  }
  return best;
}

// Seconds for `decode_tokens` greedy steps after prefilling `prompt`.
absl::StatusOr<double> TimeDecode(model::Transformer& model, const std::vector<int32_t>& prompt,
                                  int decode_tokens) {
  std::unique_ptr<model::KvCache> cache =
      model.NewCache(static_cast<int>(prompt.size()) + decode_tokens + 1);
  model::ForwardOutput out;
  RETURN_IF_ERROR(model.Forward({{cache.get(), prompt, model::LogitsMode::kLast}}, &out));
  int32_t next = Argmax(out.Row(0, 0), out.vocab_size);
  const absl::Time start = absl::Now();
  for (int i = 0; i < decode_tokens; ++i) {
    RETURN_IF_ERROR(model.Forward({{cache.get(), {&next, 1}, model::LogitsMode::kLast}}, &out));
    next = Argmax(out.Row(0, 0), out.vocab_size);
  }
  return absl::ToDoubleSeconds(absl::Now() - start);
}

// Seconds for `decode_tokens` greedy steps of `batch` sequences decoded together (one
// forward per step, one new token per sequence), after prefilling their prompts together.
absl::StatusOr<double> TimeBatchDecode(model::Transformer& model, int batch, int prompt_tokens,
                                       int decode_tokens) {
  std::vector<std::unique_ptr<model::KvCache>> caches;
  std::vector<std::vector<int32_t>> prompts;
  std::vector<int32_t> next(batch);
  std::vector<model::SequenceInput> inputs(batch);
  for (int s = 0; s < batch; ++s) {
    caches.push_back(model.NewCache(prompt_tokens + decode_tokens + 1));
    prompts.push_back(BenchTokens(prompt_tokens, model.config().vocab_size, 10 + s));
    inputs[s] = {caches[s].get(), prompts[s], model::LogitsMode::kLast};
  }
  model::ForwardOutput out;
  RETURN_IF_ERROR(model.Forward(inputs, &out));
  const absl::Time start = absl::Now();
  for (int i = 0; i < decode_tokens; ++i) {
    for (int s = 0; s < batch; ++s) {
      next[s] = Argmax(out.Row(s, 0), out.vocab_size);
      inputs[s].tokens = {&next[s], 1};
    }
    RETURN_IF_ERROR(model.Forward(inputs, &out));
  }
  return absl::ToDoubleSeconds(absl::Now() - start);
}

// Prefill seconds of `context` fresh tokens and decode seconds of `decode_tokens` greedy
// steps after them, in one cache; *cache_bytes gets the cache's bytes at the end.
absl::Status TimeAtContext(model::Transformer& model, int context, int decode_tokens,
                           double* prefill_s, double* decode_s, uint64_t* cache_bytes) {
  const std::vector<int32_t> prompt = BenchTokens(context, model.config().vocab_size, 4);
  std::unique_ptr<model::KvCache> cache = model.NewCache(context + decode_tokens + 1);
  model::ForwardOutput out;
  absl::Time start = absl::Now();
  RETURN_IF_ERROR(model.Forward({{cache.get(), prompt, model::LogitsMode::kLast}}, &out));
  *prefill_s = absl::ToDoubleSeconds(absl::Now() - start);
  int32_t next = Argmax(out.Row(0, 0), out.vocab_size);
  start = absl::Now();
  for (int i = 0; i < decode_tokens; ++i) {
    RETURN_IF_ERROR(model.Forward({{cache.get(), {&next, 1}, model::LogitsMode::kLast}}, &out));
    next = Argmax(out.Row(0, 0), out.vocab_size);
  }
  *decode_s = absl::ToDoubleSeconds(absl::Now() - start);
  *cache_bytes = cache->memory_bytes();
  return absl::OkStatus();
}

absl::StatusOr<double> TimePrefill(model::Transformer& model, const std::vector<int32_t>& tokens) {
  std::unique_ptr<model::KvCache> cache = model.NewCache(static_cast<int>(tokens.size()));
  model::ForwardOutput out;
  const absl::Time start = absl::Now();
  RETURN_IF_ERROR(model.Forward({{cache.get(), tokens, model::LogitsMode::kLast}}, &out));
  return absl::ToDoubleSeconds(absl::Now() - start);
}

// The model on --device with room for the largest forward of the runs.
model::TransformerOptions LoadOptions(const BenchFlags& f) {
  model::TransformerOptions options;
  options.threads = f.threads;
  options.device = f.device;
  options.cuda_graphs = f.cuda_graphs;
  options.kv_cache_type = f.kv_cache_type;
  const int max_context =
      f.contexts.empty() ? 0 : *std::max_element(f.contexts.begin(), f.contexts.end());
  options.memory.context_tokens = std::max(
      {f.prompt_tokens + f.decode_tokens + 1, f.prefill_tokens, max_context + f.decode_tokens + 1});
  const int max_batch = *std::max_element(f.batches.begin(), f.batches.end());
  options.memory.sequences = max_batch;
  options.memory.step_tokens =
      std::max({f.prefill_tokens, max_batch * f.prompt_tokens, max_context});
  return options;
}

absl::Status RunBench(const BenchFlags& f, const CommandArgs& argv) {
  const int threads = f.threads > 0 ? f.threads : ThreadPool::DefaultThreads();
  std::printf("command: splitspec bench %s\n", absl::StrJoin(argv, " ").c_str());
  std::printf(
      "machine: %s, %d hardware threads, ISA path %s (matmul %s%s, Q4_1 order %s, CPU attention "
      "order %s), %d threads used\n",
      CpuModelName().c_str(), ThreadPool::DefaultThreads(), kernels::CpuIsaName(),
      kernels::MatMulPathName(), kernels::InterleavedAmxNote(),
      kernels::MatMulOrderName(kernels::ActiveMatMulOrder()),
      model::CpuAttentionOrderName(model::ActiveCpuAttentionOrder()), threads);
  ASSIGN_OR_RETURN(std::unique_ptr<model::Transformer> model,
                   model::Transformer::Load(f.model, LoadOptions(f)));
  const model::ModelConfig& c = model->config();
  std::printf(
      "device: %s%s\n", f.device.ToString().c_str(),
      f.device.is_cuda() ? (f.cuda_graphs ? " (CUDA graphs on)" : " (CUDA graphs off)") : "");
  const double rss_load = RssMiB();
  const double bytes_per_token = static_cast<double>(model->weights().DecodeBytesPerToken());
  std::printf("model: %s (%s, %d layers, n_embd %d, vocab %d)\n", f.model.c_str(),
              c.architecture.c_str(), c.n_layers, c.n_embd, c.vocab_size);
  std::printf("rss after load: %.1f MiB (weights are memory-mapped; pages count once touched)\n",
              rss_load);
  ASSIGN_OR_RETURN(const MemoryBandwidth bandwidth_run, MeasureBandwidth(f.device, threads));
  const double bandwidth = bandwidth_run.gb_per_s;
  std::printf("%s bandwidth: %.2f GB/s (%s)\n", bandwidth_run.kind, bandwidth,
              bandwidth_run.how.c_str());

  const std::vector<int32_t> prompt = BenchTokens(f.prompt_tokens, c.vocab_size, 1);
  const std::vector<int32_t> prefill = BenchTokens(f.prefill_tokens, c.vocab_size, 2);
  RETURN_IF_ERROR(TimeDecode(*model, prompt, 4).status());  // warm-up: pages in the weights
  ASSIGN_OR_RETURN(double decode_s, TimeDecode(*model, prompt, f.decode_tokens));
  ASSIGN_OR_RETURN(double prefill_s, TimePrefill(*model, prefill));
  const double decode_tps = f.decode_tokens / decode_s;
  const double prefill_tps = f.prefill_tokens / prefill_s;
  const double floor_s = bytes_per_token / (bandwidth * 1e9);
  std::printf("decode: %d tokens after a %d-token prompt in %.3f s = %.2f tok/s (%.2f ms/token)\n",
              f.decode_tokens, f.prompt_tokens, decode_s, decode_tps,
              1e3 * decode_s / f.decode_tokens);
  std::printf(
      "%s: %.2f MB weights/token / %.2f GB/s = %.2f ms/token = %.1f tok/s max; "
      "decode runs at %.0f%% of it\n",
      f.device.is_cuda() ? "roofline" : "floor", bytes_per_token / 1e6, bandwidth, floor_s * 1e3,
      1 / floor_s, 100.0 * decode_tps * floor_s);
  std::printf("prefill: %d tokens in %.3f s = %.2f tok/s\n", f.prefill_tokens, prefill_s,
              prefill_tps);
  const std::string command = absl::StrCat("splitspec bench ", absl::StrJoin(argv, " "));
  std::vector<BenchResult> results = {
      {"splitspec", "", f.shape, DecodeMeasure(1), decode_tps, command},
      {"splitspec", "", f.shape, PrefillMeasure(f.prefill_tokens), prefill_tps, command}};
  std::unique_ptr<model::KvCache> probe = model->NewCache(1);
  const uint64_t kv_bytes_per_token = probe->bytes_per_position();
  std::printf("kv cache: %s, %llu bytes/token (%d layers x K and V x kv_dim %d x %s)\n",
              model::KvCacheTypeName(f.kv_cache_type),
              static_cast<unsigned long long>(kv_bytes_per_token), c.n_layers,
              c.n_kv_heads * c.head_dim,
              f.kv_cache_type == model::KvCacheType::kQ8_0
                  ? "34 bytes per 32 values, q8_0"
                  : "2 bytes, half");
  std::string context_json;
  for (int context : f.contexts) {
    double context_prefill_s = 0, context_decode_s = 0;
    uint64_t cache_bytes = 0;
    RETURN_IF_ERROR(TimeAtContext(*model, context, f.decode_tokens, &context_prefill_s,
                                  &context_decode_s, &cache_bytes));
    const double context_tps = f.decode_tokens / context_decode_s;
    std::printf(
        "context %d: prefill %.3f s (%.1f tok/s); decode %d tokens in %.3f s = %.2f tok/s "
        "(%.2f ms/token); kv cache %.1f MiB held, %.1f MB read per decode token "
        "(= context x bytes/token)\n",
        context, context_prefill_s, context / context_prefill_s, f.decode_tokens, context_decode_s,
        context_tps, 1e3 * context_decode_s / f.decode_tokens, cache_bytes / 1048576.0,
        static_cast<double>(context) * kv_bytes_per_token / 1e6);
    absl::StrAppend(&context_json, context_json.empty() ? "" : ",", "\"", context, "\":",
                    absl::StrFormat("{\"prefill_s\":%.4f,\"decode_tok_s\":%.3f,"
                                    "\"kv_cache_bytes\":%llu}",
                                    context_prefill_s, context_tps,
                                    static_cast<unsigned long long>(cache_bytes)));
  }
  std::string batch_json;
  for (int batch : f.batches) {
    if (batch == 1) continue;  // the decode line above
    ASSIGN_OR_RETURN(double seconds,
                     TimeBatchDecode(*model, batch, f.prompt_tokens, f.decode_tokens));
    const double aggregate = static_cast<double>(batch) * f.decode_tokens / seconds;
    std::printf(
        "batch %d: %d steps of %d sequences in %.3f s = %.2f tok/s aggregate "
        "(%.2f ms/step)\n",
        batch, f.decode_tokens, batch, seconds, aggregate, 1e3 * seconds / f.decode_tokens);
    absl::StrAppend(&batch_json, batch_json.empty() ? "" : ",", "\"", batch,
                    "\":", absl::StrFormat("%.3f", aggregate));
    results.push_back({"splitspec", "", f.shape, DecodeMeasure(batch), aggregate, command});
  }
  const double rss_end = RssMiB();
  std::printf("rss after runs: %.1f MiB\n", rss_end);
  std::printf(
      "{\"bench\":\"decode\",\"device\":\"%s\",\"threads\":%d,\"isa\":\"%s\",\"decode_tok_s\":%.3f,"
      "\"prefill_tok_s\":%.3f,\"prompt_tokens\":%d,\"decode_tokens\":%d,\"prefill_tokens\":%d,"
      "\"weight_bytes_per_token\":%.0f,\"read_bandwidth_gb_s\":%.3f,\"bandwidth_kind\":\"%s\","
      "\"floor_tok_s\":%.3f,"
      "\"rss_after_load_mib\":%.1f,\"rss_after_runs_mib\":%.1f,\"batch_tok_s\":{%s},"
      "\"kv_bytes_per_token\":%llu,\"contexts\":{%s}}\n",
      f.device.ToString().c_str(), threads, kernels::MatMulPathName(), decode_tps, prefill_tps,
      f.prompt_tokens, f.decode_tokens, f.prefill_tokens, bytes_per_token, bandwidth,
      bandwidth_run.kind, 1 / floor_s, rss_load, rss_end, batch_json.c_str(),
      static_cast<unsigned long long>(kv_bytes_per_token), context_json.c_str());
  if (f.results_jsonl.empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(const std::string gpu, DeviceLabel(f.device));
  for (BenchResult& r : results) r.gpu = gpu;
  RETURN_IF_ERROR(AppendBenchResults(f.results_jsonl, results));
  std::printf("results: %zu lines appended to %s\n", results.size(), f.results_jsonl.c_str());
  return absl::OkStatus();
}

}  // namespace

int RunBenchCommand(const CommandArgs& args) {
  if (!args.empty() && args[0] == "spec")
    return RunBenchSpec(CommandArgs(args.begin() + 1, args.end()));
  if (!args.empty() && args[0] == "serve") {
    return RunBenchServe(CommandArgs(args.begin() + 1, args.end()));
  }
  if (!args.empty() && args[0] == "verify") {
    return RunBenchVerify(CommandArgs(args.begin() + 1, args.end()));
  }
  absl::StatusOr<BenchFlags> flags = ParseFlags(args);
  if (!flags.ok()) {
    std::fprintf(stderr, "splitspec bench: %s\n", std::string(flags.status().message()).c_str());
    return 2;
  }
  absl::Status s = RunBench(*flags, args);
  if (s.ok()) return 0;
  std::fprintf(stderr, "splitspec bench: %s\n", std::string(s.message()).c_str());
  return 1;
}

}  // namespace splitspec::tools
