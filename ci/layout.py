"""The layout rules of CONTRIBUTING.md ("keep modules small"), checked: in
the broker and the simulator, no file over 700 lines before its tests
and no circle among the crate's top-level modules (every `crate::` path
outside tests counts); in every workspace crate, no function over 120
lines, tests included. Prints what breaks a rule and exits 1; silent and
0 otherwise.

    python3 ci/layout.py
"""

import collections
import os
import re
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
MAX_FILE, MAX_FN = 700, 120
# Old code paths compiled as children of the module they patch.
OWNER = {"historical/staging_sweep.rs": "log", "historical/stuck_topic_delete.rs": "log",
         "historical/resurrected_partition.rs": "log", "historical/zombie_append.rs": "log",
         "historical/torn_assignment.rs": "cluster"}
TESTS = re.compile(r"\n#\[cfg\(test\)\]\n(?:#\[[^\n]*\]\n)*(?:pub\(crate\) )?mod tests")
FN = re.compile(r"\s*(?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?fn\s+(\w+)")


def rust_files():
    out = subprocess.run(["git", "ls-files", "*.rs"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.split()
    return [f for f in out if not f.startswith(("third_party/", "fuzz/"))]


def code_of(line):
    """The line without string and char literals and comments, for brace
    counting."""
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    line = re.sub(r"'(\\.|[^'\\])'", "''", line)
    return line.split("//")[0]


def long_functions(path, lines):
    found = []
    for i, line in enumerate(lines):
        m = FN.match(line)
        if not m:
            continue
        depth, started = 0, False
        for j in range(i, len(lines)):
            code = code_of(lines[j])
            if not started and code.rstrip().endswith(";"):
                break
            for ch in code:
                if ch == "{":
                    depth, started = depth + 1, True
                elif ch == "}":
                    depth -= 1
            if started and depth <= 0:
                if j - i + 1 > MAX_FN:
                    found.append(f"{path}:{i + 1}: fn {m.group(1)} is {j - i + 1} lines (at most {MAX_FN})")
                break
    return found


def module_of(src, rel):
    parts = rel[:-3].split("/")
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    if not parts or parts[-1] == "tests" or parts[-1].endswith("_tests"):
        return None
    return OWNER.get(rel, parts[0])


def circles(src):
    """Strongly connected groups of the crate's top-level modules."""
    graph = collections.defaultdict(set)
    for root, _, files in os.walk(os.path.join(ROOT, src)):
        for f in files:
            if not f.endswith(".rs"):
                continue
            path = os.path.join(root, f)
            me = module_of(src, os.path.relpath(path, os.path.join(ROOT, src)))
            if me is None:
                continue
            with open(path) as fh:
                text = TESTS.split(fh.read())[0]
            text = re.sub(r"//[^\n]*", "", text)
            names = re.findall(r"crate::(\w+)", text)
            for group in re.findall(r"use crate::\{([^}]*)\}", text, re.S):
                names += re.findall(r"(?:^|,)\s*(\w+)", group)
            graph[me].update(n for n in names if n != me)
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    sys.setrecursionlimit(10_000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main():
    problems = []
    for path in rust_files():
        with open(os.path.join(ROOT, path)) as fh:
            text = fh.read()
        lines = text.split("\n")
        problems += long_functions(path, lines)
        if path.startswith(("broker/src/", "sim/src/")):
            before_tests = TESTS.split(text)[0].count("\n") + 1
            if before_tests > MAX_FILE:
                problems.append(f"{path}: {before_tests} lines before its tests (at most {MAX_FILE})")
    for src in ("broker/src", "sim/src"):
        for group in circles(src):
            problems.append(f"{src}: modules {', '.join(group)} import each other in a circle")
    if problems:
        print("layout rules broken (CONTRIBUTING.md: keep modules small):")
        print("\n".join(f"  {p}" for p in problems))
        sys.exit(1)


if __name__ == "__main__":
    main()
