"""Replicate and reflect padding (F.pad modes; #26 item 4), as slices of the
edges and a concat: float32 and int8, on the host runner (sanitizers on),
compiled and checked as users run them (separate processes); reflect beyond
what it builds (256 per side) is refused in one line."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import REPO

MODELS = '''
import torch
import torch.nn.functional as F
from torch import nn


class Padded(nn.Module):
    def __init__(self, conv, pad, mode):
        super().__init__()
        self.conv, self.pad, self.mode = conv, pad, mode

    def forward(self, x):
        return F.pad(self.conv(x), self.pad, mode=self.mode)


def reflect_1d():  # a 1-D signal padded as an STFT front end pads it
    torch.manual_seed(0)
    return Padded(nn.Conv1d(3, 4, 3), (3, 2), "reflect"), (torch.randn(1, 3, 12),)


def replicate_2d():
    torch.manual_seed(0)
    return Padded(nn.Conv2d(2, 3, 1), (1, 4, 2, 1), "replicate"), (torch.randn(1, 2, 5, 6),)


def reflect_wide():  # wider than one cat of one-element slices: a tree of cats per side (silero-vad's 64)
    torch.manual_seed(0)
    return Padded(nn.Conv1d(2, 3, 3), (9, 20), "reflect"), (torch.randn(1, 2, 26),)


def reflect_too_wide():
    return Padded(nn.Conv1d(1, 1, 1), (300, 5), "reflect"), (torch.randn(1, 1, 400),)
'''


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "torchmcu.cli", *args], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"}, check=False)


@pytest.mark.parametrize("quant", ["float32", "int8"])
@pytest.mark.parametrize("model", ["reflect_1d", "replicate_2d", "reflect_wide"])
def test_padding_modes_on_the_host(tmp_path, model, quant) -> None:
    (tmp_path / "models.py").write_text(MODELS)
    shape = {"reflect_1d": (1, 3, 12), "replicate_2d": (1, 2, 5, 6), "reflect_wide": (1, 2, 26)}[model]
    np.save(tmp_path / "cal.npy", np.random.default_rng(0).standard_normal((8, *shape)).astype(np.float32))
    out = tmp_path / "out"
    extra = [] if quant == "float32" else ["--quant", quant, "--calibration", str(tmp_path / "cal.npy")]
    proc = cli("compile", f"{tmp_path / 'models.py'}:{model}", "--board", "mps3-an547", "-o", str(out), *extra)
    assert proc.returncode == 0, proc.stderr
    assert "CONCAT" in (out / "kernels.txt").read_text().split()
    proc = cli("run", str(out), "--sim", "host", "--check")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_reflect_wider_than_it_builds_is_one_line(tmp_path) -> None:
    (tmp_path / "models.py").write_text(MODELS)
    proc = cli("compile", f"{tmp_path / 'models.py'}:reflect_too_wide", "--board", "mps3-an547",
               "-o", str(tmp_path / "o"))
    assert proc.returncode == 2
    assert "reflect padding of 300 along a dim of 400: at most 256" in proc.stderr
    assert "Traceback" not in proc.stderr
