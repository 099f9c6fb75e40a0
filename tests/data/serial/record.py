"""Re-records the serial fixture of tests/test_serial.py from a real firmware run.

    .venv/bin/python tests/data/serial/record.py [--build DIR] [--samples 3]

Compiles the digits MLP (examples/digits.py) for mps3-an547, builds its
firmware, and runs in QEMU exactly the requests `torchmcu run --device` sends
(torchmcu.sim.serial.request_blobs: one io blob per sample, the first
profiled) for the first held-out test digits. It writes, beside this script:

    session.json    each request (hex) and the firmware's UART output for it
    arrays.npz      inputs (the digits sent), qemu (the outputs QEMU's firmware
                    printed), pytorch (PyTorch's outputs for the same digits)
    digits/         the parts of the build directory `torchmcu run` reads
                    (model.json, report.json, model.pt2 for --check,
                    example_inputs.npz)

Run it again whenever the line protocol (firmware/app/app.cc) or the program
format changes; tests/test_serial.py replays session.json through a
pseudo-terminal.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
BOARD = "mps3-an547"
KEEP = ("model.json", "report.json", "model.pt2", "example_inputs.npz")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", help="build directory to use (default: a temporary one)")
    ap.add_argument("--samples", type=int, default=3)
    args = ap.parse_args()
    sys.path.insert(0, str(REPO / "examples"))
    import digits
    from torchmcu.boards import load_board
    from torchmcu.sim import run_qemu, runner
    from torchmcu.sim.serial import request_blobs

    with tempfile.TemporaryDirectory() as tmp:
        build = Path(args.build or Path(tmp) / "digits")
        cli = [sys.executable, "-m", "torchmcu.cli"]
        subprocess.run([*cli, "compile", f"{REPO}/examples/digits.py:make", "--board", BOARD, "-o", str(build)],
                       check=True, stdout=subprocess.DEVNULL)
        subprocess.run([*cli, "build", str(build)], check=True, stdout=subprocess.DEVNULL)
        meta = runner.load_meta(build)
        x, _ = digits.test_set()
        inputs = x[: args.samples, None, :]  # [samples, 1, 64]: a batch of the model's [1, 64]
        sessions = []
        for blob in request_blobs(meta, [inputs], profile=True):
            res = run_qemu(load_board(BOARD), build / "firmware.elf", blob, timeout_s=60)
            if res.exit_code != 0 or res.timed_out:
                raise SystemExit(f"firmware failed (exit {res.exit_code}):\n{res.stdout}{res.stderr}")
            sessions.append({"request": blob.hex(), "reply": res.stdout})
        qemu = runner.run(build, [inputs], sim="qemu").outputs[0]
        pytorch = runner.reference(build, runner.split_samples(meta, [inputs]))[0]
        out = HERE / "digits"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir()
        for name in KEEP:
            shutil.copy(build / name, out / name)
    (HERE / "session.json").write_text(json.dumps({
        "recorded_by": "tests/data/serial/record.py",
        "model": "examples/digits.py:make",
        "board": BOARD,
        "sessions": sessions,
    }, indent=1) + "\n")
    np.savez(HERE / "arrays.npz", inputs=inputs, qemu=qemu, pytorch=pytorch)
    print(f"recorded {len(sessions)} requests into {HERE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
