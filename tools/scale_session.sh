#!/usr/bin/env bash
# Scaling under load, as a session log: starts `splitspec serve --target-tp 2 --threads 1`
# (coordinator, one TP=2 target group, one ngram draft worker), runs 3 HTTP chat clients
# back to back for ~70 s, and meanwhile scales the pools with `splitspec scale`: draft +1,
# draft -1, target-groups +1 (TP=2), target-groups -1. Writes OUT/session.txt (the scale
# events, the request counters from /metrics, the outcomes) and OUT/requests.txt (one line
# per request: HTTP status, finish reason, tokens, accepted/verified). Then stops serve.
#
#   tools/scale_session.sh [OUT]        # OUT defaults to build/scale_session
#
# Needs deploy/setup.sh's build, curl and python3; ports 5555 and 8000 free.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."
S=build/release/bin/splitspec
OUT="${1:-build/scale_session}"
mkdir -p "$OUT"
rm -f "$OUT/requests.txt" "$OUT/session.txt"
log() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$OUT/session.txt"; }
"$S" serve --target-tp 2 --threads 1 --log-dir "$OUT/cluster" > "$OUT/serve.log" 2>&1 &
SERVE=$!
# Whatever happens below, the cluster does not outlive the script.
trap 'kill -INT $SERVE 2>/dev/null' EXIT
for i in $(seq 1 120); do curl -sf http://127.0.0.1:8000/health >/dev/null && break; sleep 1; done
if ! curl -sf http://127.0.0.1:8000/health >/dev/null; then
  echo "serve did not become healthy in 120 s; its log ($OUT/serve.log) ends:" >&2
  tail -20 "$OUT/serve.log" >&2
  exit 1
fi
log "serve up: $(curl -s http://127.0.0.1:8000/health)"
export SPLITSPEC_KEYS="$OUT/cluster/keys"  # serve's fresh keys: scale drains with the admin key
END=$((SECONDS + 70))
client() {
  local c=$1 n=0
  while (( SECONDS < END )); do
    n=$((n+1))
    local body
    body=$(printf '{"messages":[{"role":"user","content":"Request %d of client %d: write a short list of fruits and their colors."}],"max_tokens":%d,"temperature":0}' $n $c $((16 + (n*7 % 48))))
    local resp code
    resp=$(curl -s -w '\n%{http_code}' http://127.0.0.1:8000/v1/chat/completions -H 'Content-Type: application/json' -d "$body")
    code=$(echo "$resp" | tail -1)
    local fin
    fin=$(echo "$resp" | head -n -1 | python3 -c 'import json,sys
try:
  d=json.load(sys.stdin); c=d["choices"][0]; u=d.get("usage",{})
  print(c["finish_reason"], "tokens=%d" % u["completion_tokens"], "accepted=%d/%d" % (u["accepted_tokens"], u["verified_tokens"]))
except Exception as e: print("unparsable", e)')
    echo "$(date +%H:%M:%S) client=$c req=$n http=$code $fin" >> "$OUT/requests.txt"
  done
}
for c in 1 2 3; do client $c & done
sleep 10; log "scale --draft +1";           $S scale --draft +1 --log-dir "$OUT/cluster" 2>&1 | tee -a "$OUT/session.txt"
sleep 8;  log "status";                     $S status | python3 -c 'import json,sys; d=json.load(sys.stdin); print(json.dumps(d)[:600])' | tee -a "$OUT/session.txt"
sleep 5;  log "scale --draft -1";           $S scale --draft -1 2>&1 | tee -a "$OUT/session.txt"
sleep 5;  log "scale --target-groups +1 --target-tp 2 --threads 1"; $S scale --target-groups +1 --target-tp 2 --threads 1 --log-dir "$OUT/cluster" 2>&1 | tee -a "$OUT/session.txt"
sleep 10; log "scale --target-groups -1";   $S scale --target-groups -1 2>&1 | tee -a "$OUT/session.txt"
wait $(jobs -p | grep -v "^$SERVE\$") 2>/dev/null
sleep 1
log "metrics:"; curl -s http://127.0.0.1:8000/metrics | grep -E '^splitspec_(requests_total|num_requests|spec_decode_num_(draft|accepted)_tokens_total)' | tee -a "$OUT/session.txt"
log "requests: $(wc -l < "$OUT/requests.txt") total; by outcome:"
awk '{print $4, $5}' "$OUT/requests.txt" | sort | uniq -c | tee -a "$OUT/session.txt"
kill -INT $SERVE; wait $SERVE
status=$?
trap - EXIT
log "serve exited $status"
