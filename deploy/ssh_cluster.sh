#!/usr/bin/env bash
# Starts (or stops) a splitspec cluster on the hosts a cluster config names,
# over ssh: the coordinator on coordinator.host, every rank of every target
# group on its host (target_group.host, or hosts[rank]), every draft worker on
# its pool's host.
#
#   deploy/ssh_cluster.sh CONFIG            # start (same as `start`)
#   deploy/ssh_cluster.sh CONFIG start      # start, wait until every worker registered
#   deploy/ssh_cluster.sh CONFIG status     # which processes are running, and the
#                                           # coordinator's membership table
#   deploy/ssh_cluster.sh CONFIG scale --draft +N|-N [--host HOST]
#   deploy/ssh_cluster.sh CONFIG stop       # SIGTERM every process (workers first)
#   deploy/ssh_cluster.sh CONFIG plan       # print the plan, start nothing
#
# One source of truth: the command lines come from
# `splitspec serve --config CONFIG --dry-run` (run here), turned into remote
# scripts by deploy/plan.py. Each process logs to RUN_DIR/NAME.log on its host
# (cluster.run_dir; set it to a path that exists or can be made on every host)
# and writes RUN_DIR/NAME.pid, which `stop` and `status` use.
#
# `start` starts the coordinator, then every worker, then waits (START_TIMEOUT_S,
# default 120) until every draft worker and group leader has registered. If a
# host cannot be reached, or a process exits, it names the host and the log
# (HOST:PATH, with the log's last lines), stops what it started, and exits 1.
# `scale --draft +N` runs `splitspec scale` on the pool's host (or --host) with
# the pool's settings; `-N` drains N draft workers from the coordinator's host.
# Workers it starts are recorded (RUN_DIR/ssh-scaled.list on the coordinator's
# host), so that `status` and `stop` cover them. `stop` waits (STOP_TIMEOUT_S,
# default 30) for every process to exit; one that does not is killed (SIGKILL)
# and named, and stop then exits 1.
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
#   DRY_RUN=1      print the ssh commands instead of running them
#
# Tested for real by tests/deploy/ssh_cluster_test.py: sshd "hosts" in network
# namespaces (README, "Deploy over ssh").
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${SPLITSPEC_BIN:-$ROOT/build/release/bin}"
SSH="${SSH:-ssh}"
SSH_OPTS="${SSH_OPTS--o BatchMode=yes}"
DRY_RUN="${DRY_RUN:-0}"
START_TIMEOUT_S="${START_TIMEOUT_S:-120}"
STOP_TIMEOUT_S="${STOP_TIMEOUT_S:-30}"

usage() { sed -n '2,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 2; }
fail() { echo "ssh_cluster.sh: $*" >&2; }
(($# >= 1)) || usage
CONFIG="$1"
ACTION="${2:-start}"
[[ -f "$CONFIG" ]] || { fail "config $CONFIG not found"; exit 2; }
[[ -x "$BIN/splitspec" ]] || { fail "$BIN/splitspec not found; run deploy/setup.sh or set SPLITSPEC_BIN"; exit 2; }
# Absolute: the same path is used on every host, where the current directory differs.
BIN="$(cd "$BIN" && pwd)"

PLAN="$(mktemp)"
trap 'rm -f "$PLAN"' EXIT
if ! "$BIN/splitspec" serve --config "$CONFIG" --dry-run >"$PLAN"; then
  fail "cannot plan $CONFIG (the error is above)"
  exit 2
fi

# The plan, one process per entry (coordinator first): fields as plan.py ssh prints them.
P_HOST=() P_NAME=() P_ROLE=() P_PID=() P_LOG=() P_SOURCES=() P_SCRIPT=()
while IFS=$'\x1f' read -r host name role pid_file log sources script; do
  P_HOST+=("$host") P_NAME+=("$name") P_ROLE+=("$role") P_PID+=("$pid_file") P_LOG+=("$log")
  P_SOURCES+=("$sources") P_SCRIPT+=("$script")
done < <(python3 "$ROOT/deploy/plan.py" ssh "$PLAN")
COORD_HOST="${P_HOST[0]}"
RUN_DIR="$(dirname "${P_LOG[0]}")"
# Cluster sockets are CURVE-authenticated (docs/protocol.md, "Security model"):
# the plan hands every process SPLITSPEC_KEYS (security.keys_dir) or, asked for
# by name, SPLITSPEC_SECURITY=none. Keys for several hosts cannot be made here
# (each host needs its own copy), so a curve config without keys_dir is refused.
SECURITY_ENV="$(python3 "$ROOT/deploy/plan.py" security-env "$PLAN")"
if [[ -z "$SECURITY_ENV" ]]; then
  fail "$CONFIG: security.mode is \"curve\" but security.keys_dir is empty: make keys with" \
    "\`splitspec keygen --out DIR --name all\`, copy them to every host (secret files 0600)" \
    "and set keys_dir = DIR (or mode = \"none\" for a plaintext cluster on a trusted network)"
  exit 2
fi
SCALED_LIST="$RUN_DIR/ssh-scaled.list"
q() { printf '%q' "$1"; }

# run_on HOST SCRIPT [STDIN]: runs SCRIPT on HOST; STDIN (secrets) goes on ssh's stdin.
# Returns the remote script's status (255: ssh itself failed).
run_on() {
  local host="$1" script="$2" input="${3:-}"
  if [[ "$DRY_RUN" == "1" ]]; then
    printf '%s %s %s %q\n' "$SSH" "$SSH_OPTS" "$host" "$script"
    return 0
  fi
  # shellcheck disable=SC2086  # SSH_OPTS is a list of options
  printf '%s' "$input" | $SSH $SSH_OPTS "$host" "$script"
}

# Prints "host<0x1f>name<0x1f>pid file<0x1f>log" of workers `scale` started.
scaled_workers() {
  [[ "$DRY_RUN" == "1" ]] && return 0
  run_on "$COORD_HOST" "cat $(q "$SCALED_LIST") 2>/dev/null || true" </dev/null || true
}

# Prints the last lines of HOST:LOG to stderr (best effort).
show_log_tail() {
  local host="$1" log="$2"
  echo "---- last lines of $host:$log" >&2
  run_on "$host" "tail -n 20 $(q "$log") 2>&1" </dev/null >&2 || echo "(cannot read it)" >&2
  echo "----" >&2
}

# A script that prints "dead" when the process of PID_FILE is not running.
dead_check() { echo "if [ -f $(q "$1") ] && kill -0 \$(cat $(q "$1")) 2>/dev/null; then echo alive; else echo dead; fi"; }

# Names of the processes the coordinator lists as alive (JSON from `splitspec status`).
registered_names() {
  local endpoint
  endpoint="$(python3 -c 'import json,sys
for line in open(sys.argv[1]):
    p = json.loads(line)
    if p["role"] != "coordinator":
        a = p["argv"]; print(a[a.index("--coordinator") + 1]); break' "$PLAN")"
  [[ -n "$endpoint" ]] || return 0
  run_on "$COORD_HOST" "env $SECURITY_ENV $(q "$BIN/splitspec") status --coordinator $(q "$endpoint")" \
    </dev/null 2>/dev/null |
    python3 -c 'import json,sys
for m in json.load(sys.stdin).get("members", []):
    if m.get("state") == "MEMBER_STATE_ALIVE": print(m["worker_name"])' 2>/dev/null || true
}

# Checks every started process (index < $1) is alive; on the first dead one,
# names it with its host and log and returns 1.
check_started_alive() {
  local n="$1" i state
  for ((i = 0; i < n; i++)); do
    state="$(run_on "${P_HOST[$i]}" "$(dead_check "${P_PID[$i]}")" </dev/null || echo unreachable)"
    if [[ "$state" != "alive" ]]; then
      fail "${P_NAME[$i]} on ${P_HOST[$i]} is not running ($state); its log: ${P_HOST[$i]}:${P_LOG[$i]}"
      show_log_tail "${P_HOST[$i]}" "${P_LOG[$i]}"
      return 1
    fi
  done
}

# Waits until every draft worker and every group leader is registered.
wait_registered() {
  local deadline=$((SECONDS + START_TIMEOUT_S)) i missing names
  while :; do
    check_started_alive "${#P_NAME[@]}" || return 1
    names="$(registered_names)"
    missing=()
    for ((i = 1; i < ${#P_NAME[@]}; i++)); do
      # Followers (ranks >= 1) join their leader; only the leader registers.
      if [[ "${P_ROLE[$i]}" == "target" && "${P_NAME[$i]}" == *-rank[1-9]* ]]; then continue; fi
      grep -qxF "${P_NAME[$i]}" <<<"$names" || missing+=("${P_NAME[$i]}")
    done
    ((${#missing[@]} == 0)) && return 0
    if ((SECONDS >= deadline)); then
      fail "not registered with the coordinator after ${START_TIMEOUT_S}s: ${missing[*]}"
      for ((i = 0; i < ${#P_NAME[@]}; i++)); do
        if printf '%s\n' "${missing[@]}" | grep -qxF "${P_NAME[$i]}"; then
          fail "  ${P_NAME[$i]} on ${P_HOST[$i]}; its log: ${P_HOST[$i]}:${P_LOG[$i]}"
          show_log_tail "${P_HOST[$i]}" "${P_LOG[$i]}"
        fi
      done
      return 1
    fi
    sleep 1
  done
}

start() {
  local i v input rc
  for ((i = 0; i < ${#P_NAME[@]}; i++)); do
    input=""
    if [[ -n "${P_SOURCES[$i]}" ]]; then
      IFS=',' read -r -a vars <<<"${P_SOURCES[$i]}"
      for v in "${vars[@]}"; do input+="${!v:-}"$'\n'; done
    fi
    echo "==> ${P_NAME[$i]} on ${P_HOST[$i]} (log ${P_HOST[$i]}:${P_LOG[$i]})"
    rc=0
    run_on "${P_HOST[$i]}" "${P_SCRIPT[$i]}" "$input" || rc=$?
    if ((rc != 0)); then
      if ((rc == 255)); then
        fail "cannot reach ${P_HOST[$i]} over ssh (exit 255) to start ${P_NAME[$i]} (its log would be ${P_HOST[$i]}:${P_LOG[$i]})"
      else
        fail "starting ${P_NAME[$i]} on ${P_HOST[$i]} failed (exit $rc); its log: ${P_HOST[$i]}:${P_LOG[$i]}"
      fi
      rollback "$i"
      return 1
    fi
    [[ "$DRY_RUN" == "1" ]] && continue
    if ((i == 0)); then
      # The coordinator must be up before workers register.
      sleep 1
      check_started_alive 1 || { rollback 1; return 1; }
    fi
  done
  [[ "$DRY_RUN" == "1" ]] && return 0
  echo "==> waiting for every worker to register (up to ${START_TIMEOUT_S}s)"
  wait_registered || { rollback "${#P_NAME[@]}"; return 1; }
  echo "==> started; logs and pid files in $RUN_DIR on each host; stop with: $0 $CONFIG stop"
}

# Stops the first $1 processes of the plan after a failed start.
rollback() {
  local n="$1"
  ((n > 0)) || return 0
  fail "stopping the ${n} process(es) started so far"
  stop_entries "$n" >&2 || true
}

# stop_process HOST NAME PID_FILE: SIGTERM, wait, SIGKILL; prints what happened.
stop_process() {
  local host="$1" name="$2" pid_file="$3" pf
  pf="$(q "$pid_file")"
  echo "==> stopping $name on $host"
  run_on "$host" "if [ ! -f $pf ]; then echo '$name on $host: no pid file'; exit 0; fi
pid=\$(cat $pf)
if ! kill -0 \"\$pid\" 2>/dev/null; then echo '$name on $host: had exited'; rm -f $pf; exit 0; fi
kill -TERM \"\$pid\"
i=0
while kill -0 \"\$pid\" 2>/dev/null && [ \$i -lt $((STOP_TIMEOUT_S * 10)) ]; do sleep 0.1; i=\$((i + 1)); done
rm -f $pf
if kill -0 \"\$pid\" 2>/dev/null; then kill -KILL \"\$pid\"; echo '$name on $host: still running after ${STOP_TIMEOUT_S}s; killed (SIGKILL)'; exit 3; fi
echo '$name on $host: stopped'" </dev/null
}

# Stops, of the first $1 plan processes: scaled workers and draft workers, then
# target ranks (a group's leader before its followers: the leader disbands the
# group, so followers do not try to re-form it), the coordinator last.
stop_entries() {
  local n="$1" i rc=0 host name pid_file log order=()
  while IFS=$'\x1f' read -r host name pid_file log; do
    [[ -n "$host" ]] || continue
    stop_process "$host" "$name" "$pid_file" || rc=1
  done < <(scaled_workers)
  for ((i = n - 1; i >= 1; i--)); do [[ "${P_ROLE[$i]}" == "target" ]] || order+=("$i"); done
  for ((i = 1; i < n; i++)); do [[ "${P_ROLE[$i]}" != "target" ]] || order+=("$i"); done
  ((n > 0)) && order+=(0)
  for i in "${order[@]}"; do
    stop_process "${P_HOST[$i]}" "${P_NAME[$i]}" "${P_PID[$i]}" || rc=1
  done
  if [[ "$DRY_RUN" != "1" ]] && ((rc == 0)); then
    run_on "$COORD_HOST" "rm -f $(q "$SCALED_LIST")" </dev/null || true
  fi
  return "$rc"
}

stop() {
  if ! stop_entries "${#P_NAME[@]}"; then
    fail "some processes could not be stopped cleanly or a host could not be reached (above)"
    return 1
  fi
}

status() {
  local i state host name pid_file log rc=0
  for ((i = 0; i < ${#P_NAME[@]}; i++)); do
    state="$(run_on "${P_HOST[$i]}" "$(dead_check "${P_PID[$i]}")" </dev/null || echo "unreachable")"
    [[ "$state" == "dead" ]] && state="not running"
    [[ "$state" == "alive" ]] && state="running" || rc=1
    echo "${P_NAME[$i]} on ${P_HOST[$i]}: $state (log ${P_HOST[$i]}:${P_LOG[$i]})"
  done
  while IFS=$'\x1f' read -r host name pid_file log; do
    [[ -n "$host" ]] || continue
    state="$(run_on "$host" "$(dead_check "$pid_file")" </dev/null || echo "unreachable")"
    [[ "$state" == "dead" ]] && state="not running (drained, or exited)"
    [[ "$state" == "alive" ]] && state="running"
    echo "$name on $host (scaled): $state (log $host:$log)"
  done < <(scaled_workers)
  [[ "$DRY_RUN" == "1" ]] && return 0
  echo "registered with the coordinator: $(registered_names | tr '\n' ' ')"
  return "$rc"
}

# scale --draft +N|-N [--host HOST]
scale() {
  local delta="" host_arg=() line host script out rc=0 name pid log
  while (($#)); do
    case "$1" in
      --draft) delta="${2:-}"; shift 2 ;;
      --host) host_arg=(--host "${2:-}"); shift 2 ;;
      *) fail "scale: unknown argument $1 (expected --draft +N|-N [--host HOST])"; return 2 ;;
    esac
  done
  [[ -n "$delta" ]] || { fail "scale: --draft +N|-N is required"; return 2; }
  line="$(python3 "$ROOT/deploy/plan.py" scale "$PLAN" --draft "$delta" "${host_arg[@]}")" || return 2
  host="${line%%$'\x1f'*}"
  script="${line#*$'\x1f'}"
  echo "==> on $host: $script"
  out="$(run_on "$host" "$script" </dev/null)" || rc=$?
  printf '%s\n' "$out"
  # Record the workers it started, so that status and stop find them.
  while IFS=$'\x1f' read -r name pid log; do
    [[ -n "$name" ]] || continue
    run_on "$host" "echo $pid > $(q "$RUN_DIR/$name.pid")" </dev/null || rc=1
    run_on "$COORD_HOST" "mkdir -p $(q "$RUN_DIR") && cat >> $(q "$SCALED_LIST")" \
      "$(printf '%s\x1f%s\x1f%s\x1f%s' "$host" "$name" "$RUN_DIR/$name.pid" "$log")"$'\n' || rc=1
  done < <(printf '%s\n' "$out" | python3 -c 'import json,sys
for line in sys.stdin:
    try: e = json.loads(line)
    except ValueError: continue
    if e.get("event") == "started": print("\x1f".join([e["name"], str(e["pid"]), e.get("log", "")]))')
  if ((rc != 0)); then
    fail "scale --draft $delta on $host failed (exit $rc); worker logs are in $host:$RUN_DIR"
    return 1
  fi
}

case "$ACTION" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  scale) shift 2; scale "$@" ;;
  plan) cat "$PLAN" ;;
  *) usage ;;
esac
