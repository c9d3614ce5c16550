#!/usr/bin/env bash
# Starts a splitspec cluster on this host as separate processes, as a cluster
# config describes it (default deploy/cluster.toml: one coordinator with the
# HTTP API on 127.0.0.1:8000, one target worker, one n-gram draft worker).
#
#   deploy/local_cluster.sh                         # deploy/cluster.toml
#   CONFIG=deploy/examples/tp2_cpu.toml deploy/local_cluster.sh
#   DRAFTS=2 TARGETS=1 deploy/local_cluster.sh --http none
#   deploy/local_cluster.sh --dry-run               # print the plan only
#
# Why it just execs `splitspec serve`: serve already reads the config, starts
# the processes, waits for them to register, reports a process that dies and
# stops them all on Ctrl-C; a second implementation in shell would drift from
# it. This script keeps the environment overrides the old script had, mapped
# onto serve's flags (which override the config; arguments are passed on):
#
#   SPLITSPEC_BIN   folder of the binaries (default build/release/bin)
#   CONFIG          cluster config (default deploy/cluster.toml)
#   MODEL           --model (target model file)
#   CONTROL         --control (coordinator control endpoint)
#   RUN_DIR         --log-dir (logs; default build/cluster)
#   DRAFTS          --drafts (workers in the config's only draft pool)
#   TARGETS         --targets (copies of the config's only target group)
#   TARGET_TP       --target-tp (ranks per target group)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${SPLITSPEC_BIN:-$ROOT/build/release/bin}"
CONFIG="${CONFIG:-$ROOT/deploy/cluster.toml}"
[[ -x "$BIN/splitspec" ]] || { echo "local_cluster.sh: $BIN/splitspec not found; run deploy/setup.sh first" >&2; exit 1; }

args=(--config "$CONFIG")
[[ -n "${MODEL:-}" ]] && args+=(--model "$MODEL")
[[ -n "${CONTROL:-}" ]] && args+=(--control "$CONTROL")
[[ -n "${RUN_DIR:-}" ]] && args+=(--log-dir "$RUN_DIR")
[[ -n "${DRAFTS:-}" ]] && args+=(--drafts "$DRAFTS")
[[ -n "${TARGETS:-}" ]] && args+=(--targets "$TARGETS")
[[ -n "${TARGET_TP:-}" ]] && args+=(--target-tp "$TARGET_TP")
exec "$BIN/splitspec" serve "${args[@]}" "$@"
