"""The convolutional and attention models of the sequence zoo
(examples/sequence_zoo.py) in QEMU: a dilated causal TCN keyword spotter,
torchaudio's Conformer, nn.TransformerEncoder (post- and pre-norm) and a
keyword-transformer-style tiny ViT, with seeded random weights.

Each model is compiled at float32, int8 and a16w8 (quantized once, for both
boards) for the Cortex-M55 (mps3-an547) and the Cortex-M4 (mps2-an386), built
with the portable kernels and run in QEMU: bit for bit with the reference at
int8 and a16w8 (no float fallback), within the float tolerance
(runner.expected) at float32. Each board prints a line `zoo: ...` with the
figures (instructions are QEMU -icount instructions, not cycles; flash is the
program's bytes; RAM the planned activations, the state if any) and, for the
integer programs, the SQNR of the firmware's outputs against the float
model's beside PyTorch's own (q/dq) model's: the firmware must lose no more
than 1 dB beyond it.

With TORCHMCU_CMSIS_NN_DIR set, each int8 program of those runs is built
again with `--kernels cmsis-nn`, run and checked: the default build must
take no more instructions; the models whose attention has no fast path yet
are strict expected failures.

Slow (a firmware build per case): behind the `zoo` marker, run with
`pytest -m zoo tests/test_zoo_sequence.py -s`.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from _zoo import assert_not_slower, cmsis_nn_instructions, figures, known_slow, needs_cmsis_nn, sqnr_db
from conftest import REPO, needs_arm_gcc, needs_qemu
from torchmcu.builder.firmware import build_firmware
from torchmcu.compiler import compile
from torchmcu.frontend.quantize import quantize
from torchmcu.sim import runner

sys.path.insert(0, str(REPO / "examples"))
import sequence_zoo as zoo

pytestmark = [pytest.mark.zoo, needs_qemu, needs_arm_gcc]

BOARDS = ["mps3-an547", "mps2-an386"]
QUANTS = ["float32", "int8", "a16w8"]
CALIBRATION, HELD_OUT = 8, 2
# (name, board) -> an int8 build's directory, its inputs and instructions per inference (this worker's)
INT8_BUILDS: dict[tuple[str, str], tuple[Path, list[np.ndarray], int]] = {}

# The integer op codes each model must run on (no float op at int8 / a16w8): what makes it that model.
SIGNATURE = {
    "tcn_kws": {"CONV2D", "ADD", "MEAN", "LINEAR"},
    "conformer": {"LAYER_NORM", "BATCH_MATMUL", "SOFTMAX", "GLU", "DEPTHWISE_CONV2D", "LUT"},
    "transformer_post": {"LAYER_NORM", "BATCH_MATMUL", "SOFTMAX", "LINEAR"},
    "transformer_pre": {"LAYER_NORM", "BATCH_MATMUL", "SOFTMAX", "LINEAR"},
    "kwt": {"CONCAT", "LAYER_NORM", "BATCH_MATMUL", "SOFTMAX"},
}


@pytest.fixture(autouse=True)
def _only_when_asked(request):
    if "zoo" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("the sequence zoo runs with -m zoo")


def _program(name: str, quant: str, model: torch.nn.Module, example: tuple) -> torch.nn.Module:
    """The float model, or its q/dq graph quantized once for both boards
    (PyTorch's own int8 / a16w8 model: the SQNR's yardstick)."""
    if quant == "float32":
        return model
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (torchao's deprecation notices)
        return quantize(model, example, zoo.calibration(name, CALIBRATION), progress=False,
                        weights="int8", activations="int16" if quant == "a16w8" else "int8")


@pytest.mark.parametrize("quant", QUANTS)
@pytest.mark.parametrize("name", [pytest.param(m, marks=pytest.mark.xdist_group(f"sequence_{m}")) for m in zoo.MODELS])
def test_zoo_model(name: str, quant: str, tmp_path: Path) -> None:
    """Both boards in one test: they share the model and its quantized graph."""
    model, example = zoo.MODELS[name]()
    program = _program(name, quant, model, example)
    held = zoo.calibration(name, HELD_OUT, seed=1)
    with torch.no_grad():
        ref = np.stack([model(*s).numpy() for s in held])
        qdq = None if quant == "float32" else np.stack([program(*s).numpy() for s in held])
    for board in BOARDS:
        _on_board(name, quant, board, program, held, ref, qdq, tmp_path / board)


def _on_board(name: str, quant: str, board: str, program: torch.nn.Module, held: list, ref: np.ndarray,
              qdq: np.ndarray | None, out: Path) -> None:
    example = held[0]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        c = compile(program, example, board, out, quant=quant, progress=False)
    fallbacks = [str(w.message) for w in seen if str(w.message).startswith("torchmcu")]
    assert not fallbacks, f"{board}: {fallbacks}"
    codes = {op.code for op in c.graph.ops}
    if quant != "float32":
        suffix = "_S16" if quant == "a16w8" else "_S8"
        assert not any(code.endswith("_F32") for code in codes), codes
        # (CONCAT moves bytes: no suffix)
        assert {k if k == "CONCAT" else k + suffix for k in SIGNATURE[name]} <= codes, codes
    build_firmware(out)
    xs = [np.stack([s[0].numpy() for s in held])]
    res = runner.run(out, xs, sim="qemu", timeout_s=900)
    assert res.exit_code == 0, f"{board}: " + res.raw[-3000:]
    samples = runner.split_samples(runner.load_meta(out), xs)
    expected, tol = runner.expected(out, samples)
    assert (tol is None) == (quant != "float32")  # bit for bit at int8 and a16w8
    mismatch, worst = runner.compare(res.outputs, expected, tol)
    assert mismatch is None, f"{board}: {mismatch} (max abs error {worst})"
    line = figures(c.report, res.inference_instructions())
    if quant == "int8":
        INT8_BUILDS[(name, board)] = (out, xs, res.inference_instructions())
    if qdq is None:
        print(f"\nzoo: {name} {quant} {board}: {line}, max |fw - float64| {worst:.3g}")
        return
    db, db_torch = sqnr_db(res.outputs[0].reshape(ref.shape), ref), sqnr_db(qdq, ref)
    # PyTorch's own q/dq model against the float model: what the quantization scheme loses on this
    # random-weight network; the firmware must lose no more than it (1 dB of slack for rounding).
    print(f"\nzoo: {name} {quant} {board}: {line}, SQNR vs float {db:.1f} dB (PyTorch's {quant}: {db_torch:.1f} dB)")
    assert db > 0 and db >= db_torch - 1.0, f"{name} {board}: {quant} SQNR {db:.1f} dB, PyTorch's {db_torch:.1f} dB"


# The default int8 build slower than the CMSIS-NN build, measured (default/cmsis-nn instructions): none
# since the attention fast paths (kernels/fast/attention_norm, kernels/fast/reduce).
SLOWER_THAN_CMSIS_NN: dict[tuple[str, str], str] = {}


@needs_cmsis_nn
@pytest.mark.parametrize("name,board", known_slow([(m, b) for m in zoo.MODELS for b in BOARDS],
                                                  SLOWER_THAN_CMSIS_NN, "sequence"))
def test_zoo_default_not_slower_than_cmsis_nn(name: str, board: str, tmp_path: Path) -> None:
    """The int8 program of test_zoo_model (its build directory, on this
    worker; compiled and checked here when run alone) built with --kernels
    cmsis-nn."""
    if (name, board) not in INT8_BUILDS:
        model, example = zoo.MODELS[name]()
        held = zoo.calibration(name, HELD_OUT, seed=1)
        with torch.no_grad():
            ref = np.stack([model(*s).numpy() for s in held])
        program = _program(name, "int8", model, example)
        with torch.no_grad():
            qdq = np.stack([program(*s).numpy() for s in held])
        _on_board(name, "int8", board, program, held, ref, qdq, tmp_path / board)
    out, xs, default = INT8_BUILDS[(name, board)]
    assert_not_slower(f"{name} int8 {board}", default, cmsis_nn_instructions(out, xs))
