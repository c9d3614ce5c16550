#!/usr/bin/env bash
# Packs the build dependencies the GPU machine lacks into .gpu/sysroot (in .gitignore), so that
# one device call can build splitspec there. The lent GPU machines have CUDA, CMake and ninja
# but no Debian development packages and no network: Abseil, Protobuf (+ protoc), ZeroMQ,
# cppzmq, GoogleTest and Gloo travel with the call as files extracted from this machine's
# Debian packages (`apt-get download`, then `dpkg -x`; nothing is installed here).
#
#   tools/gpu/pack_deps.sh            # writes .gpu/sysroot and prints its size
#   then, with the device tool: run(command="tools/gpu/device_session.sh", carry=[".gpu"])
#
# What travels must stay under the device call's 64 MiB (with the working tree), so static
# archives, documentation and protoc's examples are left out.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DEST="$ROOT/.gpu"
PACKAGES=(
  libabsl-dev libabsl20220623
  libprotobuf-dev libprotobuf32 libprotoc32 protobuf-compiler
  libzmq3-dev libzmq5 cppzmq-dev libsodium23 libpgm-5.3-0 libnorm1 libbsd0 libmd0
  libgssapi-krb5-2 libkrb5-3 libk5crypto3 libkrb5support0 libkeyutils1
  libgtest-dev libgmock-dev
  libgloo-dev libgloo0
)

rm -rf "$DEST"
mkdir -p "$DEST/debs" "$DEST/sysroot"
(cd "$DEST/debs" && apt-get download "${PACKAGES[@]}" >/dev/null 2>&1) || {
  echo "pack_deps.sh: apt-get download failed (run 'apt-get update' first)" >&2
  exit 1
}
for deb in "$DEST"/debs/*.deb; do dpkg -x "$deb" "$DEST/sysroot"; done
rm -rf "$DEST/debs"
# Shared libraries only (the build links them dynamically), except GoogleTest, which Debian
# ships static only; no docs.
find "$DEST/sysroot" -name '*.a' ! -name 'libgtest*' ! -name 'libgmock*' -delete
rm -rf "$DEST/sysroot/usr/share/doc" "$DEST/sysroot/usr/share/man" "$DEST/sysroot/usr/share/lintian"
# libzmq.pc names its static-link dependencies (openpgm, norm, krb5, ...) whose .pc files the
# device lacks; dynamic linking needs none of them.
sed -i '/^Requires.private:/d; /^Libs.private:/d' "$DEST/sysroot/usr/lib/x86_64-linux-gnu/pkgconfig/libzmq.pc"
# Absolute symlinks (libfoo.so -> /usr/lib/...) would point outside the sysroot on the device.
while IFS= read -r link; do
  target="$(readlink "$link")"
  [[ "$target" == /* ]] && ln -sfn "$DEST/sysroot$target" "$link" && \
    ln -sfn "$(realpath --relative-to="$(dirname "$link")" "$DEST/sysroot$target")" "$link"
done < <(find "$DEST/sysroot" -type l)
du -sh "$DEST" | awk '{print "pack_deps.sh: .gpu is " $1 " (the device call carries at most 64 MiB)"}'
