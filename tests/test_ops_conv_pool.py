"""The convolution, pooling and resizing ops beyond 2-D convolutions and
TFLite's pools: conv1d (dilated, causal, depthwise), grouped convolutions,
transposed convolutions, nearest / bilinear resizing, adaptive average
pooling with uneven windows, PyTorch's pool options (ceil_mode, dilation,
count_include_pad, divisor_override) and the refusals.

End to end on the host runner (AddressSanitizer + UBSan): float programs
within the float tolerance of PyTorch; int8 and a16w8 programs bit for bit
with the NumPy reference (reference/conv.py, reference/pool_resize.py) and
within 1 LSB of PyTorch's q/dq model per output (each output is one op of the
input). Corrupted programs are refused at load.
"""

from __future__ import annotations

import copy
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import assert_close, run_on_host
from test_ops_host import Fn, _bn
from test_quant import calib
from torch import nn
from torchmcu.compiler import compile
from torchmcu.errors import CompileError
from torchmcu.program import schema, serialize
from torchmcu.sim import runner

INVALID_TENSOR, INVALID_OP = 0x23, 0x24  # firmware/core/error.h


# name: (factory, input shapes, op codes the float program must hold)
FLOAT = {
    "conv1d": (lambda: Fn(lambda m, x: (m[0](x), m[1](x), m[2](x)), nn.Conv1d(4, 6, 3, dilation=2),
                          nn.Conv1d(4, 5, 5, stride=2, padding=2), nn.Conv1d(4, 3, 4, padding="same")),
               [(2, 4, 20)], {"CONV2D_F32"}),
    "conv1d_causal_depthwise": (lambda: Fn(lambda m, x: m[1](F.pad(F.relu(m[0](F.pad(x, (4, 0)))), (8, 0))),
                                           nn.Conv1d(4, 6, 3, dilation=2), nn.Conv1d(6, 6, 3, groups=6, dilation=4)),
                                [(1, 4, 24)], {"CONV2D_F32", "DEPTHWISE_CONV2D_F32"}),
    "conv2d_same_even_and_grouped": (lambda: Fn(lambda m, x: (m[0](x), m[1](x)), nn.Conv2d(6, 4, 4, padding="same"),
                                                nn.Conv2d(6, 9, 3, groups=3, padding=1)),
                                     [(1, 6, 7, 8)], {"CONV2D_F32"}),
    "conv2d_pad_folded": (lambda: Fn(lambda m, x: m[0](F.pad(x, (2, 0, 1, 1))), nn.Conv2d(3, 4, 3)),
                          [(1, 3, 6, 7)], {"CONV2D_F32"}),
    "transposed": (lambda: Fn(lambda m, x: tuple(t(x) for t in m), nn.ConvTranspose2d(4, 3, 3, 2, 1, output_padding=1),
                              nn.ConvTranspose2d(4, 3, 4, 2, 1), nn.ConvTranspose2d(4, 2, 2, 2, bias=False),
                              nn.ConvTranspose2d(4, 3, 5, 3, 2, output_padding=2)),
                   [(1, 4, 5, 6)], {"TRANSPOSE_CONV2D_F32"}),
    "transposed_bn_relu": (lambda: Fn(lambda m, x: F.relu(m[1](m[0](x))), nn.ConvTranspose2d(4, 5, 3, 2, 1), _bn(5)),
                           [(1, 4, 5, 5)], {"TRANSPOSE_CONV2D_F32"}),
    "transposed_1d": (lambda: Fn(lambda m, x: m[0](x), nn.ConvTranspose1d(4, 3, 4, stride=2, padding=1)),
                      [(1, 4, 9)], {"TRANSPOSE_CONV2D_F32"}),
    "transposed_grouped": (lambda: Fn(lambda m, x, a: (m[0](x), m[1](x), m[2](a)),
                                      nn.ConvTranspose2d(6, 4, 3, 2, 1, output_padding=1, groups=2),
                                      nn.ConvTranspose2d(6, 6, 4, 2, 1, groups=6, bias=False),
                                      nn.ConvTranspose1d(4, 8, 3, stride=2, groups=4)),
                           [(1, 6, 4, 5), (1, 4, 7)], {"TRANSPOSE_CONV2D_F32"}),
    "resize_2d": (lambda: Fn(lambda m, x: (F.interpolate(x, scale_factor=2), F.interpolate(x, size=(7, 9)),
                                           F.interpolate(x, size=(7, 9), mode="nearest-exact"),
                                           F.interpolate(x, scale_factor=2, mode="bilinear"),
                                           F.interpolate(x, size=(9, 7), mode="bilinear", align_corners=True),
                                           F.interpolate(x, size=(3, 2), mode="bilinear"))),
                  [(1, 3, 4, 5)], {"RESIZE_NEAREST", "RESIZE_BILINEAR_F32"}),
    "resize_1d_and_modules": (lambda: Fn(lambda m, x: (m[0](x), m[1](x), F.interpolate(x, size=11, mode="linear",
                                                                                       align_corners=True)),
                                         nn.Upsample(scale_factor=3), nn.Upsample(scale_factor=2, mode="linear")),
                              [(1, 3, 6)], {"RESIZE_NEAREST", "RESIZE_BILINEAR_F32"}),
    "pools": (lambda: Fn(lambda m, x: (F.max_pool2d(x, 3, 2, 1, ceil_mode=True), F.max_pool2d(x, 3, 2, 1, dilation=2),
                                       F.avg_pool2d(x, 3, 2, 1, ceil_mode=True),
                                       F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
                                       F.avg_pool2d(x, 2, divisor_override=3))),
              [(1, 3, 10, 9)], {"MAX_POOL2D_F32", "AVG_POOL2D_F32"}),
    "pools_1d_and_adaptive": (lambda: Fn(lambda m, x: (F.max_pool1d(x, 3, 2, 1), F.avg_pool1d(x, 4, 3, 2),
                                                       F.adaptive_avg_pool1d(x, 5))),
                              [(1, 3, 13)], {"MAX_POOL2D_F32", "AVG_POOL2D_F32", "ADAPTIVE_AVG_POOL2D_F32"}),
    "adaptive_uneven": (lambda: Fn(lambda m, x: (F.adaptive_avg_pool2d(x, (3, 4)), F.adaptive_avg_pool2d(x, (5, 7)),
                                                 nn.AdaptiveAvgPool2d((2, 2))(x))),
                        [(1, 3, 7, 10)], {"ADAPTIVE_AVG_POOL2D_F32"}),
}


@pytest.mark.parametrize("name", sorted(FLOAT))
def test_float_matches_pytorch(name: str, tmp_path: Path, host_runner) -> None:
    torch.manual_seed(sum(map(ord, name)))
    factory, shapes, codes = FLOAT[name]
    model = factory().eval()
    got, expected = run_on_host(model, tuple(torch.randn(*s) for s in shapes), tmp_path)
    assert [g.shape for g in got] == [e.shape for e in expected]
    assert_close(got, expected)
    import json

    used = {op["code"] for op in json.loads((tmp_path / "report.json").read_text())["ops"]}
    assert codes <= used, used
    assert not used & {"PAD", "MUL_F32", "ADD_F32"}, used  # padding and batch norm folded


def test_float_refuses_pytorch_only_geometry_on_tflite_legacy_resize() -> None:
    """The float bilinear kernel is PyTorch's: TFLite's legacy mode (neither
    align_corners nor half-pixel centres) has no PyTorch producer and is
    refused by the reference as well as at load (see the corrupted programs)."""
    from torchmcu.reference import pool_resize

    with pytest.raises(ValueError, match="no PyTorch mode"):
        pool_resize.OPS["RESIZE_BILINEAR_F32"]([np.zeros((1, 2, 2, 1), np.float32)], {},
                                               [{"dims": [1, 4, 4, 1]}])


# ----------------------------------------------------------------------------- int8 and a16w8

# name: (factory, input shapes, int8 op codes): every output one op of an input,
# so each is within 1 LSB of PyTorch's q/dq model.
INT = {
    "conv1d": (lambda: Fn(lambda m, x: (m[0](x), m[1](F.pad(x, (4, 0))), m[2](x), m[3](F.pad(x, (6, 0)))),
                          nn.Conv1d(8, 6, 3, dilation=2), nn.Conv1d(8, 6, 3, dilation=2), nn.Conv1d(8, 5, 4, padding="same"),
                          nn.Conv1d(8, 8, 4, groups=8, dilation=2)),
               [(1, 8, 24)], {"CONV2D", "DEPTHWISE_CONV2D"}),
    "grouped": (lambda: Fn(lambda m, x: (m[0](x), m[1](x), m[2](x)), nn.Conv2d(6, 9, 3, groups=3, padding=1),
                           nn.Conv2d(6, 4, 1, groups=2, stride=2), nn.Conv2d(6, 4, 4, padding="same")),
                [(1, 6, 7, 8)], {"CONV2D"}),
    "transposed": (lambda: Fn(lambda m, x, z: (m[0](x), m[1](x), m[2](x), F.relu(m[3](x)), m[4](z), m[5](z)),
                              nn.ConvTranspose2d(20, 6, 3, 2, 1, output_padding=1), nn.ConvTranspose2d(20, 6, 4, 2, 1),
                              nn.ConvTranspose2d(20, 4, 2, 2), nn.ConvTranspose2d(20, 4, 3, 1, 1),
                              nn.ConvTranspose2d(6, 4, 5, 3, 2, output_padding=2),
                              nn.ConvTranspose2d(6, 4, 3, 2, 0, output_padding=1)),
                   [(1, 20, 4, 5), (1, 6, 4, 3)], {"TRANSPOSE_CONV2D"}),
    "transposed_1d_bn": (lambda: Fn(lambda m, x: F.relu(m[1](m[0](x))), nn.ConvTranspose1d(6, 4, 4, 2, 1),
                                    nn.BatchNorm1d(4)),
                         [(1, 6, 10)], {"TRANSPOSE_CONV2D"}),
    "transposed_grouped": (lambda: Fn(lambda m, x, a: (m[0](x), F.relu(m[1](x)), m[2](a)),
                                      nn.ConvTranspose2d(6, 4, 3, 2, 1, output_padding=1, groups=2),
                                      nn.ConvTranspose2d(6, 6, 4, 2, 1, groups=3),
                                      nn.ConvTranspose1d(4, 8, 3, stride=2, groups=4)),
                           [(1, 6, 4, 5), (1, 4, 7)], {"TRANSPOSE_CONV2D"}),
    "resize": (lambda: Fn(lambda m, x, a: (F.interpolate(x, scale_factor=2), F.interpolate(x, size=(7, 9), mode="nearest-exact"),
                                           F.interpolate(x, scale_factor=2, mode="bilinear"),
                                           F.interpolate(x, size=(8, 10), mode="bilinear", align_corners=True),
                                           F.interpolate(a, scale_factor=2, mode="linear"),
                                           F.interpolate(a, size=9))),
               [(1, 3, 4, 5), (1, 4, 6)], {"RESIZE_NEAREST", "RESIZE_BILINEAR"}),
    "pools": (lambda: Fn(lambda m, x: (F.max_pool2d(x, 3, 2, 1, ceil_mode=True), F.max_pool2d(x, 3, 2, 1, dilation=2),
                                       F.avg_pool2d(x, 3, 2, 1, ceil_mode=True),
                                       F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
                                       F.avg_pool2d(x, 3, 1, 1), F.avg_pool2d(x, 2, divisor_override=3))),
              [(1, 3, 10, 9)], {"MAX_POOL2D", "AVG_POOL2D"}),
    "pools_1d_and_adaptive": (lambda: Fn(lambda m, x, y: (F.max_pool1d(x, 3, 2, 1, ceil_mode=True), F.avg_pool1d(x, 4, 3, 2),
                                                          F.adaptive_avg_pool1d(x, 5), F.adaptive_avg_pool2d(y, (3, 4)),
                                                          F.adaptive_avg_pool2d(y, (5, 7)))),
                              [(1, 3, 13), (1, 4, 7, 10)], {"MAX_POOL2D", "AVG_POOL2D", "ADAPTIVE_AVG_POOL2D"}),
}


def _int_program(name: str, quant: str, out: Path):
    torch.manual_seed(sum(map(ord, name)))
    factory, shapes, codes = INT[name]
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="torchmcu")  # no float fallback (torch's own warnings stay warnings)
        c = compile(factory().eval(), tuple(torch.randn(*s) for s in shapes), "mps3-an547", out, quant=quant,
                    calibration=calib(shapes), progress=False)
    return c, shapes, codes


@pytest.mark.parametrize("quant, suffix, lsb", [("int8", "_S8", 1 + 1e-4), ("a16w8", "_S16", 1 + 1e-2)])
@pytest.mark.parametrize("name", sorted(INT))
def test_integer_bit_exact_and_within_one_lsb(name: str, quant: str, suffix: str, lsb: float, tmp_path: Path,
                                              host_runner) -> None:
    c, shapes, codes = _int_program(name, quant, tmp_path)
    used = {op.code for op in c.graph.ops}
    assert {code if code == "RESIZE_NEAREST" else code + suffix for code in codes} <= used, used
    assert not any(code.endswith("_F32") for code in used) and "PAD" not in used, used
    samples = [list(s) for s in calib(shapes, n=4, seed=1)]
    batch = [np.stack([s[i] for s in samples]) for i in range(len(shapes))]
    res = runner.run(tmp_path, batch, sim="host")
    assert res.exit_code == 0, res.raw[-1500:]
    expected, tol = runner.expected(tmp_path, samples)
    assert tol is None
    mismatch, _ = runner.compare(res.outputs, expected, tol)
    assert mismatch is None, str(mismatch)
    errors = runner.lsb_error(tmp_path, res.outputs, samples)
    assert max(errors) <= lsb, errors


def test_int16_bilinear_is_exact_where_tflite_positions_are_not(tmp_path: Path) -> None:
    """int16 bilinear resizing at PyTorch's exact source positions: TFLite's
    positions in 1/1024 (kept by the int8 op, for TFLite's bits) would be tens
    of int16 steps off at align_corners 4 -> 10 (scale 1/3)."""
    from torchmcu.reference import pool_resize as pr

    x = np.random.default_rng(0).integers(-32767, 32768, size=(1, 4, 4, 2)).astype(np.int16)
    exact = F.interpolate(torch.from_numpy(x.astype(np.float64)).permute(0, 3, 1, 2), size=(10, 10), mode="bilinear",
                          align_corners=True).permute(0, 2, 3, 1).numpy()
    ours = pr.resize_bilinear_s16(x, (10, 10), align_corners=True)
    tflite_way = pr.resize_bilinear(x, (10, 10), align_corners=True, dtype=np.int16)
    assert np.abs(ours - exact).max() <= 0.5 + 2 ** -14 * 32768
    assert np.abs(tflite_way - exact).max() > 10


# ----------------------------------------------------------------------------- refusals


class _Forward(nn.Module):
    """A module whose forward is the refused line itself (so the error's
    source line is this file's)."""

    def __init__(self, fn) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


def _refusal(fn, shape, match: str, tmp_path: Path, quant: str = "float32") -> CompileError:
    kw = dict(quant=quant, calibration=calib([shape]), progress=False) if quant != "float32" else {}
    with pytest.raises(CompileError, match=match) as e:
        compile(_Forward(fn).eval(), (torch.randn(*shape),), "mps3-an547", tmp_path, **kw)
    return e.value


class _Unpool(nn.Module):
    def forward(self, x):
        y, i = F.max_pool2d(x, 2, return_indices=True)
        return F.relu(y) + i.float()


@pytest.mark.parametrize("quant", ["float32", "int8"])
def test_max_pool_indices_are_refused_naming_the_line(quant: str, tmp_path: Path) -> None:
    kw = dict(quant=quant, calibration=calib([(1, 2, 4, 4)]), progress=False) if quant != "float32" else {}
    with pytest.raises(CompileError, match=r"max pooling's indices \(return_indices=True") as e:
        compile(_Unpool().eval(), (torch.randn(1, 2, 4, 4),), "mps3-an547", tmp_path, **kw)
    assert "test_ops_conv_pool.py" in (e.value.source or "") and "return_indices=True" in e.value.source
    assert "max_pool2d_with_indices" in (e.value.op or "")


def test_decomposed_forms_convert(tmp_path: Path) -> None:
    """After run_decompositions (core ATen), the ops take other forms:
    convolution (1-D, 2-D, transposed), max_pool2d_with_indices whose
    indices nobody reads, _adaptive_avg_pool2d. They lower to the same nodes."""
    from torchmcu.passes import lower

    model = Fn(lambda m, x: (m[0](x), m[1](x), F.max_pool2d(x, 2), F.adaptive_avg_pool2d(x, (3, 2)),
                             m[2](x.flatten(2))),
               nn.Conv2d(4, 6, 3, groups=2), nn.ConvTranspose2d(4, 3, 3, 2, 1), nn.Conv1d(4, 2, 3)).eval()
    ep = torch.export.export(model, (torch.randn(1, 4, 7, 6),), strict=False).run_decompositions()
    targets = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
    assert {"aten.convolution.default", "aten.max_pool2d_with_indices.default",
            "aten._adaptive_avg_pool2d.default"} <= targets, targets
    ops = [n.op for n in lower(ep).nodes]
    assert ops.count("conv2d") == 2 and ops.count("conv_transpose2d") == 1, ops
    assert "max_pool2d" in ops and "adaptive_avg_pool2d" in ops, ops


@pytest.mark.parametrize("fn, match", [
    (lambda x: F.interpolate(x, scale_factor=1.5), r"scale_factor=1.5 from 5 to 7.*give size="),
    (lambda x: F.interpolate(x, scale_factor=1.5, mode="bilinear"), r"scale_factor=1.5 from 5 to 7"),
    (lambda x: F.interpolate(x, scale_factor=2, mode="bicubic"), r"unsupported operator"),
])
def test_unsupported_variants_are_refused_clearly(fn, match: str, tmp_path: Path) -> None:
    err = _refusal(fn, (1, 4, 5, 5), match, tmp_path)
    assert "test_ops_conv_pool.py" in (err.source or ""), err


@pytest.mark.parametrize("kw, match", [(dict(dilation=2), "dilation=2")])
def test_transposed_conv_variants_tflite_lacks_are_refused(kw: dict, match: str, tmp_path: Path) -> None:
    class Up(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.up = nn.ConvTranspose2d(4, 4, 3, **kw)

        def forward(self, x):
            return self.up(x)

    with pytest.raises(CompileError, match=rf"transposed convolution with {match} is not supported") as e:
        compile(Up().eval(), (torch.randn(1, 4, 5, 5),), "mps3-an547", tmp_path)
    assert "test_ops_conv_pool.py" in (e.value.source or "") and "self.up(x)" in e.value.source


# ----------------------------------------------------------------------------- load-time checks


def _refused(tree: dict, segment: bytes, edit, host_runner: Path, io: Path, tmp_path: Path) -> int:
    t = copy.deepcopy(tree)
    edit(t)
    path = tmp_path / "v.pte"
    path.write_bytes(serialize.to_pte(t, segment))
    proc = subprocess.run([str(host_runner), str(path), str(io)], capture_output=True, text=True, check=False,
                          errors="replace", timeout=60)
    assert "runtime error" not in proc.stderr and "AddressSanitizer" not in proc.stderr, proc.stderr[-2000:]
    return proc.returncode


def test_corrupted_programs_are_refused_at_load(tmp_path: Path, host_runner) -> None:
    torch.manual_seed(0)
    model = Fn(lambda m, x, z: (m[0](x), F.interpolate(x, scale_factor=2, mode="bilinear"),
                                F.interpolate(x, scale_factor=2), F.avg_pool2d(x, 3, 2, 1, ceil_mode=True),
                                F.max_pool2d(x, 3, 2, 1, dilation=2), F.adaptive_avg_pool2d(x, (3, 2)), m[1](z)),
               nn.ConvTranspose2d(4, 3, 3, 2, 1, output_padding=1), nn.Conv2d(6, 4, 3, groups=2))
    shapes = [(1, 4, 5, 4), (1, 6, 5, 5)]
    out = tmp_path / "prog"
    c = compile(model.eval(), tuple(torch.randn(*s) for s in shapes), "mps3-an547", out, quant="int8",
                calibration=calib(shapes), progress=False)
    tree = schema.decode(c.pte)
    segment = c.pte[tree["constant_offset"]:]
    io = tmp_path / "io.bin"
    io.write_bytes(runner.io_blob([list(calib(shapes, n=1)[0])]))
    ok = _refused(tree, segment, lambda t: None, host_runner, io, tmp_path)
    assert ok == 0

    def first(t, code):
        return next(op for op in t["ops"] if op["code"] == code)

    def params(code, **kw):
        return lambda t: first(t, code)["params"][1].update(kw)

    def out_dims(code, dims):
        def edit(t):
            y = t["tensors"][first(t, code)["outputs"][0]]
            y.update(dims=dims, nbytes=int(np.prod(dims)))
        return edit

    def weight_dims(code, dims):
        def edit(t):
            w = t["tensors"][first(t, code)["inputs"][1]]
            w.update(dims=dims)
        return edit

    def short_output(code):
        def edit(t):
            y = t["tensors"][first(t, code)["outputs"][0]]
            y.update(nbytes=y["nbytes"] - 1)
        return edit

    cases = [
        ("transposed: rows the result never reaches", out_dims("TRANSPOSE_CONV2D_S8", [1, 4, 8, 3]), INVALID_OP),
        ("transposed: pad beyond the kernel's reach", params("TRANSPOSE_CONV2D_S8", pad_top=6), INVALID_OP),
        ("transposed: dilation", params("TRANSPOSE_CONV2D_S8", dilation_h=2), INVALID_OP),
        ("transposed: weight channels", weight_dims("TRANSPOSE_CONV2D_S8", [3, 3, 6, 2]), INVALID_OP),
        ("transposed: short output", short_output("TRANSPOSE_CONV2D_S8"), INVALID_TENSOR),
        ("resize: both flags", params("RESIZE_BILINEAR_S8", align_corners=True), INVALID_OP),
        ("nearest: align_corners", params("RESIZE_NEAREST", half_pixel_centers=False, align_corners=True), INVALID_OP),
        ("resize: channels", out_dims("RESIZE_BILINEAR_S8", [1, 10, 8, 3]), INVALID_OP),
        ("avg pool: dilation", params("AVG_POOL2D_S8", dilation_h=2), INVALID_OP),
        ("avg pool: divisor beyond 2^16", params("AVG_POOL2D_S8", divisor_override=70000), INVALID_OP),
        ("avg pool: zero point", params("AVG_POOL2D_S8", zero_point=300), INVALID_OP),
        ("avg pool: padding after", params("AVG_POOL2D_S8", pad_bottom=7), INVALID_OP),
        ("max pool: a divisor", params("MAX_POOL2D_S8", divisor_override=2), INVALID_OP),
        ("max pool: windows past the input", params("MAX_POOL2D_S8", stride_h=7), INVALID_OP),
        ("adaptive: channels", out_dims("ADAPTIVE_AVG_POOL2D_S8", [1, 3, 2, 3]), INVALID_OP),
        ("grouped: channels not a multiple", weight_dims("CONV2D_S8", [4, 3, 1, 9]), INVALID_OP),
        ("grouped: outputs not a multiple", weight_dims("CONV2D_S8", [4, 3, 3, 3]) if False else
         (lambda t: t["tensors"][first(t, "CONV2D_S8")["inputs"][1]].update(dims=[4, 1, 3, 9])), INVALID_OP),
    ]
    for name, edit, status in cases:
        got = _refused(tree, segment, edit, host_runner, io, tmp_path)
        assert got == status, f"{name}: exit {got:#x}"


def test_npu_and_dsp_backends_leave_what_they_would_compute_otherwise(tmp_path: Path) -> None:
    """Ethos-U (TOSA) and HiFi (nnlib) take CONV2D_S8 and the pools; a grouped
    convolution, a dilated max pool and a divisor_override avg pool stay on
    the CPU kernels, with the reason."""
    from torchmcu.backends.ethos_u import tosa_lower
    from torchmcu.backends.hifi import partition as hifi

    model = Fn(lambda m, x: (m[0](x), F.max_pool2d(x, 3, 2, 1, dilation=2), F.avg_pool2d(x, 2, divisor_override=3)),
               nn.Conv2d(6, 4, 3, groups=2))
    c = compile(model.eval(), (torch.randn(1, 6, 8, 8),), "mps3-an547", tmp_path, quant="int8",
                calibration=calib([(1, 6, 8, 8)]), progress=False)
    ops = {op.code: i for i, op in enumerate(c.graph.ops)}
    try:
        reasons = {code: tosa_lower.check_op(c.graph, ops[code])
                   for code in ("CONV2D_S8", "MAX_POOL2D_S8", "AVG_POOL2D_S8")}
    except ImportError:  # pragma: no cover - the tosa-tools package is optional
        pytest.skip("tosa-tools not installed")
    assert "grouped" in reasons["CONV2D_S8"] and "dilated" in reasons["MAX_POOL2D_S8"], reasons
    assert "divisor_override" in reasons["AVG_POOL2D_S8"], reasons
    assert "grouped" in hifi._conv_shape_reason(c.graph, c.graph.ops[ops["CONV2D_S8"]])
