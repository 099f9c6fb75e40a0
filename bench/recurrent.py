"""The recurrent models of the sequence zoo: figures issue #16 asks for.

    .venv/bin/python bench/recurrent.py [--boards mps2-an386 mps3-an547] [--skip-cmsis]

1. The LSTM keyword spotter (examples/recurrent_zoo.py: nn.LSTM hidden 64, 49
   frames of 10 MFCC) and its streaming form (one frame and its state per
   invocation), int8 and a16w8, on the Cortex-M4 (mps2-an386) and the
   Cortex-M55 (mps3-an547), compiled with each recurrent weight scheme
   (per-channel, the default; per-gate, TFLite's) and built with the
   portable kernels and, per-gate, with CMSIS-NN's LSTM
   (TORCHMCU_CMSIS_NN_DIR; BUILDS): instructions per inference (QEMU -icount
   shift=0: instructions, not cycles; the mean of 4 runs), RAM = planned
   activation arena + the streaming model's persistent state, each output
   checked bit for bit against the reference.
2. SQNR against the float model of every recurrent zoo model at int8 and
   a16w8 (8 held-out samples, the reference's outputs: the firmware's bits).

Writes bench/recurrent.json and bench/recurrent.md.
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
import warnings
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "examples"))

import recurrent_zoo as zoo  # noqa: E402
from torchmcu.builder.firmware import build_firmware  # noqa: E402
from torchmcu.compiler import compile  # noqa: E402
from torchmcu.frontend.streaming import stream_calibration  # noqa: E402
from torchmcu.program.interpret import run_reference  # noqa: E402
from torchmcu.sim import runner  # noqa: E402

CALIBRATION = 24


def sqnr_db(reference: np.ndarray, got: np.ndarray) -> float:
    err = np.sum((got.astype(np.float64) - reference) ** 2)
    return float(10 * np.log10(np.sum(reference.astype(np.float64) ** 2) / max(err, 1e-30)))


def _compile(model, example, board, out, quant, calib, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return compile(model, example, board, out, quant=quant, calibration=calib, progress=False, **kw)


def _checked(out: Path, inputs: list[np.ndarray]) -> int:
    """Instructions per inference (mean of 4 runs), the outputs checked."""
    res = runner.run(out, inputs, sim="qemu", repeat=4, timeout_s=1800)
    expected, tol = runner.expected(out, runner.split_samples(runner.load_meta(out), inputs))
    mismatch, _ = runner.compare(res.outputs, expected, tol)
    if res.exit_code != 0 or mismatch is not None:
        raise SystemExit(f"{out}: exit {res.exit_code}, {mismatch}")
    return int(res.inference_instructions())


# The builds measured: (recurrent weights, kernels). torchmcu's default
# (per-channel weights, its own kernels), TFLite's scheme on its own kernels,
# and TFLite's scheme on CMSIS-NN (arm_lstm_unidirectional_s8/_s16; per-channel
# programs' LSTMs run the portable kernel even in a cmsis-nn build, so that
# pairing is not measured).
BUILDS = [("per-channel", "portable"), ("per-gate", "portable"), ("per-gate", "cmsis-nn")]


def kws_rows(boards: list[str], kernel_sets: list[str], root: Path, quants=("int8", "a16w8"),
             forms=("sequence", "stream")) -> list[dict]:
    rows = []
    kws, example = zoo.make_lstm_kws()
    calib = zoo.calibration("lstm_kws", CALIBRATION)
    seq, _ = zoo.make_lstm_kws_sequence()
    stream, stream_example = zoo.make_lstm_kws_stream()
    sequences = [s[0] for s in zoo.calibration("lstm_kws_sequence", CALIBRATION)]
    stream_calib = stream_calibration(stream, sequences, stream_example[1:])
    x = zoo.calibration("lstm_kws", 1, seed=1)[0][0].numpy()
    for board in boards:
        for quant in quants:
            for form in forms:
                for weights in ("per-channel", "per-gate"):
                    sets = [k for w, k in BUILDS if w == weights and k in kernel_sets]
                    if not sets:
                        continue
                    out = root / f"{board}_{quant}_{form}_{weights}"
                    if form == "sequence":
                        c = _compile(kws, example, board, out, quant, calib, recurrent_weights=weights)
                        inputs = [x[None]]
                    else:
                        c = _compile(stream, stream_example, board, out, quant, stream_calib, state=2,
                                     recurrent_weights=weights)
                        inputs = [x.transpose(1, 0, 2)[:1, None]]  # one frame
                    mem = c.report["memory"]
                    state = (mem.get("state") or {}).get("bytes", 0)
                    for kernels in sets:
                        build_firmware(out, kernels=kernels)
                        rows.append({"model": f"lstm_kws ({form})", "board": board, "quant": quant,
                                     "weights": weights, "kernels": kernels, "instructions": _checked(out, inputs),
                                     "arena_bytes": mem["activation_bytes"], "state_bytes": state,
                                     "ram_bytes": mem["activation_bytes"] + state,
                                     "program_bytes": c.report["flash"]["program_bytes"]})
                        print(rows[-1], flush=True)
    return rows


def sqnr_rows(root: Path) -> list[dict]:
    rows = []
    for name, make in zoo.MODELS.items():
        model, example = make()
        calib = zoo.calibration(name, CALIBRATION)
        held = zoo.calibration(name, 8, seed=1)
        with torch.no_grad():
            ref = np.stack([model(*s).numpy() for s in held])
        row = {"model": name, "macs": None}
        for quant in ("int8", "a16w8"):
            c = _compile(model, example, "mps3-an547", root / f"sqnr_{name}_{quant}", quant, calib)
            got = run_reference(c.pte, [[s[0].numpy()] for s in held])[0]
            row[f"sqnr_{quant}"] = round(sqnr_db(ref, got), 1)
            row["macs"] = c.report["macs"]
        rows.append(row)
        print(row, flush=True)
    return rows


def markdown(kws: list[dict], sqnr: list[dict]) -> str:
    lines = ["# Recurrent zoo figures (bench/recurrent.py)", "",
             "Instructions per inference are QEMU `-icount shift=0` counts (instructions, not cycles), mean of 4 "
             "runs; the streaming model's are per frame (one invocation). RAM = planned activation arena + the "
             "streaming model's persistent state (the runtime's own Method object aside). weights: the recurrent "
             "weights' scheme, `--recurrent-weights` (per-channel: torchmcu's, the default; per-gate: TFLite's). "
             "kernels: portable = torchmcu's own (with the int8 fast paths of firmware/kernels/fast/recurrent: "
             "MVE on the M55, DSP on the M4, int8 and a16w8); cmsis-nn = the CMSIS-NN build, whose "
             "LSTM (arm_lstm_unidirectional_s8/_s16) takes per-gate programs only (a per-channel program's LSTM "
             "runs the portable kernel there, so that pairing is left out). Measured at commit "
             f"{measured_at()}.", "",
             "| model | board | quant | weights | kernels | instructions | arena B | state B | RAM B | program B |",
             "|---|---|---|---|---|---:|---:|---:|---:|---:|"]
    for r in kws:
        lines.append(f"| {r['model']} | {r['board']} | {r['quant']} | {r['weights']} | {r['kernels']} | "
                     f"{r['instructions']:,} | {r['arena_bytes']:,} | {r['state_bytes']:,} | {r['ram_bytes']:,} | "
                     f"{r['program_bytes']:,} |")
    lines += ["", "SQNR against the float model (8 held-out samples):", "",
              "| model | MACs | int8 dB | a16w8 dB |", "|---|---:|---:|---:|"]
    for r in sqnr:
        lines.append(f"| {r['model']} | {r['macs']:,} | {r['sqnr_int8']} | {r['sqnr_a16w8']} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--boards", nargs="+", default=["mps2-an386", "mps3-an547"])
    ap.add_argument("--skip-cmsis", action="store_true", help="portable kernels only")
    ap.add_argument("--out", type=Path, default=REPO / "build" / "bench_recurrent")
    args = ap.parse_args()
    kernel_sets = ["portable"] + ([] if args.skip_cmsis or not os.environ.get("TORCHMCU_CMSIS_NN_DIR") else
                                  ["cmsis-nn"])
    kws = kws_rows(args.boards, kernel_sets, args.out)
    sqnr = sqnr_rows(args.out)
    (REPO / "bench" / "recurrent.json").write_text(json.dumps({"kws": kws, "sqnr": sqnr}, indent=2) + "\n")
    (REPO / "bench" / "recurrent.md").write_text(markdown(kws, sqnr))
    print(markdown(kws, sqnr))


if __name__ == "__main__":
    main()
