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

  --drafter default     serve's own default (no --drafter flag: lookup, run inside the target)
  --concurrency 1,4     each serve start sends the requests at each concurrency in turn (N
                        clients, each taking the next request); tok/s is all completion tokens
                        over the wall time of that pass; cpu ms/tok the CPU time of serve's
                        processes over those tokens (its ratio: target-only / drafter)
  --baseline-splitspec PATH   also run both configurations with another build (e.g. main's) in
                        every round, alternating, and print its ratios beside this build's
  --threads 0           pass no --threads (serve's default: all cores)
"""
import argparse
import concurrent.futures
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


def complete(url, r):
    body = json.dumps({"messages": r["messages"], "max_tokens": r["max_tokens"],
                       "temperature": 0}).encode()
    req = urllib.request.Request(url + "/v1/chat/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as resp:
        answer = json.load(resp)
    return answer["usage"]["completion_tokens"], answer["choices"][0]["message"]["content"]


def tree_cpu_seconds(root_pid):
    """CPU seconds (user + system) of root_pid's descendants so far: the cluster's processes."""
    children, ticks = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
        ticks[int(entry)] = int(fields[11]) + int(fields[12])
    total, stack = 0, list(children.get(root_pid, []))
    while stack:
        pid = stack.pop()
        total += ticks.get(pid, 0)
        stack.extend(children.get(pid, []))
    return total / os.sysconf("SC_CLK_TCK")


def run_round(splitspec, serve_flags, url, requests, log_path, concurrencies=(1,)):
    """{concurrency: (tok/s, outputs in request order, cluster CPU ms per token)} of one serve
    start. CPU time is steadier than wall time on a shared machine: others' load slows the
    wall clock, not the work done."""
    with open(log_path, "w") as log:
        serve = subprocess.Popen([splitspec, "serve"] + serve_flags, stdout=log,
                                 stderr=subprocess.STDOUT, cwd=REPO)
    try:
        wait_healthy(url, serve)
        results = {}
        for c in concurrencies:
            cpu = tree_cpu_seconds(serve.pid)
            start = time.time()
            with concurrent.futures.ThreadPoolExecutor(max_workers=c) as pool:
                answers = list(pool.map(lambda r: complete(url, r), requests))
            elapsed = time.time() - start
            tokens = sum(a[0] for a in answers)
            cpu_ms = 1e3 * (tree_cpu_seconds(serve.pid) - cpu) / max(1, tokens)
            results[c] = (tokens / elapsed, [a[1] for a in answers], cpu_ms)
        return results
    finally:
        serve.send_signal(signal.SIGINT)
        try:
            serve.wait(timeout=30)
        except subprocess.TimeoutExpired:
            serve.kill()


def load_average():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--drafter", default="layerskip:24")
    parser.add_argument("--draft", help="the draft GGUF for --drafter model")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=26)
    parser.add_argument("--categories", default="chat,qa,summarization")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--concurrency", default="1")
    parser.add_argument("--workload", default=DEFAULT_WORKLOAD)
    parser.add_argument("--http", default="127.0.0.1:8000")
    parser.add_argument("--control", default=None, help="coordinator endpoint (default: serve's)")
    parser.add_argument("--log-dir", default=None, help="serve's run dir (default: serve's)")
    parser.add_argument("--splitspec", default=None)
    parser.add_argument("--baseline-splitspec", default=None)
    args = parser.parse_args()
    splitspec = args.splitspec or find_splitspec()
    builds = [("this", splitspec)]
    if args.baseline_splitspec:
        builds.insert(0, ("baseline", args.baseline_splitspec))
    concurrencies = [int(c) for c in args.concurrency.split(",")]
    requests = load_requests(args.workload, set(args.categories.split(",")), args.requests)
    url = "http://" + args.http
    common = ["--http", args.http]
    if args.threads > 0:
        common += ["--threads", str(args.threads)]
    if args.control:
        common += ["--control", args.control]
    if args.log_dir:
        common += ["--log-dir", args.log_dir]
    drafter_flags = [] if args.drafter == "default" else ["--drafter", args.drafter]
    drafter_flags += ["--draft", args.draft] if args.draft else []
    print("splitspec serve, %d requests (%s) over HTTP at concurrency %s, greedy, target %s; "
          "target-only (--drafts 0) vs %s k auto, %d alternating rounds; builds: %s"
          % (len(requests), args.categories, args.concurrency,
             "%d thread(s)" % args.threads if args.threads > 0 else "all cores",
             " ".join(drafter_flags) or "serve's default drafter", args.rounds,
             ", ".join("%s %s" % b for b in builds)))
    ratios = {(name, c): [] for name, _ in builds for c in concurrencies}
    cpu_ratios = {(name, c): [] for name, _ in builds for c in concurrencies}
    for round_index in range(1, args.rounds + 1):
        for name, binary in builds:
            before = load_average()
            base = run_round(binary, common + ["--drafts", "0"], url, requests,
                             "/tmp/bench_serve_auto.%s.target-only.log" % name, concurrencies)
            spec = run_round(binary, common + drafter_flags, url, requests,
                             "/tmp/bench_serve_auto.%s.drafter.log" % name, concurrencies)
            for c in concurrencies:
                (base_tps, base_out, base_cpu), (spec_tps, spec_out, spec_cpu) = base[c], spec[c]
                if spec_out != base_out:
                    first = next(i for i, (a, b) in enumerate(zip(spec_out, base_out)) if a != b)
                    sys.exit("round %d, %s build, concurrency %d: request %d's output differs "
                             "from target-only: not exact" % (round_index, name, c, first))
                ratios[(name, c)].append(spec_tps / base_tps)
                cpu_ratios[(name, c)].append(base_cpu / spec_cpu)
                print("round %d, %s build, concurrency %d: target-only %.1f tok/s %.2f cpu "
                      "ms/tok, %s %.1f tok/s %.2f cpu ms/tok: %.2fx tok/s, %.2fx cpu (load %s -> %s)"
                      % (round_index, name, c, base_tps, base_cpu, args.drafter, spec_tps,
                         spec_cpu, spec_tps / base_tps, base_cpu / spec_cpu, before,
                         load_average()), flush=True)
    median = lambda values: round(sorted(values)[len(values) // 2], 3)
    for (name, c), values in ratios.items():
        print(json.dumps({"build": name, "drafter": args.drafter, "concurrency": c,
                          "ratios": [round(r, 3) for r in values], "median_ratio": median(values),
                          "cpu_ratios": [round(r, 3) for r in cpu_ratios[(name, c)]],
                          "median_cpu_ratio": median(cpu_ratios[(name, c)])}))


if __name__ == "__main__":
    main()
