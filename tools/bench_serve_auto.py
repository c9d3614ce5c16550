#!/usr/bin/env python3
"""`splitspec serve` with a drafter and `k auto` against serve with no draft worker, over HTTP.

  python3 tools/bench_serve_auto.py [--drafter layerskip:24] [--draft PATH] [--rounds 3]
      [--requests 26] [--categories chat,qa,summarization] [--threads 1]

Unlike `splitspec bench spec --workload`, which starts a fresh in-process cluster per request,
this keeps one serve cluster per round, as users run it: the draft worker's controller sees
request after request (a drafter found hopeless starts the next requests off). Each round
starts serve twice, alternating (target-only: `--drafts 0`; then the drafter), sends the
first N requests of the chosen workload categories one at a time (chat template, greedy,
their max_tokens), and prints tok/s of both and their ratio. The outputs must be identical
(greedy speculation is exact); a difference fails the run.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

from bench_common import find_splitspec

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_WORKLOAD = os.path.join(REPO, "bench", "workloads", "suite.jsonl")


def load_requests(path, categories, limit):
    with open(path, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [r for r in rows if r["category"] in categories][:limit]


def wait_healthy(url, serve, seconds=90):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if serve.poll() is not None:
            raise RuntimeError("serve exited with %d before it was healthy" % serve.returncode)
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError("serve not healthy after %d s" % seconds)


def run_round(splitspec, serve_flags, url, requests, log_path):
    with open(log_path, "w") as log:
        serve = subprocess.Popen([splitspec, "serve"] + serve_flags, stdout=log,
                                 stderr=subprocess.STDOUT, cwd=REPO)
    try:
        wait_healthy(url, serve)
        tokens, outputs = 0, []
        start = time.time()
        for r in requests:
            body = json.dumps({"messages": r["messages"], "max_tokens": r["max_tokens"],
                               "temperature": 0}).encode()
            req = urllib.request.Request(url + "/v1/chat/completions", data=body,
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=300) as resp:
                answer = json.load(resp)
            tokens += answer["usage"]["completion_tokens"]
            outputs.append(answer["choices"][0]["message"]["content"])
        return tokens / (time.time() - start), outputs
    finally:
        serve.send_signal(signal.SIGINT)
        try:
            serve.wait(timeout=30)
        except subprocess.TimeoutExpired:
            serve.kill()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--drafter", default="layerskip:24")
    parser.add_argument("--draft", help="the draft GGUF for --drafter model")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=26)
    parser.add_argument("--categories", default="chat,qa,summarization")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--workload", default=DEFAULT_WORKLOAD)
    parser.add_argument("--http", default="127.0.0.1:8000")
    parser.add_argument("--splitspec", default=None)
    args = parser.parse_args()
    splitspec = args.splitspec or find_splitspec()
    requests = load_requests(args.workload, set(args.categories.split(",")), args.requests)
    url = "http://" + args.http
    common = ["--threads", str(args.threads), "--http", args.http]
    drafter_flags = ["--drafter", args.drafter] + (["--draft", args.draft] if args.draft else [])
    print("splitspec serve, %d requests (%s) one at a time over HTTP, greedy, target %d thread(s); "
          "target-only (--drafts 0) vs %s k auto, %d alternating rounds"
          % (len(requests), args.categories, args.threads, " ".join(drafter_flags), args.rounds))
    ratios = []
    for round_index in range(1, args.rounds + 1):
        base, base_out = run_round(splitspec, common + ["--drafts", "0"], url, requests,
                                   "/tmp/bench_serve_auto.target-only.log")
        spec, spec_out = run_round(splitspec, common + drafter_flags, url, requests,
                                   "/tmp/bench_serve_auto.drafter.log")
        if spec_out != base_out:
            first = next(i for i, (a, b) in enumerate(zip(spec_out, base_out)) if a != b)
            sys.exit("round %d: request %d's output differs from target-only: not exact"
                     % (round_index, first))
        ratios.append(spec / base)
        print("round %d: target-only %.1f tok/s, %s auto %.1f tok/s: %.2fx"
              % (round_index, base, args.drafter, spec, spec / base))
    print(json.dumps({"drafter": args.drafter, "ratios": [round(r, 3) for r in ratios],
                      "median_ratio": round(sorted(ratios)[len(ratios) // 2], 3)}))


if __name__ == "__main__":
    main()
