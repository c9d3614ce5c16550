#!/usr/bin/env bash
# Starts (or stops) a splitspec cluster on the hosts a cluster config names,
# over ssh: the coordinator on coordinator.host, every rank of every target
# group on its group's host, every draft worker on its pool's host.
#
#   deploy/ssh_cluster.sh CONFIG            # start (same as `start`)
#   deploy/ssh_cluster.sh CONFIG start
#   deploy/ssh_cluster.sh CONFIG stop       # SIGTERM every process (workers first)
#   deploy/ssh_cluster.sh CONFIG status     # which processes are running
#   deploy/ssh_cluster.sh CONFIG plan       # print the plan, start nothing
#
# One source of truth: the command lines come from
# `splitspec serve --config CONFIG --dry-run` (run here), turned into remote
# scripts by deploy/plan.py. Each process logs to RUN_DIR/NAME.log on its host
# (cluster.run_dir; set it to a path that exists or can be made on every host)
# and writes RUN_DIR/NAME.pid, which `stop` and `status` use.
#
# Assumptions: passwordless ssh to every host; the same checkout (binaries,
# models) at the same absolute paths on every host; endpoints in the config
# reachable between hosts (the config's validation refuses loopback endpoints
# when processes run on several hosts). The API key, if any, is read here from
# the variable coordinator.api_key_env names and sent to the coordinator's
# host on ssh's stdin, never on a command line.
#
# Environment:
#   SPLITSPEC_BIN  folder with the splitspec binary (default build/release/bin)
#   SSH            ssh command (default "ssh"); SSH_OPTS extra options
#                  (default "-o BatchMode=yes"; set it empty for none)
#   DRY_RUN=1      print the ssh commands instead of running them (tests use it)
#
# Tested here: `bash -n` and DRY_RUN=1 planning (tests/unit/deploy). Not run
# against real remote hosts (none were available).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${SPLITSPEC_BIN:-$ROOT/build/release/bin}"
SSH="${SSH:-ssh}"
SSH_OPTS="${SSH_OPTS--o BatchMode=yes}"
DRY_RUN="${DRY_RUN:-0}"

usage() { sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 2; }
(($# >= 1)) || usage
CONFIG="$1"
ACTION="${2:-start}"
[[ -f "$CONFIG" ]] || { echo "ssh_cluster.sh: config $CONFIG not found" >&2; exit 2; }
[[ -x "$BIN/splitspec" ]] || { echo "ssh_cluster.sh: $BIN/splitspec not found; run deploy/setup.sh or set SPLITSPEC_BIN" >&2; exit 2; }

PLAN="$(mktemp)"
trap 'rm -f "$PLAN"' EXIT
"$BIN/splitspec" serve --config "$CONFIG" --dry-run >"$PLAN"

# run_on HOST SCRIPT [STDIN]: the remote script gets STDIN (secrets) on stdin.
run_on() {
  local host="$1" script="$2" input="${3:-}"
  if [[ "$DRY_RUN" == "1" ]]; then
    printf '%s %s %s %q\n' "$SSH" "$SSH_OPTS" "$host" "$script"
    return 0
  fi
  # shellcheck disable=SC2086  # SSH_OPTS is a list of options
  printf '%s' "$input" | $SSH $SSH_OPTS "$host" "$script"
}

# Fields per process: host, name, pid file, env_from sources, start script.
plan_lines() { python3 "$ROOT/deploy/plan.py" ssh "$PLAN"; }

start() {
  local host name pid_file sources script input first=1
  while IFS=$'\x1f' read -r host name pid_file sources script <&3; do
    input=""
    if [[ -n "$sources" ]]; then
      IFS=',' read -r -a vars <<<"$sources"
      for v in "${vars[@]}"; do input+="${!v:-}"$'\n'; done
    fi
    echo "==> $name on $host"
    run_on "$host" "$script" "$input"
    # Workers retry their registration, but give the coordinator a head start.
    if ((first)) && [[ "$DRY_RUN" != "1" ]]; then sleep 2; fi
    first=0
  done 3< <(plan_lines)
  echo "==> started; logs and pid files in each host's run_dir; stop with: $0 $CONFIG stop"
}

stop() {
  local host name pid_file sources script
  # Workers first (they deregister), the coordinator (first line) last.
  while IFS=$'\x1f' read -r host name pid_file sources script <&3; do
    echo "==> stopping $name on $host"
    run_on "$host" "if [ -f $(printf '%q' "$pid_file") ]; then kill -TERM \$(cat $(printf '%q' "$pid_file")) 2>/dev/null || true; rm -f $(printf '%q' "$pid_file"); fi" || true
  done 3< <(plan_lines | tac)
}

status() {
  local host name pid_file sources script
  while IFS=$'\x1f' read -r host name pid_file sources script <&3; do
    run_on "$host" "if [ -f $(printf '%q' "$pid_file") ] && kill -0 \$(cat $(printf '%q' "$pid_file")) 2>/dev/null; then echo '$name on $host: running'; else echo '$name on $host: not running'; fi" || true
  done 3< <(plan_lines)
}

case "$ACTION" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  plan) cat "$PLAN" ;;
  *) usage ;;
esac
