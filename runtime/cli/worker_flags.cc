#include "runtime/cli/worker_flags.h"

#include <unistd.h>

#include <thread>

#include "absl/strings/str_cat.h"
#include "runtime/base/shutdown.h"
#include "runtime/base/status_macros.h"
#include "runtime/net/channel_security.h"

namespace splitspec::cli {
namespace {

std::vector<Flag> CommonFlags() {
  return {
      {"coordinator", "ENDPOINT", "tcp://127.0.0.1:5555", "the coordinator's control endpoint"},
      {"name", "NAME", "<role>-<pid>", "this worker's name in the membership table"},
      {"model", "PATH", "", "the model's GGUF (fingerprinted into the registration)"},
      {"data-endpoint", "EP", "", "where this worker serves data-plane traffic"},
      {"threads", "N", "hardware concurrency", "compute threads", IntRangeOf<int>()},
      {"device", "DEV", "cpu",
       "where the model runs: cpu or cuda:N (checked at start-up: the device must exist and "
       "hold the model)"},
      {"kv-cache-memory", "BYTES|PERCENT", "50% host / 80% device",
       "KV-cache budget of this process (each rank of a group has its own): bytes (256MiB, "
       "2GiB) or a percentage of the memory left after the weights (host RAM for --device "
       "cpu, device memory for cuda:N); requests wait for room, and the newest is evicted "
       "and recomputed when running ones outgrow it (draft workers: the model drafter's "
       "caches)"},
  };
}

// A worker binary's table: the flags every worker takes, then its role's.
FlagTable WorkerTable(std::string command, std::string summary, std::vector<Flag> role_flags) {
  FlagTable table{
      .command = std::move(command), .summary = std::move(summary), .flags = CommonFlags()};
  table.flags.insert(table.flags.end(), role_flags.begin(), role_flags.end());
  return table;
}

FlagTable MakeTargetTable() {
  return WorkerTable(
      "splitspec-target-worker",
      "one rank of a target group: verifies draft blocks in batched forward steps "
      "(--model PATH is required)",
      {{"step-tokens", "N", "512", "token budget of one forward step", IntRangeOf<int>()},
       {"block-wait-ms", "N", "200", "how long a request waits for its next draft block",
        IntRangeOf<int>()},
       {"tp-group", "G", "", "tensor-parallel group name (required with --tp-size > 1)"},
       {"tp-rank", "R", "0", "this process's rank in the group (0 leads)", IntRangeOf<int>()},
       {"tp-size", "N", "1", "ranks in the group: 1, 2, 4 or 8", IntRangeOf<int>()},
       {"tp-timeout-ms", "N", "30000", "bound on every collective of the group", IntRangeOf<int>()},
       {"tp-address", "ADDR", "derived from --data-endpoint",
        "the address this rank's collectives (Gloo, plaintext TCP) and the leader's rendezvous "
        "bind; serve passes 127.0.0.1 for a group on one host"},
       {"tp-comm", "auto|nccl|gloo", "auto",
        "transport of the group's collectives (every rank names the same): nccl = NCCL on "
        "device buffers, refused at start-up unless every rank runs on cuda:N with a GPU of its "
        "own; gloo = Gloo over TCP, CUDA ranks copy through the host (works on one GPU); auto = "
        "nccl where it can and the group has 2 ranks (NCCL's sum over more may change with the "
        "batch), else gloo"},
       {"cuda-graphs", "on|off", "on",
        "with --device cuda:N and --tp-size 1: run decode and verify steps as replayed CUDA "
        "graphs (bitwise the eager logits)"},
       {"drafter", "none|lookup|ngram", "none",
        "a model-free drafter the leader runs in its own loop for the requests the coordinator "
        "gives no draft worker (unless they ask for drafter none); none: those decode alone"},
       {"tree", "auto|off", "off", kTreeFlagHelp},
       {"kv-cache-type", "f16|q8_0", "f16",
        absl::StrCat(model::kKvCacheTypeFlagHelp, "; q8_0: CPU, --tp-size 1, --tree off")}});
}

FlagTable MakeDraftTable() {
  return WorkerTable(
      "splitspec-draft-worker",
      "drafts blocks of candidate tokens for the requests the coordinator assigns and streams "
      "them to their target leaders",
      {{"drafter", "NAME", "ngram", "ngram, model or layerskip:L"},
       {"draft", "PATH", "", "the draft model's GGUF (drafter model)"},
       {"vocab-mapping", "auto|intersection|string", "auto",
        "a draft model whose vocabulary differs from the target's: token-level intersection, "
        "string-level match, or auto (intersection for rejection, string for greedy and "
        "coupled verification)"},
       {"target-model", "PATH", "",
        "the target's GGUF: its tokenizer for the vocabulary check (or a draft of another "
        "vocabulary's mapping), and a layerskip drafter's "
        "weights"},
       {"k", "N", "4", "draft tokens per block, in [1, 64]", IntRangeOf<int>()},
       {"lookahead", "N", "2", "blocks in flight per request; 1 = sequential", IntRangeOf<int>()},
       {"spec-cache", "on|off", "off",
        "speculation cache: one block in flight, and while it is verified pre-draft the next "
        "block for its likeliest outcomes (a hit is sent without drafting)"},
       {"cache-guard", "on|off", "on",
        "with --spec-cache: pre-draft only while the cache's hits save more than its "
        "pre-drafting slows the verification (both measured per request)"},
       {"adaptive-window", "on|off", "off",
        "per request, choose sequential, overlapped (--lookahead) or the cache, and with "
        "assignments of draft_k 0 the block size, from measured acceptance and costs"},
       {"tree", "auto|off", "off", kTreeFlagHelp}});
}

absl::Status CheckAtLeastOne(const char* flag, int64_t value) {
  if (value >= 1) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("--", flag, " must be >= 1, got ", value));
}

absl::Status ReadTensorParallel(const CliArgs& parsed, WorkerFlags& flags) {
  net::WorkerIdentity& id = flags.identity;
  id.tp_group = parsed.GetString("tp-group", "");
  flags.tp_address = parsed.GetString("tp-address", "");
  ASSIGN_OR_RETURN(int tp_rank, parsed.GetInt<int>("tp-rank", 0));
  ASSIGN_OR_RETURN(int tp_size, parsed.GetInt<int>("tp-size", 1));
  ASSIGN_OR_RETURN(int tp_timeout_ms, parsed.GetInt<int>("tp-timeout-ms", flags.tp_timeout_ms));
  if (tp_size != 1 && tp_size != 2 && tp_size != 4 && tp_size != 8) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tp-size must be 1, 2, 4 or 8, got ", tp_size));
  }
  if (tp_rank < 0 || tp_rank >= tp_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tp-rank must be in [0, ", tp_size, "), got ", tp_rank));
  }
  if (tp_size > 1 && id.tp_group.empty()) {
    return absl::InvalidArgumentError(
        "--tp-group NAME is required with --tp-size > 1 (every rank of a group names it)");
  }
  RETURN_IF_ERROR(CheckAtLeastOne("tp-timeout-ms", tp_timeout_ms));
  absl::StatusOr<net::TpComm> tp_comm =
      net::ParseTpComm(parsed.GetString("tp-comm", net::TpCommName(flags.tp_comm)));
  if (!tp_comm.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--tp-comm: ", tp_comm.status().message()));
  }
  flags.tp_comm = *tp_comm;
  flags.tp_timeout_ms = tp_timeout_ms;
  id.tp_rank = tp_rank;
  id.tp_size = tp_size;
  return absl::OkStatus();
}

absl::Status ReadSizes(const CliArgs& parsed, WorkerFlags& flags) {
  ASSIGN_OR_RETURN(int step_tokens, parsed.GetInt<int>("step-tokens", flags.step_tokens));
  ASSIGN_OR_RETURN(int block_wait_ms, parsed.GetInt<int>("block-wait-ms", flags.block_wait_ms));
  ASSIGN_OR_RETURN(int k, parsed.GetInt<int>("k", flags.k));
  ASSIGN_OR_RETURN(int lookahead, parsed.GetInt<int>("lookahead", flags.lookahead));
  RETURN_IF_ERROR(CheckAtLeastOne("step-tokens", step_tokens));
  RETURN_IF_ERROR(CheckAtLeastOne("block-wait-ms", block_wait_ms));
  if (k < 1 || k > 64) {
    return absl::InvalidArgumentError(absl::StrCat("--k must be in [1, 64], got ", k));
  }
  RETURN_IF_ERROR(CheckAtLeastOne("lookahead", lookahead));
  const std::string spec_cache = parsed.GetString("spec-cache", flags.spec_cache ? "on" : "off");
  if (spec_cache != "on" && spec_cache != "off") {
    return absl::InvalidArgumentError(
        absl::StrCat("--spec-cache must be on or off, got '", spec_cache, "'"));
  }
  flags.spec_cache = spec_cache == "on";
  const std::string cache_guard = parsed.GetString("cache-guard", flags.cache_guard ? "on" : "off");
  if (cache_guard != "on" && cache_guard != "off") {
    return absl::InvalidArgumentError(
        absl::StrCat("--cache-guard must be on or off, got '", cache_guard, "'"));
  }
  flags.cache_guard = cache_guard == "on";
  const std::string adaptive_window =
      parsed.GetString("adaptive-window", flags.adaptive_window ? "on" : "off");
  if (adaptive_window != "on" && adaptive_window != "off") {
    return absl::InvalidArgumentError(
        absl::StrCat("--adaptive-window must be on or off, got '", adaptive_window, "'"));
  }
  flags.adaptive_window = adaptive_window == "on";
  ASSIGN_OR_RETURN(flags.trees, ParseTreeSwitch(parsed.GetString("tree", "off")));
  flags.step_tokens = step_tokens;
  flags.block_wait_ms = block_wait_ms;
  flags.k = k;
  flags.lookahead = lookahead;
  return absl::OkStatus();
}

absl::Status ReadDevice(const CliArgs& parsed, WorkerFlags& flags) {
  absl::StatusOr<model::DeviceSpec> device =
      model::ParseDeviceSpec(parsed.GetString("device", "cpu"));
  if (!device.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--device: ", device.status().message()));
  }
  flags.device = *device;
  const std::string graphs = parsed.GetString("cuda-graphs", flags.cuda_graphs ? "on" : "off");
  if (graphs != "on" && graphs != "off") {
    return absl::InvalidArgumentError(
        absl::StrCat("--cuda-graphs must be on or off, got '", graphs, "'"));
  }
  flags.cuda_graphs = graphs == "on";
  return absl::OkStatus();
}

absl::Status ReadKvCacheMemory(const CliArgs& parsed, WorkerFlags& flags) {
  const std::string text = parsed.GetString("kv-cache-memory", "");
  if (text.empty()) return absl::OkStatus();  // the default share
  absl::StatusOr<MemoryAmount> amount = ParseMemoryAmount(text);
  if (!amount.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--kv-cache-memory: ", amount.status().message()));
  }
  flags.kv_cache_memory = *amount;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<bool> ParseTreeSwitch(absl::string_view value) {
  if (value == "auto") return true;
  if (value == "off") return false;
  return absl::InvalidArgumentError(absl::StrCat("--tree must be auto or off, got '", value, "'"));
}

const FlagTable& WorkerFlagTable(proto::Role role) {
  static const FlagTable* const target = new FlagTable(MakeTargetTable());
  static const FlagTable* const draft = new FlagTable(MakeDraftTable());
  return role == proto::ROLE_TARGET_WORKER ? *target : *draft;
}

absl::StatusOr<WorkerFlags> WorkerFlagsFrom(const CliArgs& parsed, proto::Role role) {
  WorkerFlags flags;
  const char* prefix = role == proto::ROLE_DRAFT_WORKER ? "draft" : "target";
  flags.coordinator = parsed.GetString("coordinator", flags.coordinator);
  net::WorkerIdentity& id = flags.identity;
  id.role = role;
  id.name = parsed.GetString("name", absl::StrCat(prefix, "-", getpid()));
  id.model_path = parsed.GetString("model", "");
  id.data_endpoint = parsed.GetString("data-endpoint", "");
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  ASSIGN_OR_RETURN(int threads, parsed.GetInt<int>("threads", cores));
  RETURN_IF_ERROR(CheckAtLeastOne("threads", threads));
  id.threads = threads;
  RETURN_IF_ERROR(ReadSizes(parsed, flags));
  RETURN_IF_ERROR(ReadDevice(parsed, flags));
  RETURN_IF_ERROR(ReadKvCacheMemory(parsed, flags));
  flags.drafter =
      parsed.GetString("drafter", role == proto::ROLE_TARGET_WORKER ? "none" : flags.drafter);
  flags.draft_path = parsed.GetString("draft", "");
  if (role == proto::ROLE_DRAFT_WORKER) {
    flags.vocab_mapping = parsed.GetString("vocab-mapping", flags.vocab_mapping);
  }
  flags.target_model = parsed.GetString("target-model", "");
  RETURN_IF_ERROR(ReadTensorParallel(parsed, flags));
  if (role == proto::ROLE_TARGET_WORKER) {
    ASSIGN_OR_RETURN(flags.kv_cache_type,
                     model::ParseKvCacheType(parsed.GetString("kv-cache-type", "f16")));
    if (flags.kv_cache_type != model::KvCacheType::kF16 && flags.trees) {
      return absl::InvalidArgumentError(
          "--tree auto with --kv-cache-type q8_0: tree forwards over a q8_0 cache are not "
          "implemented; use --tree off");
    }
    if (flags.kv_cache_type != model::KvCacheType::kF16 && flags.identity.tp_size > 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--kv-cache-type ", model::KvCacheTypeName(flags.kv_cache_type),
          " is not implemented for a tensor-parallel group (--tp-size ", flags.identity.tp_size,
          "); use f16"));
    }
  }
  return flags;
}

absl::StatusOr<WorkerFlags> ParseWorkerFlags(const std::vector<std::string>& args,
                                             proto::Role role) {
  ASSIGN_OR_RETURN(CliArgs parsed, CliArgs::Parse(args, WorkerFlagTable(role)));
  return WorkerFlagsFrom(parsed, role);
}

int RunWorkerMain(int argc, char** argv, proto::Role role,
                  absl::FunctionRef<absl::Status(WorkerFlags)> serve) {
  InstallShutdownHandlers();
  return RunMain(argc, argv, WorkerFlagTable(role), [&](const CliArgs& args) -> absl::Status {
    ASSIGN_OR_RETURN(WorkerFlags flags, WorkerFlagsFrom(args, role));
    // A worker loads its own key (draft.d/NAME, target.d/NAME) when the key directory has one.
    RETURN_IF_ERROR(net::ConfigureProcessSecurity(
        role == proto::ROLE_TARGET_WORKER ? net::kTarget : net::kDraft, flags.identity.name));
    return serve(std::move(flags));
  });
}

}  // namespace splitspec::cli
