"""Capture of ordinary PyTorch (issue 15): in-place ops functionalized,
the curated decompositions, view ops zero-copy where the layout allows and
one SLICE otherwise, reshapes that keep the physical order, constants
made in forward, train mode, and the crashes found from outside. Each
model runs on the host runner (sanitizers on) against the reference: float
within the float tolerance, int8 bit for bit."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from test_ops_host import Fn
from torch import nn
from torchmcu.compiler import compile
from torchmcu.errors import CompileError, TorchMCUError
from torchmcu.frontend.capture import DECOMPOSITIONS
from torchmcu.frontend.compat import import_torchvision
from torchmcu.program import schema
from torchmcu.program.serialize import to_pte
from torchmcu.sim import runner

BOARD = "mps3-an547"
aten = torch.ops.aten


def _check(model: nn.Module, example: tuple[torch.Tensor, ...], out: Path, quant: str = "float32",
           fallback_ok: bool = False):
    """Compile, run one calibration-unrelated sample on the host, compare."""
    with warnings.catch_warnings():
        if not fallback_ok:
            warnings.filterwarnings("error", message=".*runs in float32.*")
        c = compile(model, example, BOARD, out, quant=quant, progress=False,
                    calibration=[tuple(torch.randn_like(x) for x in example) for _ in range(4)] if quant != "float32"
                    else None)
    xs = [x.numpy() for x in example]
    res = runner.run(out, xs, sim="host")
    assert res.exit_code == 0, res.raw[-2000:]
    expected, tol = runner.expected(out, runner.split_samples(runner.load_meta(out), xs))
    mismatch, worst = runner.compare(res.outputs, expected, tol)
    assert mismatch is None, f"{mismatch} (max abs error {worst})"
    return c


def _codes(c) -> list[str]:
    return [op.code for op in c.graph.ops]


class InPlace(nn.Module):
    """What torchvision's blocks leave in an exported graph."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.act = nn.ReLU(inplace=True)
        self.act6 = nn.ReLU6(inplace=True)
        self.hs = nn.Hardswish(inplace=True)
        self.drop = nn.Dropout(0.2, inplace=True)
        self.fc = nn.Linear(4 * 8 * 8, 5)

    def forward(self, x):
        h = self.act(self.bn(self.conv(x)))
        h += self.act6(h.clone())
        h = self.hs(h)
        a, b = h.chunk(2, 1)
        y = (a + b).contiguous()
        return self.fc(self.drop(torch.flatten(y, 1)))


@pytest.mark.parametrize("quant", ["float32", "int8"])
def test_inplace_ops_and_dropout_compile(quant: str, tmp_path: Path, host_runner) -> None:
    torch.manual_seed(0)
    c = _check(InPlace().eval(), (torch.randn(1, 3, 8, 8),), tmp_path, quant)
    codes = _codes(c)
    assert "SLICE" in codes  # the channel chunk of an NHWC tensor is strided
    if quant == "int8":
        assert not any(code.endswith("_F32") for code in codes), codes


def test_decomposition_table_is_curated() -> None:
    """Only ops without a kernel are decomposed: the composites the families
    lower themselves stay whole."""
    for kept in (aten.conv2d.default, aten.linear.default, aten.batch_norm.default, aten.layer_norm.default,
                 aten.hardswish.default, aten.hardsigmoid.default, aten.silu.default, aten.gelu.default,
                 aten.scaled_dot_product_attention.default, aten.upsample_nearest2d.vec, aten.lstm.input):
        assert kept not in DECOMPOSITIONS, kept
    for made in (aten.zeros_like.default, aten.split.Tensor, aten.unbind.int, aten.pixel_shuffle.default,
                 aten.relu6.default):
        assert made in DECOMPOSITIONS, made


class Composites(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln, self.lstm, self.gru = nn.LayerNorm(8), nn.LSTM(8, 8, batch_first=True), nn.GRU(8, 8, batch_first=True)

    def forward(self, x, img):
        h = F.scaled_dot_product_attention(self.ln(x), x, x)
        g = self.gru(self.lstm(h)[0])[0]
        up = F.interpolate(img, scale_factor=2.0) + F.interpolate(img, scale_factor=2.0, mode="bilinear")
        return F.gelu(g) + F.silu(g) + F.hardsigmoid(g) + F.hardswish(g) + F.leaky_relu(g), up


def test_composites_the_families_lower_stay_whole() -> None:
    from torchmcu.frontend.capture import export

    ep = export(Composites().eval(), (torch.randn(1, 4, 8), torch.randn(1, 2, 4, 4)))
    targets = {n.target for n in ep.graph.nodes if n.op == "call_function"}
    assert {aten.layer_norm.default, aten.scaled_dot_product_attention.default, aten.lstm.input, aten.gru.input,
            aten.upsample_nearest2d.vec, aten.upsample_bilinear2d.vec, aten.gelu.default, aten.silu.default,
            aten.hardsigmoid.default, aten.hardswish.default, aten.leaky_relu.default} <= targets, targets


# ---------------------------------------------------------------------------- view ops

def _relu_all(ts):
    return tuple(F.relu(t) for t in ts)


VIEWS = {  # name: (fn, input shape, zero-copy: no SLICE or PERMUTE among the program's ops)
    "select_batch": (lambda m, x: m[1](F.relu(x.select(0, 1))), (3, 4), True),
    "select_channel_nhwc": (lambda m, x: F.relu(m[0](x).select(1, 2)), (1, 2, 5, 5), False),
    "slice_rows_nhwc": (lambda m, x: F.relu(m[0](x)[:, :, 1:4]), (1, 2, 6, 5), True),
    "slice_step": (lambda m, x: m[1](F.relu(x[:, ::2])), (2, 8), False),
    "narrow_last": (lambda m, x: F.relu(x.narrow(-1, 2, 3)), (2, 4, 7), False),
    "narrow_first": (lambda m, x: F.relu(torch.narrow(x, 1, 1, 2)), (1, 4, 6), True),
    "unflatten": (lambda m, x: F.relu(x.unflatten(1, (2, 4))), (3, 8), True),
    "chunk_channels": (lambda m, x: (lambda a, b: a + b)(*m[0](x).chunk(2, 1)), (1, 2, 4, 4), False),
    "split_sizes": (lambda m, x: _relu_all(torch.split(x, [1, 3, 2], 1)), (2, 6, 3), False),
    "split_outer": (lambda m, x: _relu_all(x.split(2, 0)), (4, 5), True),
    "unbind": (lambda m, x: _relu_all(x.unbind(1)), (2, 3, 4), False),
    "expand": (lambda m, x: x[:, :1].expand(-1, 4, -1) + x, (2, 4, 3), False),
    "expand_new_dims": (lambda m, x: F.relu(x.expand(3, 2, 5)), (2, 5), False),
}


@pytest.mark.parametrize("quant", ["float32", "int8"])
@pytest.mark.parametrize("name", sorted(VIEWS))
def test_view_op(name: str, quant: str, tmp_path: Path, host_runner) -> None:
    torch.manual_seed(sum(map(ord, name)))
    fn, shape, zero_copy = VIEWS[name]
    model = Fn(fn, nn.Conv2d(shape[1] if len(shape) == 4 else 2, 4, 1), nn.Linear(4, 3)).eval()
    c = _check(model, (torch.randn(*shape),), tmp_path, quant)
    inner = [op.code for op in c.graph.ops if op.kind != "quantize" and op.kind != "dequantize"
             and not op.name.startswith("output")]
    if quant == "int8":  # the copies move int8 bytes: no float SLICE between dequantize and quantize
        assert all(c.graph.tensors[op.inputs[0]].dtype == "I8" for op in c.graph.ops if op.code == "SLICE")
    if zero_copy:  # (a PERMUTE at most at each edge: the model's NCHW input and output)
        assert "SLICE" not in inner and inner.count("PERMUTE") <= 2, inner
    else:
        assert "SLICE" in inner or "PERMUTE" in inner, inner


def test_contiguous_slice_is_an_alias_at_an_offset(tmp_path: Path, host_runner) -> None:
    model = Fn(lambda m, x: F.relu(m[0](x)[:, :, 2:5])).eval()
    model.mods.append(nn.Conv2d(2, 4, 1))
    c = _check(model, (torch.randn(1, 2, 6, 6),), tmp_path)
    relu = next(op for op in c.graph.ops if op.code == "CLAMP_F32")
    t = c.graph.tensors[relu.inputs[0]]
    assert t.offset == 2 * 6 * 4 * 4, t  # rows 2.. of an NHWC [1, 6, 6, 4] float tensor
    assert "SLICE" not in _codes(c)


# ---------------------------------------------------------------------------- reshape under a layout

class Shuffle(nn.Module):
    """torchvision's channel_shuffle between two convs."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Conv2d(3, 8, 1), nn.Conv2d(8, 4, 3)

    def forward(self, x):
        h = self.a(x)
        n, c, hh, ww = h.shape
        h = h.view(n, 2, c // 2, hh, ww)
        h = torch.transpose(h, 1, 2).contiguous()
        return self.b(h.view(n, c, hh, ww))


@pytest.mark.parametrize("quant", ["float32", "int8"])
def test_channel_shuffle_costs_one_copy(quant: str, tmp_path: Path, host_runner) -> None:
    torch.manual_seed(3)
    c = _check(Shuffle().eval(), (torch.randn(1, 3, 6, 6),), tmp_path, quant)
    ops = c.graph.ops
    first, last = [i for i, op in enumerate(ops) if op.code.startswith("CONV2D")]
    moves = [op.code for op in ops[first + 1:last] if op.code in ("PERMUTE", "SLICE", "COPY")]
    assert len(moves) == 1, _codes(c)


def test_reshape_splitting_channels_keeps_nhwc(tmp_path: Path, host_runner) -> None:
    """[N, C, H, W] in NHWC to [N, g, C/g, H, W] moves no byte."""
    model = Fn(lambda m, x: F.relu(m[0](x).view(1, 2, 3, 5, 5)) * 2.0, nn.Conv2d(2, 6, 1)).eval()
    c = _check(model, (torch.randn(1, 2, 5, 5),), tmp_path)
    ops = c.graph.ops
    conv = next(i for i, op in enumerate(ops) if op.code == "CONV2D_F32")
    assert ops[conv + 1].code == "CLAMP_F32" or ops[conv + 1].code == "MUL_F32", _codes(c)


# ---------------------------------------------------------------------------- constants, modes, inputs

def test_constants_made_in_forward_fold(tmp_path: Path, host_runner) -> None:
    def fn(m, x):
        y = x + torch.zeros(2, 6) + torch.ones_like(x) * torch.full((6,), 0.5)
        return y * torch.arange(6.0) + torch.zeros_like(x) + x.new_ones(x.shape)
    c = _check(Fn(fn).eval(), (torch.randn(2, 6),), tmp_path)
    # One op per arithmetic op with the input: each constant (and ones_like * full) is folded.
    assert _codes(c) == ["ADD_F32", "ADD_F32", "MUL_F32", "ADD_F32", "ADD_F32"], _codes(c)
    assert all(c.graph.tensors[op.inputs[1]].const is not None for op in c.graph.ops)


def test_train_mode_warns_and_compiles_in_eval(tmp_path: Path, host_runner) -> None:
    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5), nn.BatchNorm1d(4)).train()
    with pytest.warns(UserWarning, match="training mode.*eval mode.*BatchNorm1d, Dropout"):
        compile(model, (torch.randn(2, 4),), BOARD, tmp_path, progress=False)
    assert not model.training
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*training mode.*")
        compile(model, (torch.randn(2, 4),), BOARD, tmp_path / "again", progress=False)


@pytest.mark.parametrize("quant", ["float32", "int8"])
def test_scalar_example_input_is_the_same_error_at_every_precision(quant: str, tmp_path: Path) -> None:
    with pytest.raises(TorchMCUError) as info:
        compile(Fn(lambda m, x, s: x * s), (torch.randn(2, 3), 0.5), BOARD, tmp_path, quant=quant, progress=False)
    assert str(info.value).startswith("example input 1 is a float, expected a torch.Tensor"), info.value


# ---------------------------------------------------------------------------- crashes found from outside

def test_minimum_of_a_value_with_itself_at_int8(tmp_path: Path, host_runner) -> None:
    c = _check(Fn(lambda m, x: torch.minimum(x, x) + torch.maximum(x, x)).eval(), (torch.randn(2, 8),), tmp_path,
               "int8")
    assert "MINIMUM_S8" in _codes(c)


def test_biasless_grouped_conv_checks_against_the_reference(tmp_path: Path, host_runner) -> None:
    torch.manual_seed(5)
    _check(nn.Conv2d(4, 8, 3, groups=2, bias=False).eval(), (torch.randn(1, 4, 6, 6),), tmp_path)


class ClassToken(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(6, 8)
        self.cls = nn.Parameter(torch.randn(1, 1, 8))

    def forward(self, x):
        h = self.embed(x)
        return torch.cat([self.cls.expand(h.shape[0], -1, -1), h], 1)


@pytest.mark.parametrize("quant", ["float32", "int8"])
def test_vit_class_token(quant: str, tmp_path: Path, host_runner) -> None:
    torch.manual_seed(6)
    c = _check(ClassToken().eval(), (torch.randn(1, 5, 6),), tmp_path, quant)
    if quant == "int8":
        assert "CONCAT" in _codes(c) and "LINEAR_S8" in _codes(c)


@pytest.mark.parametrize("quant", ["float32", "int8"])
def test_exported_module_is_accepted(quant: str, tmp_path: Path, host_runner) -> None:
    model = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 2)).eval()
    example = (torch.randn(1, 4),)
    _check(torch.export.export(model, example).module(), example, tmp_path, quant)


# ---------------------------------------------------------------------------- errors point at the user's code

class Wrapper(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 4), nn.Softplus(beta=2.0))

    def forward(self, x):
        return self.body(x) + 1.0  # the user's line that leads into torch.nn


def test_error_inside_a_library_module_names_it(tmp_path: Path) -> None:
    with pytest.raises(CompileError) as info:
        compile(Wrapper().eval(), (torch.randn(1, 4),), BOARD, tmp_path, progress=False)
    msg = str(info.value)
    lines = msg.splitlines()
    assert lines[0] == "unsupported operator: no torchmcu backend lowers it", msg
    at = next(ln for ln in lines if ln.startswith("  at: "))
    assert "body.1 (torch.nn.Softplus, beta=2.0, threshold=20.0)" in at, msg
    assert Path(__file__).name in at and "return self.body(x) + 1.0" in at, msg
    assert "Traceback" not in msg and len(lines) == 4, msg


def test_error_inside_torchvision_names_the_module(tmp_path: Path) -> None:
    """An op of a torchvision block with no lowering: the block's path and class."""
    tv = import_torchvision()
    block = tv.ops.SqueezeExcitation(4, 2, scale_activation=nn.Softplus).eval()
    with pytest.raises(CompileError) as info:
        compile(block, (torch.randn(1, 4, 6, 6),), BOARD, tmp_path, progress=False)
    assert "  at: scale_activation (torch.nn.Softplus, beta=1.0, threshold=20.0)" in str(info.value), info.value


# ---------------------------------------------------------------------------- the SLICE kernel at load

def _slice_program(tmp_path: Path) -> tuple[dict, bytes, Path]:
    c = compile(Fn(lambda m, x: x[:, 1:7:2] * 2.0).eval(), (torch.randn(3, 8),), BOARD, tmp_path, progress=False)
    tree, segment = schema.decode(c.pte), c.pte[schema.decode(c.pte)["constant_offset"]:]
    return tree, segment, tmp_path


@pytest.mark.parametrize("edit,what", [
    (lambda p: p.update(begin=[0, 7]), "begin + (n - 1) step past the input"),
    (lambda p: p.update(begin=[0, -1]), "negative begin"),
    (lambda p: p.update(step=[1, -2]), "negative step"),
    (lambda p: p.update(step=[1, 2, 1]), "a step per dim, no more"),
    (lambda p: p.update(begin=[0]), "a begin per dim"),
])
def test_corrupted_slice_is_refused_at_load(edit, what: str, tmp_path: Path, host_runner) -> None:
    import subprocess

    tree, segment, out = _slice_program(tmp_path)
    op = next(o for o in tree["ops"] if o["code"] == "SLICE")
    assert op["params"][1]["begin"] == [0, 1] and op["params"][1]["step"] == [1, 2]
    edit(op["params"][1])
    pte = to_pte(tree, segment)
    path = out / "bad.pte"
    path.write_bytes(pte)
    io = out / "io.bin"
    io.write_bytes(runner.io_blob([[np.zeros((3, 8), np.float32)]]))
    proc = subprocess.run([str(host_runner), str(path), str(io)], capture_output=True, text=True, timeout=60)
    assert "tmcu: load status=" in proc.stdout and "tmcu: load status=0 " not in proc.stdout, (what, proc.stdout)
    assert "AddressSanitizer" not in proc.stderr and "runtime error" not in proc.stderr, proc.stderr[-2000:]
