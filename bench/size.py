"""Code size of the int8 fast paths (issue #27 item 5): DS-CNN (MLPerf Tiny KWS)
and the residual keyword-spotting CNN of the sequence zoo (tcn_kws), int8, on
the M55 (mps3-an547) and the M4 (mps2-an386), built `--opt speed` (the
default) and `--opt size`, by the command line as separate processes:

    .venv/bin/python bench/size.py [--out build/size] [--boards mps3-an547,mps2-an386]

For each: flash (text + data, `arm-none-eabi-size`), code (flash without the
program array: startup/libc, runtime, kernels, app), the runtime core and
kernels, the kernels' code by op (size.json kernel_code), and DS-CNN's
instructions per inference in QEMU (-icount shift=0: instructions, not
cycles), checked bit for bit (`run --check`). Writes bench/size.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "examples"))

import mlperf_tiny as mt  # noqa: E402
import sequence_zoo  # noqa: E402
from commit import measured_at  # noqa: E402

TORCHMCU = [sys.executable, "-m", "torchmcu"]


def cli(*args: str) -> str:
    proc = subprocess.run([*TORCHMCU, *args], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PYTHONWARNINGS": "ignore", "TORCHMCU_PLOT": "0"})
    if proc.returncode != 0:
        raise RuntimeError(f"torchmcu {' '.join(args)}:\n{proc.stdout}{proc.stderr}")
    return proc.stdout


def inputs(root: Path) -> dict[str, tuple[list[str], Path]]:
    """Each model's compile arguments and its run input (.npz)."""
    np.savez(root / "ds_cal.npz", x=mt.calibration_ds_cnn(32, 0))
    np.savez(root / "ds_in.npz", x=mt.calibration_ds_cnn(1, 1))
    np.savez(root / "tcn_cal.npz", x=np.stack([s[0].numpy()[0] for s in sequence_zoo.calibration("tcn_kws", 16)]))
    np.savez(root / "tcn_in.npz", x=np.stack([s[0].numpy() for s in sequence_zoo.calibration("tcn_kws", 1, seed=1)]))
    return {
        # NHWC int8 I/O: the interface of TFLM's DS-CNN (bench/measure.py's).
        "ds_cnn": (["examples/ds_cnn.py:make", "--calibration", str(root / "ds_cal.npz"), "--io", "int8",
                    "--io-layout", "nhwc"], root / "ds_in.npz"),
        "tcn_kws": (["examples/sequence_zoo.py:make_tcn_kws", "--calibration", str(root / "tcn_cal.npz")],
                    root / "tcn_in.npz"),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(REPO / "build" / "size"))
    ap.add_argument("--boards", default="mps3-an547,mps2-an386")
    args = ap.parse_args()
    root = Path(args.out)
    root.mkdir(parents=True, exist_ok=True)
    rows = []
    for model, (compile_args, x) in inputs(root).items():
        for board in args.boards.split(","):
            base = root / f"{model}-{board}"
            cli("compile", *compile_args, "--board", board, "--quant", "int8", "-o", str(base))
            for opt in ("speed", "size"):
                d = root / f"{model}-{board}-{opt}"
                shutil.rmtree(d, ignore_errors=True)
                shutil.copytree(base, d)
                cli("build", str(d), "--opt", opt)
                run = json.loads(cli("run", str(d), "--input", str(x), "--check", "--no-cycles", "--json"))
                s = json.loads((d / "size.json").read_text())
                p = s["parts"]
                rows.append({"model": model, "board": board, "opt": opt, "text": s["text"], "flash": s["flash"],
                             "code": s["flash"] - p["model"], "runtime": p["runtime"], "kernels": p["kernels"],
                             "runtime_kernels": p["runtime"] + p["kernels"], "program": p["model"],
                             "instructions": run["instructions"], "kernel_code": s["kernel_code"]})
                r = rows[-1]
                print(f"{model:8s} {board:11s} {opt:5s} flash {r['flash']:7,} B  code {r['code']:6,} B  "
                      f"runtime+kernels {r['runtime_kernels']:6,} B  instructions {r['instructions']:10,}")
    (REPO / "bench" / "size.json").write_text(json.dumps({"commit": measured_at(), "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
