"""`make bench`: every bundled MLPerf Tiny model on every QEMU board, int8,
with the portable kernels and (when TORCHMCU_CMSIS_NN_DIR is set) CMSIS-NN.

Writes bench/results.json, bench/results.md and PNG plots (instructions per
inference and per MAC, flash, RAM against the liveness lower bound, load
cost with full and with minimal verification, framework overhead per op). Instruction counts are QEMU's (-icount
shift=0): instructions, not cycles.

The cases are independent, so they run through a standard process pool
(`--jobs`, default: every core). To spread them over several machines, hand
the same `measure(model, board, kernels)` calls to a distributed engine
instead: with Ray, `ray.get([ray.remote(measure).remote(*case) for case in
cases])` on a cluster whose nodes have this checkout set up (`make setup`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "examples"))

BOARDS = ["mps3-an547", "mps2-an505", "mps2-an386"]


def cases(models: list[str], boards: list[str], kernel_sets: list[str]) -> list[tuple[str, str, str]]:
    return [(m, b, k) for k in kernel_sets for b in boards for m in models]


def _measure(case: tuple[str, str, str]) -> dict:
    from measure import measure

    return measure(*case)


def plots(rows: list[dict], out_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    models = sorted({r["model"] for r in rows})
    configs = sorted({(r["board"], r["kernels"]) for r in rows})
    charts = [
        ("instructions", "instructions per inference (QEMU, not cycles)", lambda r: r["instructions"], True),
        ("instructions_per_mac", "instructions per MAC", lambda r: r["instructions"] / r["macs"], False),
        ("flash", "flash bytes: code + program", lambda r: r["code_bytes"] + r["program_bytes"], False),
        ("ram_ratio", "activation RAM / liveness lower bound", lambda r: r["arena_bytes"] / r["lower_bound_bytes"], False),
        ("load", "instructions to load (program + method), full verification", lambda r: r["load_instructions"],
         False),
        ("load_minimal", "instructions to load, minimal verification (trusted compiled-in program)",
         lambda r: r.get("load_instructions_minimal") or 0, False),
        ("overhead", "framework instructions per op (inference less its kernels' own)",
         lambda r: r.get("overhead_per_op") or 0, False),
    ]
    width = 0.8 / max(1, len(configs))
    for key, title, value, log in charts:
        fig, ax = plt.subplots(figsize=(9, 4.5))
        for i, (board, kernels) in enumerate(configs):
            ys = [next((value(r) for r in rows if r["model"] == m and r["board"] == board
                        and r["kernels"] == kernels), 0) for m in models]
            ax.bar([x + i * width for x in range(len(models))], ys, width, label=f"{board} {kernels}")
        ax.set_xticks([x + width * (len(configs) - 1) / 2 for x in range(len(models))], models)
        ax.set_title(title)
        if log:
            ax.set_yscale("log")
        ax.legend(fontsize=7)
        fig.tight_layout()
        path = out_dir / f"{key}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    return written


def main() -> int:
    import mlperf_tiny as mt
    from measure import markdown

    ap = argparse.ArgumentParser()
    ap.add_argument("--models", nargs="*", default=list(mt.MODELS))
    ap.add_argument("--boards", nargs="*", default=BOARDS)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    kernel_sets = ["portable"] + (["cmsis-nn"] if os.environ.get("TORCHMCU_CMSIS_NN_DIR") else [])
    todo = cases(args.models, args.boards, kernel_sets)
    print(f"bench: {len(todo)} cases on {args.jobs} processes (kernels: {', '.join(kernel_sets)})", flush=True)
    t0 = time.monotonic()
    rows = []
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for case, row in zip(todo, pool.map(_measure, todo)):
            rows.append(row)
            print(f"bench: {' '.join(case)}: {row['instructions']:,} instructions, "
                  f"{'bit-exact' if row['bit_exact'] else 'MISMATCH'} ({row['seconds']} s)", flush=True)
    out_dir = REPO / "bench"
    (out_dir / "results.json").write_text(json.dumps(rows, indent=2) + "\n")
    (out_dir / "results.md").write_text(
        "# int8 MLPerf Tiny in QEMU (instructions, not cycles)\n\n" + markdown(rows))
    pngs = plots(rows, out_dir)
    print(markdown(rows))
    print(f"bench: wrote {out_dir / 'results.json'}, results.md and {len(pngs)} plots in "
          f"{time.monotonic() - t0:.0f} s")
    return 0 if all(r["bit_exact"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
