#!/usr/bin/env bash
# The whole GPU routine in one device call: build splitspec with CUDA for the lent GPU, run the
# `gpu`-labelled tests, then the GPU benchmarks, with every log under $OUT (or build/gpu-out).
#
#   tools/gpu/pack_deps.sh                                   # here, once: .gpu/sysroot
#   device run: command="tools/gpu/device_session.sh", carry=[".gpu"]
#
# The device machine has nvcc, CMake and ninja, and NCCL as PyTorch's nvidia-nccl wheel; the
# other libraries come from .gpu/sysroot (tools/gpu/pack_deps.sh). Steps stop at the first
# failure and say which step failed.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
OUT="${OUT:-$ROOT/build/gpu-out}"
mkdir -p "$OUT"
SYSROOT="$ROOT/.gpu/sysroot"
step() { echo "=== $*" | tee -a "$OUT/summary.txt"; }

if [[ ! -d "$SYSROOT/usr/include/absl" ]]; then
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

step "machine: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1)"
step "nvcc: $(nvcc --version | tail -1)"

nccl_args=()
nccl_dir="$(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))' 2>/dev/null)"
if [[ -n "$nccl_dir" && -f "$nccl_dir/include/nccl.h" ]]; then
  nccl_lib="$(ls "$nccl_dir"/lib/libnccl.so* | head -1)"
  nccl_args=(-DSPLITSPEC_NCCL_INCLUDE_DIR="$nccl_dir/include" -DSPLITSPEC_NCCL_LIBRARY="$nccl_lib")
  export LD_LIBRARY_PATH="$nccl_dir/lib:$LD_LIBRARY_PATH"
  step "nccl: $nccl_lib"
fi

step "configure (CUDA on, sm_90)"
cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPLITSPEC_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$SYSROOT/usr" \
  -DCMAKE_FIND_ROOT_PATH="$SYSROOT" -DProtobuf_PROTOC_EXECUTABLE="$SYSROOT/usr/bin/protoc" \
  "${nccl_args[@]}" >"$OUT/configure.log" 2>&1 || { tail -40 "$OUT/configure.log"; step "FAILED: configure"; exit 1; }
step "build"
cmake --build build/gpu -j "$(nproc)" >"$OUT/build.log" 2>&1 || { grep -m20 -B2 -A6 'error' "$OUT/build.log"; step "FAILED: build"; exit 1; }
step "gpu tests"
ctest --test-dir build/gpu -L gpu --output-on-failure >"$OUT/gpu_tests.log" 2>&1
gpu_rc=$?
tail -15 "$OUT/gpu_tests.log" | tee -a "$OUT/summary.txt"
step "benchmarks"
if [[ -x build/gpu/bin/splitspec ]] && build/gpu/bin/splitspec bench --help 2>/dev/null | grep -q -- '--device'; then
  # GPU forward benchmarks (decode, verify curve, spec) once the CUDA backend exists.
  model="$ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf"
  [[ -f "$model" ]] && build/gpu/bin/splitspec bench decode --device cuda:0 --model "$model" \
    >"$OUT/bench_decode.log" 2>&1
else
  step "no GPU benchmark yet: the transformer has no CUDA backend (bench has no --device flag)"
fi
step "done (gpu tests exit ${gpu_rc})"
exit "$gpu_rc"
