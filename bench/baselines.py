"""Our figures beside the recorded TensorFlow Lite Micro + CMSIS-NN baselines
(bench/baselines.json): instructions per inference and activation RAM as
ratios to TFLM's instructions and arena (below 1.0: fewer than TFLM).

Both are QEMU -icount shift=0 counts (instructions, not cycles) of one
inference on the same board. TFLM's arena also holds its tensor metadata and
(on the M55) kernel sums computed at setup; ours is the planned activations.
A row without a baseline (a board or model TFLM was not measured on) shows "—".
"""

from __future__ import annotations

import json
from pathlib import Path

BASELINES = Path(__file__).resolve().parent / "baselines.json"


def load(path: Path = BASELINES) -> dict:
    return json.loads(path.read_text())["tflm_cmsis_nn"]


def ratios(row: dict, baselines: dict) -> dict:
    """{"instructions_x_tflm", "arena_x_tflm"}: None where TFLM has no figure."""
    base = baselines.get(row["board"], {}).get(row["model"])
    if base is None:
        return {"instructions_x_tflm": None, "arena_x_tflm": None}
    return {"instructions_x_tflm": row["instructions"] / base["instructions"],
            "arena_x_tflm": row["arena_bytes"] / base["arena_bytes"]}


def _x(v: float | None) -> str:
    return "—" if v is None else f"{v:.2f}×"


def markdown(rows: list[dict], baselines: dict) -> str:
    """One line per (model, board, kernels): our figure, TFLM's, the ratio."""
    lines = [("| model | board | kernels | instructions | TFLM instructions | ×TFLM | instr/MAC | activation RAM B "
              "| TFLM arena B | ×TFLM arena | code B |"),
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        base = baselines.get(r["board"], {}).get(r["model"])
        x = ratios(r, baselines)
        lines.append(
            f"| {r['model']} | {r['board']} | {r['kernels']} | {r['instructions']:,} | "
            f"{'—' if base is None else format(base['instructions'], ',')} | {_x(x['instructions_x_tflm'])} | "
            f"{r['instructions'] / max(r['macs'], 1):.2f} | {r['arena_bytes']:,} | "
            f"{'—' if base is None else format(base['arena_bytes'], ',')} | {_x(x['arena_x_tflm'])} | "
            f"{r['code_bytes']:,} |")
    return "\n".join(lines) + "\n"
