#!/usr/bin/env bash
# Builds xgrammar's C++ core (the structured-output engine behind runtime/grammar/) from its
# PyPI source distribution and installs the static library and headers under a prefix
# (idempotent; deploy/setup.sh runs it).
#
#   deploy/build_xgrammar.sh                                   # into /usr/local
#   SPLITSPEC_XGRAMMAR_PREFIX=$HOME/opt deploy/build_xgrammar.sh  # elsewhere; then configure
#                                      # with -DSPLITSPEC_XGRAMMAR_PREFIX=$HOME/opt
#
# What it installs, under PREFIX (default /usr/local, where CMake looks without a hint):
#   lib/libxgrammar.a, include/xgrammar/*.h, include/dlpack/dlpack.h,
#   share/doc/xgrammar/ (the licences: xgrammar and dlpack Apache-2.0, picojson BSD-2-Clause,
#   both bundled in the sdist and compiled into the library), share/splitspec/xgrammar.stamp.
# deploy/patches/xgrammar-<version>-*.patch are applied to the source first.
# The stamp names the version, the sdist's and the patches' sha256 and the build options; when
# it matches,
# nothing is downloaded or built (a fresh machine builds once: 83-149 s of CPU time measured
# on this project's shared 2-core machine, 2026-11-27).
#
# Why from the sdist: the wheel carries only the Python extension. The sdist's
# cmake/config.cmake forces the Python bindings on (they need nanobind and tvm-ffi), so a
# config.cmake in the build folder, read first, turns them off. -fno-lto: upstream adds
# -flto=auto, which would make the archive GCC-only LTO bytecode (the clang fuzz preset links
# it too, and every binary's link would redo the optimisation).
set -euo pipefail

XGRAMMAR_VERSION="0.2.8"
XGRAMMAR_SDIST_SHA256="8305646fd2b319d6c3003f51a1665e54cbbe9cba1fb636bc41d0b46434ccbb80"
PREFIX="${SPLITSPEC_XGRAMMAR_PREFIX:-/usr/local}"
STAMP="$PREFIX/share/splitspec/xgrammar.stamp"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Our fixes to upstream, applied in name order (each says what and why at its top).
PATCHES=("$ROOT"/deploy/patches/xgrammar-"${XGRAMMAR_VERSION}"-*.patch)
patch_sums="$(cat "${PATCHES[@]}" | sha256sum | cut -d' ' -f1)"
WANT="xgrammar ${XGRAMMAR_VERSION} sdist-sha256 ${XGRAMMAR_SDIST_SHA256} patches-sha256 ${patch_sums} python-bindings-off no-lto Release"

say() { echo "==> [xgrammar] $*"; }

if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" && -f "$PREFIX/lib/libxgrammar.a" &&
      -f "$PREFIX/include/xgrammar/xgrammar.h" ]]; then
  say "xgrammar ${XGRAMMAR_VERSION} already installed under ${PREFIX}"
  exit 0
fi

SUDO=""
if [[ ! -w "$PREFIX" && $(id -u) -ne 0 ]]; then SUDO="sudo"; fi

# A fixed build folder (not mktemp): the same paths on every build, so that ccache reuses the
# objects of the files a new patch does not touch.
work="${XDG_CACHE_HOME:-$HOME/.cache}/splitspec/xgrammar-build"
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
say "downloading the sdist xgrammar==${XGRAMMAR_VERSION} from PyPI"
# --no-binary names only xgrammar: its build requirements (needed by pip to read the sdist's
# metadata) may come as wheels; with ':all:' pip would compile those from source too.
python3 -m pip download --quiet --no-deps --no-binary xgrammar -d "$work" \
  "xgrammar==${XGRAMMAR_VERSION}"
sdist="$work/xgrammar-${XGRAMMAR_VERSION}.tar.gz"
if ! echo "${XGRAMMAR_SDIST_SHA256}  ${sdist}" | sha256sum --check --status; then
  echo "build_xgrammar.sh: ${sdist} does not have the expected sha256 ${XGRAMMAR_SDIST_SHA256}" >&2
  exit 1
fi
tar -xzf "$sdist" -C "$work"
src="$work/xgrammar-${XGRAMMAR_VERSION}"
for p in "${PATCHES[@]}"; do
  say "applying $(basename "$p")"
  patch --quiet --forward -p1 -d "$src" <"$p"
done

mkdir -p "$work/build"
echo 'set(XGRAMMAR_BUILD_PYTHON_BINDINGS OFF)' >"$work/build/config.cmake"
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
say "configuring (C++ core only, Release, no LTO)"
cmake -S "$src" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_FLAGS=-fno-lto -DCMAKE_INSTALL_PREFIX="$PREFIX" "${launcher[@]}" >/dev/null
say "building with $(nproc) jobs"
cmake --build "$work/build" -j "$(nproc)"
say "installing under ${PREFIX}"
$SUDO cmake --install "$work/build" >/dev/null
$SUDO mkdir -p "$PREFIX/share/doc/xgrammar" "$PREFIX/share/splitspec"
$SUDO cp "$src/LICENSE" "$src/NOTICE" "$PREFIX/share/doc/xgrammar/"
$SUDO cp "$src/3rdparty/dlpack/LICENSE" "$PREFIX/share/doc/xgrammar/LICENSE.dlpack"
# picojson's licence is the comment at the top of its only file.
sed -n '1,/\*\//p' "$src/3rdparty/picojson/picojson.h" |
  $SUDO tee "$PREFIX/share/doc/xgrammar/LICENSE.picojson" >/dev/null
echo "$WANT" | $SUDO tee "$STAMP" >/dev/null
say "installed: ${PREFIX}/lib/libxgrammar.a"
