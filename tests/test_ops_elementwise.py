"""Activations, element-wise ops and reductions end to end: compiled, run by
the C++ runtime on the host (AddressSanitizer + UBSan), at float32 (within
the float tolerance of PyTorch), int8 and a16w8 (bit for bit with the NumPy
reference, no float fallback where the op has an integer kernel); the int8
ops TFLite has, each alone against TensorFlow Lite Micro; load-time checks of
the new kernels; and the squeeze-excite blocks of torchvision's
mobilenet_v3_small at int8."""

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
from test_ops_host import Fn
from test_quant import calib
from torch import nn
from torchmcu.compiler import compile
from torchmcu.errors import CompileError
from torchmcu.program import schema, serialize
from torchmcu.sim import runner


def _bn1d(c: int) -> nn.BatchNorm1d:
    bn = nn.BatchNorm1d(c)
    with torch.no_grad():
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        bn.weight.uniform_(-1.5, 1.5)
        bn.bias.uniform_(-0.5, 0.5)
    return bn


# name: (factory, input shapes, program op codes at int8, at a16w8)
CASES = {
    "gelu": (lambda: Fn(lambda m, x: F.gelu(m[0](x)), nn.Linear(8, 16)), [(2, 8)], {"LUT_S8"}, {"LUT_S16"}),
    "gelu_tanh": (lambda: Fn(lambda m, x: F.gelu(x * 2, approximate="tanh")), [(3, 10)], {"LUT_S8"}, {"LUT_S16"}),
    "silu_after_conv": (lambda: Fn(lambda m, x: F.silu(m[0](x)), nn.Conv2d(3, 6, 3)), [(1, 3, 6, 6)],
                        {"CONV2D_S8", "LUT_S8"}, {"CONV2D_S16", "LUT_S16"}),
    "hardsigmoid": (lambda: Fn(lambda m, x: F.hardsigmoid(x * 3)), [(2, 20)], {"LUT_S8"}, {"LUT_S16"}),
    "elu": (lambda: Fn(lambda m, x: F.elu(x * 2)), [(2, 20)], {"LUT_S8"}, {"LUT_S16"}),
    "elu_alpha": (lambda: nn.ELU(0.5), [(2, 20)], {"LUT_S8"}, {"LUT_S16"}),
    "exp_rsqrt": (lambda: Fn(lambda m, x: torch.exp(x) + torch.rsqrt(x * x + 0.5)), [(2, 12)],
                  {"LUT_S8", "ADD_S8"}, {"LUT_S16", "ADD_S16"}),
    "sqrt": (lambda: Fn(lambda m, x: torch.sqrt(x * x + 0.25)), [(2, 12)], {"LUT_S8"}, {"LUT_S16"}),
    "sigmoid_tanh": (lambda: Fn(lambda m, x: torch.sigmoid(x) * torch.tanh(x)), [(2, 16)], {"LUT_S8", "MUL_S8"},
                     {"LUT_S16", "MUL_S16"}),
    "hardswish": (lambda: Fn(lambda m, x: F.hardswish(x * 3)), [(2, 20)], {"LUT_S8"}, {"LUT_S16"}),
    "leaky_relu": (lambda: Fn(lambda m, x: F.leaky_relu(m[0](x), 0.1), nn.Linear(6, 8)), [(2, 6)],
                   {"PRELU_S8"}, {"PRELU_S16"}),
    "prelu_channels": (lambda: nn.Sequential(nn.Conv2d(3, 4, 1), nn.PReLU(4)), [(1, 3, 5, 5)], {"PRELU_S8"},
                       {"PRELU_S16"}),
    "prelu_one": (lambda: nn.Sequential(nn.Linear(5, 7), nn.PReLU()), [(3, 5)], {"PRELU_S8"}, {"PRELU_S16"}),
    "glu": (lambda: nn.Sequential(nn.Linear(6, 8), nn.GLU()), [(2, 6)], {"GLU_S8"}, {"GLU_S16"}),
    "glu_channels": (lambda: nn.Sequential(nn.Conv2d(3, 8, 1), nn.GLU(1)), [(1, 3, 4, 4)], {"GLU_S8"}, {"GLU_S16"}),
    "sub_two_inputs": (lambda: Fn(lambda m, x, y: x - y), [(2, 10), (2, 10)], {"SUB_S8"}, {"SUB_S16"}),
    "sub_alpha": (lambda: Fn(lambda m, x, y: torch.sub(x, y, alpha=0.5)), [(2, 10), (2, 10)], {"SUB_S8"},
                  {"SUB_S16"}),
    "add_alpha_negative": (lambda: Fn(lambda m, x, y: torch.add(x, y, alpha=-2)), [(2, 10), (2, 10)], {"SUB_S8"},
                           {"SUB_S16"}),
    "rsub_constant": (lambda: Fn(lambda m, x: 1 - x), [(2, 10)], {"SUB_S8"}, {"SUB_S16"}),
    "add_scalar": (lambda: Fn(lambda m, x: x + 0.75), [(2, 10)], {"ADD_S8"}, {"ADD_S16"}),
    "mul_constant_tensor": (lambda: Fn(lambda m, x: m[0](x) * m[1].weight.view(1, 4, 1, 1), nn.Conv2d(2, 4, 1),
                                       nn.Linear(1, 4)), [(1, 2, 3, 3)], {"MUL_S8"}, {"MUL_S16"}),
    "div_constant": (lambda: Fn(lambda m, x: x / 3.0), [(2, 10)], {"MUL_S8"}, {"MUL_S16"}),
    "div_tensors": (lambda: Fn(lambda m, x, y: x / (y * y + 1)), [(2, 10), (2, 10)], {"DIV_S8"}, None),
    "broadcast_lower_rank": (lambda: Fn(lambda m, x, y: m[0](x) * y, nn.Conv2d(3, 4, 1)),
                             [(1, 3, 5, 5), (5,)], {"MUL_S8"}, {"MUL_S16"}),
    "broadcast_lower_rank_first": (lambda: Fn(lambda m, x, y: y + x), [(2, 3, 4), (4,)], {"ADD_S8"}, {"ADD_S16"}),
    "log_softmax": (lambda: nn.Sequential(nn.Linear(6, 10), nn.LogSoftmax(-1)), [(2, 6)], {"LOG_SOFTMAX_S8"}, None),
    "log_softmax_dim1": (lambda: Fn(lambda m, x: F.log_softmax(m[0](x), 1), nn.Conv2d(2, 5, 1)), [(1, 2, 3, 3)],
                         {"LOG_SOFTMAX_S8"}, None),
    "softmax_dim1_nchw": (lambda: Fn(lambda m, x: torch.softmax(m[0](x), 1), nn.Conv2d(2, 5, 1)), [(1, 2, 3, 3)],
                          {"SOFTMAX_S8"}, {"SOFTMAX_S16"}),
    "softmax_dim0": (lambda: Fn(lambda m, x: torch.softmax(x * 2, 0)), [(6, 5)], {"SOFTMAX_S8"}, {"SOFTMAX_S16"}),
    "mean_last": (lambda: Fn(lambda m, x: m[0](x).mean(-1), nn.Linear(6, 9)), [(2, 3, 6)], {"MEAN_S8"},
                  {"MEAN_S16"}),
    "mean_channels_keepdim": (lambda: Fn(lambda m, x: m[0](x).mean(1, keepdim=True), nn.Conv2d(3, 5, 1)),
                              [(1, 3, 4, 4)], {"MEAN_S8"}, {"MEAN_S16"}),
    "mean_two_dims": (lambda: Fn(lambda m, x: (x * 2).mean((0, 2))), [(3, 4, 5)], {"MEAN_S8"}, {"MEAN_S16"}),
    "batchnorm1d_alone": (lambda: Fn(lambda m, x: m[0](torch.tanh(x)), _bn1d(4)), [(2, 4, 6)],
                          {"DEPTHWISE_CONV2D_S8"}, {"DEPTHWISE_CONV2D_S16"}),
    "batchnorm1d_vector": (lambda: nn.Sequential(nn.Tanh(), _bn1d(6)), [(3, 6)], {"DEPTHWISE_CONV2D_S8"},
                           {"DEPTHWISE_CONV2D_S16"}),
}

# Float cases only: ops whose float forms differ from the integer ones.
FLOAT_ONLY = {
    "reciprocal": (lambda: Fn(lambda m, x: 2 / (x * x + 1)), [(2, 10)]),
    "neg": (lambda: Fn(lambda m, x: -m[0](x), nn.Linear(3, 4)), [(2, 3)]),
    "div_by_input": (lambda: Fn(lambda m, x, y: (x + 3) / (y * y + 0.5)), [(3, 4), (3, 4)]),
}


@pytest.mark.parametrize("name", sorted(CASES) + sorted(FLOAT_ONLY))
def test_float_matches_pytorch(name: str, tmp_path: Path, host_runner) -> None:
    torch.manual_seed(sum(map(ord, name)))
    factory, shapes = (CASES[name][:2] if name in CASES else FLOAT_ONLY[name])
    model = factory().eval()
    got, expected = run_on_host(model, tuple(torch.randn(*s) for s in shapes), tmp_path)
    assert_close(got, expected)


@pytest.mark.parametrize("quant", ["int8", "a16w8"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_integer_bit_exact_on_host(name: str, quant: str, tmp_path: Path, host_runner) -> None:
    torch.manual_seed(sum(map(ord, name)))
    factory, shapes, codes8, codes16 = CASES[name]
    model = factory().eval()
    example = tuple(torch.randn(*s) for s in shapes)
    codes = codes8 if quant == "int8" else codes16
    with warnings.catch_warnings():
        warnings.simplefilter("ignore" if codes is None else "error")  # no float fallback where there is a kernel
        c = compile(model, example, "mps3-an547", tmp_path, quant=quant, calibration=calib(shapes), progress=False, tile=False)
    used = {op.code for op in c.graph.ops}
    if codes is not None:
        assert codes <= used, used
        assert not any(code.endswith("_F32") for code in used), used
    samples = [list(s) for s in calib(shapes, n=3, seed=1)]
    res = runner.run(tmp_path, [np.stack([s[i] for s in samples]) for i in range(len(shapes))], sim="host")
    assert res.exit_code == 0, res.raw[-1500:]
    expected, tol = runner.expected(tmp_path, samples)
    mismatch, _ = runner.compare(res.outputs, expected, tol)
    assert tol is None and mismatch is None, str(mismatch)
    # Close to PyTorch's own q/dq model: a few rounding steps (tables, requantizations) per op chain.
    assert max(runner.lsb_error(tmp_path, res.outputs, samples)) <= (4 if quant == "int8" else 48)


# ------------------------------------------------------------------ TensorFlow Lite Micro

# The int8 ops that map to one TFLite operator (or SPLIT + LOGISTIC + MUL for GLU).
TFLM_OPS = {"SUB_S8", "DIV_S8", "PRELU_S8", "LOG_SOFTMAX_S8", "MEAN_S8", "SOFTMAX_S8", "ADD_S8", "MUL_S8", "GLU_S8",
            "SUB_S16", "PRELU_S16", "MEAN_S16", "ADD_S16", "MUL_S16", "SOFTMAX_S16"}
TFLM_CASES = ["sub_two_inputs", "rsub_constant", "add_scalar", "mul_constant_tensor", "div_tensors",
              "leaky_relu", "prelu_channels", "prelu_one", "log_softmax", "log_softmax_dim1", "softmax_dim1_nchw",
              "mean_last", "mean_channels_keepdim", "mean_two_dims", "glu", "elu", "broadcast_lower_rank"]


@pytest.mark.parametrize("quant", ["int8", "a16w8"])
@pytest.mark.parametrize("name", TFLM_CASES)
def test_each_op_bit_exact_with_tflite_micro(name: str, quant: str, tmp_path: Path) -> None:
    pytest.importorskip("tflite_micro", reason="the tflite-micro wheel (TFLM's Python interpreter) is not installed")
    from torchmcu.export.tflite import export_op, run_tflite_micro, trace, verify_derived

    factory, shapes, _, codes16 = CASES[name]
    if quant == "a16w8" and (codes16 is None or codes16 <= {"GLU_S16", "LUT_S16"}):
        pytest.skip("no int16 kernel, or one TFLite has no exact form of (its int16 tables)")
    torch.manual_seed(sum(map(ord, name)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = compile(factory().eval(), tuple(torch.randn(*s) for s in shapes), "mps3-an547", tmp_path, quant=quant,
                    calibration=calib(shapes), progress=False, tile=False)
    assert verify_derived(c.pte) == []
    prog = schema.decode(c.pte)
    seen = 0
    for sample in calib(shapes, n=2, seed=3):
        steps = trace(c.pte, list(sample))
        for i, op in enumerate(prog["ops"]):
            code = op["code"]
            if code not in TFLM_OPS and not (code == "LUT_S8" and name == "elu"):
                continue
            tflite, values = export_op(c.pte, i, list(sample), steps)
            got = run_tflite_micro(tflite, values)[0]
            want = steps[i][1]
            assert got.dtype == want.dtype and np.array_equal(got.reshape(want.shape), want), \
                f"op {i} {code}: {np.abs(got.reshape(want.shape).astype(float) - want).max()} off"
            seen += 1
    assert seen


def test_alpha_has_no_tflite_form(tmp_path: Path) -> None:
    """a - alpha * b runs as SUB with b's scale times alpha: TFLite's SUB
    derives its parameters from b's own scale, so the export refuses it."""
    from torchmcu.export.tflite import ExportError, export_tflite, verify_derived

    factory, shapes, _, _ = CASES["sub_alpha"]
    c = compile(factory().eval(), tuple(torch.randn(*s) for s in shapes), "mps3-an547", tmp_path, quant="int8",
                calibration=calib(shapes), progress=False, tile=False)
    assert any("SUB_S8" in line for line in verify_derived(c.pte))
    with pytest.raises(ExportError):
        export_tflite(c.pte)


def test_div_every_pair_with_tflite_micro(tmp_path: Path) -> None:
    """All 65536 (a, b) int8 pairs through TFLM's DIV and the reference:
    equal except where TFLite's final shift exceeds 31 bits (undefined in
    C++; the reference gives 0 there)."""
    pytest.importorskip("tflite_micro", reason="the tflite-micro wheel (TFLM's Python interpreter) is not installed")
    from torchmcu import reference as ref
    from torchmcu.export.tflite import export_op, run_tflite_micro, trace

    factory, shapes, _, _ = CASES["div_tensors"]
    torch.manual_seed(1)
    c = compile(factory().eval(), tuple(torch.randn(*s) for s in shapes), "mps3-an547", tmp_path, quant="int8",
                calibration=calib(shapes), progress=False, tile=False)
    prog = schema.decode(c.pte)
    k = next(i for i, op in enumerate(prog["ops"]) if op["code"] == "DIV_S8")
    sample = list(calib(shapes, n=1)[0])
    tflite, values = export_op(c.pte, k, sample, trace(c.pte, sample))
    p = prog["ops"][k]["params"][1]
    a = np.repeat(np.arange(-128, 128, dtype=np.int8), 256)
    b = np.tile(np.arange(-128, 128, dtype=np.int8), 256)
    got, want = [], []
    for lo in range(0, a.size, values[0].size):
        xa, xb = a[lo:lo + values[0].size], b[lo:lo + values[0].size]
        if xa.size < values[0].size:
            break
        got.append(run_tflite_micro(tflite, [xa.reshape(values[0].shape), xb.reshape(values[1].shape)])[0].ravel())
        want.append(ref.div(xa, xb, p))
    got, want = np.concatenate(got), np.concatenate(want)
    v1 = a[:got.size].astype(np.int64) + p["input1_offset"]
    v2 = b[:got.size].astype(np.int64) + p["input2_offset"]
    defined = v2 != 0
    headroom = 31 - np.ceil(np.log2(np.abs(np.where(v1 < 0, -v1 - 1, v1)) + 1)).astype(np.int64)
    exponent = np.floor(np.log2(np.maximum(np.abs(v2), 1))).astype(np.int64) + headroom - p["output_shift"]
    defined &= exponent <= 31
    assert defined.sum() > 10000
    np.testing.assert_array_equal(got[defined], want[defined])


# ------------------------------------------------------------------ refusals and load-time checks

def test_unsupported_forms_are_refused_clearly(tmp_path: Path) -> None:
    cases = [
        (Fn(lambda m, x: torch.div(x, x + 2, rounding_mode="floor")), (torch.randn(2, 3),), "rounding_mode"),
        (Fn(lambda m, x: F.elu(x) * 1 + F.selu(x)), (torch.randn(2, 3),), "aten.selu"),
        (Fn(lambda m, x, v: x @ v), (torch.randn(2, 3), torch.randn(3)), "1-D operand"),
    ]
    for model, example, words in cases:
        with pytest.raises(CompileError) as e:
            compile(model.eval(), example, "mps3-an547", tmp_path, tile=False)
        assert words in str(e.value), str(e.value)


INVALID_TENSOR, INVALID_OP = 0x23, 0x24  # firmware/core/error.h


def _first(t: dict, code: str) -> dict:
    return next(op for op in t["ops"] if op["code"] == code)


def test_corrupted_programs_are_refused_at_load(tmp_path: Path, host_runner) -> None:
    """Each new kernel's check: a bad parameter or operand makes Method::load
    fail with the error for it, with no sanitizer report."""
    model = Fn(lambda m, x, y: F.log_softmax(m[0](x) / (y * y + 1), -1).mean(-1, keepdim=True) - F.gelu(x).mean(-1),
               nn.Linear(6, 6))
    shapes = [(2, 6), (2, 6)]
    progs = {}
    for quant in ("int8", "a16w8"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            c = compile(model.eval(), tuple(torch.randn(*s) for s in shapes), "mps3-an547", tmp_path / quant,
                        quant=quant, calibration=calib(shapes), progress=False, tile=False)
        progs[quant] = (schema.decode(c.pte), c.pte)

    def params(code, **kw):
        return lambda t: _first(t, code)["params"][1].update(kw)

    def tensor(code, k, **kw):
        return lambda t: t["tensors"][_first(t, code)["inputs"][k]].update(kw)

    cases = [
        ("int8", "div output shift 30", params("DIV_S8", output_shift=30), INVALID_OP),
        ("int8", "div activation range", params("DIV_S8", act_min=100, act_max=50), INVALID_OP),
        ("int8", "mean output short", lambda t: t["tensors"][_first(t, "MEAN_S8")["outputs"][0]].update(nbytes=1),
         INVALID_TENSOR),
        ("int8", "log softmax shift 40", params("LOG_SOFTMAX_S8", input_left_shift=40), INVALID_OP),
        ("int8", "log softmax right shift -1", params("LOG_SOFTMAX_S8", reverse_scaling_right_shift=-1), INVALID_OP),
        ("int8", "mean axis beyond rank", params("MEAN_S8", axis_mask=64), INVALID_OP),
        ("int8", "mean zero point 200", params("MEAN_S8", input_zero_point=200), INVALID_OP),
        ("int8", "sub left shift 30", params("SUB_S8", left_shift=30), INVALID_OP),
        ("int8", "table of 255", tensor("LUT_S8", 1, dims=[255], nbytes=255), INVALID_OP),
        ("a16w8", "int16 table of 512", tensor("LUT_S16", 1, dims=[512], nbytes=1024), INVALID_OP),
        ("a16w8", "mean int16 zero point", params("MEAN_S16", input_zero_point=1), INVALID_OP),
        ("a16w8", "sub int16 offset", params("SUB_S16", input1_offset=1), INVALID_OP),
    ]
    io = {q: tmp_path / f"io_{q}.bin" for q in progs}
    for q in progs:
        io[q].write_bytes(runner.io_blob([[np.zeros(s, np.float32) for s in shapes]]))
    for quant, name, edit, status in cases:
        tree, pte = progs[quant]
        t = copy.deepcopy(tree)
        edit(t)
        path = tmp_path / "v.pte"
        path.write_bytes(serialize.to_pte(t, pte[tree["constant_offset"]:]))
        proc = subprocess.run([str(host_runner), str(path), str(io[quant])], capture_output=True, text=True,
                              check=False, errors="replace", timeout=60)
        assert "runtime error" not in proc.stderr and "AddressSanitizer" not in proc.stderr, proc.stderr[-2000:]
        assert proc.returncode == status, f"{name}: exit {proc.returncode:#x}\n{proc.stdout[-500:]}"


# ------------------------------------------------------------------ torchvision's squeeze-excite

def _se_blocks():
    from torchmcu.frontend.compat import import_torchvision

    tv = import_torchvision()
    from torchvision.ops.misc import SqueezeExcitation

    torch.manual_seed(0)
    model = tv.models.mobilenet_v3_small(weights=None).eval()
    return [m for m in model.modules() if isinstance(m, SqueezeExcitation)]


def test_mobilenet_v3_squeeze_excite_runs_at_int8_without_float(tmp_path: Path, host_runner) -> None:
    """torchvision's own SE block (adaptive avg pool -> 1x1 conv -> ReLU ->
    1x1 conv -> hardsigmoid -> broadcast mul by the input), the first and the
    widest of mobilenet_v3_small, on realistic inputs (post-ReLU/hardswish
    activations): all int8, bit for bit on the host, SQNR against float."""
    blocks = _se_blocks()
    for k, se in ((0, blocks[0]), (len(blocks) - 1, blocks[-1])):
        channels = se.fc1.in_channels
        shapes = [(1, channels, 7, 7)]
        data = [tuple(F.hardswish(torch.from_numpy(x) * 2).numpy() for x in s) for s in calib(shapes, n=16)]
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            c = compile(se, (torch.from_numpy(data[0][0]),), "mps3-an547", tmp_path / str(k), quant="int8",
                        calibration=data, progress=False, tile=False)
        codes = [op.code for op in c.graph.ops]
        assert not any(code.endswith("_F32") for code in codes), codes
        assert {"AVG_POOL2D_S8", "CONV2D_S8", "LUT_S8", "MUL_S8"} <= set(codes), codes
        samples = [list(s) for s in data[:3]]
        res = runner.run(tmp_path / str(k), [np.stack([s[0] for s in samples])], sim="host")
        assert res.exit_code == 0, res.raw[-1500:]
        expected, _ = runner.expected(tmp_path / str(k), samples)
        assert runner.compare(res.outputs, expected, None)[0] is None
        with torch.no_grad():
            ref = se(torch.from_numpy(np.stack([s[0] for s in samples])[:, 0])).numpy()
        got = res.outputs[0][:, 0]
        sqnr = 10 * np.log10((ref ** 2).sum() / ((got - ref) ** 2).sum())
        assert sqnr > 25, sqnr
