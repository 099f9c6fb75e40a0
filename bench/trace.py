"""Exact instructions per function of a firmware run, from QEMU's own trace.

    .venv/bin/python bench/trace.py BUILD_DIR [--input x.npy] [--top 30] [--from FUNC --to FUNC]

Runs the compiled model's firmware once in QEMU with one instruction per
translation block (-singlestep) and the execution log on (-d exec,nochain),
so every executed instruction is one log line with its address; each address
is attributed to the function holding it (arm-none-eabi-nm). No tick counter
is involved: these are exact instruction counts, the ground truth the
firmware's own (tick-based, averaged) profile is checked against. Slow (the
log holds one line per instruction): use it on small models.

--from/--to restrict the count to the instructions executed from the first
entry into one function to the last instruction of another (e.g. the load:
--from Program::load --to Method::load).
"""

from __future__ import annotations

import argparse
import bisect
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def symbols(elf: Path) -> tuple[list[int], list[str]]:
    out = subprocess.run(["arm-none-eabi-nm", "-C", "-n", "--defined-only", str(elf)], capture_output=True,
                         text=True, check=True).stdout
    starts, names = [], []
    for line in out.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[1] in "tTwW":
            starts.append(int(parts[0], 16) & ~1)
            names.append(parts[2])
    return starts, names


def trace(build_dir: Path, inputs: list[np.ndarray]) -> list[int]:
    """The address of every instruction the firmware executed, in order."""
    sys.path.insert(0, str(REPO / "aot"))
    from torchmcu.boards import load_board
    from torchmcu.sim import QemuRunner, runner

    meta = runner.load_meta(build_dir)
    board = load_board(meta["board"])
    blob = runner.io_blob(runner.program_samples(meta, runner.split_samples(meta, inputs)))
    with tempfile.TemporaryDirectory() as tmp:
        io = Path(tmp) / "io.bin"
        io.write_bytes(blob)
        log = Path(tmp) / "exec.log"
        cmd = QemuRunner().command(board, build_dir / "firmware.elf", io)
        cmd[1:1] = ["-singlestep", "-d", "exec,nochain", "-D", str(log)]
        subprocess.run(cmd, capture_output=True, timeout=600, stdin=subprocess.DEVNULL, check=False)
        pcs = []
        pat = re.compile(r"^Trace \d+: 0x[0-9a-f]+ \[[0-9a-f]+/([0-9a-f]+)/")
        with log.open() as f:
            for line in f:
                m = pat.match(line)
                if m:
                    pcs.append(int(m.group(1), 16))
    return pcs


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir", type=Path)
    ap.add_argument("--input", action="append", default=[])
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--from", dest="start", help="count from the first instruction of this function")
    ap.add_argument("--to", dest="end", help="... to the last instruction of this function")
    args = ap.parse_args()
    inputs = [np.load(p) for p in args.input] or [np.load(args.dir / "example_inputs.npz")[k]
                                                   for k in np.load(args.dir / "example_inputs.npz").files]
    starts, names = symbols(args.dir / "firmware.elf")
    pcs = trace(args.dir, inputs)
    owner = [names[bisect.bisect_right(starts, pc) - 1] if pc >= starts[0] else "?" for pc in pcs]
    lo, hi = 0, len(pcs)
    if args.start:
        lo = next(i for i, n in enumerate(owner) if args.start in n)
    if args.end:
        hi = max(i for i, n in enumerate(owner) if args.end in n) + 1
    counts = Counter(owner[lo:hi])
    print(f"{hi - lo:,} instructions ({'all' if not args.start else f'{args.start} .. {args.end}'}); "
          "exact, from QEMU's trace")
    for name, n in counts.most_common(args.top):
        print(f"{n:>10,}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
