"""Helpers the Python benchmark and reference scripts share (tools/*.py, tools/reference/*.py)."""
import glob
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def find_splitspec(explicit=None):
    """The splitspec binary: `explicit`, $SPLITSPEC_BIN, else the newest build/*/bin/splitspec."""
    candidates = [explicit, os.environ.get("SPLITSPEC_BIN")]
    candidates += sorted(glob.glob(os.path.join(REPO, "build", "*", "bin", "splitspec")),
                         key=os.path.getmtime, reverse=True)
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    sys.exit("splitspec binary not found: build it or pass --splitspec / set SPLITSPEC_BIN")


def lcg_tokens(n, vocab, seed):
    """The ids of BenchTokens() in tools/bench_tokens.h."""
    ids, state = [], seed
    for _ in range(n):
        state = (state * 1664525 + 1013904223) & 0xFFFFFFFF
        ids.append((state >> 8) % vocab)
    return ids
