#!/usr/bin/env bash
# Writes build/llama-cpp-src: the llama.cpp sources inside the llama-cpp-python sdist, pruned to
# what llama-bench with the CUDA backend needs. They are built HERE, on the CPU machine, into the
# prebuilt llama-bench archive that the GPU routine runs beside splitspec
# (tools/gpu/device_session.sh --llama; docs/gpu.md, "The llama.cpp archive", has the configure
# and build commands: ~23 minutes on 2 cores). The sdist comes from PyPI through pip (the version
# the project's CPU comparisons use); nothing is installed.
#
#   tools/gpu/pack_llama_cpp.sh [VERSION]      # default 0.3.36; prints the size
#
# Kept: the top CMake files and cmake/, ggml (its CPU and CUDA backends only), include/, src/,
# common/, vendor/ and tools/llama-bench, with a tools/CMakeLists.txt of one
# line that adds llama-bench alone. Dropped: models, docs, tests, examples, other backends.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VERSION="${1:-0.3.36}"
DEST="$ROOT/build/llama-cpp-src"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

pip download "llama-cpp-python==$VERSION" --no-deps --no-binary :all: -d "$WORK" >/dev/null
tar xzf "$WORK/llama_cpp_python-$VERSION.tar.gz" -C "$WORK"
SRC="$WORK/llama_cpp_python-$VERSION/vendor/llama.cpp"
[[ -f "$SRC/CMakeLists.txt" ]] || { echo "pack_llama_cpp.sh: no llama.cpp in the sdist" >&2; exit 1; }

rm -rf "$DEST"
mkdir -p "$DEST/tools" "$DEST/ggml/src"
cp "$SRC"/CMakeLists.txt "$SRC"/LICENSE "$DEST/"
cp -r "$SRC/cmake" "$SRC/include" "$SRC/src" "$SRC/common" "$SRC/vendor" "$DEST/"
cp -r "$SRC/tools/llama-bench" "$DEST/tools/"
echo "add_subdirectory(llama-bench)" >"$DEST/tools/CMakeLists.txt"
# ggml: everything but the source trees of the backends not built here.
for entry in "$SRC"/ggml/*; do
  [[ "$(basename "$entry")" == src ]] || cp -r "$entry" "$DEST/ggml/"
done
for entry in "$SRC"/ggml/src/*; do
  name="$(basename "$entry")"
  if [[ -d "$entry" && "$name" == ggml-* && "$name" != ggml-cpu && "$name" != ggml-cuda ]]; then
    continue
  fi
  cp -r "$entry" "$DEST/ggml/src/"
done
du -sh "$DEST" | awk '{print "pack_llama_cpp.sh: build/llama-cpp-src is " $1}'
