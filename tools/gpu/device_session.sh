#!/usr/bin/env bash
# The GPU routine: one device call runs every gpu test, the sanitizers and the benchmarks from
# a bundle prebuilt on the CPU machine. Nothing is compiled on the GPU machine.
#
# The procedure (docs/gpu.md has the details):
#   1. Here, on the CPU machine:
#        cmake --preset werror && tools/gpu/bundle.sh --llama ../shared/peers/llama-bench-cuda13-sm90.tar.xz
#        tools/gpu/device_session.sh --dry-run --bundle .gpu/splitspec-gpu-bundle.tar.xz   # the plan
#   2. One device call (the whole routine fits one 8-minute call; .gpu/ is git-ignored, so carry it):
#        run(command="tools/gpu/device_session.sh --bundle .gpu/splitspec-gpu-bundle.tar.xz
#                     --llama .gpu/llama-bench-cuda13-sm90.tar.xz", carry=[".gpu"], timeout_s=540)
#   3. Read $OUT/summary.txt (and $OUT/logs.tar.xz): each failed test, each sanitizer error by
#      binary and kernel, the benchmark figures.
#   4. Fix here, rebuild the bundle (step 1), run again (step 2).
#
#   tools/gpu/device_session.sh [--dry-run] --bundle ARCHIVE [--llama ARCHIVE] [STEP...]
#
# Steps (default: all five, in this order):
#   test      every gpu test binary of the bundle, each with a timeout, with
#             SPLITSPEC_REQUIRE_GPU=1 (a skip fails, naming CUDA's error). The two-GPU NCCL
#             tests (TWO_GPU_TESTS below) are left out by name on a machine with one GPU.
#   sanitize  compute-sanitizer memcheck and initcheck over every gpu test binary, racecheck and
#             synccheck over the kernel tests (KERNEL_TESTS), all with --target-processes all
#             (serve_cuda_test starts services); 0 errors required, the summary names each
#             binary and kernel with errors.
#   bench     `splitspec bench decode|verify --device cuda:0` on random-weight GGUFs with real
#             models' shapes (smollm2 Q4_1, llama3-1b Q4_0, llama3-8b Q4_0; the bundle's
#             splitspec_write_bench_model writes them in the background from the start).
#   llama     llama.cpp's llama-bench (from --llama) on the same files, beside splitspec's.
#   profile   Nsight Compute per-kernel times (CUDA graphs off) on Llama-3.2-1B shapes: splitspec's
#             verify at k=1 and k=1,5 and a 512-token prompt, llama-bench's 1-token decode,
#             5-token batch and pp512, each summarised by tools/gpu/ncu_summary.py (kernel,
#             launches, total and mean us).
# --dry-run prints each command instead of running it, on any machine (no GPU, no NCCL needed):
# the plan of a device call, checked before device time is spent (tests/tools/).
#
# On the GPU machine: LD_LIBRARY_PATH = the bundle's lib/ + NCCL's folder from the machine's
# PyTorch wheel (`list(nvidia.nccl.__path__)[0]`/lib; the run fails at once, saying so, when
# none is found: the bundle carries no NCCL) + /usr/local/cuda/lib64. The bundle and the
# benchmark models are unpacked under $SPLITSPEC_GPU_WORK (default /tmp/splitspec-gpu), outside
# the checkout. Logs go to $OUT (the device call's output folder; build/gpu-out elsewhere):
# summary.txt, and every log packed into logs.tar.xz after each step (a call returns at most 8
# files). The routine stops starting work at SPLITSPEC_GPU_BUDGET_S seconds (default 450), and
# no command's timeout reaches past it, so that it ends inside the call; what it skipped for
# time is named in the summary, and fails it.
# Exit status: 0 when every test passed, no sanitizer found an error and every benchmark ran;
# 1 otherwise; 2 for a usage error; 3 when NCCL or the GPU is missing.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

# Tests that need two GPUs (one NCCL rank per GPU): the only ones that may not run, by name.
TWO_GPU_TESTS=(NcclCommunicatorTest.TwoRanksAllReduceAllGatherAndBroadcast
               CudaTensorParallelTest.TwoRanksOverNcclOnTwoGpusMatchOneRank)
# The tests that provoke a CUDA API error on purpose to prove it is handled: memcheck's records of
# API errors inside them are expected (tools/gpu/sanitizer_summary.py), never a memory error.
EXPECTED_API_ERROR_TESTS=(CudaRefusalTest.AHandledCudaErrorDoesNotFailTheNextForward
                          CudaTensorParallelTest.ADeviceUuidIsStableAndInNvidiaSmiForm
                          DeviceRowsTest.AStoreOnAMissingDeviceIsRefusedNamingIt
                          CudaGraphTest.AFailedCaptureRunsTheCallEagerlyAndCountsIt
                          DeviceInfoCudaTest.AnImpossibleSizeFailsAndLeavesNoStickyError)
# The kernel tests (kernels/cuda): racecheck and synccheck run on these.
KERNEL_TESTS=(softmax_cuda_test verify_cuda_test guidance_cuda_test quant_matmul_cuda_test)
# Benchmark models: shape:type.
BENCH_MODELS=(smollm2:q4_1 llama3-1b:q4_0 llama3-8b:q4_0)
PARALLEL=4  # test binaries at a time on the one GPU

usage() { echo "usage: device_session.sh [--dry-run] --bundle ARCHIVE [--llama ARCHIVE] [test|sanitize|bench|llama|profile|all ...]" >&2; exit 2; }
DRY_RUN=0
BUNDLE=""
LLAMA=""
STEP_ARGS=()
while (($#)); do
  case "$1" in
    --dry-run) DRY_RUN=1; shift ;;
    --bundle) [[ $# -ge 2 ]] || usage; BUNDLE="$2"; shift 2 ;;
    --llama) [[ $# -ge 2 ]] || usage; LLAMA="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "device_session.sh: unknown flag '$1'" >&2; usage ;;
    *) STEP_ARGS+=("$1"); shift ;;
  esac
done
STEPS=" ${STEP_ARGS[*]:-all} "
for s in $STEPS; do
  [[ "$s" =~ ^(all|test|sanitize|bench|llama|profile)$ ]] || { echo "device_session.sh: unknown step '$s'" >&2; usage; }
done
want() { [[ "$STEPS" == *" all "* || "$STEPS" == *" $1 "* ]]; }
[[ -n "$BUNDLE" ]] || { echo "device_session.sh: --bundle ARCHIVE is required (tools/gpu/bundle.sh writes .gpu/splitspec-gpu-bundle.tar.xz)" >&2; exit 2; }
[[ -f "$BUNDLE" ]] || { echo "device_session.sh: --bundle $BUNDLE: no such file (make it with tools/gpu/bundle.sh)" >&2; exit 2; }
[[ -z "$LLAMA" || -f "$LLAMA" ]] || { echo "device_session.sh: --llama $LLAMA: no such file" >&2; exit 2; }
BUNDLE="$(realpath "$BUNDLE")"
[[ -z "$LLAMA" ]] || LLAMA="$(realpath "$LLAMA")"

WORK="${SPLITSPEC_GPU_WORK:-/tmp/splitspec-gpu}"
OUT="${OUT:-$ROOT/build/gpu-out}"
if ((DRY_RUN)); then OUT="$(mktemp -d)"; trap 'rm -rf "$OUT"' EXIT; fi
mkdir -p "$OUT"
LOGS="$WORK/logs"
((DRY_RUN)) && LOGS="$OUT/logs" && mkdir -p "$LOGS"  # the redirections of printed commands
B="$WORK/splitspec-gpu"
BUDGET_S="${SPLITSPEC_GPU_BUDGET_S:-450}"
SUMMARY="$OUT/summary.txt"
# One JSON line per (engine, shape, measure) from the tools' own output (tools/bench_results.h);
# copy it to bench/results/gpu/<date>-<gpu>.jsonl in the checkout (issue 36).
RESULTS="$OUT/results.jsonl"
: >"$SUMMARY"
exec 3>&1
say() { echo "$*" | tee -a "$SUMMARY"; }
# Runs a command, or with --dry-run prints it (to the script's stdout, whatever the redirections).
run() { if ((DRY_RUN)); then echo "+ $*" >&3; else "$@"; fi; }
failures=()
fail() { failures+=("$*"); say "FAILED: $*"; }
# True while the budget allows starting `need` more seconds of work.
in_budget() {
  ((DRY_RUN)) && return 0
  if ((SECONDS + $1 > BUDGET_S)); then fail "$2: not started for time (${SECONDS}s of ${BUDGET_S}s used)"; return 1; fi
}
# A command's timeout: `want` seconds, or what is left of the budget when that is less (at least
# 10), so that no run outlasts the call.
limit() {
  local left=$((BUDGET_S - SECONDS))
  if ((DRY_RUN || left >= $1)); then echo "$1"; elif ((left > 10)); then echo "$left"; else echo 10; fi
}
pack_logs() { ((DRY_RUN)) || tar -cJf "$OUT/logs.tar.xz" -C "$WORK" logs 2>/dev/null; }

# --- the machine, NCCL, the bundle ----------------------------------------------------------
if ((DRY_RUN)); then
  say "=== dry run: nothing is unpacked or run; bundle $BUNDLE"
  TESTS=()
  mapfile -t TESTS < <(tar -xJOf "$BUNDLE" splitspec-gpu/gpu_tests.txt) \
    || { echo "device_session.sh: $BUNDLE has no splitspec-gpu/gpu_tests.txt: not a bundle" >&2; exit 2; }
  gpu_count=1
  gpu_name="GPU"
  echo "+ python3 -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])'"
  NCCL_LIB="NCCL_WHEEL/lib"
else
  nccl_dir="$(python3 -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])' 2>&1)"
  if [[ $? -ne 0 || ! -e "$nccl_dir/lib/libnccl.so.2" ]]; then
    say "FAILED: NCCL not found: python3 -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])' gave: ${nccl_dir##*$'\n'}"
    say "  the bundle carries no libnccl (tools/gpu/bundle.sh); this routine needs the machine's nvidia-nccl wheel"
    exit 3
  fi
  NCCL_LIB="$nccl_dir/lib"
  machine="$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1)" \
    || { say "FAILED: nvidia-smi: $machine"; exit 3; }
  gpu_count="$(grep -c . <<<"$machine")"
  gpu_name="$(head -1 <<<"$machine")"; gpu_name="${gpu_name%%,*}"
  say "=== machine: $(hostname), $(nproc) cores; GPUs ($gpu_count): ${machine//$'\n'/; }"
  say "=== nccl: $NCCL_LIB"
fi
export LD_LIBRARY_PATH="$B/lib:$NCCL_LIB:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
SANITIZER="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
run rm -rf "$WORK"
run mkdir -p "$WORK/logs" "$WORK/models"
run tar -xJf "$BUNDLE" -C "$WORK" || { say "FAILED: unpacking $BUNDLE"; exit 1; }
if ((!DRY_RUN)); then
  mapfile -t TESTS <"$B/gpu_tests.txt"
  say "=== bundle: $(head -1 "$B/BUNDLE.txt")"
fi
gtest_filter=()
if ((gpu_count < 2)); then
  gtest_filter=("--gtest_filter=-$(IFS=:; echo "${TWO_GPU_TESTS[*]}")")
  say "=== not run (they need two GPUs; this machine has $gpu_count): ${TWO_GPU_TESTS[*]}"
fi

# Runs `job NAME...` for each name, PARALLEL at a time (one after another with --dry-run).
for_each_parallel() {
  local job="$1"; shift
  for name in "$@"; do
    if ((DRY_RUN)); then "$job" "$name"; continue; fi
    while (($(jobs -rp | wc -l) >= PARALLEL)); do wait -n; done
    "$job" "$name" &
  done
  wait
}

# --- benchmark models, written in the background from the start ------------------------------
writer_pid=""
if want bench || want llama || want profile; then
  write_models() {
    for spec in "${BENCH_MODELS[@]}"; do
      local path="$WORK/models/bench-${spec/:/-}.gguf"
      run "$B/bin/splitspec_write_bench_model" --shape "${spec%%:*}" --type "${spec##*:}" --out "$path.tmp" \
        && run mv "$path.tmp" "$path"
    done
  }
  if ((DRY_RUN)); then write_models; else write_models >"$LOGS/write_bench_models.log" 2>&1 & writer_pid=$!; fi
fi

# --- test ---------------------------------------------------------------------------------------
test_one() {
  local t="$1"
  run timeout "$(limit 200)" env SPLITSPEC_REQUIRE_GPU=1 "$B/tests/$t" "${gtest_filter[@]}" >"$LOGS/test_$t.log" 2>&1
  echo $? >"$LOGS/test_$t.rc"
}
# The names gtest reports as FAILED or SKIPPED in `log`: "N: first, second, ..." (at most 6).
gtest_names() {
  grep -E "^\[  $1 {1,2}\] " "$2" | grep -v 'listed below' | sed -E 's/^\[ *[A-Z]+ *\] ([^ ,]+).*/\1/' \
    | sort -u | awk '{n++; if (n <= 6) s = s (n > 1 ? ", " : "") $0}
                     END {if (n) printf "%d: %s%s", n, s, (n > 6 ? ", ..." : "")}'
}
if want test && in_budget 200 "gpu tests"; then
  say "=== gpu tests (SPLITSPEC_REQUIRE_GPU=1, $PARALLEL binaries at a time, 200 s each)"
  for_each_parallel test_one "${TESTS[@]}"
  if ((!DRY_RUN)); then
    for t in "${TESTS[@]}"; do
      rc="$(cat "$LOGS/test_$t.rc")"
      passed="$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$LOGS/test_$t.log")"
      failed="$(gtest_names FAILED "$LOGS/test_$t.log")"
      skipped="$(gtest_names SKIPPED "$LOGS/test_$t.log")"
      if [[ "$rc" == 0 && -z "$skipped" ]]; then
        say "test $t: PASS (${passed:-0} tests)"
      elif [[ "$rc" == 124 ]]; then
        fail "test $t: TIMEOUT (200 s, or what was left of the budget)"
      else
        fail "test $t: exit $rc; passed ${passed:-0}; failed: ${failed:-none}${skipped:+; skipped: $skipped}"
      fi
    done
    grep -h '\[ cuda vs cpu \]\|\[ cuda graphs \]\|\[ cuda matmul \]' "$LOGS"/test_*.log 2>/dev/null | tee -a "$SUMMARY"
  fi
  pack_logs
fi

# --- sanitize -----------------------------------------------------------------------------------
sanitize_one() {
  local tool="${1%%:*}" t="${1##*:}"
  run timeout "$(limit 150)" env SPLITSPEC_REQUIRE_GPU=1 "$SANITIZER" --tool "$tool" --target-processes all --error-exitcode 86 \
    --print-limit 50 "$B/tests/$t" "${gtest_filter[@]}" >"$LOGS/${tool}_$t.log" 2>&1
  echo $? >"$LOGS/${tool}_$t.rc"
}
# "N errors in KernelA, ..." from a compute-sanitizer log, "" when it has none of ours, and the
# expected API errors in parentheses (tools/gpu/sanitizer_summary.py: NCCL's own probes, and the
# tests of EXPECTED_API_ERROR_TESTS); exit status 1 when there is an error of ours.
sanitizer_errors() {
  local args=()
  for t in "${EXPECTED_API_ERROR_TESTS[@]}"; do args+=(--expected-test "$t"); done
  python3 "$ROOT/tools/gpu/sanitizer_summary.py" "$1" "${args[@]}"
}
if want sanitize && in_budget 120 "sanitizers"; then
  say "=== compute-sanitizer: memcheck + initcheck on every gpu test binary, racecheck + synccheck on ${KERNEL_TESTS[*]}"
  runs=()
  for t in "${TESTS[@]}"; do runs+=("memcheck:$t" "initcheck:$t"); done
  for t in "${KERNEL_TESTS[@]}"; do
    [[ " ${TESTS[*]} " == *" $t "* ]] && runs+=("racecheck:$t" "synccheck:$t")
  done
  for_each_parallel sanitize_one "${runs[@]}"
  if ((!DRY_RUN)); then
    for r in "${runs[@]}"; do
      tool="${r%%:*}" t="${r##*:}"
      log="$LOGS/${tool}_$t.log" rc="$(cat "$LOGS/${tool}_$t.rc")"
      errors="$(sanitizer_errors "$log")"; ours=$?
      if [[ "$rc" == 124 ]]; then
        fail "$tool $t: TIMEOUT (150 s, or what was left of the budget)${errors:+ ($errors so far)}"
      elif ((ours)); then
        fail "$tool $t: $errors"
      elif [[ "$rc" != 0 && "$rc" != 86 ]] || grep -q '^\[  FAILED  \]' "$log"; then
        # 86: the tool counted errors, all of them expected; a test that failed still fails.
        fail "$tool $t: exit $rc with 0 sanitizer errors of ours (a test failed under the tool: see ${tool}_$t.log)${errors:+ $errors}"
      else
        say "$tool $t: 0 errors${errors:+ $errors}"
      fi
    done
  fi
  pack_logs
fi

# --- bench and llama ----------------------------------------------------------------------------
LLAMA_DIR="$WORK/llama/llama-bench-cuda"
if want llama; then
  if [[ -z "$LLAMA" ]]; then
    say "=== llama-bench: not run (no --llama ARCHIVE; ../shared/peers/README.md)"
  else
    run mkdir -p "$WORK/llama"
    run tar -xJf "$LLAMA" -C "$WORK/llama" || fail "unpacking $LLAMA"
  fi
fi
# Waits (within the budget) until the background writer has written `path`.
wait_for_model() {
  ((DRY_RUN)) && return 0
  while [[ ! -f "$1" ]] && kill -0 "$writer_pid" 2>/dev/null && ((SECONDS < BUDGET_S - 30)); do sleep 2; done
  [[ -f "$1" ]] || { fail "benchmark model $(basename "$1") not written (write_bench_models.log)"; return 1; }
}
if want bench || want llama; then
  for spec in "${BENCH_MODELS[@]}"; do
    tag="bench-${spec/:/-}"
    model="$WORK/models/$tag.gguf"
    in_budget 40 "benchmarks of $tag (random weights)" || continue
    wait_for_model "$model" || continue
    if want bench; then
      say "=== splitspec bench decode --device cuda:0 ($tag, RANDOM weights)"
      run timeout "$(limit 90)" "$B/bin/splitspec" bench decode --device cuda:0 --model "$model" \
        --decode-tokens 128 --prefill-tokens 512 --batch 1,8,64 --results-jsonl "$RESULTS" --shape "$tag" \
        >"$LOGS/decode_$tag.log" 2>&1 \
        || fail "bench decode $tag (exit $?)"
      ((DRY_RUN)) || grep -E '^(device|decode|prefill|batch [0-9]+):' "$LOGS/decode_$tag.log" | tee -a "$SUMMARY"
      say "=== splitspec bench verify --device cuda:0 ($tag, RANDOM weights)"
      run timeout "$(limit 90)" "$B/bin/splitspec" bench verify --device cuda:0 --model "$model" \
        --repeats 10 --k 1,2,3,5,8,16 --results-jsonl "$RESULTS" --shape "$tag" \
        >"$LOGS/verify_$tag.log" 2>&1 || fail "bench verify $tag (exit $?)"
      ((DRY_RUN)) || tail -9 "$LOGS/verify_$tag.log" | tee -a "$SUMMARY"
    fi
    if want llama && [[ -n "$LLAMA" ]]; then
      say "=== llama-bench ($tag): pp512, tg128; then pp1..pp16 (its verify-like curve)"
      run timeout "$(limit 90)" env LD_LIBRARY_PATH="$LLAMA_DIR:$NCCL_LIB:/usr/local/cuda/lib64" \
        "$LLAMA_DIR/llama-bench" -m "$model" -ngl 99 -fa 1 -p 512 -n 128 -r 3 \
        >"$LOGS/llama_$tag.log" 2>&1 || fail "llama-bench $tag (exit $?)"
      run timeout "$(limit 60)" env LD_LIBRARY_PATH="$LLAMA_DIR:$NCCL_LIB:/usr/local/cuda/lib64" \
        "$LLAMA_DIR/llama-bench" -m "$model" -ngl 99 -fa 1 -p 1,2,3,5,8,16 -n 0 -r 10 \
        >>"$LOGS/llama_$tag.log" 2>&1 || fail "llama-bench pp1..16 $tag (exit $?)"
      ((DRY_RUN)) || grep -E '^\|' "$LOGS/llama_$tag.log" | grep -v -- '---' | tee -a "$SUMMARY"
      # Its results lines, from the tables it printed (tools/llama_bench_results.py --markdown).
      run python3 "$ROOT/tools/llama_bench_results.py" "$LOGS/llama_$tag.log" --markdown \
        --gpu "$gpu_name" --shape "$tag" --command "llama-bench -m $tag.gguf -ngl 99 -fa 1 -p 512 -n 128 -r 3; llama-bench -m $tag.gguf -ngl 99 -fa 1 -p 1,2,3,5,8,16 -n 0 -r 10" \
        >>"$RESULTS" || fail "llama-bench results lines of $tag"
    fi
    pack_logs
  done
fi
# --- profile ------------------------------------------------------------------------------------
NCU="$(command -v ncu || echo /usr/local/cuda/bin/ncu)"
# ncu on one command: `profile_one TAG [NAME=VALUE...] COMMAND...` (run through env); its CSV summarised into the summary.
profile_one() {
  local tag="$1"; shift
  run timeout "$(limit 60)" env "$@" >"$LOGS/ncu_$tag.csv" 2>"$LOGS/ncu_$tag.err" \
    || { fail "ncu $tag (exit $?; ncu_$tag.err)"; return; }
  ((DRY_RUN)) || python3 "$ROOT/tools/gpu/ncu_summary.py" "$LOGS/ncu_$tag.csv" --label "$tag" --top 15 \
    | tee -a "$SUMMARY"
}
if want profile && in_budget 60 "ncu profile"; then
  model="$WORK/models/bench-llama3-1b-q4_0.gguf"
  if wait_for_model "$model"; then
    say "=== ncu profile (graphs off; bench-llama3-1b-q4_0, RANDOM weights): per-kernel times"
    ncu_args=("$NCU" --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv)
    # splitspec: the k=1 run is the prompt + three 1-token forwards; k=1,5 adds three 5-token ones.
    profile_one splitspec_k1 "${ncu_args[@]}" "$B/bin/splitspec" bench verify --device cuda:0 \
      --cuda-graphs off --model "$model" --prompt-tokens 8 --repeats 3 --k 1
    profile_one splitspec_k1_5 "${ncu_args[@]}" "$B/bin/splitspec" bench verify --device cuda:0 \
      --cuda-graphs off --model "$model" --prompt-tokens 8 --repeats 3 --k 1,5
    # A 512-token prompt: the tensor-core matmul (MmaMatMulKernel, kernels/cuda/mma_tiling.h).
    profile_one splitspec_pp512 "${ncu_args[@]}" "$B/bin/splitspec" bench verify --device cuda:0 \
      --cuda-graphs off --model "$model" --prompt-tokens 512 --repeats 1 --k 1
    if [[ -n "$LLAMA" ]]; then
      profile_one llama_tg1 GGML_CUDA_DISABLE_GRAPHS=1 LD_LIBRARY_PATH="$LLAMA_DIR:$NCCL_LIB:/usr/local/cuda/lib64" \
        "${ncu_args[@]}" "$LLAMA_DIR/llama-bench" -m "$model" -ngl 99 -fa 1 -p 0 -n 1 -r 1
      profile_one llama_pp5 GGML_CUDA_DISABLE_GRAPHS=1 LD_LIBRARY_PATH="$LLAMA_DIR:$NCCL_LIB:/usr/local/cuda/lib64" \
        "${ncu_args[@]}" "$LLAMA_DIR/llama-bench" -m "$model" -ngl 99 -fa 1 -p 5 -n 0 -r 1
      profile_one llama_pp512 GGML_CUDA_DISABLE_GRAPHS=1 LD_LIBRARY_PATH="$LLAMA_DIR:$NCCL_LIB:/usr/local/cuda/lib64" \
        "${ncu_args[@]}" "$LLAMA_DIR/llama-bench" -m "$model" -ngl 99 -fa 1 -p 512 -n 0 -r 1
    fi
  fi
  pack_logs
fi

[[ -z "$writer_pid" ]] || { pkill -P "$writer_pid" 2>/dev/null; kill "$writer_pid" 2>/dev/null; }
if ((DRY_RUN)); then
  say "=== done (dry run)"
  exit 0
fi

if ((${#failures[@]})); then
  say "=== RESULT: FAIL (${#failures[@]}) after ${SECONDS}s"
  printf '  %s\n' "${failures[@]}" | tee -a "$SUMMARY"
  pack_logs
  exit 1
fi
say "=== RESULT: PASS after ${SECONDS}s (every test passed, 0 sanitizer errors, every benchmark ran)"
pack_logs
exit 0
