"""The MLPerf Tiny models' estimated latency on the MLPerf Tiny reference
boards (issue #27 item 1): each model int8 on the NUCLEO-L4R5ZI (Cortex-M4,
120 MHz) and NUCLEO-U575ZI-Q (Cortex-M33, 160 MHz) board files, run in QEMU on
their stand-ins (mps2-an386, mps2-an505) with the cycle model
(torchmcu.sim.cycles): cycles at zero wait states and with the board's flash
wait states (no cache, no ART: an upper bound), ms at the board's clock,
beside X-CUBE-AI 10.2's MLPerf Tiny v1.3 measurements on the same boards.
Outputs are checked bit for bit against the project's reference.

    .venv/bin/python bench/cycles.py [--models ds_cnn ...] [--boards nucleo-l4r5zi ...]

Writes bench/cycles.json and bench/cycles.md, with the commit measured at.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "examples"))

import mlperf_tiny as mt  # noqa: E402
from torchmcu.builder.firmware import build_firmware  # noqa: E402
from torchmcu.compiler import compile  # noqa: E402
from torchmcu.sim import runner  # noqa: E402

BOARDS = ("nucleo-l4r5zi", "nucleo-u575zi-q")
MODELS = {"ds_cnn": "KWS", "mobilenet_v1": "VWW", "resnet8": "IC", "autoencoder": "AD"}
# X-CUBE-AI 10.2, MLPerf Tiny v1.3 (ST's submission): measured ms and cycles per inference.
XCUBE = {
    "nucleo-l4r5zi": {"KWS": (43.4, 5.21e6), "VWW": (89.4, 10.73e6), "IC": (165.7, 19.88e6), "AD": (4.79, 575e3)},
    "nucleo-u575zi-q": {"KWS": (29.0, 4.64e6), "VWW": (59.3, 9.49e6), "IC": (109.5, 17.5e6), "AD": (3.21, 514e3)},
}


def measure(name: str, board: str, root: Path) -> dict:
    t0 = time.monotonic()
    model, example = mt.MODELS[name]()
    calibration = list(mt.CALIBRATION[name](32, 0))
    out = root / f"{name}-{board}"
    compile(model, example, board, out, quant="int8", calibration=calibration, io="int8", io_layout="nhwc",
            progress=False)
    build_firmware(out)
    x = mt.CALIBRATION[name](1, 1)
    res = runner.run(out, [x], sim="qemu", profile=True, cycles=True)
    if res.exit_code != 0 or res.cycles is None:
        raise RuntimeError(f"{name} on {board}: firmware status {res.exit_code}\n{res.raw[-1000:]}")
    meta = runner.load_meta(out)
    expected, _ = runner.expected(out, runner.split_samples(meta, [x]))
    mismatch, _ = runner.compare(res.outputs, expected, None)
    c = res.cycles
    task = MODELS[name]
    ms, cycles = XCUBE[board][task]
    return {"model": name, "task": task, "board": board, "cpu": c.cpu, "clock_hz": c.clock_hz,
            "instructions": res.inference_instructions(), "instructions_traced": c.inference_instructions,
            "cycles": c.inference_cycles, "cycles_with_wait_states": c.inference_cycles_with_wait,
            "ms": round(c.ms(c.inference_cycles), 2), "ms_with_wait_states": round(c.ms(c.inference_cycles_with_wait), 2),
            "xcube_ai_ms": ms, "xcube_ai_cycles": cycles, "bit_exact": mismatch is None,
            "classes": dict(c.classes.most_common(8)), "seconds": round(time.monotonic() - t0, 1)}


def markdown(rows: list[dict], commit: str) -> str:
    lines = [f"Measured at commit {commit}: our estimates (the cycle model over QEMU's executed instructions, "
             "docs/cycles.md) against X-CUBE-AI 10.2's MLPerf Tiny v1.3 measurements on the boards.\n",
             "| model | board | instructions | est. cycles, 0 WS | est. ms, 0 WS | est. cycles, flash WS (no cache) | "
             "est. ms, flash WS | X-CUBE-AI cycles (measured) | X-CUBE-AI ms (measured) | est. / measured (0 WS) |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['task']} ({r['model']}) | {r['board']} ({r['clock_hz'] / 1e6:g} MHz) | {r['instructions']:,} | "
                     f"{r['cycles']:,} | {r['ms']:.1f} | {r['cycles_with_wait_states']:,} | "
                     f"{r['ms_with_wait_states']:.1f} | {r['xcube_ai_cycles']:,.0f} | {r['xcube_ai_ms']} | "
                     f"{r['cycles'] / r['xcube_ai_cycles']:.2f} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", nargs="*", default=list(MODELS))
    ap.add_argument("--boards", nargs="*", default=list(BOARDS))
    ap.add_argument("--out", default=str(REPO / "build" / "bench-cycles"))
    args = ap.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO).stdout.strip()
    rows = []
    for board in args.boards:
        for name in args.models:
            row = measure(name, board, Path(args.out))
            rows.append(row)
            print(json.dumps(row), flush=True)
    md = markdown(rows, commit)
    print(md)
    (REPO / "bench" / "cycles.json").write_text(json.dumps({"commit": commit, "rows": rows}, indent=2) + "\n")
    (REPO / "bench" / "cycles.md").write_text(md)
    return 0 if all(r["bit_exact"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
