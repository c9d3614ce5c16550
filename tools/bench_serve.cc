// `splitspec bench serve [--url URL [--off-url URL]] [--model PATH] [--workload FILE]
//                        [--limit N] [--concurrency 1,4,16,64] [--rounds N] [--threads N]
//                        [--config FILE] [--drafter NAME [--draft PATH]] [--log-dir DIR]
//                        [--timeout-s S] [--json]`
//
// A load generator for an OpenAI-compatible cluster, speculation on against off,
// over HTTP with streamed greedy requests, as users run it:
//   clusters  without --url it starts two `splitspec serve` clusters on free
//             loopback ports (binaries beside this one): "on" with serve's
//             defaults (or --drafter / --draft), "off" with --drafts 0; both stay up
//             for the whole run (the
//             one not measured is idle). With --url it measures that running
//             cluster: "on" is its default, "off" the same requests with the
//             "drafter": "none" extension (or the cluster at --off-url).
//   workload  the JSONL of tools/workload_suite.h (chat lines go to
//             /v1/chat/completions, prompt lines to /v1/completions), temperature
//             0, each line's max_tokens, stream_options.include_usage.
//   sweep     for each concurrency C: --rounds rounds, each one pass of the whole
//             workload with speculation on and one with it off, the order
//             alternating pass after pass (so drifting load from other processes
//             hits both alike); C clients keep C requests in flight. One unmeasured
//             request warms each cluster first.
//   exact     in each round, every request's output with speculation on must
//             equal its output with speculation off (greedy speculation is exact);
//             a difference fails the run, naming the request and the first
//             differing token (the outputs tokenized with --model's tokenizer). The
//             check compares the streamed text, which is what HTTP carries: bytes
//             that are not UTF-8 arrive as U+FFFD, so two outputs that differ only
//             in such bytes pass (real models' greedy text is UTF-8).
//             A line's response_format (tools/workload_suite.h) is sent as written.
//   report    per concurrency and side: aggregate tok/s, TTFT, ITL and TPOT p50 and
//             p99 (tools/bench_serve_stats.h), and on/off; with several categories,
//             per category and side the per-request tok/s (tokens / end-to-end
//             seconds, summed over its requests) and mean TPOT, which compare
//             categories within one pass (e.g. json_schema against none:
//             bench/workloads/json_extraction.jsonl); --json prints one object per
//             concurrency instead of the table ("categories" holds the same).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "runtime/base/json_string.h"
#include "runtime/base/status_macros.h"
#include "runtime/base/subprocess.h"
#include "runtime/model/gguf_reader.h"
#include "runtime/tokenizer/tokenizer_gguf.h"
#include "tools/bench_serve_stats.h"
#include "tools/commands.h"
#include "tools/default_paths.h"
#include "tools/http_stream_client.h"
#include "tools/workload_suite.h"

namespace splitspec::tools {
namespace {

constexpr char kApiKeyEnv[] = "SPLITSPEC_API_KEY";

struct Flags {
  std::string url;      // "" = start the clusters here
  std::string off_url;  // with url: a speculation-off cluster; "" = drafter none on url
  std::string model;
  std::string workload;
  int limit = 0;
  std::vector<int> concurrency = {1, 4, 16, 64};
  int rounds = 1;
  int threads = 0;
  std::string config;
  std::string drafter;  // "" = serve's
  std::string draft;
  std::string log_dir;
  int timeout_s = 600;
  bool json = false;
};

absl::StatusOr<Flags> ParseFlags(const CommandArgs& argv) {
  ASSIGN_OR_RETURN(CliArgs args, CliArgs::Parse(argv, BenchServeFlagTable()));
  Flags f;
  f.url = args.GetString("url", "");
  while (!f.url.empty() && f.url.back() == '/') f.url.pop_back();
  f.off_url = args.GetString("off-url", "");
  while (!f.off_url.empty() && f.off_url.back() == '/') f.off_url.pop_back();
  if (!f.off_url.empty() && f.url.empty())
    return absl::InvalidArgumentError("--off-url needs --url (the speculation-on cluster)");
  f.model = args.GetString("model", DefaultModelPath());
  f.workload = args.GetString("workload", RepositoryRoot() + "/bench/workloads/suite.jsonl");
  ASSIGN_OR_RETURN(f.limit, args.GetInt<int>("limit", 0));
  if (f.limit < 0) return absl::InvalidArgumentError(absl::StrCat("--limit ", f.limit, " < 0"));
  if (args.Has("concurrency")) {
    ASSIGN_OR_RETURN(std::vector<int32_t> list, args.GetIntList("concurrency"));
    if (list.empty()) return absl::InvalidArgumentError("--concurrency is empty");
    f.concurrency.assign(list.begin(), list.end());
    for (int c : f.concurrency) {
      if (c < 1 || c > 1024) {
        return absl::InvalidArgumentError(
            absl::StrCat("--concurrency ", c, " out of range [1, 1024]"));
      }
    }
  }
  ASSIGN_OR_RETURN(f.rounds, args.GetInt<int>("rounds", 1));
  if (f.rounds < 1 || f.rounds > 100)
    return absl::InvalidArgumentError(
        absl::StrCat("--rounds ", f.rounds, " out of range [1, 100]"));
  ASSIGN_OR_RETURN(f.threads, args.GetInt<int>("threads", 0));
  if (f.threads < 0)
    return absl::InvalidArgumentError(absl::StrCat("--threads ", f.threads, " < 0"));
  f.config = args.GetString("config", "");
  f.drafter = args.GetString("drafter", "");
  f.draft = args.GetString("draft", "");
  f.log_dir = args.GetString("log-dir", "");
  ASSIGN_OR_RETURN(f.timeout_s, args.GetInt<int>("timeout-s", 600));
  if (f.timeout_s < 1)
    return absl::InvalidArgumentError(absl::StrCat("--timeout-s ", f.timeout_s, " < 1"));
  if (!f.url.empty() && (!f.config.empty() || f.threads != 0 || !f.log_dir.empty() ||
                         !f.drafter.empty() || !f.draft.empty())) {
    return absl::InvalidArgumentError(
        "--config, --threads, --drafter, --draft and --log-dir configure the clusters bench "
        "serve starts; with --url it starts none");
  }
  f.json = args.Has("json");
  return f;
}

// A TCP port on 127.0.0.1 that was free a moment ago.
absl::StatusOr<int> FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError("socket() failed looking for a free port");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  close(fd);
  if (port == 0) return absl::InternalError("no free TCP port on 127.0.0.1");
  return port;
}

// One side of the comparison: where its requests go and what they add.
struct Side {
  std::string name;                 // "on" / "off"
  std::string url;                  // the cluster's HTTP base
  bool drafter_none = false;        // requests carry "drafter": "none"
  std::optional<Subprocess> serve;  // a cluster started here
};

// Starts `splitspec serve` for `side` and waits (bounded by 5 minutes) until its
// /health answers 200.
absl::Status StartCluster(const Flags& f, const std::string& run_dir, bool speculation,
                          Side* side) {
  ASSIGN_OR_RETURN(const int http_port, FreeLoopbackPort());
  ASSIGN_OR_RETURN(const int control_port, FreeLoopbackPort());
  std::error_code error;
  std::filesystem::create_directories(run_dir, error);
  if (error)
    return absl::InternalError(absl::StrCat("cannot create ", run_dir, ": ", error.message()));
  std::vector<std::string> argv = {BinaryDirectory() + "/splitspec",
                                   "serve",
                                   "--model",
                                   f.model,
                                   "--http",
                                   absl::StrCat("127.0.0.1:", http_port),
                                   "--control",
                                   absl::StrCat("tcp://127.0.0.1:", control_port),
                                   "--log-dir",
                                   run_dir};
  if (!f.config.empty()) argv.insert(argv.end(), {"--config", f.config});
  if (f.threads > 0) argv.insert(argv.end(), {"--threads", absl::StrCat(f.threads)});
  if (!speculation) argv.insert(argv.end(), {"--drafts", "0"});
  if (speculation && !f.drafter.empty()) argv.insert(argv.end(), {"--drafter", f.drafter});
  if (speculation && !f.draft.empty()) argv.insert(argv.end(), {"--draft", f.draft});
  const std::string log = run_dir + "/serve.out";
  ASSIGN_OR_RETURN(Subprocess serve,
                   Subprocess::Spawn(argv, log, {}, LogMode::kTruncate, OnParentDeath::kDie));
  side->url = absl::StrCat("http://127.0.0.1:", http_port);
  side->serve.emplace(std::move(serve));
  std::fprintf(stderr, "bench serve: speculation %s: %s (log %s)\n", side->name.c_str(),
               absl::StrJoin(argv, " ").c_str(), log.c_str());
  const absl::Time deadline = absl::Now() + absl::Minutes(5);
  while (absl::Now() < deadline) {
    absl::StatusOr<int> exited = side->serve->Wait(absl::ZeroDuration());
    if (exited.ok()) {
      return absl::InternalError(absl::StrCat("serve (speculation ", side->name, ") ",
                                              DescribeExit(*exited), " before it was healthy:\n",
                                              LastLines(ReadFileOrEmpty(log), 20)));
    }
    absl::StatusOr<int> health = HttpGetStatus(side->url, "/health", absl::Seconds(2));
    if (health.ok() && *health == 200) return absl::OkStatus();
    absl::SleepFor(absl::Milliseconds(250));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("serve (speculation ", side->name, ") not healthy after 5 minutes; log ", log));
}

void StopCluster(Side* side) {
  if (!side->serve.has_value() || !side->serve->running()) return;
  side->serve->Signal(SIGTERM);  // serve stops its workers, then the coordinator
  if (!side->serve->Wait(absl::Seconds(30)).ok()) side->serve->Kill();
}

std::string RequestBody(const WorkloadRequest& request, bool drafter_none) {
  std::string body = "{";
  if (request.messages.empty()) {
    absl::StrAppend(&body, "\"prompt\":", JsonQuote(request.prompt));
  } else {
    absl::StrAppend(&body, "\"messages\":[");
    for (size_t i = 0; i < request.messages.size(); ++i) {
      absl::StrAppend(&body, i ? "," : "", "{\"role\":", JsonQuote(request.messages[i].role),
                      ",\"content\":", JsonQuote(request.messages[i].content), "}");
    }
    absl::StrAppend(&body, "]");
  }
  if (!request.response_format.empty()) {
    absl::StrAppend(&body, ",\"response_format\":", request.response_format);
  }
  absl::StrAppend(&body, ",\"max_tokens\":", request.max_tokens,
                  ",\"temperature\":0,\"stream\":true,\"stream_options\":{\"include_usage\":true}",
                  drafter_none ? ",\"drafter\":\"none\"" : "", "}");
  return body;
}

std::string Label(const Flags& f, const WorkloadRequest& request, int index) {
  return absl::StrCat("request ", index, " (", f.workload, ":", request.line, ", ",
                      request.category, ")");
}

struct Pass {
  RoundTiming round;
  std::vector<StreamedCompletion> outputs;  // in workload order
};

// The whole workload through `side` with `concurrency` requests in flight.
absl::StatusOr<Pass> RunPass(const Flags& f, const Side& side,
                             const std::vector<WorkloadRequest>& requests, int concurrency) {
  const std::string api_key = std::getenv(kApiKeyEnv) ? std::getenv(kApiKeyEnv) : "";
  std::vector<absl::StatusOr<StreamedCompletion>> results(requests.size(),
                                                          absl::UnknownError("not sent"));
  std::atomic<size_t> next{0};
  const absl::Time start = absl::Now();
  std::vector<std::thread> clients;
  for (int c = 0; c < concurrency && c < static_cast<int>(requests.size()); ++c) {
    clients.emplace_back([&] {
      for (size_t i; (i = next.fetch_add(1)) < requests.size();) {
        const WorkloadRequest& r = requests[i];
        results[i] = PostStreamingCompletion(
            side.url, r.messages.empty() ? "/v1/completions" : "/v1/chat/completions",
            RequestBody(r, side.drafter_none), api_key, absl::Seconds(f.timeout_s));
      }
    });
  }
  for (std::thread& t : clients) t.join();
  Pass pass;
  pass.round.wall_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  for (size_t i = 0; i < requests.size(); ++i) {
    if (!results[i].ok()) {
      return absl::Status(results[i].status().code(),
                          absl::StrCat(Label(f, requests[i], static_cast<int>(i)), ", speculation ",
                                       side.name, ": ", results[i].status().message()));
    }
    if (results[i]->completion_tokens < 0) {
      return absl::InternalError(absl::StrCat(Label(f, requests[i], static_cast<int>(i)),
                                              ": the stream carried no usage"));
    }
    pass.round.tokens += results[i]->completion_tokens;
    pass.outputs.push_back(*std::move(results[i]));
  }
  return pass;
}

absl::Status CheckIdentical(const Flags& f, const std::vector<WorkloadRequest>& requests,
                            const Pass& on, const Pass& off, const model::Tokenizer& tokenizer,
                            int concurrency, int round) {
  for (size_t i = 0; i < requests.size(); ++i) {
    const std::string& a = on.outputs[i].text;
    const std::string& b = off.outputs[i].text;
    if (a == b) continue;
    const auto encode = [&](const std::string& text) {
      return tokenizer.Encode(text, {.add_special = false, .parse_special = true});
    };
    const auto piece = [&](int32_t id) {
      absl::StatusOr<std::string> text = tokenizer.Decode({id});
      return text.ok() ? *text : absl::StrCat("<token ", id, ">");
    };
    std::optional<std::string> why =
        DescribeOutputDifference(absl::StrCat(Label(f, requests[i], static_cast<int>(i)),
                                              " at concurrency ", concurrency, ", round ", round),
                                 encode(a), encode(b), piece);
    return absl::InternalError(
        why.value_or(absl::StrCat(Label(f, requests[i], static_cast<int>(i)),
                                  ": the outputs with speculation on and off differ")));
  }
  return absl::OkStatus();
}

std::string Ms(double seconds) { return absl::StrFormat("%.1f", seconds * 1e3); }

// One category's requests on one side at one concurrency, over the rounds: the per-request
// decode rate, which (unlike the aggregate tok/s) does not mix the categories of a pass.
struct CategoryTotals {
  int64_t tokens = 0;
  double e2e_s = 0.0;     // sent to the end of the stream, summed
  double decode_s = 0.0;  // after the first text event, summed
  int64_t decoded = 0;    // tokens after the first, summed

  void Add(const RequestTiming& timing) {
    tokens += timing.tokens;
    e2e_s += timing.e2e_s;
    decode_s += timing.e2e_s - timing.ttft_s;
    decoded += std::max<int64_t>(timing.tokens - 1, 0);
  }
  double tok_s() const { return e2e_s > 0 ? tokens / e2e_s : 0.0; }
  double tpot_ms() const { return decoded > 0 ? decode_s / decoded * 1e3 : 0.0; }
  std::string Json() const {
    return absl::StrFormat(R"({"tokens":%d,"tok_s_per_request":%.3f,"tpot_mean_ms":%.3f})",
                           tokens, tok_s(), tpot_ms());
  }
};

// category -> (on, off), in name order.
using CategoryTable = std::map<std::string, std::pair<CategoryTotals, CategoryTotals>>;

void PrintTableRow(int concurrency, const char* side, const ServeSummary& s,
                   const std::string& ratio) {
  std::printf("%11d  %-4s %9.1f %7d %9s %9s %8s %8s %9s %9s %7s\n", concurrency, side, s.tok_s,
              s.requests, Ms(s.ttft_p50_s).c_str(), Ms(s.ttft_p99_s).c_str(),
              Ms(s.itl_p50_s).c_str(), Ms(s.itl_p99_s).c_str(), Ms(s.tpot_p50_s).c_str(),
              Ms(s.tpot_p99_s).c_str(), ratio.c_str());
}

std::string CategoriesJson(const CategoryTable& categories) {
  std::string json;
  for (const auto& [category, sides] : categories) {
    absl::StrAppend(&json, json.empty() ? "" : ",", "{\"category\":", JsonQuote(category),
                    ",\"on\":", sides.first.Json(), ",\"off\":", sides.second.Json(), "}");
  }
  return json;
}

// Per category: each side's per-request tok/s (tokens / the requests' end-to-end seconds) and
// mean time per output token after the first (TPOT), and on/off of the per-request tok/s.
void PrintCategories(const CategoryTable& categories) {
  for (const auto& [category, sides] : categories) {
    const auto& [on, off] = sides;
    std::printf("%11s  %-20s on %7.1f tok/s/req, TPOT %6.2f ms | off %7.1f tok/s/req, TPOT "
                "%6.2f ms | %.3fx\n",
                "", category.c_str(), on.tok_s(), on.tpot_ms(), off.tok_s(), off.tpot_ms(),
                off.tok_s() > 0 ? on.tok_s() / off.tok_s() : 0.0);
  }
}

absl::Status Run(const Flags& f) {
  ASSIGN_OR_RETURN(std::vector<WorkloadRequest> all, LoadWorkload(f.workload));
  const std::vector<WorkloadRequest> requests = FirstPerCategory(all, f.limit);
  ASSIGN_OR_RETURN(std::unique_ptr<model::GgufFile> file, model::GgufFile::Open(f.model));
  ASSIGN_OR_RETURN(model::Tokenizer tokenizer, model::LoadTokenizerFromGguf(*file));

  Side on;
  on.name = "on";
  Side off;
  off.name = "off";
  std::string described;
  if (f.url.empty()) {
    std::string dir = f.log_dir;
    if (dir.empty()) {
      std::string pattern =
          (std::filesystem::temp_directory_path() / "splitspec-bench-serve-XXXXXX");
      if (mkdtemp(pattern.data()) == nullptr)
        return absl::InternalError(absl::StrCat("cannot create a directory like ", pattern));
      dir = pattern;
    }
    RETURN_IF_ERROR(StartCluster(f, dir + "/on", /*speculation=*/true, &on));
    RETURN_IF_ERROR(StartCluster(f, dir + "/off", /*speculation=*/false, &off));
    described = absl::StrCat("on = splitspec serve",
                             f.drafter.empty() ? " (its defaults)" : " --drafter " + f.drafter,
                             ", off = splitspec serve --drafts 0");
  } else {
    on.url = f.url;
    off.url = f.off_url.empty() ? f.url : f.off_url;
    off.drafter_none = f.off_url.empty();
    described = f.off_url.empty()
                    ? absl::StrCat("on = ", f.url, " (its default), off = the same with ",
                                   "\"drafter\": \"none\"")
                    : absl::StrCat("on = ", f.url, ", off = ", f.off_url);
  }
  struct Stopper {
    Side* a;
    Side* b;
    ~Stopper() {
      StopCluster(a);
      StopCluster(b);
    }
  } stopper{&on, &off};

  // Warm-up: the first request once per side, unmeasured (page-in, first allocations).
  for (const Side* side : {&on, &off}) {
    RETURN_IF_ERROR(RunPass(f, *side, {requests.front()}, 1).status());
  }
  if (!f.json) {
    std::printf(
        "splitspec bench serve: %zu requests (%s), greedy, streamed; %s; %d round(s) per "
        "concurrency, on and off alternating; outputs on == off checked\n",
        requests.size(), f.workload.c_str(), described.c_str(), f.rounds);
    std::printf("%11s  %-4s %9s %7s %9s %9s %8s %8s %9s %9s %7s\n", "concurrency", "spec", "tok/s",
                "reqs", "TTFT p50", "TTFT p99", "ITL p50", "ITL p99", "TPOT p50", "TPOT p99",
                "on/off");
    std::fflush(stdout);  // before any error on stderr
  }
  int round_index = 0;  // over the whole sweep: which side goes first alternates
  for (int concurrency : f.concurrency) {
    ServeTotals on_totals, off_totals;
    std::vector<double> round_ratios;
    CategoryTable categories;
    for (int round = 1; round <= f.rounds; ++round, ++round_index) {
      std::optional<Pass> on_pass, off_pass;
      for (int half = 0; half < 2; ++half) {
        const bool speculation = (half == 0) == (round_index % 2 == 0);
        std::fprintf(stderr, "bench serve: concurrency %d, round %d, speculation %s\n", concurrency,
                     round, speculation ? "on" : "off");
        ASSIGN_OR_RETURN(Pass pass, RunPass(f, speculation ? on : off, requests, concurrency));
        (speculation ? on_pass : off_pass) = std::move(pass);
      }
      RETURN_IF_ERROR(
          CheckIdentical(f, requests, *on_pass, *off_pass, tokenizer, concurrency, round));
      on_totals.AddRound(on_pass->round);
      off_totals.AddRound(off_pass->round);
      for (const StreamedCompletion& c : on_pass->outputs) on_totals.AddRequest(c.timing);
      for (const StreamedCompletion& c : off_pass->outputs) off_totals.AddRequest(c.timing);
      for (size_t i = 0; i < requests.size(); ++i) {
        categories[requests[i].category].first.Add(on_pass->outputs[i].timing);
        categories[requests[i].category].second.Add(off_pass->outputs[i].timing);
      }
      const double off_rate = off_pass->round.tokens / off_pass->round.wall_seconds;
      round_ratios.push_back((on_pass->round.tokens / on_pass->round.wall_seconds) / off_rate);
    }
    const ServeSummary on_summary = on_totals.Summary();
    const ServeSummary off_summary = off_totals.Summary();
    const double ratio = SpeedRatio(on_summary, off_summary);
    // At most one client per request: a concurrency above the workload's size keeps
    // every request in flight at once, no more.
    const int clients = std::min(concurrency, static_cast<int>(requests.size()));
    if (f.json) {
      std::string ratios;
      for (double r : round_ratios)
        absl::StrAppend(&ratios, ratios.empty() ? "" : ",", absl::StrFormat("%.4f", r));
      std::printf(
          "{\"bench\":\"serve\",\"concurrency\":%d,\"clients\":%d,\"requests\":%zu,"
          "\"workload\":%s,"
          "\"identical\":true,\"ratio\":%.4f,\"round_ratios\":[%s],\"on\":%s,\"off\":%s,"
          "\"categories\":[%s]}\n",
          concurrency, clients, requests.size(), JsonQuote(f.workload).c_str(), ratio,
          ratios.c_str(), ServeSummaryJson(on_summary).c_str(),
          ServeSummaryJson(off_summary).c_str(), CategoriesJson(categories).c_str());
    } else {
      PrintTableRow(concurrency, "on", on_summary, absl::StrFormat("%.3fx", ratio));
      PrintTableRow(concurrency, "off", off_summary, "");
      if (clients < concurrency) {
        std::printf("%11s  (%zu requests: %d in flight at most)\n", "", requests.size(), clients);
      }
      if (categories.size() > 1) PrintCategories(categories);
    }
    std::fflush(stdout);
  }
  if (!f.json) std::printf("(times in ms; tok/s over all clients; ITL between streamed events)\n");
  return absl::OkStatus();
}

}  // namespace

int RunBenchServe(const CommandArgs& args) {
  absl::StatusOr<Flags> flags = ParseFlags(args);
  if (!flags.ok()) {
    std::fprintf(stderr, "splitspec bench serve: %s\n",
                 std::string(flags.status().message()).c_str());
    return 2;
  }
  absl::Status status = Run(*flags);
  if (status.ok()) return 0;
  std::fprintf(stderr, "splitspec bench serve: %s\n", std::string(status.message()).c_str());
  return 1;
}

}  // namespace splitspec::tools
