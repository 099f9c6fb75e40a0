"""int8, int4 (W4A8) and a16w8 side by side: the figures issue #6 asks for.

    .venv/bin/python bench/precisions.py [--board mps3-an547] [--models ds_cnn ...] [--samples 32]

For each MLPerf Tiny model (examples/mlperf_tiny.py) and each scheme: compile
(32 calibration samples, float I/O), build, run `--samples` held-out samples
in QEMU, check the outputs bit for bit against the project's reference, and
report weight flash (as stored and at int8), the program's flash, SQNR of the
firmware's outputs against the float model, and instructions per inference
(QEMU -icount shift=0: instructions, not cycles), with the portable kernels
and, when TORCHMCU_CMSIS_NN_DIR is set, with CMSIS-NN. Writes
bench/precisions.json and bench/precisions.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "examples"))
sys.path.insert(0, str(REPO / "bench"))

import mlperf_tiny as mt  # noqa: E402
from measure import sqnr_db  # noqa: E402
from torchmcu.builder.firmware import build_firmware  # noqa: E402
from torchmcu.compiler import compile  # noqa: E402
from torchmcu.sim import runner  # noqa: E402

SCHEMES = ("int8", "int4", "a16w8")


def measure(name: str, quant: str, board: str, samples: int, out_root: Path) -> dict:
    t0 = time.monotonic()
    model, example = mt.MODELS[name]()
    out = out_root / f"{name}-{quant}"
    c = compile(model, example, board, out, quant=quant, calibration=list(mt.CALIBRATION[name](32, 0)),
                progress=False)
    x = np.asarray(mt.CALIBRATION[name](samples, 1))
    with torch.no_grad():
        fl = np.stack([model(torch.from_numpy(s)).numpy() for s in x])
    row: dict = {"model": name, "quant": quant, "board": board,
                 "weight_bytes": c.report["flash"]["weights"]["bytes"],
                 "program_bytes": c.report["flash"]["program_bytes"]}
    row["flash"] = c.report["flash"]
    sets = ["portable"] + (["cmsis-nn"] if os.environ.get("TORCHMCU_CMSIS_NN_DIR") else [])
    for kernels in sets:
        build_firmware(out, kernels=kernels)
        res = runner.run(out, [x], sim="qemu")
        if res.exit_code != 0:
            raise RuntimeError(f"{name} {quant} {kernels}: firmware status {res.exit_code}\n{res.raw[-800:]}")
        expected, tol = runner.expected(out, runner.split_samples(runner.load_meta(out), [x]))
        mismatch, _ = runner.compare(res.outputs, expected, tol)
        row[f"instructions_{kernels}"] = res.inference_instructions()
        row[f"bit_exact_{kernels}"] = mismatch is None
        if kernels == "portable":
            row["sqnr_db"] = round(sqnr_db(fl, res.outputs[0].reshape(fl.shape)), 2)
    row["seconds"] = round(time.monotonic() - t0, 1)
    return row


def markdown(rows: list[dict]) -> str:
    cmsis = any("instructions_cmsis-nn" in r for r in rows)
    head = ("| model | scheme | weights B (as stored) | program B | SQNR vs float dB | instr. portable"
            + (" | instr. CMSIS-NN" if cmsis else "") + " | bit-exact |")
    lines = [head, "|---|---|---:|---:|---:|---:|" + ("---:|" if cmsis else "") + "---|"]
    for r in rows:
        exact = all(v for k, v in r.items() if k.startswith("bit_exact"))
        cm = f" | {r['instructions_cmsis-nn']:,}" if cmsis else ""
        lines.append(f"| {r['model']} | {r['quant']} | {r['weight_bytes']:,} | {r['program_bytes']:,} | "
                     f"{r['sqnr_db']} | {r['instructions_portable']:,}{cm} | {'yes' if exact else 'NO'} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--board", default="mps3-an547")
    ap.add_argument("--models", nargs="*", default=list(mt.MODELS))
    ap.add_argument("--schemes", nargs="*", default=list(SCHEMES), choices=SCHEMES)
    ap.add_argument("--samples", type=int, default=32)
    ap.add_argument("--out", default=str(REPO / "build" / "precisions"))
    args = ap.parse_args()
    rows = []
    for name in args.models:
        for quant in args.schemes:
            row = measure(name, quant, args.board, args.samples, Path(args.out))
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "flash"}), flush=True)
    table = markdown(rows)
    print(table)
    (REPO / "bench" / "precisions.json").write_text(json.dumps(rows, indent=2) + "\n")
    (REPO / "bench" / "precisions.md").write_text(
        f"# int8, int4 (W4A8) and a16w8 on {args.board} (QEMU: instructions, not cycles)\n\n" + table)
    return 0 if all(v for r in rows for k, v in r.items() if k.startswith("bit_exact")) else 1


if __name__ == "__main__":
    sys.exit(main())
