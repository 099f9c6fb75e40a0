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


# One small model per op family (aot/torchmcu/ops/), each compiled, built and
# checked in separate processes at int8: whatever a saved program needs to
# load (model.pt2's ops, model.json, the float model) must come from
# `import torchmcu` alone. `every_family` holds them all in one program (in
# make test); the per-family ones run in the zoo.
FAMILIES = '''
import torch
import torch.nn.functional as F
from torch import nn


class Conv(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 8, 3, padding=1)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.t = nn.ConvTranspose2d(8, 4, 2, stride=2)
        self.fc = nn.Linear(4 * 32 * 32, 5)

    def forward(self, x):
        return self.fc(self.t(self.dw(F.relu(self.c(x)))).flatten(1))


class PoolResize(nn.Module):
    def forward(self, x):
        y = F.max_pool2d(x, 2) + F.avg_pool2d(x, 2)
        return F.interpolate(F.adaptive_avg_pool2d(y, 2), scale_factor=2, mode="nearest")


class Elementwise(nn.Module):
    def forward(self, x):
        return (x * 0.5 + x.mean(dim=1, keepdim=True)) - torch.maximum(x, torch.zeros_like(x)) / 3


class Reduce(nn.Module):
    def forward(self, x):
        return torch.cat([x.mean(dim=(2, 3)), F.adaptive_avg_pool2d(x, 1).flatten(1), F.log_softmax(x.mean(dim=1).flatten(1), dim=1)[:, :3]], dim=1)


class ShapeViews(nn.Module):
    def forward(self, x):
        y = x.permute(0, 2, 3, 1).reshape(1, -1, 3)
        return torch.cat([y[:, ::2], F.pad(y, (0, 0, 1, 1))[:, :128]], dim=1).transpose(1, 2)


class Activations(nn.Module):
    def forward(self, x):
        return torch.sigmoid(x) + torch.tanh(x) * F.gelu(x) - F.hardswish(x) + F.softmax(x, dim=-1)


class AttentionNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(16)
        self.att = nn.MultiheadAttention(16, 2, batch_first=True)
        self.gn = nn.GroupNorm(3, 3)

    def forward(self, x):
        s = self.gn(x).flatten(2)[:, :, :96].reshape(1, 18, 16)
        y = self.ln(s)
        return self.att(y, y, y, need_weights=False)[0]


class Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(16, 12, batch_first=True)
        self.gru = nn.GRU(12, 8, batch_first=True)

    def forward(self, x):
        s = x.flatten(2)[:, :, :96].reshape(1, 18, 16)
        return self.gru(self.lstm(s)[0])[0]


class Every(nn.Module):
    def __init__(self):
        super().__init__()
        self.parts = nn.ModuleList([Conv(), PoolResize(), Elementwise(), Reduce(), ShapeViews(), Activations(),
                                    AttentionNorm(), Recurrent()])

    def forward(self, x):
        return tuple(p(x) for p in self.parts)


def _make(cls):
    torch.manual_seed(0)
    return cls().eval(), (torch.randn(1, 3, 16, 16),)


def conv(): return _make(Conv)
def pool_resize(): return _make(PoolResize)
def elementwise(): return _make(Elementwise)
def reduce(): return _make(Reduce)
def shape_views(): return _make(ShapeViews)
def activations(): return _make(Activations)
def attention_norm(): return _make(AttentionNorm)
def recurrent(): return _make(Recurrent)
def every_family(): return _make(Every)
'''


@needs_qemu
@needs_arm_gcc
@pytest.mark.parametrize("family", ["every_family"] + [
    pytest.param(f, marks=pytest.mark.zoo) for f in ("conv", "pool_resize", "elementwise", "reduce", "shape_views",
                                                     "activations", "attention_norm", "recurrent")])
def test_every_op_family_checks_in_a_fresh_process(tmp_path, family) -> None:
    (tmp_path / "families.py").write_text(FAMILIES)
    np.save(tmp_path / "cal.npy", np.random.default_rng(0).standard_normal((8, 1, 3, 16, 16)).astype(np.float32))
    out = tmp_path / "out"
    for args in (["compile", f"{tmp_path / 'families.py'}:{family}", "--board", "mps3-an547", "-o", str(out),
                  "--quant", "int8", "--calibration", str(tmp_path / "cal.npy")],
                 ["build", str(out)],
                 ["run", str(out), "--sim", "qemu", "--check"]):
        proc = cli(*args)
        assert proc.returncode == 0, f"{args[0]}: {proc.stderr[-2000:]}"
    assert "check against torchmcu (bit for bit): passed" in proc.stdout, proc.stdout[-2000:]
