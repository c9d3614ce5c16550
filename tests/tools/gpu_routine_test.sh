#!/usr/bin/env bash
# The one-call GPU routine's plan (tools/gpu/device_session.sh --dry-run), checked on any
# machine: every step is planned in order with the flags the device needs, step selection
# works, and an unknown step is refused. Nothing is built or run.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SCRIPT="$ROOT/tools/gpu/device_session.sh"
fail() { echo "FAIL: $*" >&2; exit 1; }

all="$(bash "$SCRIPT" --dry-run)" || fail "dry run of every step exited $?"
expect_in_order() {
  local text="$1"; shift
  local rest="$text"
  for needle in "$@"; do
    [[ "$rest" == *"$needle"* ]] || fail "missing or out of order: '$needle'"
    rest="${rest#*"$needle"}"
  done
}
expect_in_order "$all" \
  "+ cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPLITSPEC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90" \
  "+ cmake --build build/gpu" "--target splitspec_gpu_tests splitspec splitspec_write_bench_model" \
  "+ timeout 300 ctest --test-dir build/gpu -L gpu" \
  "splitspec_write_bench_model" \
  "bench decode --device cuda:0" "--batch 1,8,32,64" \
  "bench decode --device cpu" \
  "bench decode --device cuda:0 --cuda-graphs off" \
  "bench verify --device cuda:0" "--k 1,2,3,5,8,9,16" \
  "-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=90" \
  "llama-bench -m" "-ngl 99" \
  "python3 tools/gpu/bench_hf.py --batch 1,8,32,64" \
  "=== done"

tests_only="$(bash "$SCRIPT" --dry-run test)" || fail "dry run of 'test' exited $?"
[[ "$tests_only" == *"ctest --test-dir build/gpu -L gpu"* ]] || fail "'test' does not run the gpu tests"
[[ "$tests_only" != *"bench decode"* && "$tests_only" != *"llama-bench"* ]] || fail "'test' benchmarks"

llama_only="$(bash "$SCRIPT" --dry-run llama)" || fail "dry run of 'llama' exited $?"
[[ "$llama_only" == *"llama-bench"* && "$llama_only" != *"bench decode"* ]] || fail "'llama' step"
[[ "$llama_only" != *"ctest"* ]] || fail "'llama' runs the tests"

hf_only="$(bash "$SCRIPT" --dry-run hf)" || fail "dry run of 'hf' exited $?"
[[ "$hf_only" == *"bench_hf.py"* && "$hf_only" != *"llama-bench"* ]] || fail "'hf' step"

if bash "$SCRIPT" --dry-run bogus >/dev/null 2>&1; then fail "an unknown step was accepted"; fi
echo "PASS"
