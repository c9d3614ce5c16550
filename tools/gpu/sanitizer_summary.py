#!/usr/bin/env python3
"""The errors of one compute-sanitizer log, split into ours and the expected (the GPU routine).

  tools/gpu/sanitizer_summary.py LOG [--expected-test NAME ...]

Prints one line: "" when the log has no error of ours, else "N errors in WHERE" (the kernels or
API calls, most frequent first); with expected errors it appends "(M expected: ...)" so that the
summary still shows them. Exit status 1 when there is an error of ours, else 0.

An error is *expected* only when it is a CUDA API error (a "Program hit cudaErrorX ... on CUDA API
call to F" record, never a memory, race or sync error) and either
  - NCCL made the call (a frame of its backtrace is in libnccl): NCCL's own probe of the kernel
    images it carries (ncclInitKernelsForDevice asks cudaFuncGetAttributes for every
    architecture's kernels and handles the refusal); not our call, not ours to fix; or
  - it happened inside a test named by --expected-test (the gtest name, parameter suffix
    allowed): the tests that provoke a CUDA error on purpose to prove it is handled (an invalid
    device ordinal, an impossible allocation, a capture made to fail).
The test is the last "[ RUN      ]" line before the record. The sanitizer prints at most
--print-limit records: errors it counted in "ERROR SUMMARY" but did not print are counted as ours
(never assumed expected).
"""
import argparse
import collections
import re
import sys

RECORD = re.compile(r"^========= (\S.*)$")
API_ERROR = re.compile(r"Program hit (\w+) .* on CUDA API call to (\w+)")
KERNEL = re.compile(r"(?:^|\s)at ([A-Za-z_][A-Za-z0-9_:<>]*)(?:\(|\+0x)")
SUMMARY = re.compile(r"ERROR SUMMARY: (\d+) error")
RUN = re.compile(r"^\[ RUN      \] (\S+)")


def matches(test, expected):
    # "Suite/Fixture.Name/Param" or "Fixture.Name" against "Fixture.Name".
    if not test:
        return False
    base = re.sub(r"^[^/.]+/", "", test)     # instantiation prefix
    base = re.sub(r"/[^/]+$", "", base)      # parameter suffix
    return test in expected or base in expected


def summarise(lines, expected_tests):
    total = 0
    test = ""
    records = []  # (message, frames, test)
    current = None
    for line in lines:
        line = line.rstrip("\n")
        m = RUN.match(line)
        if m:
            test = m.group(1)
            continue
        m = SUMMARY.search(line)
        if m:
            total += int(m.group(1))
            current = None
            continue
        m = RECORD.match(line)
        if m:
            msg = m.group(1)
            if (msg.startswith(("COMPUTE-SANITIZER", "Target application", "This ", "Note:"))
                    or re.match(r"[A-Z]+ SUMMARY:", msg)):
                current = None
                continue
            current = [msg, [], test]
            records.append(current)
            continue
        if current is not None and line.startswith("=========     "):
            current[1].append(line.strip("= ").strip())
    ours = collections.Counter()
    expected = collections.Counter()
    for msg, frames, rec_test in records:
        api = API_ERROR.search(msg)
        if api:
            where = f"API {api.group(2)} ({api.group(1)})"
            by_nccl = any("libnccl" in f for f in frames if f.startswith("Host Frame"))
            if by_nccl:
                expected[f"{where} by NCCL"] += 1
                continue
            if matches(rec_test, expected_tests):
                expected[f"{where} in {rec_test}"] += 1
                continue
            ours[f"{where} in {rec_test or '?'}"] += 1
            continue
        kernel = None
        for text in [msg] + frames:
            k = KERNEL.search(text)
            if k:
                kernel = k.group(1)
                break
        what = kernel or re.sub(r"0x[0-9a-f]+|[0-9][0-9,]*", "N", msg)[:70]
        ours[f"{what} in {rec_test or '?'}"] += 1
    n_expected = sum(expected.values())
    n_ours = max(total - n_expected, sum(ours.values()))
    unprinted = n_ours - sum(ours.values())
    if unprinted > 0:
        ours["(not printed: over --print-limit)"] += unprinted
    parts = []
    if n_ours:
        where = ", ".join(f"{k} x{v}" for k, v in ours.most_common(6))
        parts.append(f"{n_ours} errors in {where}")
    if n_expected:
        where = ", ".join(f"{k} x{v}" for k, v in expected.most_common(4))
        parts.append(f"({n_expected} expected: {where})")
    return n_ours, " ".join(parts)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log")
    ap.add_argument("--expected-test", action="append", default=[])
    args = ap.parse_args()
    with open(args.log, errors="replace") as f:
        n_ours, line = summarise(f, set(args.expected_test))
    print(line)
    return 1 if n_ours else 0


if __name__ == "__main__":
    sys.exit(main())
