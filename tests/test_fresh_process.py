"""Programs compiled, built and checked as users run them: `compile`, `build`
and `run --check` as separate processes. The int8 attention case failed this
way (issue #26): model.pt2 holds torchmcu::attention_softmax, which was
registered with torch only in a process that had imported the compiler's
attention module, so `run --check` in a fresh process could not load it."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import REPO, needs_arm_gcc, needs_qemu

MODELS = '''
import torch
from torch import nn


class SelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.att = nn.MultiheadAttention(16, 2, batch_first=True)

    def forward(self, x):
        return self.att(x, x, x, need_weights=False)[0]


def mha():
    torch.manual_seed(0)
    return SelfAttention(), (torch.randn(1, 6, 16),)


def encoder_layer():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0, batch_first=True)
    return layer, (torch.randn(1, 6, 16),)
'''


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "torchmcu.cli", *args], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"}, check=False)


@needs_qemu
@needs_arm_gcc
@pytest.mark.parametrize("model,quant", [("mha", "int8"), pytest.param("encoder_layer", "int8", marks=pytest.mark.zoo),
                                         pytest.param("mha", "a16w8", marks=pytest.mark.zoo)])
def test_attention_checks_in_a_fresh_process(tmp_path, model, quant) -> None:
    (tmp_path / "models.py").write_text(MODELS)
    np.save(tmp_path / "cal.npy", np.random.default_rng(0).standard_normal((8, 1, 6, 16)).astype(np.float32))
    out = tmp_path / "out"
    for args in (["compile", f"{tmp_path / 'models.py'}:{model}", "--board", "mps3-an547", "-o", str(out),
                  "--quant", quant, "--calibration", str(tmp_path / "cal.npy")],
                 ["build", str(out)],
                 ["run", str(out), "--sim", "qemu", "--check"]):
        proc = cli(*args)
        assert proc.returncode == 0, f"{args[0]}: {proc.stderr[-2000:]}"
    assert "attention_softmax" in (out / "model.pt2").read_bytes().decode("latin-1")  # the custom op was saved
    assert "passed" in proc.stdout
