"""`make bench`: every bundled MLPerf Tiny model on every QEMU board, int8,
with the portable kernels and (when TORCHMCU_CMSIS_NN_DIR is set) CMSIS-NN.

Writes bench/results.json, bench/results.md and PNG plots (instructions per
inference and per MAC, flash, RAM against the liveness lower bound, load
cost with full and with minimal verification, framework overhead per op). Instruction counts are QEMU's (-icount
shift=0): instructions, not cycles.

Every row stands beside the recorded TensorFlow Lite Micro + CMSIS-NN
baselines (bench/baselines.json, bench/baselines.py): instructions and
activation RAM as ratios to TFLM's, "—" where TFLM has no figure.

The cases are independent, so they run through a standard process pool
(`--jobs`, default: every core), or, with `--ray auto` (`make bench RAY=auto`),
as Ray tasks on a local Ray cluster started here, or with `--ray <address>`
on an existing one (`ray.init(address=...)`): the same `measure(model, board,
kernels)` calls, one task each. The cluster's nodes need this checkout at the
same path, set up (`make setup`, plus ray), and the same TORCHMCU_* settings
(passed on as the job's environment).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
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


def _ray_results(todo: list[tuple[str, str, str]], address: str):
    """The cases as Ray tasks; yields each row in the order of `todo`."""
    import ray

    env = {k: v for k, v in os.environ.items() if k.startswith("TORCHMCU_")}
    if not ray.is_initialized():
        # "auto" here starts a local cluster (ray.init()), unlike Ray's own "auto" (find a running one).
        local = {"include_dashboard": False} if address == "auto" else {}
        ray.init(address=None if address == "auto" else address,
                 runtime_env={"env_vars": env} if env else None, log_to_driver=False, **local)
    paths = [str(REPO / "aot"), str(REPO / "bench"), str(REPO / "examples")]

    # A closure, so Ray ships it by value: a worker needs no import of this script.
    def on_node(case):
        for p in reversed(paths):
            if p not in sys.path:
                sys.path.insert(0, p)
        from measure import measure

        return measure(*case)

    remote = ray.remote(num_cpus=1)(on_node)
    futures = [remote.remote(case) for case in todo]
    for f in futures:
        yield ray.get(f)


def run_cases(todo: list[tuple[str, str, str]], jobs: int, ray_address: str | None = None):
    """Yield (case, row) in the order of `todo`: through a process pool, or Ray."""
    if ray_address:
        yield from zip(todo, _ray_results(todo, ray_address))
        return
    # Spawned, not forked: a fork of a process whose torch threads hold locks can hang (under pytest-xdist it did).
    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        yield from zip(todo, pool.map(_measure, todo))


def plots(rows: list[dict], out_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    models = sorted({r["model"] for r in rows})
    configs = sorted({(r["board"], r["kernels"]) for r in rows})
    charts = [
        ("instructions", "instructions per inference (QEMU, not cycles)", lambda r: r["instructions"], True),
        ("instructions_x_tflm", "instructions / TFLM + CMSIS-NN's on the same board (0: no baseline)",
         lambda r: r.get("instructions_x_tflm") or 0, False),
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
    import baselines
    import mlperf_tiny as mt
    from measure import markdown

    ap = argparse.ArgumentParser()
    ap.add_argument("--models", nargs="*", default=list(mt.MODELS))
    ap.add_argument("--boards", nargs="*", default=BOARDS)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--ray", default=None, metavar="auto|ADDRESS",
                    help="run the cases as Ray tasks: 'auto' starts a local cluster, else ray.init(address=...)")
    args = ap.parse_args()
    kernel_sets = ["portable"] + (["cmsis-nn"] if os.environ.get("TORCHMCU_CMSIS_NN_DIR") else [])
    todo = cases(args.models, args.boards, kernel_sets)
    where = f"Ray ({args.ray})" if args.ray else f"{args.jobs} processes"
    print(f"bench: {len(todo)} cases on {where} (kernels: {', '.join(kernel_sets)})", flush=True)
    t0 = time.monotonic()
    tflm = baselines.load()
    rows = []
    for case, row in run_cases(todo, args.jobs, args.ray):
        row.update(baselines.ratios(row, tflm))
        rows.append(row)
        x = row["instructions_x_tflm"]
        print(f"bench: {' '.join(case)}: {row['instructions']:,} instructions"
              f"{'' if x is None else f' ({x:.2f}× TFLM)'}, "
              f"{'bit-exact' if row['bit_exact'] else 'MISMATCH'} ({row['seconds']} s)", flush=True)
    out_dir = REPO / "bench"
    (out_dir / "results.json").write_text(json.dumps(rows, indent=2) + "\n")
    versus = ("## Beside TensorFlow Lite Micro + CMSIS-NN\n\n"
              "×TFLM: our figure over TFLM + CMSIS-NN's on the same board (bench/baselines.json: the MLPerf "
              "Tiny reference models in TFLM, same QEMU, same -icount method; below 1.00× is fewer). "
              "Activation RAM: our planned activations against TFLM's whole arena. "
              "\"—\": no TFLM figure for that board or model.\n\n" + baselines.markdown(rows, tflm))
    (out_dir / "results.md").write_text(
        "# int8 MLPerf Tiny in QEMU (instructions, not cycles)\n\n" + versus + "\n## All figures\n\n"
        + markdown(rows))
    pngs = plots(rows, out_dir)
    print(markdown(rows))
    print(baselines.markdown(rows, tflm))
    print(f"bench: wrote {out_dir / 'results.json'}, results.md and {len(pngs)} plots in "
          f"{time.monotonic() - t0:.0f} s")
    return 0 if all(r["bit_exact"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
