#!/usr/bin/env bash
# Submits deploy/slurm/splitspec.sbatch sized to a cluster config.
#
#   deploy/slurm/submit.sh CONFIG                 # sbatch with the sizes below
#   deploy/slurm/submit.sh CONFIG --print         # print the #SBATCH lines only
#   deploy/slurm/submit.sh CONFIG -- --time=4:00:00 --partition=gpu   # more sbatch options
#
# #SBATCH lines cannot depend on a file, so the sizes (tasks per component,
# --ntasks-per-node = tp, --cpus-per-task = threads, a GPU per task for GPU
# ranks) come from the plan (`splitspec serve --config CONFIG --dry-run`,
# deploy/plan.py slurm) and go to sbatch as command-line options, which
# override the script's own #SBATCH lines component by component. Options
# after -- go to every component. Prints sbatch's "Submitted batch job N".
#
# Environment: SPLITSPEC_BIN (default build/release/bin); the job gets this
# environment (sbatch's default --export=ALL), with SPLITSPEC_CONFIG set to
# CONFIG's absolute path.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="${SPLITSPEC_BIN:-$ROOT/build/release/bin}"
(($# >= 1)) || { sed -n '2,7p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 2; }
CONFIG="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
shift
PRINT=0
EXTRA=()
while (($#)); do
  case "$1" in
    --print) PRINT=1; shift ;;
    --) shift; EXTRA=("$@"); break ;;
    *) echo "submit.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -f "$CONFIG" ]] || { echo "submit.sh: config $CONFIG not found" >&2; exit 2; }

PLAN="$(mktemp)"
trap 'rm -f "$PLAN"' EXIT
"$BIN/splitspec" serve --config "$CONFIG" --dry-run >"$PLAN"
LINES="$(python3 "$ROOT/deploy/plan.py" slurm "$PLAN")"
if ((PRINT)); then
  printf '%s\n' "$LINES"
  exit 0
fi
# "#SBATCH a b" lines -> sbatch options, components separated by ":".
args=()
while read -r _ rest; do
  if [[ "$rest" == "hetjob" ]]; then args+=(":"); continue; fi
  read -r -a opts <<<"$rest"
  args+=("${opts[@]}" "${EXTRA[@]}")
done <<<"$LINES"
export SPLITSPEC_CONFIG="$CONFIG" SPLITSPEC_ROOT="${SPLITSPEC_ROOT:-$ROOT}" SPLITSPEC_BIN="$BIN"
exec sbatch "${args[@]}" "$ROOT/deploy/slurm/splitspec.sbatch"
