#!/usr/bin/env python3
"""Per-kernel time table from Nsight Compute's CSV (issue 36's profile step).

Reads `ncu --csv --metrics gpu__time_duration.sum` output (one row per kernel launch) and prints,
per kernel name and launch shape, the launches, the total and the mean duration, largest total
first, and the sum over every launch. With --per N the totals are also divided by N (the number
of forwards the profiled command ran) so that two engines' runs compare per forward.

  tools/gpu/ncu_summary.py PROFILE.csv [--top 25] [--per N] [--label TEXT]

ncu prints its own log lines before the CSV header; they are skipped. Durations are converted
to microseconds from the unit ncu names (ns, us, usecond, ms, msecond).
"""
import argparse
import csv
import sys

UNIT_TO_US = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3,
              "s": 1e6, "second": 1e6}


def read_rows(path):
    with open(path, newline="", errors="replace") as f:
        lines = f.readlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return []
    return list(csv.DictReader(lines[start:]))


def short_name(name):
    # "void ns::Kernel<...>(args)" -> "ns::Kernel<...>": the template says which variant ran.
    name = name.strip()
    if name.startswith("void "):
        name = name[5:]
    depth = 0
    for i, ch in enumerate(name):
        if ch in "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            return name[:i]
    return name


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--per", type=float, default=0, help="forwards in the profiled run")
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    rows = read_rows(args.csv)
    groups = {}
    total_us = 0.0
    for row in rows:
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        try:
            value = float(row["Metric Value"].replace(",", ""))
        except ValueError:
            continue
        us = value * UNIT_TO_US.get(row.get("Metric Unit", "ns").strip(), 1e-3)
        key = (short_name(row.get("Kernel Name", "?")), row.get("Grid Size", ""), row.get("Block Size", ""))
        count, total = groups.get(key, (0, 0.0))
        groups[key] = (count + 1, total + us)
        total_us += us
    launches = sum(c for c, _ in groups.values())
    head = f"ncu {args.label}: {launches} launches, {total_us:.1f} us of kernel time"
    if args.per > 0:
        head += f"; per forward ({args.per:g}): {launches / args.per:.0f} launches, {total_us / args.per:.1f} us"
    print(head)
    if not groups:
        print("  (no kernel rows: see the ncu log)")
        return 1
    print(f"  {'total us':>10} {'launches':>8} {'mean us':>9}  kernel [grid] [block]")
    for (name, grid, block), (count, total) in sorted(groups.items(), key=lambda kv: -kv[1][1])[:args.top]:
        print(f"  {total:10.1f} {count:8d} {total / count:9.2f}  {name[:90]} {grid} {block}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
