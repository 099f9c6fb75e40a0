"""`run --check` against the float model, and the figures it prints.

A quantized program is checked bit for bit against torchmcu's own
reference (sim/runner.py expected), which says the firmware computes what
the compiler meant; it says nothing of whether that is the model the user
trained. A program calibrated on data scaled by 1e30 outputs zeros and
passes. So the check also compares the firmware's outputs with the float
model (the exported program before quantization, which compile saves as
model_float.pt2: frontend/ranges.py) and reports per output its SQNR, its
largest absolute error and the float output's range, and warns when

- an output is constant over all its elements and samples while the float
  model's is not (the quantized model lost it), or
- its SQNR is below a floor (DEFAULT_SQNR_FLOOR_DB, --sqnr-floor), or
- it is further from the float model than PyTorch's own quantized model
  (the q/dq program, model.pt2) is: its SQNR more than QDQ_MARGIN_DB below
  the q/dq model's, or it differs from the q/dq model's output by more than
  QDQ_LSB_BOUND steps (--qdq-lsb). The firmware equals torchmcu's reference
  bit for bit; this judges the reference's integer scheme against
  PyTorch's, on the user's own weights and data (a trained LSTM's gates
  saturating, say), which random-weight tests cannot.

The warnings fail the check only with --strict: how much error a model
tolerates is the user's call.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from .sim import runner

# 10 dB: noise power a tenth of the signal's, an RMS error about a third of
# the output's RMS. Measured on outputs (--check, 8 samples): the trained
# digits MLP at int8 33 dB; the MLPerf Tiny models (examples/mlperf_tiny.py,
# seeded random weights) at int8 ds_cnn 35, resnet8 31, mobilenet_v1 20,
# autoencoder 11 dB; at int4 28, 23, 22 and 1 dB (ten random dense layers
# with 4-bit weights: noise). A mis-scaled calibration (a constant output)
# gives 0 dB or less. The floor flags the broken and the nearly useless,
# and leaves the merely coarse to the user (--sqnr-floor).
DEFAULT_SQNR_FLOOR_DB = 10.0
# How much worse than PyTorch's q/dq model an output may be: 1 dB of SQNR
# against float, and 8 steps of its quantization (an int16 output's step is
# 1/256 of an int8 one's over the same range: 8 int8 steps = 2048 of its own).
# Measured (run --check): silero-vad's trained LSTM tail 0-1 LSB at int8, 5-12
# at a16w8; the elementwise and conv ops 1-4 LSB (tests/test_ops_*.py).
QDQ_MARGIN_DB = 1.0
QDQ_LSB_BOUND = 8.0
QUANTIZED = ("int8", "int4", "a16w8")


def float_reference(out_dir: str | Path, samples: list[list[np.ndarray]]) -> list[np.ndarray] | None:
    """The float model's outputs for `samples` (float32), or None when
    compile saved no float model (a model quantized by the user, or a build
    directory of an older torchmcu)."""
    from .frontend.ranges import FLOAT_PROGRAM  # with torch: a run without --check starts without it

    path = Path(out_dir) / FLOAT_PROGRAM
    if not path.is_file():
        return None
    meta = runner.load_meta(out_dir)
    return runner._run_exported(runner._load_exported(out_dir, FLOAT_PROGRAM), out_dir,
                                runner.float_samples(meta, samples), False)


def as_float(outputs: list[np.ndarray], meta: dict[str, Any]) -> list[np.ndarray]:
    """The firmware's outputs as values: int8 outputs (--io int8) dequantized."""
    from . import reference as ref

    return [ref.dequantize(o, m["scale"], m["zero_point"]) if o.dtype == np.int8 else o.astype(np.float64)
            for o, m in zip(outputs, meta["outputs"])]


def sqnr_db(got: np.ndarray, ref: np.ndarray) -> float | None:
    """10 log10(sum ref^2 / sum (got - ref)^2) over every element and sample;
    None when it is no number: no error at all (exact), or a float output that
    is all zero (no signal to measure against)."""
    g, r = got.astype(np.float64).ravel(), ref.astype(np.float64).ravel()
    noise = float(np.sum((g - r) ** 2))
    signal = float(np.sum(r ** 2))
    if noise == 0.0 or signal == 0.0 or not (math.isfinite(noise) and math.isfinite(signal)):
        return None
    return 10.0 * math.log10(signal / noise)


def vs_float(got: list[np.ndarray], ref: list[np.ndarray]) -> list[dict[str, Any]]:
    """Per output: SQNR (dB), the largest |got - ref|, and the float output's
    range [min, max] for scale (None when it has no elements)."""
    stats = []
    for g, r in zip(got, ref):
        finite = r[np.isfinite(r)]
        stats.append({
            "sqnr_db": None if (s := sqnr_db(g, r)) is None else round(s, 2),
            "max_abs_error": runner._max_abs(g, r),
            "range": [float(finite.min()), float(finite.max())] if finite.size else None,
        })
    return stats


def warnings_for(got: list[np.ndarray], ref: list[np.ndarray], stats: list[dict[str, Any]],
                 floor_db: float) -> list[str]:
    """One line per suspicious output (see the module docstring)."""
    out = []
    for k, (g, r, s) in enumerate(zip(got, ref, stats)):
        if g.size == 0:
            continue
        if not np.isfinite(g).all() and np.isfinite(r).all():
            out.append(f"output {k} has non-finite values where the float model's are finite")
            continue
        g_lo, g_hi, r_lo, r_hi = float(g.min()), float(g.max()), float(r.min()), float(r.max())
        if g_lo == g_hi and r_lo < r_hi:
            out.append(f"output {k} is {g_lo:.3g} in all its {g.size} values while the float model's ranges over "
                       f"[{r_lo:.3g}, {r_hi:.3g}]: the quantized model lost it (calibration data mis-scaled?)")
        if s["sqnr_db"] is not None and s["sqnr_db"] < floor_db:
            out.append(f"output {k}: SQNR {s['sqnr_db']:.1f} dB against the float model, below the floor of "
                       f"{floor_db:g} dB (--sqnr-floor); max abs error {s['max_abs_error']:.3g} for values in "
                       f"[{r_lo:.3g}, {r_hi:.3g}]")
    return out


def lsb_bound(out_dir: str | Path, k: int, bound: float) -> float:
    """The LSB bound of output k: `bound` int8 steps, in the output's own
    steps (x 256 for an int16 output, whose step is 256 times finer)."""
    from .program import schema

    prog = schema.decode((Path(out_dir) / "model.pte").read_bytes())
    dq = runner.output_dequantize(prog, prog["outputs"][k])
    return bound * 256 if dq is not None and dq["code"] == "DEQUANTIZE_S16" else bound


def vs_qdq(stats: list[dict[str, Any]], qdq: list[np.ndarray], ref: list[np.ndarray], lsb: list[float | None],
           limits: list[float]) -> list[str]:
    """Adds each output's q/dq SQNR against float to `stats`; one line per
    output further from float than PyTorch's q/dq model: an SQNR more than
    QDQ_MARGIN_DB below the q/dq model's, or lsb[k] (its largest difference
    from the q/dq model in steps) past limits[k] (see lsb_bound)."""
    out = []
    for k, (s, q, r) in enumerate(zip(stats, qdq, ref)):
        qs = sqnr_db(np.asarray(q, np.float64), r)
        s["qdq_sqnr_db"] = None if qs is None else round(qs, 2)
        if s["sqnr_db"] is not None and qs is not None and s["sqnr_db"] < qs - QDQ_MARGIN_DB:
            out.append(f"output {k}: SQNR {s['sqnr_db']:.1f} dB against the float model, {qs - s['sqnr_db']:.1f} dB "
                       f"below PyTorch's q/dq model of the same program ({qs:.1f} dB)")
        limit = limits[k]
        if k < len(lsb) and lsb[k] is not None and lsb[k] > limit:
            out.append(f"output {k}: {lsb[k]:g} LSB from PyTorch's q/dq model, past the bound of {limit:g} "
                       "(--qdq-lsb)")
    return out


def check_vs_float(out_dir: str | Path, outputs: list[np.ndarray], samples: list[list[np.ndarray]],
                   floor_db: float, lsb: list[float | None] | None = None,
                   lsb_limit: float = QDQ_LSB_BOUND) -> tuple[list[dict[str, Any]] | None, list[str]]:
    """For a quantized program: (per output figures, warnings), or (None,
    []) when there is no float model to compare with. lsb: per output, the
    firmware's largest difference from the q/dq model in LSB
    (runner.qdq_error), judged against lsb_limit."""
    meta = runner.load_meta(out_dir)
    if meta.get("quant") not in QUANTIZED:
        return None, []
    ref = float_reference(out_dir, samples)
    if ref is None:
        return None, []
    got = as_float(outputs, meta)
    stats = vs_float(got, ref)
    warns = warnings_for(got, ref, stats, floor_db)
    qdq = runner.reference(out_dir, runner.float_samples(meta, samples))
    limits = [lsb_bound(out_dir, k, lsb_limit) for k in range(len(stats))]
    return stats, warns + vs_qdq(stats, qdq, ref, lsb or [], limits)


def _number(v: float) -> str:
    """1, 0.5, 2.5e-07: never 1.0000000002 (float noise in a ratio of steps)."""
    return f"{round(v, 2):g}" if abs(v) >= 0.01 else f"{v:.3g}"


def lsb_text(lsb: list[float | None], abs_errors: list[float]) -> str:
    """The difference from PyTorch's q/dq model, per output: in LSB, or in
    its own units for an output with no int8 step (a float op's)."""
    parts = [f"{_number(v)} LSB" if v is not None else f"{e:.3g} (a float output: no int8 step)"
             for v, e in zip(lsb, abs_errors)]
    if len(parts) == 1:
        return parts[0]
    return ", ".join(f"output {k}: {p}" for k, p in enumerate(parts))


def check_lines(check: dict[str, Any]) -> list[str]:
    """The check's result as `run` prints it."""
    if check["passed"]:
        verdict = "passed"
    elif check["first_mismatch"]:
        verdict = f"FAILED: {check['first_mismatch']}"
    else:
        verdict = (f"bit for bit as expected, but FAILED with --strict: {len(check.get('warnings') or [])} "
                   "numerics warning(s) against the float model")
    lines = [f"check against {check['reference']}: {verdict} (max abs error {check['max_abs_error']:.3g})"]
    if "max_lsb_vs_pytorch_qdq" in check:
        lines.append("difference from PyTorch's q/dq model: "
                     + lsb_text(check["max_lsb_vs_pytorch_qdq"], check["max_abs_error_vs_pytorch_qdq"]))
    stats = check.get("vs_float")
    if stats is None and "vs_float" in check:
        lines.append("against the float model: no float model saved (quantized before compile, or compiled by an "
                     "older torchmcu): not compared")
    for k, s in enumerate(stats or []):
        if s["sqnr_db"] is not None:
            sqnr = f"SQNR {s['sqnr_db']:.1f} dB"
        elif s["max_abs_error"] == 0:
            sqnr = "exact"
        else:
            sqnr = "SQNR n/a (the float output is all zero)" if s["range"] == [0.0, 0.0] else "SQNR n/a"

        span = "" if s["range"] is None else f" (float output in [{s['range'][0]:.3g}, {s['range'][1]:.3g}])"
        qdq = "" if s.get("qdq_sqnr_db") is None else f" (PyTorch's q/dq model: {s['qdq_sqnr_db']:.1f} dB)"
        lines.append(f"{'' if len(stats) == 1 else f'output {k} '}against the float model: {sqnr}{qdq}, "
                     f"max abs error {s['max_abs_error']:.3g}{span}")
    return lines


def run_check(out_dir: str | Path, outputs: list[np.ndarray], samples: list[list[np.ndarray]],
              sqnr_floor: float | None = None, qdq_lsb: float | None = None,
              strict: bool = False) -> tuple[dict[str, Any], bool]:
    """`run --check`: the firmware's outputs against the reference (bit for
    bit, or PyTorch in float64 within tolerance for a float program), and a
    quantized program's also against PyTorch's q/dq model and the float
    model. Prints the warnings and the failure to stderr. (the check's
    record, whether it failed)."""
    import sys

    expected, tol = runner.expected(out_dir, samples)
    mismatch, worst = runner.compare(outputs, expected, tol)
    if tol is not None and "slack" in tol:  # per output, per sample: as JSON lists
        tol = dict(tol, slack=[[float(v) for v in s] for s in tol["slack"]])
    check: dict[str, Any] = {"passed": mismatch is None, "max_abs_error": worst,
                             "reference": "torchmcu (bit for bit)" if tol is None else
                             "PyTorch in float64 (slack: pytorch_factor x PyTorch float32's own error)",
                             "tolerance": tol, "first_mismatch": str(mismatch) if mismatch else None}
    failed = False
    if tol is None:  # quantized: against PyTorch's q/dq model, and against the float model
        errors = runner.qdq_error(out_dir, outputs, samples)
        check["max_lsb_vs_pytorch_qdq"] = [lsb for _, lsb in errors]  # None: a float output
        check["max_abs_error_vs_pytorch_qdq"] = [e for e, _ in errors]
        floor = DEFAULT_SQNR_FLOOR_DB if sqnr_floor is None else sqnr_floor
        stats, warns = check_vs_float(out_dir, outputs, samples, floor, [lsb for _, lsb in errors],
                                      QDQ_LSB_BOUND if qdq_lsb is None else qdq_lsb)
        check.update(vs_float=stats, sqnr_floor_db=floor, qdq_margin_db=QDQ_MARGIN_DB, warnings=warns)
        for w in warns:
            print(f"torchmcu: warning: {w}", file=sys.stderr)
        if warns and strict:
            check["passed"] = False
            print(f"torchmcu: check failed: {len(warns)} numerics warning(s), an error with --strict", file=sys.stderr)
            failed = True
    if mismatch is not None:
        print(f"torchmcu: check failed: {mismatch}", file=sys.stderr)
        failed = True
    return check, failed
