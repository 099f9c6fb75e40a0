"""Ops real models still missed (#26 item 4): masked_fill (a constant mask,
one a comparison computes, a bool input) and torch.where with a scalar;
integer and bool model inputs (token ids into nn.Embedding, a length made
into an attention mask with arange < length); clamp with tensor bounds;
in-place activations (on a slice, a select, a model input); grouped
transposed convolution. Compiled, built and checked as users run them
(compile, build, run --check as separate processes): one precision per op in
QEMU in make test, the others in make zoo, and every (model, precision) on
the host runner (sanitizers on) in make zoo; the NumPy twins against PyTorch
on the host."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from conftest import REPO, needs_arm_gcc, needs_qemu
from torchmcu.reference import elementwise as rew
from torchmcu.reference import shape_views as rsv

MODELS = '''
import torch
import torch.nn.functional as F
from torch import nn


class MaskedFill(nn.Module):
    """masked_fill by a constant mask, by a comparison, and torch.where with a scalar."""
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.register_buffer("mask", torch.tensor([True, False, False, True, False, True, False, False]))

    def forward(self, x):
        y = self.fc(x)
        return y.masked_fill(self.mask, -1.5) + torch.where(x > 0.3, 0.25, y).masked_fill(y <= -0.5, 0.0)


def masked_fill():
    torch.manual_seed(0)
    return MaskedFill(), (torch.randn(2, 8),)


class MaskInput(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x, keep):
        return self.fc(x).masked_fill(~keep, 2.0)


def mask_input():
    torch.manual_seed(0)
    return MaskInput(), (torch.randn(2, 8), torch.rand(2, 8) > 0.5)


class Tokens(nn.Module):
    """Token ids into an embedding; a length into a key mask (arange < length)."""
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 16)
        self.q = nn.Linear(16, 16)
        self.out = nn.Linear(16, 4)

    def forward(self, ids, length):
        x = self.emb(ids)
        keep = torch.arange(6) < length
        return self.out(F.scaled_dot_product_attention(self.q(x), x, x, attn_mask=keep))


def tokens():
    torch.manual_seed(0)
    return Tokens(), (torch.tensor([[1, 5, 7, 19, 0, 3]]), torch.tensor([4]))


class Embed(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.fc = nn.Linear(8, 4)

    def forward(self, ids):
        return self.fc(self.emb(ids))


def embed():
    torch.manual_seed(0)
    return Embed(), (torch.tensor([[1, 5, 7, 19, 0]]),)


class KeyPadding(nn.Module):
    def __init__(self):
        super().__init__()
        self.att = nn.MultiheadAttention(16, 2, batch_first=True)

    def forward(self, x, length):
        pad = torch.arange(6).unsqueeze(0) >= length.unsqueeze(1)
        return self.att(x, x, x, key_padding_mask=pad, need_weights=False)[0]


def key_padding():
    torch.manual_seed(0)
    return KeyPadding(), (torch.randn(1, 6, 16), torch.tensor([4]))


class Clamp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.register_buffer("lo", torch.linspace(-1, 0, 8))

    def forward(self, x):
        y = self.fc(x)
        return torch.clamp(y, self.lo, -x) + y.clamp_min(self.lo) + y.clamp_max(x)


def clamp():
    torch.manual_seed(0)
    return Clamp(), (torch.randn(2, 8),)


class InPlace(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(3, 4, 3)

    def forward(self, x):
        x.tanh_()
        y = self.conv(x)
        y[:, 1].sigmoid_()
        y[:, :, 2:5].relu_()
        F.hardtanh_(y[:, 2:], -0.5, 0.5)
        return y


def in_place():
    torch.manual_seed(0)
    return InPlace(), (torch.randn(1, 3, 10),)


class GroupedTransposed(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.ConvTranspose1d(4, 6, 3, stride=2, groups=2)
        self.c2 = nn.ConvTranspose2d(4, 8, 3, stride=2, padding=1, output_padding=1, groups=4)

    def forward(self, x, y):
        return self.c1(x), self.c2(y)


def grouped_transposed():
    torch.manual_seed(0)
    return GroupedTransposed(), (torch.randn(1, 4, 7), torch.randn(1, 4, 5, 5))


class TwoTensorWhere(nn.Module):
    def forward(self, x):
        return torch.where(x > 0, x, -x * 2)


def two_tensor_where():
    return TwoTensorWhere(), (torch.randn(2, 8),)
'''

# name: (calibration inputs (random: float, ids below 20, lengths 1..6, bools), kernels its programs hold)
CASES = {
    "masked_fill": ("f", {"MASKED_FILL", "COMPARE"}),
    "mask_input": ("fb", {"MASKED_FILL", "COMPARE"}),
    "tokens": ("il", {"GATHER", "COMPARE", "ATTENTION_MASK"}),
    "embed": ("i", {"GATHER"}),
    "key_padding": ("fl", {"COMPARE", "ATTENTION_MASK"}),
    "clamp": ("f", {"MAXIMUM", "MINIMUM"}),
    "in_place": ("f", {"CONCAT"}),
    "grouped_transposed": ("ff", {"TRANSPOSE_CONV2D"}),
}
SHAPES = {"masked_fill": [(2, 8)], "mask_input": [(2, 8), (2, 8)], "tokens": [(1, 6), (1,)], "embed": [(1, 5)],
          "key_padding": [(1, 6, 16), (1,)], "clamp": [(2, 8)], "in_place": [(1, 3, 10)],
          "grouped_transposed": [(1, 4, 7), (1, 4, 5, 5)]}
FLOAT_ONLY: set[str] = set()  # (every case runs at the three precisions)


def calibration(name: str, n: int = 8) -> dict[str, np.ndarray]:
    g = np.random.default_rng(0)
    arrays = {}
    for k, (kind, shape) in enumerate(zip(CASES[name][0], SHAPES[name])):
        full = (n, *shape)
        arrays[f"in{k}"] = (g.standard_normal(full).astype(np.float32) if kind == "f" else
                            g.integers(0, 20, full) if kind == "i" else g.integers(1, 7, full) if kind == "l" else
                            g.random(full) > 0.5)
    return arrays


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "torchmcu.cli", *args], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"}, check=False)


def compile_case(tmp_path, name: str, quant: str):
    (tmp_path / "models.py").write_text(MODELS)
    np.savez(tmp_path / "cal.npz", **calibration(name))
    out = tmp_path / "out"
    extra = [] if quant == "float32" else ["--quant", quant, "--calibration", str(tmp_path / "cal.npz")]
    proc = cli("compile", f"{tmp_path / 'models.py'}:{name}", "--board", "mps3-an547", "-o", str(out), *extra)
    assert proc.returncode == 0, proc.stderr[-2000:]
    kernels = set((out / "kernels.txt").read_text().split())
    # a mask computed from the inputs: -inf filled in float; the integer softmax's mask operand
    mask = "MASKED_FILL" if quant == "float32" else "SOFTMAX_MASKED"
    for want in (mask if w == "ATTENTION_MASK" else w for w in CASES[name][1]):
        assert any(k == want or k.startswith(want + "_") for k in kernels), (want, kernels)
    return out


# In make test: one precision per op in QEMU; the rest in make zoo.
QEMU = [("masked_fill", "int8"), ("tokens", "float32"), ("clamp", "int8"), ("in_place", "int8"),
        ("grouped_transposed", "a16w8")]
QEMU_ZOO = [(n, q) for n in CASES for q in ("float32", "int8", "a16w8")
            if (n, q) not in QEMU and (q == "float32" or n not in FLOAT_ONLY)]


@needs_qemu
@needs_arm_gcc
@pytest.mark.parametrize("name,quant", QEMU + [pytest.param(n, q, marks=pytest.mark.zoo) for n, q in QEMU_ZOO])
def test_in_qemu_as_users_run_it(tmp_path, name: str, quant: str) -> None:
    out = compile_case(tmp_path, name, quant)
    for args in (["build", str(out)], ["run", str(out), "--sim", "qemu", "--check"]):
        proc = cli(*args)
        assert proc.returncode == 0, f"{args[0]}: {proc.stdout[-1500:]} {proc.stderr[-2000:]}"
    assert "passed" in proc.stdout
    if quant != "float32":
        assert "check against torchmcu (bit for bit): passed" in proc.stdout


HOST = [(n, q) for n in CASES for q in ("float32", "int8", "a16w8") if q == "float32" or n not in FLOAT_ONLY]


@pytest.mark.zoo
@pytest.mark.parametrize("name,quant", HOST)
def test_on_the_host_runner(tmp_path, name: str, quant: str) -> None:
    out = compile_case(tmp_path, name, quant)
    proc = cli("run", str(out), "--sim", "host", "--check")
    assert proc.returncode == 0, proc.stdout[-1500:] + proc.stderr[-2000:]


def test_integer_inputs_are_int32_in_the_c_api(tmp_path) -> None:
    out = compile_case(tmp_path, "embed", "int8")
    header = (out / "model.h").read_text()
    assert "int32" in header and "PyTorch's int64 or bool input given as int32" in header, header[:3000]


def test_two_tensor_where_is_one_line(tmp_path) -> None:
    (tmp_path / "models.py").write_text(MODELS)
    proc = cli("compile", f"{tmp_path / 'models.py'}:two_tensor_where", "--board", "mps3-an547", "-o",
               str(tmp_path / "o"))
    assert proc.returncode == 2, proc.stderr
    assert "torch.where of two tensors is not supported" in proc.stderr
    assert "Traceback" not in proc.stderr


# -- the NumPy twins against PyTorch -------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.int16])
def test_masked_fill_twin(dtype) -> None:
    g = np.random.default_rng(1)
    x = (g.standard_normal((2, 3, 5)) * 50).astype(dtype)
    mask = g.random((3, 1)) > 0.5
    got = rew.OPS["MASKED_FILL"]([x, mask.astype(np.uint8)], {"value": -2.5, "qvalue": -7}, [])
    value = -2.5 if dtype == np.float32 else -7
    exp = torch.from_numpy(x).masked_fill(torch.from_numpy(mask), value).numpy()
    assert got.dtype == x.dtype and np.array_equal(got, exp)


@pytest.mark.parametrize("op", list(range(6)))
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8])
def test_compare_twin(op: int, dtype) -> None:
    g = np.random.default_rng(op)
    a = g.integers(0, 4, (3, 4)).astype(dtype)
    b = g.integers(0, 4, (1, 4)).astype(dtype)
    got = rew.OPS["COMPARE"]([a, b], {"op": op}, [])
    ta, tb = torch.from_numpy(a.astype(np.int64)), torch.from_numpy(b.astype(np.int64))
    exp = [torch.lt, torch.le, torch.gt, torch.ge, torch.eq, torch.ne][op](ta, tb).numpy()
    assert got.dtype == np.uint8 and np.array_equal(got, exp.astype(np.uint8))


def test_gather_twin() -> None:
    g = np.random.default_rng(2)
    table = g.standard_normal((20, 8)).astype(np.float32)
    ids = np.asarray([[3, 0, 19], [7, 7, 1]], np.int32)
    got = rsv.OPS["GATHER"]([table, ids], {}, [{"dims": [6, 8]}])
    exp = torch.nn.functional.embedding(torch.from_numpy(ids.astype(np.int64)), torch.from_numpy(table)).numpy()
    assert np.array_equal(got.reshape(exp.shape), exp)
    bad = rsv.OPS["GATHER"]([table, np.asarray([-1, 20, 2], np.int32)], {}, [{"dims": [3, 8]}])
    assert not bad[:2].any() and np.array_equal(bad[2], table[2])  # ids outside the table: zeros
