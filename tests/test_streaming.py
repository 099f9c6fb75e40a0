"""Streaming (stateful) inference: compile(..., state=N) keeps a model's
state in a persistent arena (aot/torchmcu/plan/state.py).

A streaming model (`forward(x_frame, h, c) -> (y, h, c)`) fed one frame per
invocation must give what the whole-sequence model gives: within the float
tolerance at float32, bit for bit at int8 (both programs quantized from the
same sequences, the streaming one's calibration made frame by frame by
frontend/streaming.py). The state lives apart from the activations, starts
at zero when the method loads (init copies), and loading again resets it.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from torchmcu.compiler import compile
from torchmcu.errors import CompileError
from torchmcu.frontend.streaming import stream_calibration
from torchmcu.program import schema
from torchmcu.program.interpret import Interpreter, run_reference
from torchmcu.sim import runner

BOARD = "mps3-an547"
T, FEATURES, HIDDEN = 12, 6, 16


class Sequence(nn.Module):
    """A recurrent layer and a per-frame linear head over the whole sequence."""

    def __init__(self, kind: str = "lstm") -> None:
        super().__init__()
        cls = {"lstm": nn.LSTM, "gru": nn.GRU}[kind]
        self.rnn, self.fc = cls(FEATURES, HIDDEN, batch_first=True), nn.Linear(HIDDEN, 5)

    def forward(self, x):
        return self.fc(self.rnn(x)[0])


class LstmStream(nn.Module):
    """The same layers, one frame and its state per call."""

    def __init__(self, seq: Sequence) -> None:
        super().__init__()
        self.rnn, self.fc = seq.rnn, seq.fc

    def forward(self, x, h, c):
        y, (h, c) = self.rnn(x, (h, c))
        return self.fc(y), h, c


class GruStream(nn.Module):
    def __init__(self, seq: Sequence) -> None:
        super().__init__()
        self.rnn, self.fc = seq.rnn, seq.fc

    def forward(self, x, h):
        y, h = self.rnn(x, h)
        return self.fc(y), h


def _state(kind: str) -> list[torch.Tensor]:
    return [torch.zeros(1, 1, HIDDEN) for _ in range(2 if kind == "lstm" else 1)]


def _frames(x: torch.Tensor) -> np.ndarray:
    """[1, T, F] as T samples of one frame [1, 1, F]."""
    return x.numpy().transpose(1, 0, 2)[:, None]


def _models(kind: str):
    torch.manual_seed(7)
    seq = Sequence(kind).eval()
    return seq, (LstmStream if kind == "lstm" else GruStream)(seq).eval()


def _run(out: Path, frames: np.ndarray, **kw) -> np.ndarray:
    res = runner.run(out, [frames], sim="host", **kw)
    assert res.exit_code == 0, res.raw[-2000:]
    expected, tol = runner.expected(out, runner.split_samples(runner.load_meta(out), [frames]))
    mismatch, worst = runner.compare(res.outputs, expected, tol)
    assert mismatch is None, f"{mismatch} (max abs error {worst})"
    return res.outputs[0]  # samples first


def test_float_stream_is_the_sequence_model(host_runner, tmp_path):
    seq, stream = _models("lstm")
    x = torch.randn(1, T, FEATURES)
    c = compile(stream, (x[:, :1], *_state("lstm")), BOARD, tmp_path, state=2, progress=False)
    got = _run(tmp_path, _frames(x))[:, 0, 0]
    with torch.no_grad():
        np.testing.assert_allclose(got, seq(x)[0].numpy(), rtol=1e-5, atol=1e-5)
    # The state: a persistent arena of its own, out of the model's inputs and outputs.
    meta = json.loads((tmp_path / "model.json").read_text())
    assert [m["name"] for m in meta["inputs"]] == ["x"] and len(meta["outputs"]) == 1
    assert [a.get("persistent", False) for a in meta["arenas"]] == [False, True]
    state = c.report["memory"]["state"]
    assert state["bytes"] == 2 * HIDDEN * 4 and [t["name"] for t in state["tensors"]] == ["h", "c"]
    assert "model state: 128 B in" in (tmp_path / "report.txt").read_text()
    assert ".bss.tmcu_arena_dtcm.state" in (tmp_path / "model_arenas.c").read_text()
    prog = schema.decode(c.pte)
    assert prog["arenas"][-1]["persistent"] and len(prog["init_copies"]) == 2


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_int8_stream_is_the_sequence_program_bit_for_bit(kind, host_runner, tmp_path):
    seq, stream = _models(kind)
    sequences = [torch.randn(1, T, FEATURES) for _ in range(6)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        whole = compile(seq, (sequences[0],), BOARD, tmp_path / "seq", quant="int8",
                        calibration=[(s,) for s in sequences], progress=False)
        calib = stream_calibration(stream, sequences, _state(kind))
        c = compile(stream, calib[0], BOARD, tmp_path / "stream", quant="int8", calibration=calib,
                    state=len(_state(kind)), progress=False)
    # The state is kept as the program computes it: int8 h (and int16 c), no float round trip.
    assert [t["dtype"] for t in c.report["memory"]["state"]["tensors"]] == (["I8", "I16"] if kind == "lstm"
                                                                            else ["I8"])
    assert {op.code for op in c.graph.ops} & {"QUANTIZE_S16", "DEQUANTIZE_S16"} == set()
    for x in (sequences[0], torch.randn(1, T, FEATURES)):  # a calibration sequence and another
        got = _run(tmp_path / "stream", _frames(x))[:, 0, 0]
        want = run_reference(whole.pte, [[x.numpy()]])[0][0, 0]
        np.testing.assert_array_equal(got, want)


def test_loading_again_resets_the_state(host_runner, tmp_path):
    """The reference interpreter keeps the state across runs and a new one
    starts from zero; on the device, the profiled and repeated runs of the
    first sample (which advance the state) are followed by a reload, so the
    outputs are those of a plain run."""
    _, stream = _models("lstm")
    x = torch.randn(1, T, FEATURES)
    c = compile(stream, (x[:, :1], *_state("lstm")), BOARD, tmp_path, state=2, progress=False)
    frames = _frames(x)
    it = Interpreter(c.pte)
    first = [it.run([f])[0] for f in frames[:3]]
    again = Interpreter(c.pte).run([frames[0]])[0]
    np.testing.assert_array_equal(again, first[0])
    assert not np.array_equal(first[1], Interpreter(c.pte).run([frames[1]])[0])  # the state mattered
    plain = _run(tmp_path, frames[:4])
    measured = _run(tmp_path, frames[:4], profile=True, repeat=3)
    np.testing.assert_array_equal(measured, plain)


class Ema(nn.Module):
    """State that is no recurrent layer's: an exponential moving average."""

    def forward(self, x, avg):
        avg = 0.9 * avg + 0.1 * x
        return torch.relu(avg) * 2.0, avg


def test_any_state_is_carried(host_runner, tmp_path):
    x = torch.randn(8, 1, 4)
    compile(Ema(), (x[0], torch.zeros(1, 4)), BOARD, tmp_path, state=[(1, 1)], progress=False)
    got = _run(tmp_path, x.numpy())
    avg, want = torch.zeros(1, 4), []
    for f in x:
        y, avg = Ema()(f, avg)
        want.append(y)
    np.testing.assert_allclose(got, torch.stack(want).numpy(), rtol=1e-5, atol=1e-6)


def test_state_pairs_are_checked(tmp_path):
    _, stream = _models("lstm")
    ex = (torch.randn(1, 1, FEATURES), *_state("lstm"))
    with pytest.raises(CompileError, match="3 inputs"):
        compile(stream, ex, BOARD, tmp_path, state=4, progress=False)
    with pytest.raises(CompileError, match="one shape and type"):
        compile(stream, ex, BOARD, tmp_path, state=[(1, 0)], progress=False)
    with pytest.raises(CompileError, match="one state"):
        compile(stream, ex, BOARD, tmp_path, state=[(1, 1), (2, 1)], progress=False)
