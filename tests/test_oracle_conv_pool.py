"""TensorFlow Lite Micro as the oracle of the convolution, pooling and
resizing ops (tests/test_oracle.py's method): each program of
tests/test_ops_conv_pool.py's integer cases and the models of
tests/test_models_conv_pool.py, at int8 and a16w8, exported as .tflite
(TRANSPOSE_CONV, RESIZE_NEAREST_NEIGHBOR, RESIZE_BILINEAR, grouped CONV_2D
as SPLIT + CONV_2D + CONCATENATION, PAD + AVERAGE_POOL_2D for
count_include_pad) and run in TFLM's interpreter: bit for bit with the NumPy
reference end to end and op by op. Ops TFLite has no form of are refused by
the export with a message (adaptive pooling, dilated or divisor-overridden
pools, int16 bilinear resizing).
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from test_models_conv_pool import MODELS, make
from test_ops_conv_pool import INT
from test_quant import calib
from torchmcu import reference as ref
from torchmcu.compiler import compile
from torchmcu.export.tflite.writer import TFLiteWriter
from torchmcu.program import schema
from torchmcu.program.interpret import run_reference

pytest.importorskip("tflite_micro.python.tflite_micro.runtime", reason="tflite-micro wheel not installed")

from torchmcu.export.tflite import (
    ExportError,
    export_op,
    export_tflite,
    run_tflite_micro,
    trace,
    verify_derived,
)

# What TFLite (Micro) has no form of: the export refuses it, saying so.
NO_TFLITE = re.compile(r"no TFLite counterpart|TFLite Micro has no int16 RESIZE_BILINEAR|dilated pooling has no "
                       r"TFLite form|divisor_override has no TFLite form|ceil_mode windows|SAME/VALID cannot express")
NAMES = [f"ops:{n}" for n in sorted(INT)] + [f"model:{n}" for n in sorted(MODELS)]


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    cache: dict[tuple[str, str], tuple[bytes, list]] = {}

    def get(name: str, quant: str) -> tuple[bytes, list]:
        if (name, quant) not in cache:
            kind, key = name.split(":")
            if kind == "ops":
                torch.manual_seed(sum(map(ord, key)))
                factory, shapes, _ = INT[key]
                model = factory().eval()
            else:
                model, shapes = make(key)
            out = tmp_path_factory.mktemp(f"{key}-{quant}")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                compile(model, tuple(torch.randn(*s) for s in shapes), "mps3-an547", out, quant=quant,
                        calibration=calib(shapes), progress=False, tile=False, avg_pool_rounding="tflite")
            cache[(name, quant)] = ((out / "model.pte").read_bytes(), [list(s) for s in calib(shapes, n=2, seed=1)])
        return cache[(name, quant)]

    return get


def _same(code: str, got: np.ndarray, exp: np.ndarray) -> bool:
    got = got.reshape(exp.shape)
    if code.endswith("_F32"):  # a float fallback (another family's op at a16w8)
        return np.allclose(got, exp, rtol=1e-5, atol=1e-6)
    return got.dtype == exp.dtype and np.array_equal(got, exp)


@pytest.mark.parametrize("quant", ["int8", "a16w8"])
@pytest.mark.parametrize("name", NAMES)
def test_every_op_bit_exact_with_tflite_micro(name: str, quant: str, programs) -> None:
    pte, samples = programs(name, quant)
    assert verify_derived(pte) == []
    ops = schema.decode(pte)["ops"]
    steps = trace(pte, samples[0])
    exported, failures = 0, []
    for i, op in enumerate(ops):
        try:
            tflite, values = export_op(pte, i, samples[0], steps)
        except ExportError as e:
            assert NO_TFLITE.search(str(e)), str(e)
            continue
        got = run_tflite_micro(tflite, values)[0]
        exported += 1
        if not _same(op["code"], got, steps[i][1]):
            failures.append(f"op {i} {op['code']} ({op['name']}): {np.sum(got.reshape(steps[i][1].shape) != steps[i][1])} "
                            f"of {steps[i][1].size} values differ")
    assert exported and not failures, "\n".join(failures)


@pytest.mark.parametrize("quant", ["int8", "a16w8"])
@pytest.mark.parametrize("name", NAMES)
def test_whole_program_bit_exact_with_tflite_micro(name: str, quant: str, programs) -> None:
    pte, samples = programs(name, quant)
    codes = {op["code"] for op in schema.decode(pte)["ops"]}
    if any(c.endswith("_F32") for c in codes):
        pytest.skip("a float fallback inside: compared op by op within the float tolerance")
    try:
        tflite = export_tflite(pte)
    except ExportError as e:
        assert NO_TFLITE.search(str(e)), str(e)
        pytest.skip(f"an op without a TFLite form (compared op by op): {e}")
    expected = run_reference(pte, samples)
    for k, sample in enumerate(samples):
        for j, out in enumerate(run_tflite_micro(tflite, sample)):
            assert np.array_equal(out.reshape(expected[j][k].shape), expected[j][k]), f"sample {k} output {j}"


def test_tflite_micro_rounds_bilinear_half_away_from_zero() -> None:
    """The int8 bilinear twin rounds the 2^20-scaled sum half away from zero
    (TFLite's double rounding): TFLM agrees on every pair of neighbours, and
    single rounding (>> 20) would not, so the oracle can tell them apart."""
    w = TFLiteWriter()
    x = w.add_tensor("x", (1, 1, 2, 1), "int8", 0.1, 0)
    size = w.add_tensor("size", (2,), "int32", data=np.asarray([1, 4], np.int32))
    y = w.add_tensor("y", (1, 1, 4, 1), "int8", 0.1, 0)
    w.add_op("RESIZE_BILINEAR", [x, size], [y], dict(align_corners=False, half_pixel_centers=True))
    model = w.finish()
    g = np.random.default_rng(0)
    pairs = np.concatenate([g.integers(-128, 128, size=(300, 2)), [[0, -2], [-2, 0], [1, 3], [-1, -3]]])
    differs = False
    for a, b in pairs:
        xs = np.asarray([a, b], np.int8).reshape(1, 1, 2, 1)
        got = run_tflite_micro(model, [xs])[0].reshape(1, 1, 4, 1)
        exp = ref.pool_resize.resize_bilinear(xs, (1, 4), half_pixel_centers=True)
        assert np.array_equal(got, exp), (a, b, got.ravel(), exp.ravel())
        acc = (np.asarray([[1024, 0], [768, 256], [256, 768], [0, 1024]]) @ np.asarray([a, b]) * 1024)
        differs |= not np.array_equal((acc + (1 << 19)) >> 20, exp.ravel())
    assert differs


def test_transposed_conv_multipliers_are_tflites(programs) -> None:
    """TFLM derives the transposed convolution's requantization from the
    scales: a program whose multipliers are off is caught."""
    from torchmcu.program.serialize import to_pte

    pte, samples = programs("ops:transposed", "int8")
    prog = schema.decode(pte)
    k = next(i for i, op in enumerate(prog["ops"]) if op["code"] == "TRANSPOSE_CONV2D_S8")
    mult = prog["tensors"][prog["ops"][k]["inputs"][3]]
    seg = bytearray(pte[prog["constant_offset"]:prog["constant_offset"] + prog["constant_size"]])
    at = mult["offset"]
    value = int.from_bytes(seg[at:at + 4], "little", signed=True)
    seg[at:at + 4] = int(value - (1 << 24)).to_bytes(4, "little", signed=True)
    bad = to_pte(prog, bytes(seg))
    assert any("TRANSPOSE_CONV2D_S8" in p for p in verify_derived(bad))
    steps = trace(bad, samples[0])
    tflite, values = export_op(bad, k, samples[0], steps)
    assert not np.array_equal(run_tflite_micro(tflite, values)[0].reshape(steps[k][1].shape), steps[k][1])


def test_no_tflite_form_is_refused_with_the_reason(tmp_path: Path) -> None:
    import torch.nn.functional as F
    from test_ops_host import Fn

    shapes = [(1, 3, 10, 10)]
    cases = [(lambda m, x: F.max_pool2d(x, 3, 2, 1, dilation=2), "dilated pooling"),
             (lambda m, x: F.avg_pool2d(x, 2, divisor_override=3), "divisor_override"),
             (lambda m, x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True), "ceil_mode windows"),
             (lambda m, x: F.adaptive_avg_pool2d(x, (4, 5)), "no TFLite counterpart")]
    for k, (fn, match) in enumerate(cases):
        out = tmp_path / str(k)
        compile(Fn(fn).eval(), (torch.randn(*shapes[0]),), "mps3-an547", out, quant="int8",
                calibration=calib(shapes), progress=False, tile=False, avg_pool_rounding="tflite")
        with pytest.raises(ExportError, match=match):
            export_tflite((out / "model.pte").read_bytes())
