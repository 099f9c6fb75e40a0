"""MASKED_FILL, COMPARE and GATHER against TensorFlow Lite Micro (#26 item
4): the models of tests/test_ops_more.py that hold them (masked_fill by a
constant mask and by comparisons, a bool mask input, arange < length, token
ids into nn.Embedding) exported as SELECT_V2, LESS/GREATER/..., GATHER with
BOOL and int32 tensors. int8 and a16w8 programs: TFLM's outputs and every
op's output along the way equal the reference interpreter's bits, and the
host firmware's; float32 programs (refused whole by export_tflite) and int8
ones with a masked softmax (no TFLite form): these ops alone, within float
tolerance."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from test_ops_more import CASES, MODELS, calibration
from torchmcu.compiler import compile
from torchmcu.program import schema
from torchmcu.program.interpret import run_reference
from torchmcu.sim import runner

pytest.importorskip("tflite_micro.python.tflite_micro.runtime", reason="tflite-micro wheel not installed")

from torchmcu.export.tflite import ExportError, export_op, export_tflite, run_tflite_micro, summary, trace  # noqa: E402

BOARD = "mps3-an547"
NAMESPACE: dict = {}
exec(MODELS, NAMESPACE)  # noqa: S102 - the test's own model source


def _compile(tmp_path: Path, name: str, quant: str) -> tuple[bytes, list[list[np.ndarray]]]:
    model, example = NAMESPACE[name]()
    cal = calibration(name)
    kw = {} if quant == "float32" else dict(quant=quant, calibration=[tuple(torch.from_numpy(v[k]) for v in
                                                                            cal.values()) for k in range(8)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compile(model.eval(), example, BOARD, tmp_path, progress=False, tile=False, **kw)
    # int64 and bool inputs as the device's caller gives them: int32
    samples = [[v[k] if v.dtype == np.float32 else v[k].astype(np.int32) for v in calibration(name, 3).values()]
               for k in range(3)]
    return (tmp_path / "model.pte").read_bytes(), samples


# (model, precision): the TFLite operators its export must hold
WHOLE = {("masked_fill", "int8"): {"SELECT_V2", "GREATER", "LESS_EQUAL"},
         ("masked_fill", "a16w8"): {"SELECT_V2", "GREATER"},
         ("mask_input", "int8"): {"SELECT_V2", "NOT_EQUAL", "EQUAL"},
         ("embed", "int8"): {"GATHER"}}


@pytest.mark.parametrize("name,quant", sorted(WHOLE))
def test_whole_program_matches_tflite_micro(name: str, quant: str, tmp_path: Path, host_runner) -> None:
    pte, samples = _compile(tmp_path, name, quant)
    tensor_map: dict[int, int] = {}
    tflite = export_tflite(pte, tensor_map=tensor_map)
    assert WHOLE[name, quant] <= set(summary(tflite)["op_counts"]), summary(tflite)["op_counts"]
    ops = schema.decode(pte)["ops"]
    produced = [op["outputs"][0] for op in ops]
    expected = run_reference(pte, samples)
    res = runner.run(tmp_path, [np.stack([s[j] for s in samples]) for j in range(len(samples[0]))], sim="host")
    assert res.exit_code == 0, res.raw[-2000:]
    for k, sample in enumerate(samples):
        got = run_tflite_micro(tflite, sample, tensors=[tensor_map[t] for t in produced])
        for i, (value, (_, exp)) in enumerate(zip(got[len(expected):], trace(pte, sample))):
            assert value.dtype == exp.dtype and np.array_equal(value.reshape(exp.shape), exp), \
                f"sample {k}: op {i} {ops[i]['code']} ({ops[i]['name']})"
        for j, exp in enumerate(expected):
            assert np.array_equal(got[j].reshape(exp[k].shape), exp[k]), f"TFLM: sample {k} output {j}"
            assert np.array_equal(res.outputs[j][k], exp[k]), f"firmware: sample {k} output {j}"


# float32 programs, which export_tflite refuses whole, and int8 programs whose masked softmax has no TFLite form
ALONE = [("masked_fill", "float32"), ("mask_input", "float32"), ("tokens", "float32"), ("embed", "float32"),
         ("tokens", "int8"), ("key_padding", "int8")]


@pytest.mark.parametrize("name,quant", ALONE)
def test_ops_alone_match_tflite_micro(name: str, quant: str, tmp_path: Path) -> None:
    pte, samples = _compile(tmp_path, name, quant)
    ops = schema.decode(pte)["ops"]
    wanted = {"MASKED_FILL", "COMPARE", "GATHER"} & CASES[name][1]
    if quant != "float32":
        with pytest.raises(ExportError, match=r"SOFTMAX_MASKED_S8 .*no TFLite operator"):
            export_tflite(pte)
    assert wanted <= {op["code"] for op in ops}
    steps = trace(pte, samples[0])
    for i, op in enumerate(ops):
        if op["code"] not in ("MASKED_FILL", "COMPARE", "GATHER"):
            continue
        tflite, values = export_op(pte, i, samples[0], steps)
        got, exp = run_tflite_micro(tflite, values)[0], steps[i][1]
        assert got.dtype == exp.dtype and np.allclose(got.reshape(exp.shape), exp, rtol=1e-6, atol=0), \
            f"op {i} {op['code']} ({op['name']})"


def test_a_wrong_mask_is_caught(tmp_path: Path) -> None:
    """The oracle can fail: a MASKED_FILL whose computed mask takes both values, fed to TFLM inverted, differs."""
    pte, samples = _compile(tmp_path, "masked_fill", "int8")
    prog = schema.decode(pte)
    i = next(k for k, op in enumerate(prog["ops"]) if op["code"] == "MASKED_FILL"
             and prog["tensors"][op["inputs"][1]]["region"] != "CONSTANT")
    steps = trace(pte, samples[0])
    tflite, (x, mask) = export_op(pte, i, samples[0], steps)
    assert set(np.unique(mask)) == {0, 1}
    exp = steps[i][1]
    assert np.array_equal(run_tflite_micro(tflite, [x, mask])[0].reshape(exp.shape), exp)
    assert not np.array_equal(run_tflite_micro(tflite, [x, 1 - mask])[0].reshape(exp.shape), exp)


def test_compare_of_booleans_other_than_equality_is_one_line(tmp_path: Path) -> None:
    class BoolLess(torch.nn.Module):
        def forward(self, x):
            return x.masked_fill((x > 0) < (x > 1), 0.0)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compile(BoolLess().eval(), (torch.randn(2, 8),), BOARD, tmp_path, quant="int8",
                calibration=[(torch.randn(2, 8),) for _ in range(8)], progress=False, tile=False)
    with pytest.raises(ExportError, match=r"^op \d+ COMPARE \(\w+\): LESS of boolean tensors[^\n]*$"):
        export_tflite((tmp_path / "model.pte").read_bytes())
