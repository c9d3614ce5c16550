#!/usr/bin/env bash
# The GPU routine's plan and its refusals (tools/gpu/device_session.sh), checked on any machine:
# with --dry-run every step is planned in order with the flags the device needs (from a stand-in
# bundle that holds only the list of test binaries), step selection works, and the routine
# refuses at once, saying why, without --bundle, with a missing archive, with an unknown step,
# and when the machine has no NCCL (the bundle carries none). Nothing is built or run on a GPU.
# tests/tools/gpu_bundle_test.sh checks the plan against a real bundle.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SCRIPT="$ROOT/tools/gpu/device_session.sh"
fail() { echo "FAIL: $*" >&2; exit 1; }
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

# A stand-in bundle: the layout's manifest with two test binaries, one of them a kernel test.
mkdir -p "$TMP/stage/splitspec-gpu"
printf 'softmax_cuda_test\nserve_cuda_test\n' >"$TMP/stage/splitspec-gpu/gpu_tests.txt"
tar -C "$TMP/stage" -cJf "$TMP/bundle.tar.xz" splitspec-gpu
echo "not an archive the dry run opens" >"$TMP/llama.tar.xz"
export SPLITSPEC_GPU_WORK="$TMP/work"

expect_in_order() {
  local text="$1"; shift
  local rest="$text"
  for needle in "$@"; do
    [[ "$rest" == *"$needle"* ]] || fail "missing or out of order: '$needle' in:
$text"
    rest="${rest#*"$needle"}"
  done
}
two_gpu_filter="--gtest_filter=-NcclCommunicatorTest.TwoRanksAllReduceAllGatherAndBroadcast:CudaTensorParallelTest.TwoRanksOverNcclOnTwoGpusMatchOneRank"

all="$(bash "$SCRIPT" --dry-run --bundle "$TMP/bundle.tar.xz" --llama "$TMP/llama.tar.xz")" \
  || fail "dry run of every step exited $?"
B="$TMP/work/splitspec-gpu"
expect_in_order "$all" \
  "+ python3 -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])'" \
  "+ tar -xJf $TMP/bundle.tar.xz -C $TMP/work" \
  "=== not run (they need two GPUs; this machine has 1): NcclCommunicatorTest.TwoRanksAllReduceAllGatherAndBroadcast" \
  "+ $B/bin/splitspec_write_bench_model --shape smollm2 --type q4_1" \
  "--shape llama3-1b --type q4_0" "--shape llama3-8b --type q4_0" \
  "+ timeout 200 env SPLITSPEC_REQUIRE_GPU=1 $B/tests/softmax_cuda_test $two_gpu_filter" \
  "+ timeout 200 env SPLITSPEC_REQUIRE_GPU=1 $B/tests/serve_cuda_test $two_gpu_filter" \
  "compute-sanitizer --tool memcheck --target-processes all --error-exitcode 86" "$B/tests/softmax_cuda_test" \
  "--tool initcheck" "$B/tests/softmax_cuda_test" \
  "--tool memcheck" "$B/tests/serve_cuda_test" "--tool initcheck" "$B/tests/serve_cuda_test" \
  "--tool racecheck" "$B/tests/softmax_cuda_test" "--tool synccheck" "$B/tests/softmax_cuda_test" \
  "+ tar -xJf $TMP/llama.tar.xz -C $TMP/work/llama" \
  "$B/bin/splitspec bench decode --device cuda:0 --model $TMP/work/models/bench-smollm2-q4_1.gguf" \
  "--prefill-tokens 512 --batch 1,8,64" \
  "$B/bin/splitspec bench verify --device cuda:0" "--k 1,2,3,5,8,16" \
  "llama-bench-cuda/llama-bench -m $TMP/work/models/bench-smollm2-q4_1.gguf -ngl 99 -fa 1 -p 512 -n 128" \
  "bench decode --device cuda:0 --model $TMP/work/models/bench-llama3-8b-q4_0.gguf" \
  "llama-bench -m $TMP/work/models/bench-llama3-8b-q4_0.gguf" \
  "--cuda-graphs off --model $TMP/work/models/bench-llama3-1b-q4_0.gguf --prompt-tokens 512 --repeats 1 --k 1" \
  "llama-bench -m $TMP/work/models/bench-llama3-1b-q4_0.gguf -ngl 99 -fa 1 -p 512 -n 0 -r 1" \
  "=== done (dry run)"
# serve_cuda_test is no kernel test: no racecheck for it.
! grep -E -- '--tool (racecheck|synccheck).*serve_cuda_test' <<<"$all" \
  || fail "racecheck or synccheck planned on serve_cuda_test"

tests_only="$(bash "$SCRIPT" --dry-run --bundle "$TMP/bundle.tar.xz" test)" || fail "dry run of 'test' exited $?"
[[ "$tests_only" == *"SPLITSPEC_REQUIRE_GPU=1 $B/tests/softmax_cuda_test"* ]] || fail "'test' does not run the gpu tests"
[[ "$tests_only" != *"compute-sanitizer"* && "$tests_only" != *"bench decode"* && \
   "$tests_only" != *"write_bench_model"* ]] || fail "'test' runs more than the tests"

sanitize_only="$(bash "$SCRIPT" --dry-run --bundle "$TMP/bundle.tar.xz" sanitize)" || fail "dry run of 'sanitize' exited $?"
[[ "$sanitize_only" == *"compute-sanitizer --tool memcheck"* && "$sanitize_only" != *"bench decode"* ]] \
  || fail "'sanitize' step"

no_llama="$(bash "$SCRIPT" --dry-run --bundle "$TMP/bundle.tar.xz" bench llama)" || fail "dry run of 'bench llama' exited $?"
[[ "$no_llama" == *"llama-bench: not run (no --llama ARCHIVE"* && "$no_llama" == *"bench verify"* ]] \
  || fail "without --llama, llama-bench is not said to be left out"

# Refusals: each exits 2 or 3 at once and says why.
expect_refusal() {
  local code="$1" message="$2"; shift 2
  local out rc
  out="$("$@" 2>&1)"; rc=$?
  [[ "$rc" == "$code" ]] || fail "'$*' exited $rc, not $code: $out"
  [[ "$out" == *"$message"* ]] || fail "'$*' did not say '$message': $out"
}
expect_refusal 2 "--bundle ARCHIVE is required" bash "$SCRIPT" --dry-run
expect_refusal 2 "no such file" bash "$SCRIPT" --dry-run --bundle "$TMP/none.tar.xz"
expect_refusal 2 "unknown step 'bogus'" bash "$SCRIPT" --dry-run --bundle "$TMP/bundle.tar.xz" bogus
# A machine without NCCL's wheel (a python3 that cannot import nvidia.nccl): a loud stop,
# before anything is unpacked or run.
mkdir -p "$TMP/fakebin"
printf '#!/bin/sh\necho "ModuleNotFoundError: No module named '"'"'nvidia'"'"'" >&2\nexit 1\n' >"$TMP/fakebin/python3"
chmod +x "$TMP/fakebin/python3"
expect_refusal 3 "NCCL not found" env PATH="$TMP/fakebin:$PATH" OUT="$TMP/out" bash "$SCRIPT" --bundle "$TMP/bundle.tar.xz" test
grep -q "No module named 'nvidia'" "$TMP/out/summary.txt" || fail "summary.txt does not say why NCCL was not found"
[[ ! -e "$TMP/work/splitspec-gpu" ]] || fail "the bundle was unpacked although NCCL is missing"
# Past its time budget the routine starts nothing more and fails, naming what it left out
# (stand-ins for NCCL's wheel and nvidia-smi; a budget of 0 s).
mkdir -p "$TMP/py/nvidia/nccl/lib"
: >"$TMP/py/nvidia/nccl/lib/libnccl.so.2"
printf '#!/bin/sh\necho "Stand-in GPU, 1 MiB, 0.0"\n' >"$TMP/fakebin/nvidia-smi"
chmod +x "$TMP/fakebin/nvidia-smi"
rm -f "$TMP/fakebin/python3"
out="$(PATH="$TMP/fakebin:$PATH" PYTHONPATH="$TMP/py" OUT="$TMP/out2" SPLITSPEC_GPU_BUDGET_S=0 \
  bash "$SCRIPT" --bundle "$TMP/bundle.tar.xz" test sanitize 2>&1)"
rc=$?
[[ "$rc" == 1 ]] || fail "out of budget, the routine exited $rc, not 1: $out"
expect_in_order "$(cat "$TMP/out2/summary.txt")" "=== nccl: $TMP/py/nvidia/nccl/lib" \
  "FAILED: gpu tests: not started for time" "FAILED: sanitizers: not started for time" \
  "=== RESULT: FAIL (2)"
echo "PASS"
