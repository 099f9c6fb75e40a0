"""The MLPerf Tiny models (and MobileNetV2-0.35), int8, compiled for each
reference board and run in QEMU: the firmware's outputs equal the project's
NumPy reference bit for bit (which tests/test_oracle.py holds against the
tflite-micro oracle). The same program runs on M4, M33 and M55."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import REPO, needs_arm_gcc, needs_qemu
from torchmcu.builder.firmware import build_firmware
from torchmcu.compiler import compile
from torchmcu.program import schema
from torchmcu.sim import runner

sys.path.insert(0, str(REPO / "examples"))
import mlperf_tiny as mt  # noqa: E402

pytestmark = [needs_qemu, needs_arm_gcc]

BOARDS = ["mps3-an547", "mps2-an505", "mps2-an386"]
MLPERF = ("ds_cnn", "mobilenet_v1", "resnet8", "autoencoder")


@pytest.fixture(scope="module")
def models():
    return {name: mt.MODELS[name]() for name in mt.MODELS}


@pytest.mark.parametrize("board", BOARDS)
@pytest.mark.parametrize("name", list(mt.MODELS))
def test_int8_model_in_qemu(name: str, board: str, models, tmp_path: Path) -> None:
    model, example = models[name]
    c = compile(model, example, board, tmp_path, quant="int8", calibration=list(mt.CALIBRATION[name](16, 0)),
                progress=False, io="int8")
    assert not [op.name for op in c.graph.ops if not op.code.endswith("_S8") and op.code not in ("PERMUTE", "CONCAT")]
    assert all(r.arena_bytes == r.lower_bound_bytes for r in c.plan.regions)  # each memory at its bound
    build_firmware(tmp_path)
    # The fast paths' buffers are planned scratch in the arena, not stack
    # (backends/portable/scratch.py): the whole image's computed worst case,
    # interrupts included, was 4.5-6 KB. Issue #27's goal is 2 KiB; this
    # build (the runner's, with its op observer) reaches 2,092 B on the M55
    # (DS-CNN: the MVE conv's frame of 840 B) and ADD's 1 KiB table is still
    # on the stack: a guard against regressions, not the goal.
    stack = json.loads((tmp_path / "size.json").read_text())["stack"]
    if name in MLPERF:
        assert stack["computed_bytes"] <= 2304, [(f["frame"], f["function"]) for f in stack["path"]]
    x = mt.CALIBRATION[name](1, 3)
    res = runner.run(tmp_path, [x], sim="qemu")
    assert res.exit_code == 0, res.raw[-1000:]
    samples = runner.split_samples(runner.load_meta(tmp_path), [x])
    expected, tol = runner.expected(tmp_path, samples)
    assert tol is None
    mismatch, _ = runner.compare(res.outputs, expected, tol)
    assert mismatch is None, str(mismatch)


def test_program_is_isa_independent(models, tmp_path: Path) -> None:
    """Compiled for M55 or M4, the program differs only in its arena's name."""
    model, example = models["ds_cnn"]
    calibration = list(mt.CALIBRATION["ds_cnn"](8, 0))
    a = compile(model, example, "mps3-an547", tmp_path / "a", quant="int8", calibration=calibration, progress=False)
    # blockram=0: one arena there too (the an386's 16 KiB block RAM would take part of the plan).
    b = compile(model, example, "mps2-an386", tmp_path / "b", quant="int8", calibration=calibration, progress=False,
                budgets={"blockram": 0})
    pa, pb = schema.decode(a.pte), schema.decode(b.pte)
    pa["arenas"][0]["name"] = pb["arenas"][0]["name"]
    assert pa == pb
