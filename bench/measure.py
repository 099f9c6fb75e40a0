"""The MLPerf Tiny models, int8, on a QEMU board: the figures issue reports quote.

    .venv/bin/python bench/measure.py [--board mps3-an547] [--kernels portable] [--io int8]

For each model: compile (int8, 32 calibration samples), build, run 4 samples in
QEMU, check the outputs bit for bit against the project's reference, and
print instructions per inference and to load (QEMU -icount shift=0:
instructions, not cycles), RAM (activations planned vs the liveness lower
bound), flash (code, program), SQNR against the float model, and the largest
difference from PyTorch's q/dq model in LSB. Writes bench/results-<board>.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "examples"))

import mlperf_tiny as mt  # noqa: E402
from torchmcu import reference as ref  # noqa: E402
from torchmcu.builder.firmware import build_firmware  # noqa: E402
from torchmcu.builder.size import elf_size  # noqa: E402
from torchmcu.compiler import compile  # noqa: E402
from torchmcu.sim import runner  # noqa: E402


def sqnr_db(signal: np.ndarray, approx: np.ndarray) -> float:
    noise = np.sum((signal.astype(np.float64) - approx) ** 2)
    return float("inf") if noise == 0 else float(10 * np.log10(np.sum(signal.astype(np.float64) ** 2) / noise))


LOAD_BASE, LOAD_PER_OP = 3000, 50  # the load target: 3,000 instructions + 50 per op


def measure(name: str, board: str, kernels: str = "portable", io: str = "int8",
            out_root: str | Path = REPO / "build" / "bench", samples: int = 4, repeat: int = 4) -> dict:
    """One model on one board: compile, build, run in QEMU, check; one row."""
    t0 = time.monotonic()
    model, example = mt.MODELS[name]()
    calibration = list(mt.CALIBRATION[name](32, 0))
    out = Path(out_root) / f"{name}-{board}-{kernels}"
    # NHWC int8 I/O: the interface TFLM's models have (no permute or quantize at the edges).
    c = compile(model, example, board, out, quant="int8", calibration=calibration, io=io,
                io_layout="nhwc" if io == "int8" else "nchw", progress=False)
    elf = build_firmware(out, **({} if kernels == "portable" else {"kernels": kernels}))
    size = elf_size(elf)
    x = mt.CALIBRATION[name](samples, 1)
    res = runner.run(out, [x], sim="qemu", profile=True, repeat=repeat)
    if res.exit_code != 0:
        raise RuntimeError(f"{name} on {board}: firmware status {res.exit_code}\n{res.raw[-1000:]}")
    meta = runner.load_meta(out)
    split = runner.split_samples(meta, [x])
    expected, _ = runner.expected(out, split)
    mismatch, _ = runner.compare(res.outputs, expected, None)
    got = res.outputs[0]
    if meta["outputs"][0]["dtype"] == "int8":
        got = ref.dequantize(got, meta["outputs"][0]["scale"], meta["outputs"][0]["zero_point"])
    with torch.no_grad():
        fl = np.stack([model(torch.from_numpy(s)).numpy() for s in x])
    memory = c.report["memory"]
    parts = json.loads((out / "size.json").read_text())["parts"]
    overhead = res.overhead_per_op()
    # The same program compiled in as a trusted one (--verify minimal): its
    # load and its image, without the verifier and the kernels' checks.
    elf_min = build_firmware(out, verify="minimal", **({} if kernels == "portable" else {"kernels": kernels}))
    size_min = elf_size(elf_min)
    res_min = runner.run(out, [x[:1]], sim="qemu", repeat=repeat)
    if res_min.exit_code != 0 or any((a != b[:1]).any() for a, b in zip(res_min.outputs, res.outputs)):
        raise RuntimeError(f"{name} on {board}: the minimal-verification build differs\n{res_min.raw[-1000:]}")
    return {
        "model": name, "board": board, "kernels": kernels, "io": io,
        "instructions": res.inference_instructions(),
        "kernel_instructions": sum(k for k in res.kernel_instructions() if k is not None),
        "overhead_per_op": None if overhead is None else round(overhead, 1),
        "load_instructions": res.instructions(res.load_ticks),
        "load_budget": LOAD_BASE + LOAD_PER_OP * len(res.op_ticks),
        "load_instructions_minimal": res_min.instructions(res_min.load_ticks),
        "code_bytes_minimal": size_min.text + size_min.data - parts["model"],
        "repeat": repeat,
        "size_parts": parts,
        "ops": len(c.graph.ops),
        "macs": c.report["macs"],
        "macs_executed": c.report["macs_executed"],  # patch-based inference recomputes the rows bands share
        "tiled_runs": memory["aliasing"].get("tiled_runs", 0),
        # All memories the plan uses together, against the liveness lower bound of
        # the whole model (one memory); a plan over several memories can exceed it.
        "arena_bytes": memory["activation_bytes"], "lower_bound_bytes": memory["classic_lower_bound_bytes"],
        "regions": {r["name"]: r["planned_bytes"] for r in memory["regions"]},
        # The firmware holds the program's device image (model part): model.pte
        # less the tables only tools read.
        "program_bytes": parts["model"], "constant_bytes": c.report["flash"]["constant_bytes"],
        "code_bytes": size.text + size.data - parts["model"],
        "bit_exact": mismatch is None,
        "sqnr_db": round(sqnr_db(fl, got), 2),
        "max_lsb_vs_pytorch_qdq": max(runner.lsb_error(out, res.outputs, split)),
        "seconds": round(time.monotonic() - t0, 1),
    }


def _arena(r: dict) -> str:
    """Total (lower bound), and each memory's part when there are several."""
    parts = r.get("regions") or {}
    split = " = " + " + ".join(f"{n} {b:,}" for n, b in parts.items()) if len(parts) > 1 else ""
    return f"{r['arena_bytes']:,} ({r['lower_bound_bytes']:,}){split}"


def markdown(rows: list[dict]) -> str:
    lines = [("| model | board | kernels | instr/inference | instr/MAC | overhead/op | load full / minimal (budget) | "
              "activations B (lower bound) = per memory | code B full / minimal | program B | bit-exact | "
              "SQNR dB | LSB vs q/dq |"),
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|"]
    for r in rows:
        overhead = "" if r.get("overhead_per_op") is None else f"{r['overhead_per_op']:.0f}"
        budget = f" ({r['load_budget']:,})" if "load_budget" in r else ""
        lines.append(
            f"| {r['model']} | {r['board']} | {r['kernels']} | {r['instructions']:,} | "
            f"{r['instructions'] / r['macs']:.2f} | {overhead} | {r['load_instructions']:,} / "
            f"{r.get('load_instructions_minimal', 0):,}{budget} | "
            f"{_arena(r)} | {r['code_bytes']:,} / "
            f"{r.get('code_bytes_minimal', 0):,} | {r['program_bytes']:,} | "
            f"{'yes' if r['bit_exact'] else 'NO'} | {r['sqnr_db']} | {r['max_lsb_vs_pytorch_qdq']:.0f} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--board", default="mps3-an547")
    ap.add_argument("--kernels", default="portable", help="portable, or cmsis-nn (needs TORCHMCU_CMSIS_NN_DIR)")
    ap.add_argument("--io", default="int8", choices=["int8", "float"])
    ap.add_argument("--models", nargs="*", default=list(mt.MODELS))
    ap.add_argument("--out", default=str(REPO / "build" / "bench"))
    ap.add_argument("--repeat", type=int, default=4, help="runs averaged for load, profile and inference")
    args = ap.parse_args()

    rows = []
    for name in args.models:
        row = measure(name, args.board, args.kernels, args.io, args.out, repeat=args.repeat)
        rows.append(row)
        print(json.dumps(row), flush=True)
    print()
    print(f"int8 MLPerf Tiny on {args.board} ({args.kernels} kernels, {args.io} I/O); "
          "QEMU -icount: instructions, not cycles")
    print(markdown(rows))
    (REPO / "bench" / f"results-{args.board}-{args.kernels}.json").write_text(json.dumps(rows, indent=2) + "\n")
    return 0 if all(r["bit_exact"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
