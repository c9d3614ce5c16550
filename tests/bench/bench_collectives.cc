// Benchmark of tensor parallelism on the CPU: Gloo collective latency on
// loopback, and decode tokens/s of the default model at TP=1 against TP=N,
// measured in the same run.
//
//   splitspec_bench_collectives [--model PATH] [--tp 2,3] [--iterations 2000]
//                               [--decode-tokens 32] [--threads-per-rank 1] [--synthetic 1]
//
// Ranks run as threads of this process (one GlooCommunicator each, TCP on
// 127.0.0.1, rendezvous through a FileRendezvousStore in a fresh directory).
//
// Collectives (2 ranks): all_reduce_sum of 576 floats (one decode token's
// hidden state of SmolLM2-135M), of 49152 floats (one token's vocabulary-sized
// vector), and broadcast of a 1 KB step plan (Broadcast of 1024 bytes, and
// BroadcastString = length + bytes, two collectives). Figures per call, over
// --iterations calls after 100 warm-up calls: median and p90 of the slowest
// rank's wall time (each call is timed on every rank; the call ends for the
// group when its slowest rank returns).
//
// Decode: prefill 8 prompt tokens, then --decode-tokens greedy steps of one
// token. TP=1 is model::Transformer with --threads-per-rank threads; TP=N runs
// N ranks of Transformer with --threads-per-rank threads each.
// TP=1 is also run with every hardware thread: the same cores, one process.
// Per token:  ms/token = decode wall time / tokens;  tokens/s = 1000 / ms;
// collective ms/token = time rank 0 spent inside collectives / tokens
// (2 * n_layers + 1 calls per token); compute ms/token = ms/token - collective.
// A TP size the model cannot be split by is printed with the reason. The default
// model (9 heads, 3 KV heads) splits 2 ways only by replicating KV head 1 on both
// ranks (runtime/model/tp_shard.h), so --synthetic (on by default) also runs
// TP=1 vs TP=2 on a random model with its layer shapes but 8 / 4 heads (written
// with the tests' tiny-model writer), whose split needs no replication.
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "kernels/cpu/matmul.h"
#include "runtime/base/status_macros.h"
#include "runtime/cli/cli_args.h"
#include "runtime/dist/file_rendezvous_store.h"
#include "runtime/dist/gloo_communicator.h"
#include "runtime/model/transformer.h"
#include "tests/testing/tiny_model.h"
#include "tools/default_paths.h"

namespace splitspec::tools {
namespace {

using Clock = std::chrono::steady_clock;

double MillisSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double ThreadCpuMillis() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

struct Options {
  std::string model = DefaultModelPath();
  std::vector<int> tp_sizes = {2, 3};
  int iterations = 2000;
  int decode_tokens = 32;
  int threads_per_rank = 1;
  bool synthetic = true;  // also TP=1 vs TP=2 on a SmolLM2-shaped model TP=2 can split
};

// A Communicator that times every call of the one it wraps (benchmark only).
class TimedCommunicator final : public net::Communicator {
 public:
  explicit TimedCommunicator(net::Communicator* inner) : inner_(inner) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  absl::Duration timeout() const override { return inner_->timeout(); }
  net::BufferSpace buffer_space() const override { return inner_->buffer_space(); }
  const char* backend_name() const override { return inner_->backend_name(); }
  absl::Status AllReduceSum(float* data, int64_t count) override {
    return Time([&] { return inner_->AllReduceSum(data, count); });
  }
  absl::Status AllGather(const float* in, int64_t count, float* out) override {
    return Time([&] { return inner_->AllGather(in, count, out); });
  }
  absl::Status Broadcast(void* data, int64_t bytes, int root) override {
    return Time([&] { return inner_->Broadcast(data, bytes, root); });
  }
  double total_ms = 0;      // wall time inside collectives
  double total_cpu_ms = 0;  // this thread's CPU time inside collectives
  int64_t calls = 0;

 private:
  absl::Status Time(const std::function<absl::Status()>& call) {
    const Clock::time_point start = Clock::now();
    const double cpu_start = ThreadCpuMillis();
    absl::Status s = call();
    total_ms += MillisSince(start);
    total_cpu_ms += ThreadCpuMillis() - cpu_start;
    ++calls;
    return s;
  }
  net::Communicator* inner_;
};

// Runs body(comm) on `size` threads of one fresh Gloo group.
std::vector<absl::Status> RunGroup(int size,
                                   const std::function<absl::Status(net::Communicator&)>& body) {
  static int counter = 0;
  std::string dir = "/tmp/splitspec-bench-XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) return {absl::UnavailableError("mkdtemp failed")};
  const std::string group = absl::StrCat("bench-", getpid(), "-", counter++);
  std::vector<absl::Status> results(size);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      results[rank] = [&]() -> absl::Status {
        ASSIGN_OR_RETURN(auto store, net::FileRendezvousStore::Open(dir));
        net::GlooTransportOptions transport;
        transport.hostname = "127.0.0.1";
        ASSIGN_OR_RETURN(
            auto comm,
            net::GlooCommunicator::Create(
                *store, {.group = group, .rank = rank, .size = size, .timeout = absl::Seconds(60)},
                transport));
        return body(*comm);
      }();
    });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

absl::Status FirstError(const std::vector<absl::Status>& results) {
  for (const absl::Status& s : results) RETURN_IF_ERROR(s);
  return absl::OkStatus();
}

// Median and p90 over calls of the slowest rank's time.
void PrintLatency(const char* name, const std::vector<std::vector<double>>& per_rank_us) {
  std::vector<double> slowest(per_rank_us[0].size(), 0);
  for (const auto& rank : per_rank_us) {
    for (size_t i = 0; i < rank.size(); ++i) slowest[i] = std::max(slowest[i], rank[i]);
  }
  std::sort(slowest.begin(), slowest.end());
  std::printf("  %-36s median %8.1f us   p90 %8.1f us   (%zu calls)\n", name,
              slowest[slowest.size() / 2], slowest[slowest.size() * 9 / 10], slowest.size());
}

absl::Status BenchCollectives(const Options& options) {
  std::printf("\n== Gloo collectives, 2 ranks as threads, TCP on 127.0.0.1 ==\n");
  struct Case {
    const char* name;
    std::function<absl::Status(net::Communicator&, std::vector<float>&, std::string&)> call;
    int64_t floats;
  };
  const std::vector<Case> cases = {
      {"all_reduce_sum 576 floats (2.3 KB)",
       [](net::Communicator& c, std::vector<float>& v, std::string&) {
         return c.AllReduceSum(v.data(), 576);
       },
       576},
      {"all_reduce_sum 49152 floats (192 KB)",
       [](net::Communicator& c, std::vector<float>& v, std::string&) {
         return c.AllReduceSum(v.data(), 49152);
       },
       49152},
      {"broadcast 1024 bytes",
       [](net::Communicator& c, std::vector<float>& v, std::string&) {
         return c.Broadcast(v.data(), 1024, 0);
       },
       256},
      {"BroadcastString 1 KB plan (2 calls)",
       [](net::Communicator& c, std::vector<float>&, std::string& plan) {
         if (c.rank() == 0) plan.assign(1024, 'p');
         return net::BroadcastString(c, &plan, 0);
       },
       1},
  };
  for (const Case& c : cases) {
    std::vector<std::vector<double>> us(2);
    RETURN_IF_ERROR(FirstError(RunGroup(2, [&](net::Communicator& comm) -> absl::Status {
      std::vector<float> data(c.floats, 1.f + comm.rank());
      std::string plan;
      for (int i = 0; i < 100; ++i) RETURN_IF_ERROR(c.call(comm, data, plan));
      std::vector<double>& mine = us[comm.rank()];
      for (int i = 0; i < options.iterations; ++i) {
        const Clock::time_point start = Clock::now();
        RETURN_IF_ERROR(c.call(comm, data, plan));
        mine.push_back(MillisSince(start) * 1000);
      }
      return absl::OkStatus();
    })));
    PrintLatency(c.name, us);
  }
  return absl::OkStatus();
}

struct DecodeResult {
  double ms_per_token = 0;
  double cpu_ms_per_token = 0;  // the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID)
  double collective_ms_per_token = 0;
  double collective_cpu_ms_per_token = 0;
  int64_t collectives_per_token = 0;
  std::vector<int32_t> tokens;
  std::vector<float> top2_gaps;      // per step: best logit - second best
  std::vector<float> prompt_logits;  // [vocab] after the prompt
};

const std::vector<int32_t> kPrompt = {1, 9690, 198, 2683, 359, 253, 5356, 11};

// Prefill + greedy decode on any model with the Forward contract.
template <typename Model>
absl::StatusOr<DecodeResult> Decode(Model& model, int steps, TimedCommunicator* timed) {
  auto cache = model.NewCache();
  model::ForwardOutput out;
  std::vector<int32_t> prompt = kPrompt;
  for (int32_t& id : prompt) id %= model.config().vocab_size;
  RETURN_IF_ERROR(model.Forward({{cache.get(), prompt, model::LogitsMode::kLast}}, &out));
  DecodeResult result;
  result.prompt_logits.assign(out.Row(0, 0), out.Row(0, 0) + out.vocab_size);
  const double collective_before = timed ? timed->total_ms : 0;
  const double collective_cpu_before = timed ? timed->total_cpu_ms : 0;
  const int64_t calls_before = timed ? timed->calls : 0;
  const Clock::time_point start = Clock::now();
  const double cpu_start = ThreadCpuMillis();
  for (int i = 0; i < steps; ++i) {
    std::vector<float> row(out.Row(0, 0), out.Row(0, 0) + out.vocab_size);
    const int32_t next =
        static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
    const float top = row[next];
    row[next] = -1e30f;
    result.top2_gaps.push_back(top - *std::max_element(row.begin(), row.end()));
    result.tokens.push_back(next);
    const std::vector<int32_t> one = {next};
    RETURN_IF_ERROR(model.Forward({{cache.get(), one, model::LogitsMode::kLast}}, &out));
  }
  result.ms_per_token = MillisSince(start) / steps;
  result.cpu_ms_per_token = (ThreadCpuMillis() - cpu_start) / steps;
  if (timed) {
    result.collective_ms_per_token = (timed->total_ms - collective_before) / steps;
    result.collective_cpu_ms_per_token = (timed->total_cpu_ms - collective_cpu_before) / steps;
    result.collectives_per_token = (timed->calls - calls_before) / steps;
  }
  return result;
}

absl::Status BenchDecode(const Options& options, const std::string& path,
                         const std::vector<int>& tp_sizes) {
  std::printf("\n== Decode, %s ==\n", path.c_str());
  ASSIGN_OR_RETURN(auto single,
                   model::Transformer::Load(path, {.threads = options.threads_per_rank}));
  const model::ModelConfig& c = single->config();
  std::printf("  model: %d layers, %d heads, %d KV heads, n_embd %d, n_ff %d, vocab %d\n",
              c.n_layers, c.n_heads, c.n_kv_heads, c.n_embd, c.n_ff, c.vocab_size);
  ASSIGN_OR_RETURN(DecodeResult base, Decode(*single, options.decode_tokens, nullptr));
  single.reset();
  std::printf(
      "  TP=1  %d thread(s):            %7.2f ms/token  %7.1f tokens/s  "
      "(calling thread CPU %.2f ms/token)\n",
      options.threads_per_rank, base.ms_per_token, 1000 / base.ms_per_token, base.cpu_ms_per_token);
  const int all_threads = static_cast<int>(std::thread::hardware_concurrency());
  if (all_threads > options.threads_per_rank) {  // the same cores used by one process
    ASSIGN_OR_RETURN(auto wide, model::Transformer::Load(path, {.threads = all_threads}));
    ASSIGN_OR_RETURN(DecodeResult r, Decode(*wide, options.decode_tokens, nullptr));
    std::printf("  TP=1  %d thread(s):            %7.2f ms/token  %7.1f tokens/s\n", all_threads,
                r.ms_per_token, 1000 / r.ms_per_token);
  }
  for (int tp : tp_sizes) {
    std::vector<DecodeResult> results(tp);
    absl::Status s = FirstError(RunGroup(tp, [&](net::Communicator& comm) -> absl::Status {
      TimedCommunicator timed(&comm);
      ASSIGN_OR_RETURN(auto model, model::Transformer::Load(path, &timed,
                                                            {.threads = options.threads_per_rank}));
      ASSIGN_OR_RETURN(results[comm.rank()], Decode(*model, options.decode_tokens, &timed));
      return absl::OkStatus();
    }));
    if (!s.ok()) {
      std::printf("  TP=%d  not run: %s\n", tp, std::string(s.message()).c_str());
      continue;
    }
    const DecodeResult& r = results[0];
    std::printf(
        "  TP=%d  %d rank(s) x %d thread(s):  %7.2f ms/token  %7.1f tokens/s  "
        "(%.2fx TP=1)\n",
        tp, tp, options.threads_per_rank, r.ms_per_token, 1000 / r.ms_per_token,
        base.ms_per_token / r.ms_per_token);
    std::printf(
        "        where rank 0's time goes: collectives %.2f ms/token wall (%lld calls, "
        "%.1f us each; rank 0 CPU inside them %.2f ms), rest %.2f ms/token wall "
        "(rank 0 CPU %.2f ms)\n",
        r.collective_ms_per_token, static_cast<long long>(r.collectives_per_token),
        1000 * r.collective_ms_per_token / std::max<int64_t>(1, r.collectives_per_token),
        r.collective_cpu_ms_per_token, r.ms_per_token - r.collective_ms_per_token,
        r.cpu_ms_per_token - r.collective_cpu_ms_per_token);
    double max_diff = 0, max_abs = 0;
    for (size_t i = 0; i < base.prompt_logits.size(); ++i) {
      max_diff = std::max(max_diff, std::fabs(double{r.prompt_logits[i]} - base.prompt_logits[i]));
      max_abs = std::max(max_abs, std::fabs(double{base.prompt_logits[i]}));
    }
    std::printf("        logits after the prompt: max |TP=%d - TP=1| = %.3g (max |TP=1| = %.3g)\n",
                tp, max_diff, max_abs);
    size_t differ = 0;
    while (differ < r.tokens.size() && r.tokens[differ] == base.tokens[differ]) ++differ;
    if (differ == r.tokens.size()) {
      std::printf("        greedy tokens identical to TP=1's (%zu steps)\n", r.tokens.size());
    } else {
      std::printf(
          "        greedy tokens equal TP=1's for %zu steps, then TP=%d picks %d and "
          "TP=1 picks %d; TP=1's top-2 logit gap there: %.3g (TP=%d's: %.3g)\n",
          differ, tp, r.tokens[differ], base.tokens[differ], base.top2_gaps[differ], tp,
          r.top2_gaps[differ]);
    }
  }
  return absl::OkStatus();
}

// The default model's layer stack with 8 query / 4 KV heads instead of 9 / 3, so
// that TP=2 can split it; random weights, tiny vocabulary (the head is negligible).
absl::Status BenchSyntheticDecode(const Options& options) {
  model::TinyModelOptions shape;
  shape.n_layers = 30;
  shape.n_embd = 576;
  shape.n_ff = 1536;
  shape.n_heads = 8;
  shape.n_kv_heads = 4;
  shape.weight_type = kernels::GgmlType::kQ4_1;
  shape.embedding_type = kernels::GgmlType::kQ8_0;
  std::string path = "/tmp/splitspec-bench-XXXXXX";
  if (mkdtemp(path.data()) == nullptr) return absl::UnavailableError("mkdtemp failed");
  path += "/smollm2-shaped-8-heads.gguf";
  RETURN_IF_ERROR(model::WriteTinyModel(shape, path));
  std::printf(
      "\n(synthetic: SmolLM2-135M's 30 Q4_1 layers, n_embd 576, n_ff 1536, but 8 heads / "
      "4 KV heads of 72, random weights, %d-token vocabulary)",
      model::TinyModelVocabSize());
  absl::Status s = BenchDecode(options, path, {2});
  std::remove(path.c_str());
  return s;
}

void PrintMachine(int argc, char** argv) {
  std::string cpu = "unknown CPU";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      cpu = line.substr(line.find(':') + 2);
      break;
    }
  }
  utsname host;
  uname(&host);
  std::string load;
  std::getline(std::ifstream("/proc/loadavg"), load);
  std::printf("machine: %s, %u hardware threads, %s %s, matmul path %s, load average %s\n",
              cpu.c_str(), std::thread::hardware_concurrency(), host.sysname, host.release,
              kernels::MatMulPathName(), load.c_str());
  std::string command;
  for (int i = 0; i < argc; ++i) absl::StrAppend(&command, i ? " " : "", argv[i]);
  std::printf("command: %s\n", command.c_str());
}

const cli::FlagTable& FlagTable() {
  static const cli::FlagTable* const table = new cli::FlagTable{
      .command = "splitspec_bench_collectives",
      .summary = "Gloo collective latency on loopback, and decode tokens/s at TP=1 against TP=N",
      .flags = {
          {"model", "PATH", "$SPLITSPEC_MODEL, else the default model", "the model to decode"},
          {"tp", "LIST", "2,3", "tensor-parallel sizes to decode with (each >= 2)"},
          {"iterations", "N", "2000", "calls per collective after 100 warm-up calls",
           cli::IntRangeOf<int>()},
          {"decode-tokens", "N", "32", "greedy decode steps per run", cli::IntRangeOf<int>()},
          {"threads-per-rank", "N", "1", "compute threads of each rank", cli::IntRangeOf<int>()},
          {"synthetic", "0|1", "1", "also TP=1 vs TP=2 on a model with 8 / 4 heads"}}};
  return *table;
}

absl::StatusOr<int> PositiveInt(const cli::CliArgs& args, const std::string& name, int fallback) {
  ASSIGN_OR_RETURN(int value, args.GetInt<int>(name, fallback));
  if (value < 1 || value > (1 << 30)) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " must be >= 1, got ", value));
  }
  return static_cast<int>(value);
}

absl::StatusOr<Options> ParseOptions(const cli::CliArgs& args) {
  Options options;
  options.model = args.GetString("model", options.model);
  if (args.Has("tp")) {
    ASSIGN_OR_RETURN(std::vector<int32_t> sizes, args.GetIntList("tp"));
    options.tp_sizes.assign(sizes.begin(), sizes.end());
    for (int n : options.tp_sizes) {
      if (n < 2) return absl::InvalidArgumentError(absl::StrCat("--tp: ", n, " is not >= 2"));
    }
  }
  ASSIGN_OR_RETURN(options.iterations, PositiveInt(args, "iterations", options.iterations));
  ASSIGN_OR_RETURN(options.decode_tokens,
                   PositiveInt(args, "decode-tokens", options.decode_tokens));
  ASSIGN_OR_RETURN(options.threads_per_rank,
                   PositiveInt(args, "threads-per-rank", options.threads_per_rank));
  const std::string synthetic = args.GetString("synthetic", "1");
  options.synthetic = synthetic != "0" && synthetic != "false";
  return options;
}

}  // namespace
}  // namespace splitspec::tools

int main(int argc, char** argv) {
  using namespace splitspec::tools;
  return splitspec::cli::RunMain(argc, argv, FlagTable(), [&](const splitspec::cli::CliArgs& args) {
    ASSIGN_OR_RETURN(Options options, ParseOptions(args));
    PrintMachine(argc, argv);
    RETURN_IF_ERROR(BenchCollectives(options));
    RETURN_IF_ERROR(BenchDecode(options, options.model, options.tp_sizes));
    if (options.synthetic) RETURN_IF_ERROR(BenchSyntheticDecode(options));
    return absl::OkStatus();
  });
}
