#!/usr/bin/env bash
# Chaos soak of `splitspec serve` on loopback: N streaming clients for S seconds while a loop
# SIGKILLs, or SIGSTOPs and later SIGCONTs, random draft workers, target ranks and the TP
# follower, and serve's supervision restarts what died. At the end every request must have
# completed with output equal to plain greedy (`splitspec generate`, temperature 0) or ended
# with a clear error; zero hung, zero lost (tools/chaos_soak_clients.py defines the classes).
# Prints the counts; exit 0 when they hold, 1 when not, 2 for a usage or set-up error.
#
#   tools/chaos_soak.sh --seconds 300 --clients 8          # the 5-minute soak (default model)
#   tools/chaos_soak.sh --seconds 60 --clients 4 --tiny-model-tool build/dev/tests/deploy_tiny_model
#
# The cluster: coordinator, target groups t0 and t1 of --tp ranks each (2: a leader and a
# follower), 2 lookup draft workers, one compute thread per process. Both groups have the same
# size because the reference is plain greedy at that size (`generate --target-tp N`): TP=2 sums
# in another order than TP=1, and at a near-tie the argmax can differ (3 of the 6 prompts here
# on SmolLM2), so a request re-placed between groups of different sizes would match neither
# reference. Bounded:
# the clients stop starting requests after --seconds and a stream with no byte for --stall-s
# counts as hung; serve is stopped at the end. Everything binds 127.0.0.1 only.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seconds=300
clients=8
max_tokens=32
stall_s=150
bin_dir=""
model="${SPLITSPEC_MODEL:-$repo/models/SmolLM2-135M-Instruct.Q4_1.gguf}"
tiny_model_tool=""
tp=2
work=""
seed=$$
pause_min=2
pause_max=6

usage() {
  sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
  cat <<EOF
flags: --seconds S ($seconds)  --clients N ($clients)  --max-tokens T ($max_tokens)
       --stall-s X ($stall_s)  --bin-dir DIR (build/release/bin, else build/dev/bin)
       --model PATH ($model)  --tiny-model-tool PATH (write a tiny model and use it)
       --tp N ($tp: ranks per target group; 1: no follower)  --work-dir DIR (kept; default: a new temporary folder, removed after a pass)
       --seed N
       --pause-min S ($pause_min)  --pause-max S ($pause_max): between chaos actions
EOF
}

while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --clients) clients="$2"; shift 2 ;;
    --max-tokens) max_tokens="$2"; shift 2 ;;
    --stall-s) stall_s="$2"; shift 2 ;;
    --bin-dir) bin_dir="$2"; shift 2 ;;
    --model) model="$2"; shift 2 ;;
    --tiny-model-tool) tiny_model_tool="$2"; shift 2 ;;
    --tp) tp="$2"; shift 2 ;;
    --work-dir) work="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    --pause-min) pause_min="$2"; shift 2 ;;
    --pause-max) pause_max="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "chaos_soak.sh: unknown flag $1 (--help lists them)" >&2; exit 2 ;;
  esac
done

if [[ -z "$bin_dir" ]]; then
  bin_dir="$repo/build/release/bin"
  [[ -x "$bin_dir/splitspec" ]] || bin_dir="$repo/build/dev/bin"
fi
splitspec="$bin_dir/splitspec"
[[ -x "$splitspec" ]] || { echo "chaos_soak.sh: $splitspec not found; build first" >&2; exit 2; }
keep_work=1
if [[ -z "$work" ]]; then
  work="$(mktemp -d "${TMPDIR:-/tmp}/splitspec-chaos.XXXXXX")"
  keep_work=0  # removed after a pass; kept (and named) after a failure
fi
mkdir -p "$work"
if [[ -n "$tiny_model_tool" ]]; then
  model="$work/tiny.gguf"
  "$tiny_model_tool" "$model" || { echo "chaos_soak.sh: $tiny_model_tool failed" >&2; exit 2; }
fi
[[ -f "$model" ]] || { echo "chaos_soak.sh: model $model not found" >&2; exit 2; }
RANDOM=$seed

serve_pid=""
stopped_pids=()
cleanup() {
  local pid
  for pid in "${stopped_pids[@]}"; do kill -CONT "$pid" 2>/dev/null || true; done
  if [[ -n "$serve_pid" ]] && kill -0 "$serve_pid" 2>/dev/null; then
    kill -TERM "$serve_pid" 2>/dev/null || true
    for _ in $(seq 1 300); do kill -0 "$serve_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$serve_pid" 2>/dev/null || true
  fi
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
control="tcp://127.0.0.1:$(free_port)"
http_port="$(free_port)"

# --- plain greedy references (target alone, one process) ---
prompts=("1,2,3,4,5,6,7,8" "10,20,30,10,20,30" "200,5,200,5,200" "42,43,44" "7,8,9,10,11"
         "99,98,97,96")
echo "==> plain greedy references for ${#prompts[@]} prompts ($model)"
references="$work/references.json"
{
  echo "["
  first=1
  for ids in "${prompts[@]}"; do
    line="$("$splitspec" generate --target "$model" --prompt-ids "$ids" --max-tokens "$max_tokens" \
            --temperature 0 --drafter none --threads 1 --target-tp "$tp" --json \
            2>>"$work/generate.log")"
    [[ $first -eq 1 ]] || echo ","
    first=0
    python3 -c 'import json, sys; g = json.loads(sys.argv[2]);
print(json.dumps({"prompt_ids": [int(x) for x in sys.argv[1].split(",")], "text": g["text"]}))' \
      "$ids" "$line"
  done
  echo "]"
} > "$references"

# --- the cluster ---
config="$work/cluster.toml"
{
  echo "[cluster]"
  echo "run_dir = \"$work/logs\""
  echo "[coordinator]"
  echo "control = \"$control\""
  echo "http = \"127.0.0.1:$http_port\""
  echo "[models]"
  echo "target = \"$model\""
  for group in t0 t1; do
    echo "[[target_group]]"
    echo "name = \"$group\""
    echo "tp = $tp"
    echo "threads = 1"
  done
  echo "[[draft_pool]]"
  echo "name = \"draft\""
  echo "count = 2"
  echo "drafter = \"lookup\""
  echo "placement = \"workers\""  # draft worker processes to kill (else lookup runs in the targets)
  echo "threads = 1"
} > "$config"
# Restarts are the point here: a generous crash-loop limit, so only a real loop stops it;
# a long queue timeout, so a request waits out a restart instead of failing.
"$splitspec" serve --config "$config" --heartbeat-ms 200 --max-restarts 30 \
  --queue-timeout-ms 120000 > "$work/serve.out" 2>&1 &
serve_pid=$!
for _ in $(seq 1 1200); do
  grep -qs "cluster ready" "$work/serve.out" && break
  kill -0 "$serve_pid" 2>/dev/null || break
  sleep 0.1
done
if ! grep -q "cluster ready" "$work/serve.out"; then
  echo "chaos_soak.sh: the cluster did not start; $work/serve.out:" >&2
  cat "$work/serve.out" >&2
  exit 2
fi
echo "==> cluster up (work dir $work); $clients clients for $seconds s, chaos every" \
     "$pause_min-$pause_max s"

python3 "$repo/tools/chaos_soak_clients.py" --port "$http_port" --clients "$clients" \
  --seconds "$seconds" --references "$references" --out "$work/clients.json" \
  --max-tokens "$max_tokens" --stall-s "$stall_s" --seed "$seed" > "$work/clients.out" 2>&1 &
clients_pid=$!

# Live draft workers and target ranks: "NAME PID KIND" lines (KIND draft, target or follower).
live_workers() {
  # serve made the cluster's CURVE keys in its run_dir; status talks with the admin key.
  SPLITSPEC_KEYS="$work/logs/keys" "$splitspec" status --coordinator "$control" --timeout-ms 2000 \
    2>/dev/null | python3 -c '
import json, sys
try:
    status = json.load(sys.stdin)
except ValueError:
    sys.exit(0)
for m in status.get("members", []):
    if m.get("state") not in ("MEMBER_STATE_ALIVE", "alive"):
        continue
    role = m.get("role", "")
    if "DRAFT" in role.upper():
        kind = "draft"
    elif "TARGET" in role.upper():
        kind = "follower" if int(m.get("tp_rank", 0) or 0) > 0 else "target"
    else:
        continue
    print(m.get("worker_name", "?"), m.get("pid", 0), kind)'
}

declare -A actions=()
end=$((SECONDS + seconds))
while (( SECONDS < end )); do
  sleep $((pause_min + RANDOM % (pause_max - pause_min + 1)))
  (( SECONDS < end )) || break
  mapfile -t workers < <(live_workers)
  (( ${#workers[@]} > 0 )) || continue
  # A kind first (draft, target, follower: each as likely), then one of its workers.
  mapfile -t kinds < <(printf '%s\n' "${workers[@]}" | awk '{print $3}' | sort -u)
  wanted="${kinds[RANDOM % ${#kinds[@]}]}"
  mapfile -t candidates < <(printf '%s\n' "${workers[@]}" | awk -v k="$wanted" '$3 == k')
  read -r name pid kind <<< "${candidates[RANDOM % ${#candidates[@]}]}"
  [[ "$pid" =~ ^[0-9]+$ && "$pid" -gt 0 ]] || continue
  if (( RANDOM % 2 == 0 )); then
    kill -KILL "$pid" 2>/dev/null || continue
    key="kill9-$kind"
    echo "$(date +%T) kill -9 $name (pid $pid, $kind)" >> "$work/chaos.log"
  else
    pause=$((1 + RANDOM % 8))
    kill -STOP "$pid" 2>/dev/null || continue
    stopped_pids+=("$pid")
    echo "$(date +%T) SIGSTOP $name (pid $pid, $kind) for $pause s" >> "$work/chaos.log"
    sleep "$pause"
    kill -CONT "$pid" 2>/dev/null || true
    stopped_pids=()
    key="stop-cont-$kind"
  fi
  actions[$key]=$(( ${actions[$key]:-0} + 1 ))
done

echo "==> chaos over; waiting for the requests in flight (at most $stall_s s each)"
wait "$clients_pid" || true
serve_alive=0
kill -0 "$serve_pid" 2>/dev/null && serve_alive=1
metrics="$(python3 -c 'import sys, urllib.request
print(urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=10).read().decode())' \
  "$http_port" 2>/dev/null || true)"
restarts_metric="$(printf '%s\n' "$metrics" | awk '/^splitspec_worker_restarts_total/ {s += $2} END {print s + 0}')"
restarts_logged="$(grep -c ' restarted (pid ' "$work/serve.out" || true)"

action_list=""
for key in $(printf '%s\n' "${!actions[@]}" | sort); do action_list+="$key=${actions[$key]} "; done
echo "==> chaos actions: ${action_list:-none}"
echo "==> restarts: $restarts_logged in serve's output, $restarts_metric in /metrics"
echo "==> serve still running at the end: $([[ $serve_alive -eq 1 ]] && echo yes || echo NO)"
if [[ ! -s "$work/clients.json" ]]; then
  echo "chaos_soak.sh: the clients wrote no result; $work/clients.out:" >&2
  cat "$work/clients.out" >&2
  exit 1
fi
verdict=0
python3 - "$work/clients.json" "$serve_alive" <<'EOF' || verdict=$?
import json, sys
r = json.load(open(sys.argv[1]))
serve_alive = sys.argv[2] == "1"
print("==> requests %d: exact %d, clear errors %d, mismatched %d, hung %d, lost %d"
      % (r["requests"], r["exact"], r["error"], r["mismatch"], r["hung"], r["lost"]))
for kind, details in sorted(r["examples"].items()):
    for d in details:
        print("    %s: %s" % (kind, d))
ok = serve_alive and r["exact"] > 0 and r["mismatch"] == 0 and r["hung"] == 0 and r["lost"] == 0
print("==> chaos soak %s" % ("PASSED" if ok else "FAILED"))
sys.exit(0 if ok else 1)
EOF
if [[ $verdict -eq 0 && $keep_work -eq 0 ]]; then
  cleanup
  trap - EXIT
  rm -rf "$work"
elif [[ $verdict -ne 0 ]]; then
  echo "==> logs kept in $work (serve.out, logs/, chaos.log, clients.json)"
fi
exit "$verdict"
