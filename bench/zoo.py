"""The CNN zoo's figures (issue #15): each torchvision model of
examples/cnn_zoo.py at int8 on the Cortex-M55 (mps3-an547), with the
portable kernels and (when TORCHMCU_CMSIS_NN_DIR is set) CMSIS-NN:
instructions per inference (QEMU -icount shift=0: instructions, not
cycles), flash (firmware text + data, and the program within it), planned
activation RAM against the liveness lower bound, and SQNR of the firmware's
output against the float model's (beside PyTorch's own int8 q/dq model's).
Every run's output is checked bit for bit against the reference.

    .venv/bin/python bench/zoo.py [--models NAME ...] [--board mps3-an547]

Writes bench/zoo.json and bench/zoo.md (`make bench` runs it after run.py).
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).resolve().parent))
from commit import measured_at  # noqa: E402

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "examples"))

import cnn_zoo as zoo  # noqa: E402
from torchmcu.builder.firmware import build_firmware  # noqa: E402
from torchmcu.compiler import compile  # noqa: E402
from torchmcu.frontend.quantize import quantize  # noqa: E402
from torchmcu.sim import runner  # noqa: E402


def sqnr_db(got: np.ndarray, ref: np.ndarray) -> float:
    noise = float(np.sum((got.astype(np.float64) - ref) ** 2))
    return float("inf") if noise == 0 else 10 * np.log10(float(np.sum(ref.astype(np.float64) ** 2)) / noise)


def measure(name: str, board: str, kernel_sets: list[str], root: Path, make=zoo.make,
            calibration=zoo.calibration) -> list[dict]:
    """One model on one board, a row per kernel set; `make(name)` -> (model,
    example inputs) and `calibration(name)` -> samples: the CNN zoo's by default."""
    t0 = time.monotonic()
    model, example = make(name)
    q = quantize(model, example, calibration(name), progress=False)
    out = root / f"{name}_{board}"
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*runs in float32.*")  # no float fallback at int8
        c = compile(q, example, board, out, quant="int8", progress=False)
    x = [example[0].numpy()]
    samples = runner.split_samples(runner.load_meta(out), x)
    expected, tol = runner.expected(out, samples)
    with torch.no_grad():
        ref = model(*example).numpy()
    qdq = runner.reference(out, samples)[0][0]
    rows = []
    for kernels in kernel_sets:
        build_firmware(out, kernels=kernels)
        size = json.loads((out / "size.json").read_text())
        res = runner.run(out, x, sim="qemu", timeout_s=3600)
        mismatch, _ = runner.compare(res.outputs, expected, tol)
        mem = c.report["memory"]
        rows.append({
            "model": name, "board": board, "kernels": kernels, "macs": c.report["macs"],
            "instructions": res.inference_instructions(), "bit_exact": res.exit_code == 0 and mismatch is None,
            "flash_bytes": size["flash"], "ram_total_bytes": size["ram"].get("total"),
            "program_bytes": c.report["flash"]["program_bytes"],
            "activation_bytes": mem["activation_bytes"], "lower_bound_bytes": mem["lower_bound_bytes"],
            "sqnr_db": round(sqnr_db(res.outputs[0][0], ref), 1), "sqnr_pytorch_int8_db": round(sqnr_db(qdq, ref), 1),
            "seconds": round(time.monotonic() - t0, 1)})
        print(f"zoo bench: {rows[-1]}", flush=True)
    return rows


ABOUT = "torchvision models with random weights (batch norm re-estimated), examples/cnn_zoo.py."


def markdown(rows: list[dict], title: str = "CNN zoo at int8 in QEMU (bench/zoo.py)", about: str = ABOUT) -> str:
    lines = [f"# {title}", "",
             about + " Instructions "
             "per inference are QEMU `-icount shift=0` counts: instructions, not cycles. Flash: the firmware "
             "image's text + data (the program inside it given apart). RAM: the planned activation arena against "
             "the liveness lower bound. SQNR: the firmware's output against the float model's (PyTorch's own "
             "int8 q/dq model beside it); every output checked bit for bit against the reference. Measured at "
             f"commit {measured_at()}.", "",
             "| model | board | kernels | MACs | instructions | instr/MAC | flash B | program B | activations B "
             "| lower bound B | SQNR dB | PyTorch int8 dB | bit-exact |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        flash = f"{r['flash_bytes']:,}" if r.get("flash_bytes") else "-"
        lines.append(f"| {r['model']} | {r['board']} | {r['kernels']} | {r['macs']:,} | {r['instructions']:,} | "
                     f"{r['instructions'] / max(r['macs'], 1):.2f} | {flash} | {r['program_bytes']:,} | "
                     f"{r['activation_bytes']:,} | {r['lower_bound_bytes']:,} | {r['sqnr_db']} | "
                     f"{r['sqnr_pytorch_int8_db']} | {'yes' if r['bit_exact'] else 'NO'} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="*", default=list(zoo.MODELS))
    ap.add_argument("--board", default="mps3-an547")
    ap.add_argument("--out", type=Path, default=REPO / "build" / "bench_zoo")
    args = ap.parse_args()
    kernel_sets = ["portable"] + (["cmsis-nn"] if os.environ.get("TORCHMCU_CMSIS_NN_DIR") else [])
    rows = [r for name in args.models for r in measure(name, args.board, kernel_sets, args.out)]
    (REPO / "bench" / "zoo.json").write_text(json.dumps(rows, indent=2) + "\n")
    (REPO / "bench" / "zoo.md").write_text(markdown(rows))
    print(markdown(rows))
    return 0 if all(r["bit_exact"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
