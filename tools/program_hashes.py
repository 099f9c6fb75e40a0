#!/usr/bin/env python3
"""Compare two program logs written with TORCHMCU_PROGRAM_LOG=FILE (one JSON
line per compiled program: the test or command that compiled it, its output
directory's name and the program's SHA-256): which programs are
byte-identical, which differ, which only one run made.

    TORCHMCU_PROGRAM_LOG=/tmp/before.jsonl make test   # at the old commit
    TORCHMCU_PROGRAM_LOG=/tmp/after.jsonl make test    # at the new one
    tools/program_hashes.py /tmp/before.jsonl /tmp/after.jsonl

A test that compiles the same directory twice keeps each program in order.
Exit status 1 when a program compiled by both runs differs."""

from __future__ import annotations

import json
import sys
from collections import defaultdict


def load(path: str) -> dict[tuple[str, str], list[str]]:
    out: dict[tuple[str, str], list[str]] = defaultdict(list)
    with open(path) as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                out[(r["test"], r["out"])].append(r["sha256"])
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    before, after = load(argv[0]), load(argv[1])
    same = differ = 0
    changed = []
    for key in sorted(set(before) & set(after)):
        a, b = before[key], after[key]
        for x, y in zip(a, b):
            if x == y:
                same += 1
            else:
                differ += 1
                changed.append(key)
    only_before = sorted(set(before) - set(after))
    only_after = sorted(set(after) - set(before))
    print(f"programs compiled by both runs: {same + differ}; identical {same}; different {differ}")
    print(f"only before: {len(only_before)}; only after: {len(only_after)}")
    for key in changed:
        print(f"  differs: {key[0]} ({key[1]})")
    for key in only_before[:20]:
        print(f"  only before: {key[0]} ({key[1]})")
    for key in only_after[:20]:
        print(f"  only after: {key[0]} ({key[1]})")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
