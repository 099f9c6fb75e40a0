"""Recurrent models of the sequence zoo, with seeded random weights.

    model             input         layers                                         MACs per inference
    lstm_kws          [1, 49, 10]   LSTM(10, 64), linear on h_n -> 12              1,171,520
    lstm_2layer       [1, 49, 10]   LSTM(10, 64, 2 layers), linear per frame,     2,447,872
                                    mean over time -> 12
    gru_kws           [1, 49, 10]   GRU(10, 64), linear on h_n -> 12                 878,976
    rnnt_encoder      [1, 32, 40]   LSTM(40, 64); time reduction x2 (two frames    1,449,984
                                    stacked); LSTM(128, 64, 2 layers); linear
                                    per frame -> 32
    lstm_kws_stream   [1, 1, 10]    lstm_kws's layers with a linear per frame,        23,936
    (+ h, c state)                  one frame and its state per call

The keyword spotters take 49 frames of 10 MFCC (1 s of audio, 20 ms hops),
as MLPerf Tiny's DS-CNN; the RNN-T-style encoder is the shape of a
streaming transducer's (stacked LSTMs, a time-reduction layer halving the
frame rate) scaled to fit a Cortex-M's RAM. `lstm_kws_sequence` is the
whole-sequence model `lstm_kws_stream` runs frame by frame (per-frame
logits [1, 49, 12]): compiled with compile(..., state=2) and calibrated
with torchmcu.frontend.streaming.stream_calibration on the same sequences,
the streaming program fed one frame per invocation gives its outputs bit
for bit at int8 (tests/test_zoo_recurrent.py).

Usage: `torchmcu compile examples/recurrent_zoo.py:make_lstm_kws --board mps3-an547 ...`
(`make_*` return (model, example_inputs)); `calibration(name, n)` gives seeded
calibration samples shaped as the model's inputs.
"""

from __future__ import annotations

import torch
from torch import nn

FRAMES, MFCC, CLASSES, HIDDEN = 49, 10, 12, 64


class LstmKws(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(MFCC, HIDDEN, batch_first=True)
        self.fc = nn.Linear(HIDDEN, CLASSES)

    def forward(self, x):
        _, (h, _) = self.lstm(x)
        return self.fc(h.squeeze(0))


class Lstm2Layer(nn.Module):
    """Two stacked LSTMs; the classifier reads both layers' final states."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(MFCC, HIDDEN, num_layers=2, batch_first=True)
        self.fc = nn.Linear(2 * HIDDEN, CLASSES)

    def forward(self, x):
        _, (h, _) = self.lstm(x)
        return self.fc(h.permute(1, 0, 2).reshape(x.shape[0], -1))


class GruKws(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gru = nn.GRU(MFCC, HIDDEN, batch_first=True)
        self.fc = nn.Linear(HIDDEN, CLASSES)

    def forward(self, x):
        _, h = self.gru(x)
        return self.fc(h.squeeze(0))


class RnntEncoder(nn.Module):
    """Stacked LSTMs with a time-reduction layer between them (two adjacent
    frames concatenated: half the frame rate, twice the features)."""

    def __init__(self, features: int = 40, hidden: int = 64, out: int = 32) -> None:
        super().__init__()
        self.lower = nn.LSTM(features, hidden, batch_first=True)
        self.upper = nn.LSTM(2 * hidden, hidden, num_layers=2, batch_first=True)
        self.proj = nn.Linear(hidden, out)

    def forward(self, x):
        y, _ = self.lower(x)
        b, t, f = y.shape
        y = y.reshape(b, t // 2, 2 * f)  # time reduction
        y, _ = self.upper(y)
        return self.proj(y)


class LstmKwsSequence(nn.Module):
    """The keyword spotter with logits on every frame: what the streaming
    model computes frame by frame."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(MFCC, HIDDEN, batch_first=True)
        self.fc = nn.Linear(HIDDEN, CLASSES)

    def forward(self, x):
        y, _ = self.lstm(x)
        return self.fc(y)


class LstmKwsStream(nn.Module):
    """LstmKwsSequence's layers, one frame [1, 1, 10] and the state per call."""

    def __init__(self, seq: LstmKwsSequence) -> None:
        super().__init__()
        self.lstm, self.fc = seq.lstm, seq.fc

    def forward(self, x, h, c):
        y, (h, c) = self.lstm(x, (h, c))
        return self.fc(y), h, c


def _seeded(model: nn.Module, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    for p in model.parameters():  # PyTorch's default init, reseeded per model
        nn.init.uniform_(p, -1.0 / HIDDEN ** 0.5 * 1.5, 1.0 / HIDDEN ** 0.5 * 1.5)
    return model.eval()


def make_lstm_kws():
    return _seeded(LstmKws(), 1), (torch.randn(1, FRAMES, MFCC),)


def make_lstm_2layer():
    return _seeded(Lstm2Layer(), 2), (torch.randn(1, FRAMES, MFCC),)


def make_gru_kws():
    return _seeded(GruKws(), 3), (torch.randn(1, FRAMES, MFCC),)


def make_rnnt_encoder():
    return _seeded(RnntEncoder(), 4), (torch.randn(1, 32, 40),)


def make_lstm_kws_sequence():
    return _seeded(LstmKwsSequence(), 5), (torch.randn(1, FRAMES, MFCC),)


def make_lstm_kws_stream():
    seq, _ = make_lstm_kws_sequence()
    state = (torch.zeros(1, 1, HIDDEN), torch.zeros(1, 1, HIDDEN))
    return LstmKwsStream(seq).eval(), (torch.randn(1, 1, MFCC), *state)


MODELS = {"lstm_kws": make_lstm_kws, "lstm_2layer": make_lstm_2layer, "gru_kws": make_gru_kws,
          "rnnt_encoder": make_rnnt_encoder}


def calibration(name: str, n: int, seed: int = 0) -> list[tuple[torch.Tensor, ...]]:
    """n seeded samples shaped as model `name`'s inputs (standard normal:
    MFCCs normalised per coefficient)."""
    _, example = MODELS[name]() if name in MODELS else make_lstm_kws_sequence()
    g = torch.Generator().manual_seed(1000 + seed)
    return [tuple(torch.randn(*x.shape, generator=g) for x in example) for _ in range(n)]


if __name__ == "__main__":
    for name, make in MODELS.items():
        model, example = make()
        print(f"{name:14s} {list(example[0].shape)}  params {sum(p.numel() for p in model.parameters()):,}")
