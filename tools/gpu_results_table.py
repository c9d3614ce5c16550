#!/usr/bin/env python3
"""The README's GPU table from a results file (bench/results/gpu/<date>-<gpu>.jsonl).

  python3 tools/gpu_results_table.py bench/results/gpu/2026-11-27-nvidia-h100-80gb-hbm3.jsonl

One markdown row per (shape, measure): splitspec's value, llama.cpp's and splitspec / llama.cpp
for throughputs (tok/s: higher is better) or both T(k)/T(1) for the verify curve (lower is
better). Values come from the lines the tools wrote (tools/bench_results.h,
tools/llama_bench_results.py), never typed by hand; a measure one engine lacks shows "-".
"""
import argparse
import json
import sys

ORDER = ["decode_b1", "decode_b8", "decode_b64", "prefill_512"]


def measure_key(measure):
    if measure in ORDER:
        return (0, ORDER.index(measure))
    if measure.startswith("verify_k"):
        return (1, int(measure[len("verify_k"):]))
    return (2, measure)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results")
    args = ap.parse_args()
    values = {}
    gpus = set()
    with open(args.results, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
                values[(r["shape"], r["measure"], r["engine"])] = float(r["value"])
                gpus.add(r["gpu"])
            except (ValueError, KeyError) as e:
                print(f"gpu_results_table: {args.results}:{n}: {e}", file=sys.stderr)
                return 1
    print(f"GPU: {', '.join(sorted(gpus))} (random weights, real models' shapes)\n")
    print("| shape | measure | splitspec | llama.cpp | splitspec / llama.cpp |")
    print("|---|---|---:|---:|---:|")
    shapes = sorted({s for s, _, _ in values})
    for shape in shapes:
        measures = sorted({m for s, m, _ in values if s == shape}, key=measure_key)
        for m in measures:
            ours = values.get((shape, m, "splitspec"))
            peer = values.get((shape, m, "llama.cpp"))
            verify = m.startswith("verify_k")
            fmt = (lambda v: f"{v:.2f}") if verify else (lambda v: f"{v:,.0f} tok/s")
            ratio = "-" if verify or ours is None or not peer else f"{ours / peer:.2f}x"
            label = f"{m} (T(k)/T(1))" if verify else m
            print(f"| {shape} | {label} | {fmt(ours) if ours is not None else '-'} | "
                  f"{fmt(peer) if peer is not None else '-'} | {ratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
