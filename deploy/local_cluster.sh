#!/usr/bin/env bash
# Starts a local splitspec cluster on this host as separate processes:
# one coordinator, N draft workers and M target workers, all on loopback.
#
#   deploy/local_cluster.sh                  # 1 draft + 1 target, default model
#   DRAFTS=2 TARGETS=1 deploy/local_cluster.sh
#
# Environment:
#   SPLITSPEC_BIN   folder of the binaries (default build/release/bin)
#   MODEL           model file (default models/SmolLM2-135M-Instruct.Q4_1.gguf)
#   CONTROL         coordinator control endpoint (default tcp://127.0.0.1:5555)
#   RUN_DIR         logs go here (default build/cluster)
#   DRAFTS, TARGETS number of workers of each kind (default 1 each)
# Ctrl-C (or SIGTERM) stops every process it started.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${SPLITSPEC_BIN:-$ROOT/build/release/bin}"
MODEL="${MODEL:-$ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf}"
CONTROL="${CONTROL:-tcp://127.0.0.1:5555}"
RUN_DIR="${RUN_DIR:-$ROOT/build/cluster}"
DRAFTS="${DRAFTS:-1}"
TARGETS="${TARGETS:-1}"

for b in splitspec-coordinator splitspec-draft-worker splitspec-target-worker splitspec; do
  [[ -x "$BIN/$b" ]] || { echo "local_cluster.sh: $BIN/$b not found; run deploy/setup.sh first" >&2; exit 1; }
done
[[ -f "$MODEL" ]] || { echo "local_cluster.sh: model $MODEL not found; run deploy/setup.sh first" >&2; exit 1; }
mkdir -p "$RUN_DIR"

pids=()
stop() {
  echo "==> stopping ${#pids[@]} processes"
  kill -TERM "${pids[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
}
# Ctrl-C / SIGTERM exit normally; the EXIT trap then stops the children once.
trap stop EXIT
trap 'exit 0' INT TERM

echo "==> coordinator on $CONTROL (log $RUN_DIR/coordinator.log)"
"$BIN/splitspec-coordinator" --control "$CONTROL" >"$RUN_DIR/coordinator.log" 2>&1 &
pids+=($!)
for ((i = 0; i < TARGETS; i++)); do
  echo "==> target worker target-$i (log $RUN_DIR/target-$i.log)"
  "$BIN/splitspec-target-worker" --coordinator "$CONTROL" --name "target-$i" --model "$MODEL" \
    --tp-group "group-$i" >"$RUN_DIR/target-$i.log" 2>&1 &
  pids+=($!)
done
for ((i = 0; i < DRAFTS; i++)); do
  echo "==> draft worker draft-$i (log $RUN_DIR/draft-$i.log)"
  "$BIN/splitspec-draft-worker" --coordinator "$CONTROL" --name "draft-$i" --model "$MODEL" \
    >"$RUN_DIR/draft-$i.log" 2>&1 &
  pids+=($!)
done

sleep 2
echo "==> membership (splitspec status --coordinator $CONTROL):"
"$BIN/splitspec" status --coordinator "$CONTROL"
echo "==> cluster running; Ctrl-C to stop"
wait -n "${pids[@]}" || true
echo "local_cluster.sh: a process exited on its own; see the logs in $RUN_DIR" >&2
exit 1
