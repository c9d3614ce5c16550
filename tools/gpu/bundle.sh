#!/usr/bin/env bash
# Makes the GPU bundle on this (CPU) machine: one .tar.xz that a lent GPU machine unpacks and
# runs with no compiler (tools/gpu/device_session.sh --bundle; the procedure is in docs/gpu.md).
#
#   tools/gpu/bundle.sh [--build-dir DIR] [--out FILE] [--llama ARCHIVE] [--no-build]
#
# --build-dir  a CUDA Release build (default build/release: sm_80 and sm_90, see CMakeLists.txt)
# --out        the archive (default .gpu/splitspec-gpu-bundle.tar.xz; .gpu/ is git-ignored and
#              is what a device call carries)
# --llama      also check llama.cpp's prebuilt CUDA llama-bench archive (the peer of the GPU
#              benchmarks; ../shared/peers/llama-bench-cuda13-sm90.tar.xz, its README says how
#              it was built) and copy it beside the bundle
# --no-build   pack what the build directory holds (CI builds everything first)
#
# The archive holds one folder, splitspec-gpu/, laid out like a build directory so that
# binaries find each other relative to themselves (/proc/self/exe), never through a path
# compiled in:
#   bin/    splitspec, the three services, splitspec_write_bench_model (stripped)
#   tests/  every gpu-labelled test binary, as listed in DIR/gpu_tests.txt (stripped)
#   lib/    the shared libraries they load that a bare GPU machine lacks, as ldd finds them
#           here: absl, protobuf, zmq and its dependencies, gloo and its (hiredis, ibverbs,
#           nl-3, nl-route-3), libcudart. Not the C/C++ runtime (libc, libm, libstdc++,
#           libgcc_s), not libcuda (the driver's), not libnccl (the machine's PyTorch wheel
#           has it; device_session.sh finds it).
#   gpu_tests.txt  the test binaries, one a line;  BUNDLE.txt  what was packed, from which commit
# It fails when a packed binary holds the path of the build's bin/ or tests/ (a compile-time
# path that would not exist on the GPU machine), when the archive exceeds 40 MiB, or when it
# and the --llama archive exceed 58 MiB together (a device call carries 64 MiB, tree included).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="$ROOT/build/release"
OUT_FILE="$ROOT/.gpu/splitspec-gpu-bundle.tar.xz"
LLAMA=""
BUILD_FIRST=1
MAX_BYTES=$((40 * 1024 * 1024))
die() { echo "bundle.sh: $*" >&2; exit 1; }
while (($#)); do
  case "$1" in
    --build-dir) BUILD="$(cd "$2" && pwd)"; shift 2 ;;
    --out) OUT_FILE="$2"; shift 2 ;;
    --llama) LLAMA="$2"; shift 2 ;;
    --no-build) BUILD_FIRST=0; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bundle.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
BINARIES=(splitspec splitspec-coordinator splitspec-draft-worker splitspec-target-worker
          splitspec_write_bench_model)
# Libraries every Linux GPU machine has (the C and C++ runtimes), or that must come from the
# machine itself (the driver's libcuda, NCCL from its wheel): never packed.
# glibc's own parts (libresolv, libanl, ...) are tied to its exact version: never packed either.
SYSTEM_LIBS='^(linux-vdso|ld-linux-x86-64|libc|libm|libpthread|libdl|librt|libutil|libresolv|libanl|libnsl|libnss_[a-z]+|libstdc\+\+|libgcc_s|libcuda|libnccl)\.so'

if ((BUILD_FIRST)); then
  echo "bundle.sh: building the bundled targets in $BUILD"
  cmake --build "$BUILD" -j "$(nproc)" --target splitspec_gpu_tests "${BINARIES[@]}" >/dev/null \
    || die "the build failed: cmake --build $BUILD --target splitspec_gpu_tests ${BINARIES[*]}"
fi
[[ -s "$BUILD/gpu_tests.txt" ]] \
  || die "$BUILD/gpu_tests.txt is missing or empty: $BUILD is not a CUDA build (configure with nvcc on PATH)"
mapfile -t TESTS <"$BUILD/gpu_tests.txt"
# The lent GPUs are H100 / H200 (sm_90): a build without sm_90 code would not run there.
ARCHS="$(grep -oE 'generate-code=arch=compute_[0-9]+,code=\[?[a-z_0-9,]*' "$BUILD/build.ninja" \
  | grep -oE 'sm_[0-9]+' | sort -u | tr '\n' ' ')"
[[ " $ARCHS" == *" sm_90 "* ]] || die "$BUILD compiles CUDA for '${ARCHS}', not sm_90 (H100/H200)"

STAGE="$(mktemp -d)"
trap 'rm -rf "$STAGE"' EXIT
B="$STAGE/splitspec-gpu"
mkdir -p "$B/bin" "$B/tests" "$B/lib"
for name in "${BINARIES[@]}"; do
  [[ -x "$BUILD/bin/$name" ]] || die "$BUILD/bin/$name is not built"
  cp "$BUILD/bin/$name" "$B/bin/"
done
for name in "${TESTS[@]}"; do
  [[ -x "$BUILD/tests/$name" ]] || die "$BUILD/tests/$name (listed in gpu_tests.txt) is not built"
  cp "$BUILD/tests/$name" "$B/tests/"
done
strip --strip-unneeded "$B"/bin/* "$B"/tests/*
cp "$BUILD/gpu_tests.txt" "$B/"

# A compiled-in path to the build tree's binaries would resolve here (the tree exists) and
# nowhere else: a binary that finds another must look beside itself (/proc/self/exe).
if held="$(grep -l -F -e "$BUILD/bin" -e "$BUILD/tests" "$B"/bin/* "$B"/tests/*)"; then
  die "these binaries hold the compile-time path $BUILD/bin or $BUILD/tests (find binaries from /proc/self/exe instead): $(echo $held | xargs -n1 basename | tr '\n' ' ')"
fi

# The libraries: what ldd resolves for every packed binary, minus the system's.
declare -A packed=()
for elf in "$B"/bin/* "$B"/tests/*; do
  while read -r soname _ path _; do
    [[ "$soname" =~ $SYSTEM_LIBS ]] && continue
    [[ "$path" == "not" ]] && die "$(basename "$elf") needs $soname, which ldd does not find here"
    [[ -n "${packed[$soname]:-}" ]] && continue
    cp -L "$path" "$B/lib/$soname"
    packed[$soname]="$path"
  done < <(ldd "$elf" | awk '$2 == "=>" {print $1, $2, $3, $4}')
done
for soname in "${!packed[@]}"; do
  [[ "$soname" =~ ^libnccl ]] && die "libnccl was packed; it must come from the GPU machine"
done

commit="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
[[ -z "$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null)" ]] || commit+=" (with uncommitted changes)"
{
  echo "splitspec GPU bundle, made $(date -u +%Y-%m-%dT%H:%MZ) on $(hostname) from commit $commit"
  echo "build: $BUILD (CUDA code for ${ARCHS% })"
  echo "nvcc: $(sed -n 's/^CMAKE_CUDA_COMPILER:[A-Z]*=//p' "$BUILD/CMakeCache.txt")"
  echo "bin: ${BINARIES[*]}"
  echo "tests: ${TESTS[*]}"
  echo "lib: $(cd "$B/lib" && ls | tr '\n' ' ')"
  echo "run: tools/gpu/device_session.sh --bundle THIS_ARCHIVE (docs/gpu.md)"
} >"$B/BUNDLE.txt"

mkdir -p "$(dirname "$OUT_FILE")"
# -9: a 64 MiB dictionary spans several of the ~8 MiB binaries, which share most of their
# statically linked code; -6's 8 MiB does not (2026-11-27: 23,552,204 bytes at -6, 13,290,296 at -9).
tar -C "$STAGE" -cf - splitspec-gpu | xz -T"$(nproc)" -9 >"$OUT_FILE.tmp"
mv "$OUT_FILE.tmp" "$OUT_FILE"
bytes="$(stat -c %s "$OUT_FILE")"
((bytes <= MAX_BYTES)) || die "$OUT_FILE is $bytes bytes, over the 40 MiB a device call can carry beside the llama archive"
echo "bundle.sh: wrote $OUT_FILE ($((bytes / 1024)) KiB; ${#TESTS[@]} gpu test binaries, ${#packed[@]} libraries; sha256 $(sha256sum "$OUT_FILE" | cut -c1-16))"

if [[ -n "$LLAMA" ]]; then
  [[ -f "$LLAMA" ]] || die "--llama $LLAMA: no such file"
  listing="$(tar -tJf "$LLAMA")" || die "--llama $LLAMA: not a .tar.xz"
  for want in llama-bench-cuda/llama-bench llama-bench-cuda/libgomp.so.1 llama-bench-cuda/libssl.so.3 \
              llama-bench-cuda/libcrypto.so.3; do
    grep -qx "$want" <<<"$listing" || die "--llama $LLAMA lacks $want (build it as ../shared/peers/README.md says)"
  done
  dest="$(dirname "$OUT_FILE")/$(basename "$LLAMA")"
  [[ "$(realpath "$LLAMA")" == "$(realpath -m "$dest")" ]] || cp "$LLAMA" "$dest"
  echo "bundle.sh: llama.cpp archive $dest ($(($(stat -c %s "$dest") / 1024)) KiB)"
  # A device call carries 64 MiB in all, the working tree (~5 MB) included.
  total=$((bytes + $(stat -c %s "$dest")))
  ((total <= 58 * 1024 * 1024)) \
    || die "the bundle and the llama archive are $((total / 1024)) KiB together, over the 58 MiB that leave room for the working tree in a device call's 64 MiB"
fi
