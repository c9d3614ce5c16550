#!/usr/bin/env bash
# The whole GPU routine in one device call: build splitspec with CUDA for the lent GPU, run the
# `gpu`-labelled tests (CUDA kernels, the CUDA transformer vs the CPU forward, bitwise batch
# invariance, greedy speculative == plain greedy with the CUDA target, the target engine
# verifying on the device vs on the host, CUDA graph replay bitwise == eager, the one-rank NCCL
# group of a worker), then `splitspec bench decode|verify --device cuda:0` (decode also with
# --cuda-graphs off, same run) (and decode on the device's CPU for the
# ratio), with every log under $OUT (or build/gpu-out) and the headlines in $OUT/summary.txt.
# Benchmarks run on a random-weight GGUF with the default model's shapes and types
# (tests/bench/write_bench_model.cc); figures from it must say so. llama.cpp's CUDA build runs
# beside it when its sources were carried, and HF transformers when the machine has it.
#
#   tools/gpu/pack_deps.sh                                   # here, once: .gpu/sysroot
#   tools/gpu/pack_llama_cpp.sh                              # here, once: build/llama-cpp-src
#   device run: command="tools/gpu/device_session.sh", carry=[".gpu", "build/llama-cpp-src"]
#   device run: command="tools/gpu/device_session.sh bench"  # a second call: build is kept
#
# Within a session's 30 device minutes (10 per call), while the machine stays warm:
#   1. `test` (cold build + gpu tests), 2. `bench hf`, 3. `llama` (builds llama.cpp's CUDA
#   backend, several minutes on 16 cores) -- each call carries .gpu and build/llama-cpp-src.
#
# Arguments pick steps after the (incremental) configure and build: `test`, `bench`,
# `llama` (llama.cpp's CUDA build from build/llama-cpp-src, carried; tools/gpu/pack_llama_cpp.sh
# writes it, and its llama-bench on the same GGUF), `hf` (HF transformers, tools/gpu/bench_hf.py,
# if importable there), or nothing / `all` for every one.
# `--dry-run` (first) prints each command instead of running it, on any machine: the plan of
# a device call, checked before device time is spent (tests/tools/gpu_routine_test.sh). A cold build plus everything may not fit one call's 10 minutes;
# then the build and tests finish in the first call and `bench` runs in the next (the build
# directory stays on the machine while it is warm).
#
# The device machine has nvcc, CMake and ninja, and NCCL as PyTorch's nvidia-nccl wheel; the
# other libraries come from .gpu/sysroot (tools/gpu/pack_deps.sh). Steps stop at the first
# failure and say which step failed.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
DRY_RUN=0
if [[ "${1:-}" == "--dry-run" ]]; then DRY_RUN=1; shift; fi
OUT="${OUT:-$ROOT/build/gpu-out}"
if [[ "$DRY_RUN" == 1 ]]; then OUT="$(mktemp -d)"; trap 'rm -rf "$OUT"' EXIT; fi
mkdir -p "$OUT"
SYSROOT="$ROOT/.gpu/sysroot"
exec 3>&1
step() { echo "=== $*" | tee -a "$OUT/summary.txt"; }
# Runs a command, or with --dry-run prints it (to the script's stdout, whatever the redirections).
run() { if [[ "$DRY_RUN" == 1 ]]; then echo "+ $*" >&3; else "$@"; fi; }
STEPS=" ${*:-all} "
for s in $STEPS; do
  [[ "$s" =~ ^(all|test|bench|llama|hf)$ ]] || { echo "device_session.sh: unknown step '$s'" >&2; exit 2; }
done
want() { [[ "$STEPS" == *" all "* || "$STEPS" == *" $1 "* ]]; }

if [[ "$DRY_RUN" == 1 ]]; then
  step "dry run: nothing is built or run; sysroot $([[ -d "$SYSROOT/usr/include/absl" ]] && echo present || echo ABSENT)"
elif [[ ! -d "$SYSROOT/usr/include/absl" ]]; then
  echo "device_session.sh: $SYSROOT has no Abseil: run tools/gpu/pack_deps.sh here and carry .gpu" >&2
  exit 2
fi
MULTIARCH=x86_64-linux-gnu
export PATH="$SYSROOT/usr/bin:/usr/local/cuda/bin:$PATH"
export LD_LIBRARY_PATH="$SYSROOT/usr/lib/$MULTIARCH:${LD_LIBRARY_PATH:-}"
# Only the sysroot's .pc files (the device has none of these packages); headers and libraries
# named bare (gloo) are found through CPATH / LIBRARY_PATH.
export PKG_CONFIG_LIBDIR="$SYSROOT/usr/lib/$MULTIARCH/pkgconfig:$SYSROOT/usr/share/pkgconfig"
export PKG_CONFIG_SYSROOT_DIR="$SYSROOT"
export CPATH="$SYSROOT/usr/include${CPATH:+:$CPATH}"
export LIBRARY_PATH="$SYSROOT/usr/lib/$MULTIARCH${LIBRARY_PATH:+:$LIBRARY_PATH}"

if [[ "$DRY_RUN" == 0 ]]; then
  step "machine: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1)"
  step "nvcc: $(nvcc --version | tail -1)"
fi

nccl_args=()
nccl_dir="$(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))' 2>/dev/null)"
if [[ -n "$nccl_dir" && -f "$nccl_dir/include/nccl.h" ]]; then
  nccl_lib="$(ls "$nccl_dir"/lib/libnccl.so* | head -1)"
  nccl_args=(-DSPLITSPEC_NCCL_INCLUDE_DIR="$nccl_dir/include" -DSPLITSPEC_NCCL_LIBRARY="$nccl_lib")
  export LD_LIBRARY_PATH="$nccl_dir/lib:$LD_LIBRARY_PATH"
  step "nccl: $nccl_lib"
fi

step "configure (CUDA on, sm_90)"
run cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPLITSPEC_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$SYSROOT/usr" \
  -DCMAKE_FIND_ROOT_PATH="$SYSROOT" -DProtobuf_PROTOC_EXECUTABLE="$SYSROOT/usr/bin/protoc" \
  "${nccl_args[@]}" >"$OUT/configure.log" 2>&1 || { tail -40 "$OUT/configure.log"; step "FAILED: configure"; exit 1; }
# Only what the routine runs: the gpu-labelled tests (with the services and tools they
# start), the CLI and the bench-model writer; the full tree would not fit one call's time.
step "build"
run cmake --build build/gpu -j "$(nproc)" --target splitspec_gpu_tests splitspec \
  splitspec_write_bench_model >"$OUT/build.log" 2>&1 || {
  grep -m20 -B2 -A6 'error' "$OUT/build.log"; step "FAILED: build"; exit 1; }
gpu_rc=0
if want test; then
  step "gpu tests"
  run timeout 300 ctest --test-dir build/gpu -L gpu -j4 --output-on-failure >"$OUT/gpu_tests.log" 2>&1
  gpu_rc=$?
  tail -25 "$OUT/gpu_tests.log" 2>/dev/null | tee -a "$OUT/summary.txt"
  grep -h '\[ cuda vs cpu \]' "$OUT/gpu_tests.log" 2>/dev/null | tee -a "$OUT/summary.txt"
  grep -h '\[ cuda graphs \]' "$OUT/gpu_tests.log" 2>/dev/null | tee -a "$OUT/summary.txt"
  grep -h '\[ cuda matmul \]' "$OUT/gpu_tests.log" 2>/dev/null | tee -a "$OUT/summary.txt"
fi
if ! want bench && ! want llama && ! want hf; then
  step "done (gpu tests exit ${gpu_rc})"
  exit "$gpu_rc"
fi

# Benchmarks on a GGUF with the default model's exact shapes and types but random weights
# (the real 98 MB file does not travel with a call; a forward costs the same). It is written
# under build/, not $OUT, so that it does not come back. When models/ holds the real file
# (carried separately), it is measured too.
step "benchmarks (SmolLM2-135M Q4_1 shapes, RANDOM weights)"
bench_model="$ROOT/build/gpu/bench-smollm2-shapes-q4_1.gguf"
[[ -f "$bench_model" ]] || run build/gpu/bin/splitspec_write_bench_model "$bench_model" >>"$OUT/summary.txt" 2>&1
models=("$bench_model")
real_model="$ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf"
[[ -f "$real_model" ]] && models+=("$real_model")
for model in "${models[@]}"; do
  want bench || break
  tag="$(basename "$model" .gguf)"
  for device in cuda:0 cpu; do
    step "bench decode --device $device ($tag)"
    batches=1
    [[ "$device" == cuda:0 ]] && batches=1,8,32,64  # aggregate tok/s of batched decode
    run timeout 150 build/gpu/bin/splitspec bench decode --device "$device" --model "$model" \
      --decode-tokens 128 --prefill-tokens 512 --batch "$batches" \
      >"$OUT/bench_decode_${device/:/}_$tag.log" 2>&1 \
      || step "FAILED: bench decode --device $device (exit $?)"
    grep -E '^(device|decode|prefill|batch [0-9]+):' "$OUT/bench_decode_${device/:/}_$tag.log" 2>/dev/null | tee -a "$OUT/summary.txt"
  done
  # The same decode with CUDA graphs off: the launch overhead that graphs remove (same run).
  step "bench decode --device cuda:0 --cuda-graphs off ($tag)"
  run timeout 120 build/gpu/bin/splitspec bench decode --device cuda:0 --cuda-graphs off \
    --model "$model" --decode-tokens 128 --prefill-tokens 512 --batch 1,8 \
    >"$OUT/bench_decode_cuda0_nographs_$tag.log" 2>&1 \
    || step "FAILED: bench decode --cuda-graphs off (exit $?)"
  grep -E '^(device|decode|batch [0-9]+):' "$OUT/bench_decode_cuda0_nographs_$tag.log" 2>/dev/null | tee -a "$OUT/summary.txt"
  step "bench verify --device cuda:0 ($tag)"
  run timeout 120 build/gpu/bin/splitspec bench verify --device cuda:0 --model "$model" \
    --repeats 20 --k 1,2,3,5,8,9,16 >"$OUT/bench_verify_cuda0_$tag.log" 2>&1 \
    || step "FAILED: bench verify --device cuda:0 (exit $?)"
  tail -12 "$OUT/bench_verify_cuda0_$tag.log" 2>/dev/null | tee -a "$OUT/summary.txt"
done
# llama.cpp's CUDA build beside it, from the sources inside the llama-cpp-python sdist
# (tools/gpu/pack_llama_cpp.sh prunes them to fit a call), and its llama-bench on the same GGUF.
if want llama; then
  LLAMA_SRC="$ROOT/build/llama-cpp-src"
  if [[ ! -f "$LLAMA_SRC/CMakeLists.txt" && "$DRY_RUN" == 0 ]]; then
    step "SKIPPED: llama.cpp (no sources at $LLAMA_SRC: run tools/gpu/pack_llama_cpp.sh, carry build/llama-cpp-src)"
  else
    step "llama.cpp CUDA build (sm_90)"
    run cmake -S "$LLAMA_SRC" -B build/llama-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=on \
      -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
      -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=ON \
      -DLLAMA_BUILD_APP=OFF \
      >"$OUT/llama_configure.log" 2>&1 || step "FAILED: llama.cpp configure"
    run cmake --build build/llama-cuda -j "$(nproc)" --target llama-bench \
      >"$OUT/llama_build.log" 2>&1 || step "FAILED: llama.cpp build"
    for model in "${models[@]}"; do
      step "llama-bench CUDA ($(basename "$model" .gguf)): tg128 at batch 1, pp512"
      run timeout 150 build/llama-cuda/bin/llama-bench -m "$model" -ngl 99 -p 512 -n 128 -r 3 \
        >"$OUT/llama_bench_$(basename "$model" .gguf).log" 2>&1 || step "FAILED: llama-bench"
      [[ "$DRY_RUN" == 1 ]] || tail -6 "$OUT/llama_bench_$(basename "$model" .gguf).log" | tee -a "$OUT/summary.txt"
    done
  fi
fi
# HF transformers beside it, if the machine's Python has torch and transformers (nothing can
# be installed there): the same shapes with random float16 weights (tools/gpu/bench_hf.py).
if want hf; then
  if [[ "$DRY_RUN" == 0 ]] && ! python3 tools/gpu/bench_hf.py --check >>"$OUT/summary.txt" 2>&1; then
    step "SKIPPED: HF transformers (torch with CUDA or transformers not importable)"
  else
    step "HF transformers decode (SmolLM2-135M shapes, RANDOM weights, float16)"
    run timeout 300 python3 tools/gpu/bench_hf.py --batch 1,8,32,64 --prefill-tokens 512 \
      --decode-tokens 128 >"$OUT/bench_hf.log" 2>&1 || step "FAILED: bench_hf.py"
    [[ "$DRY_RUN" == 1 ]] || tee -a "$OUT/summary.txt" <"$OUT/bench_hf.log"
  fi
fi
step "done (gpu tests exit ${gpu_rc})"
exit "$gpu_rc"
