#!/usr/bin/env python3
"""Fails when a C++/CUDA #include runs from a lower layer to a higher one.

Usage: check_layering.py [ROOT] [--loops]

Reads every `#include "..."` line of the .h/.cc/.cu/.cuh files under ROOT (default: the
repository this script lives in; build/, models/ and dot-folders are skipped). Each file and
each included path is placed in a layer by the longest matching folder prefix of LAYERS. An
include is allowed when both ends are in the same layer or the included layer has a lower
rank; includes that match no prefix (absl/, gloo/, gtest/, ...) are outside the tree and
ignored. A file outside tests/ may never include tests/. Forbidden edges are printed as
`file:line: layer -> layer: "path"` and the exit status is 1.

--loops also prints the folder-level include cycles (strongly connected groups of folders,
and the number of simple cycles among them), the measure issue 13 reports before and after,
and the same count over layers (folders grouped as LAYERS groups them).

The ranks are the DAG written at the top of runtime/CMakeLists.txt; keep the two in step.
"""

import os
import re
import sys

# (folder prefix, layer, rank). Same rank, different layer: neither may include the other.
LAYERS = [
    ("runtime/base/", "base", 0),
    ("proto/", "proto", 1),
    ("kernels/", "kernels", 2),
    ("runtime/config/", "config", 3),
    ("runtime/dist/", "dist", 4),
    ("runtime/model/", "model", 5),
    ("runtime/tokenizer/", "tokenizer", 6),
    # Between tokenizer and spec: the logits-processing seam (spec) applies grammar masks.
    ("runtime/grammar/", "grammar", 6.5),
    ("runtime/spec/", "spec", 7),
    ("runtime/net/", "net", 8),
    ("runtime/cli/", "cli", 9),
    # The flag parsers still live in tools/ until they move to runtime/cli/ (issue 13).
    ("tools/cli_args.", "cli", 9),
    ("tools/worker_flags.", "cli", 9),
    ("runtime/worker/", "worker", 10),
    ("coordinator/", "coordinator", 11),
    ("draft_worker/", "draft_worker", 11),
    # The target leader runs model-free drafters itself, with the draft worker's engine
    # (target_worker/local_drafts.h); nothing below tools/ includes the target worker.
    ("target_worker/", "target_worker", 12),
    ("tools/cluster/", "cluster", 13),
    ("tools/", "tools", 14),
    ("tests/testing/", "testing", 15),
    ("tests/", "tests", 16),
]

SOURCE_SUFFIXES = (".h", ".cc", ".cu", ".cuh")
SKIPPED_DIRS = {"build", "models"}
INCLUDE_LINE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer_of(path):
    """(layer, rank) of the longest prefix of LAYERS matching `path`, or None."""
    best = None
    for prefix, layer, rank in LAYERS:
        if path.startswith(prefix) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, layer, rank)
    return None if best is None else best[1:]


def source_files(root):
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and not d.startswith("."))
        for name in sorted(files):
            if name.endswith(SOURCE_SUFFIXES):
                yield os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/")


def includes(root, rel_path):
    """(line number, included path) of each quoted include of root/rel_path."""
    with open(os.path.join(root, rel_path), encoding="utf-8", errors="replace") as source:
        for number, line in enumerate(source, 1):
            match = INCLUDE_LINE.match(line)
            if match:
                yield number, match.group(1)


def forbidden_edges(root):
    errors = []
    for rel_path in source_files(root):
        source_layer = layer_of(rel_path)
        for number, included in includes(root, rel_path):
            where = f"{rel_path}:{number}"
            if included.startswith("tests/") and not rel_path.startswith("tests/"):
                errors.append(f'{where}: non-test file includes test code: "{included}"')
                continue
            target_layer = layer_of(included)
            if source_layer is None or target_layer is None:
                continue
            if source_layer[0] == target_layer[0] or target_layer[1] < source_layer[1]:
                continue
            errors.append(f"{where}: {source_layer[0]} (rank {source_layer[1]}) -> "
                          f'{target_layer[0]} (rank {target_layer[1]}): "{included}"')
    return errors


def folder_graph(root):
    """Folder -> set of folders it includes from (only folders that hold sources)."""
    files = list(source_files(root))
    folders = {os.path.dirname(f) for f in files}
    graph = {folder: set() for folder in folders}
    for rel_path in files:
        source_folder = os.path.dirname(rel_path)
        for _, included in includes(root, rel_path):
            target_folder = os.path.dirname(included)
            if target_folder in folders and target_folder != source_folder:
                graph[source_folder].add(target_folder)
    return graph


def layer_graph(root):
    """Layer -> set of layers it includes from (the LAYERS table's grouping of folders)."""
    graph = {layer: set() for _, layer, _ in LAYERS}
    for rel_path in source_files(root):
        source_layer = layer_of(rel_path)
        for _, included in includes(root, rel_path):
            target_layer = layer_of(included)
            if source_layer and target_layer and source_layer[0] != target_layer[0]:
                graph[source_layer[0]].add(target_layer[0])
    return graph


def strongly_connected(graph):
    """Tarjan's algorithm; returns the groups of more than one folder."""
    index, low, on_stack, stack, groups = {}, {}, set(), [], []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph[node]):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    sys.setrecursionlimit(10000)
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def simple_cycles(graph, group):
    """Every simple cycle inside one strongly connected group (small graphs only)."""
    members = set(group)
    order = sorted(group)
    cycles = []

    def walk(start, node, path, seen):
        for succ in sorted(graph[node] & members):
            if succ == start:
                cycles.append(path + [start])
            elif succ not in seen and order.index(succ) > order.index(start):
                walk(start, succ, path + [succ], seen | {succ})

    for start in order:
        walk(start, start, [start], {start})
    return cycles


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    default_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    root = os.path.abspath(args[0]) if args else default_root
    if "--loops" in argv:
        graph = folder_graph(root)
        groups = strongly_connected(graph)
        cycles = [c for g in groups for c in simple_cycles(graph, g)]
        for group in groups:
            print("folder loop group: " + ", ".join(group))
        for cycle in cycles:
            print("folder cycle: " + " -> ".join(cycle))
        print(f"folder loops: {len(groups)} group(s), {len(cycles)} simple cycle(s)")
        graph = layer_graph(root)
        groups = strongly_connected(graph)
        cycles = [c for g in groups for c in simple_cycles(graph, g)]
        for cycle in cycles:
            print("layer cycle: " + " -> ".join(cycle))
        print(f"layer loops: {len(groups)} group(s), {len(cycles)} simple cycle(s)")
    errors = forbidden_edges(root)
    for error in errors:
        print(error)
    if errors:
        print(f"layering check: {len(errors)} forbidden include(s) under {root}")
        return 1
    print(f"layering check: no forbidden includes under {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
