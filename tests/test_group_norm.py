"""GroupNorm (nn.GroupNorm, aten.group_norm), the op added through the op
table (aot/torchmcu/ops/attention_norm.py): float32, int8 and a16w8, in
QEMU, compiled, built and checked as a user runs them (separate processes),
on torchaudio's wav2vec2 feature extractor (GroupNorm with one group per
channel) and a CNN with GroupNorm(4, 8)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from conftest import REPO, needs_arm_gcc, needs_qemu
from torchmcu.reference import attention_norm as ref

MODELS = '''
import torch
from torch import nn


def wav2vec2_features():
    """torchaudio's wav2vec2 feature extractor (conv, GroupNorm(C, C), GELU), two layers."""
    from torchmcu.frontend.compat import import_torchaudio

    import_torchaudio()
    from torchaudio.models.wav2vec2.components import _get_feature_extractor

    torch.manual_seed(0)
    fe = _get_feature_extractor("group_norm", [(16, 10, 5), (16, 3, 2)], bias=False)
    with torch.no_grad():
        norm = fe.conv_layers[0].layer_norm
        norm.weight.uniform_(0.5, 1.5)
        norm.bias.uniform_(-0.5, 0.5)

    class Features(nn.Module):
        def __init__(self):
            super().__init__()
            self.fe = fe

        def forward(self, x):
            return self.fe(x, None)[0]

    return Features(), (torch.randn(1, 400),)


def cnn():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.GroupNorm(4, 8), nn.ReLU(), nn.Conv2d(8, 4, 1))
    with torch.no_grad():
        m[1].weight.uniform_(0.5, 1.5)
        m[1].bias.uniform_(-0.5, 0.5)
    return m, (torch.randn(1, 3, 6, 5),)
'''

SHAPES = {"wav2vec2_features": (1, 400), "cnn": (1, 3, 6, 5)}


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "torchmcu.cli", *args], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"}, check=False)


@needs_qemu
@needs_arm_gcc
@pytest.mark.parametrize("model,quant", [
    ("cnn", "int8"), ("wav2vec2_features", "float32"),
    # the other precisions in `make zoo` (CI runs it too), to keep `make test` short
    *(pytest.param(m, q, marks=pytest.mark.zoo) for m, q in [("cnn", "float32"), ("cnn", "a16w8"),
                                                              ("wav2vec2_features", "int8")])])
def test_group_norm_in_qemu(tmp_path, model, quant) -> None:
    (tmp_path / "models.py").write_text(MODELS)
    rng = np.random.default_rng(2)
    samples = rng.standard_normal((16, *SHAPES[model])).astype(np.float32)
    np.save(tmp_path / "cal.npy", samples)
    np.save(tmp_path / "x.npy", samples[:3])
    out = tmp_path / "out"
    extra = [] if quant == "float32" else ["--quant", quant, "--calibration", str(tmp_path / "cal.npy")]
    proc = cli("compile", f"{tmp_path / 'models.py'}:{model}", "--board", "mps3-an547", "-o", str(out), *extra)
    assert proc.returncode == 0, proc.stderr
    kernels = (out / "kernels.txt").read_text().split()
    want = {"float32": "GROUP_NORM_F32", "int8": "GROUP_NORM_S8", "a16w8": "GROUP_NORM_S16"}[quant]
    assert want in kernels, kernels  # the op runs at its precision, not as a float fallback
    proc = cli("build", str(out))
    assert proc.returncode == 0, proc.stderr
    proc = cli("run", str(out), "--sim", "qemu", "--input", str(tmp_path / "x.npy"), "--check")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_integer_group_norm_is_layer_norm_per_group() -> None:
    """group_norm_q with one group of one position's channels is layer_norm_q
    over them; with G groups, each group is a layer norm of its values."""
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, (2, 5, 12)).astype(np.int8)  # [n, positions, channels]
    gamma = rng.integers(-127, 128, 12).astype(np.int8)
    beta = rng.integers(-2000, 2000, 12).astype(np.int32)
    p = ref.layer_norm_params(0.05, 3, 0.01, 0.02, -4, 5 * 4, 1e-5)
    got = ref.group_norm_q(x, gamma, beta, dict(p, groups=3))
    for g in range(3):
        ch = slice(4 * g, 4 * g + 4)
        rows = x[:, :, ch].reshape(2, 20)
        n = ref.layer_norm_rows(rows, p["input_zero_point"], (p["eps_hi"] << 32) | p["eps_lo"]).reshape(2, 5, 4)
        acc = n * gamma[ch].astype(np.int64) + beta[ch]
        want = np.clip(ref.requantize(acc, p["output_multiplier"], p["output_shift"]) + p["output_zero_point"],
                       -128, 127)
        assert np.array_equal(got[:, :, ch], want)


def test_int8_group_norm_is_close_to_float() -> None:
    """The integer scheme against torch's group norm: within about one output step."""
    rng = np.random.default_rng(1)
    xf = rng.standard_normal((1, 7, 8)).astype(np.float32) * 2
    s_in, zp_in, s_out, zp_out = 4 / 127, 0, 4 / 127, 0
    xq = np.clip(np.round(xf / s_in) + zp_in, -128, 127).astype(np.int8)
    w = rng.uniform(0.5, 1.5, 8).astype(np.float32)
    b = rng.uniform(-0.5, 0.5, 8).astype(np.float32)
    gq, bq, s_gamma = ref.layer_norm_constants(w, b, 8)
    p = dict(ref.layer_norm_params(s_in, zp_in, s_gamma, s_out, zp_out, 7 * 4, 1e-5), groups=2)
    got = (ref.group_norm_q(xq, gq, bq, p).astype(np.float32) - zp_out) * s_out
    xd = (xq.astype(np.float32) - zp_in) * s_in
    want = torch.nn.functional.group_norm(torch.from_numpy(xd).transpose(1, 2), 2, torch.from_numpy(w),
                                          torch.from_numpy(b)).transpose(1, 2).numpy()
    assert np.abs(got - want).max() <= 1.5 * s_out
