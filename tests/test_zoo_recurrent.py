"""The recurrent models of the sequence zoo (examples/recurrent_zoo.py) in QEMU.

Each model is compiled at float32, int8 and a16w8 for the Cortex-M55
(mps3-an547) and the Cortex-M4 (mps2-an386), built with the portable kernels
and run in QEMU: bit for bit with the reference at int8 and a16w8, within the
float tolerance at float32; the integer programs' SQNR against the float
model is bounded below. The streaming keyword spotter, fed one frame per
invocation, gives the whole-sequence program's outputs bit for bit; with
TORCHMCU_CMSIS_NN_DIR set, the LSTMs also run on CMSIS-NN's
arm_lstm_unidirectional_s8/_s16 on M4, M33 and M55, bit for bit.

With TORCHMCU_CMSIS_NN_DIR set, each model's int8 program of those runs
(torchmcu's per-channel recurrent weights, the default) is compared with
its CMSIS-NN build, compiled with --recurrent-weights per-gate (TFLite's
scheme, the only one CMSIS-NN's LSTM takes): the default build must take
no more instructions; the LSTMs, whose fast path is being written, are
strict expected failures.

Slow (a firmware build per case): behind the `zoo` marker, run with
`pytest -m zoo tests/test_zoo_recurrent.py`. bench/recurrent.py measures the
figures (instructions, RAM, SQNR).
"""

from __future__ import annotations

import os
import sys
import warnings

import numpy as np
import pytest
import torch
from _zoo import assert_not_slower, cmsis_nn_instructions, known_slow, needs_cmsis_nn, run_checked, sqnr_db
from conftest import REPO, needs_arm_gcc, needs_qemu
from torchmcu.builder.firmware import build_firmware
from torchmcu.compiler import compile
from torchmcu.frontend.streaming import stream_calibration
from torchmcu.program.interpret import run_reference
from torchmcu.sim import runner

sys.path.insert(0, str(REPO / "examples"))
import recurrent_zoo as zoo  # noqa: E402

pytestmark = [pytest.mark.zoo, needs_qemu, needs_arm_gcc]

BOARDS = ["mps3-an547", "mps2-an386"]
CALIBRATION, HELD_OUT = 24, 3
MIN_SQNR = {"int8": 25.0, "a16w8": 28.0}
# (name, board) -> the default int8 build's instructions per inference (this worker's)
INT8_INSTRUCTIONS: dict[tuple[str, str], int] = {}


@pytest.fixture(autouse=True)
def _only_when_asked(request):
    if "zoo" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("the sequence zoo runs with -m zoo")


def _compile(model, example, board, out, quant, calib, **kw):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        c = compile(model, example, board, out, quant=quant, progress=False,
                    calibration=None if quant == "float32" else calib, **kw)
    fallbacks = [str(w.message) for w in seen if str(w.message).startswith("torchmcu")]
    assert not fallbacks, fallbacks
    return c


def _run_checked(out, inputs: list[np.ndarray]) -> list[np.ndarray]:
    return run_checked(out, inputs, timeout_s=900)[0].outputs


@pytest.mark.parametrize("board", BOARDS)
@pytest.mark.parametrize("quant", ["float32", "int8", "a16w8"])
@pytest.mark.parametrize("name", [pytest.param(m, marks=pytest.mark.xdist_group(f"recurrent_{m}")) for m in zoo.MODELS])
def test_zoo_model(name, quant, board, tmp_path):
    model, example = zoo.MODELS[name]()
    calib = zoo.calibration(name, CALIBRATION)
    held = zoo.calibration(name, HELD_OUT, seed=1)
    c = _compile(model, example, board, tmp_path, quant, calib)
    if quant != "float32":
        kind = {"lstm_kws": "LSTM", "lstm_2layer": "LSTM", "gru_kws": "GRU", "rnnt_encoder": "LSTM"}[name]
        assert f"{kind}_{'S16' if quant == 'a16w8' else 'S8'}" in {op.code for op in c.graph.ops}
    build_firmware(tmp_path)
    inputs = [np.stack([s[0].numpy() for s in held])]
    res, _ = run_checked(tmp_path, inputs, timeout_s=900)
    got = res.outputs[0]
    if quant == "int8":
        INT8_INSTRUCTIONS[(name, board)] = res.inference_instructions()
    if quant != "float32":
        with torch.no_grad():
            ref = np.stack([model(*s).numpy() for s in held])
        assert sqnr_db(got, ref) >= MIN_SQNR[quant]


@pytest.mark.parametrize("kernels", ["portable", "cmsis-nn"])
def test_streaming_kws_is_the_sequence_program(kernels, tmp_path):
    """One frame per invocation on the Cortex-M55: the whole-sequence int8
    program's outputs bit for bit (its state int8 h and int16 c)."""
    if kernels == "cmsis-nn" and not os.environ.get("TORCHMCU_CMSIS_NN_DIR"):
        pytest.skip("TORCHMCU_CMSIS_NN_DIR is not set")
    seq, _ = zoo.make_lstm_kws_sequence()
    stream, example = zoo.make_lstm_kws_stream()
    sequences = [s[0] for s in zoo.calibration("lstm_kws_sequence", CALIBRATION)]
    whole = _compile(seq, (sequences[0],), "mps3-an547", tmp_path / "seq", "int8", [(s,) for s in sequences])
    calib = stream_calibration(stream, sequences, example[1:])
    c = _compile(stream, example, "mps3-an547", tmp_path / "stream", "int8", calib, state=2)
    assert c.report["memory"]["state"]["bytes"] == 64 + 128  # int8 h, int16 c
    build_firmware(tmp_path / "stream", kernels=kernels)
    x = zoo.calibration("lstm_kws_sequence", 1, seed=2)[0][0]
    frames = x.numpy().transpose(1, 0, 2)[:, None]  # 49 samples of one frame
    got = _run_checked(tmp_path / "stream", [frames])[0][:, 0, 0]
    np.testing.assert_array_equal(got, run_reference(whole.pte, [[x.numpy()]])[0][0, 0])


@pytest.mark.skipif(not os.environ.get("TORCHMCU_CMSIS_NN_DIR"), reason="TORCHMCU_CMSIS_NN_DIR is not set")
@pytest.mark.parametrize("board", ["mps2-an386", "mps2-an505", "mps3-an547"])
@pytest.mark.parametrize("quant", ["int8", "a16w8"])
def test_lstm_kws_on_cmsis_nn(quant, board, tmp_path):
    """arm_lstm_unidirectional_s8/_s16 on M4, M33 and M55, bit for bit (TFLite's
    per-gate weights: CMSIS-NN's gates take one multiplier each). Speed:
    at int8 the portable kernel's fast paths (kernels/fast/recurrent) take
    under 0.75x CMSIS-NN's instructions with MVE, within 10% of them with
    DSP (M4, M33: SMLAD on both sides, its scalar gates); at a16w8 fewer
    than CMSIS-NN's with DSP (the same SMLAD loops), more with MVE."""
    model, example = zoo.make_lstm_kws()
    c = _compile(model, example, board, tmp_path, quant, zoo.calibration("lstm_kws", CALIBRATION),
                 recurrent_weights="per-gate")
    assert not next(op for op in c.graph.ops if op.code.startswith("LSTM")).params[1]["may_saturate"]
    inputs = [np.stack([s[0].numpy() for s in zoo.calibration("lstm_kws", 2, seed=1)])]
    counts = {}
    for kernels in ("portable", "cmsis-nn"):
        build_firmware(tmp_path, kernels=kernels)
        _run_checked(tmp_path, inputs)
        counts[kernels] = runner.run(tmp_path, inputs, sim="qemu").inference_instructions()
    if quant == "a16w8" and board == "mps3-an547":
        assert counts["cmsis-nn"] < counts["portable"], counts
    elif quant == "a16w8":
        assert counts["portable"] < counts["cmsis-nn"], counts
    else:
        assert counts["portable"] < (0.75 if board == "mps3-an547" else 1.1) * counts["cmsis-nn"], counts


# The default int8 build slower than the CMSIS-NN build (per-gate weights, arm_lstm_unidirectional_s8),
# measured with the recurrent fast paths (kernels/fast/recurrent): on the M4 both sides run SMLAD and
# CMSIS-NN's scalar gates are a little shorter; the GRU's MVE path is within 1% of CMSIS-NN's.
SLOWER_THAN_CMSIS_NN: dict[tuple[str, str], str] = {
    ("lstm_kws", "mps2-an386"): "#27 item 2: the M4 LSTM fast path takes 1.01x CMSIS-NN's instructions",
    ("gru_kws", "mps3-an547"): "#27 item 2: the M55 GRU fast path takes 1.01x CMSIS-NN's instructions",
}


@needs_cmsis_nn
@pytest.mark.parametrize("name,board", known_slow([(m, b) for m in zoo.MODELS for b in BOARDS],
                                                  SLOWER_THAN_CMSIS_NN, "recurrent"))
def test_zoo_default_not_slower_than_cmsis_nn(name, board, tmp_path):
    """The default int8 program's instructions (test_zoo_model's, on this
    worker; compiled, built and checked here when run alone) against the
    per-gate program built with --kernels cmsis-nn, checked too."""
    model, example = zoo.MODELS[name]()
    calib = zoo.calibration(name, CALIBRATION)
    inputs = [np.stack([s[0].numpy() for s in zoo.calibration(name, HELD_OUT, seed=1)])]
    if (name, board) not in INT8_INSTRUCTIONS:
        _compile(model, example, board, tmp_path / "default", "int8", calib)
        build_firmware(tmp_path / "default")
        INT8_INSTRUCTIONS[(name, board)] = run_checked(tmp_path / "default", inputs, 900)[0].inference_instructions()
    _compile(model, example, board, tmp_path / "per-gate", "int8", calib, recurrent_weights="per-gate")
    assert_not_slower(f"{name} int8 {board} (CMSIS-NN: per-gate weights)", INT8_INSTRUCTIONS[(name, board)],
                      cmsis_nn_instructions(tmp_path / "per-gate", inputs))
