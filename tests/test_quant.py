"""int8 programs end to end: PT2E quantization, q/dq folding into int8 ops,
the C++ runtime on the host (sanitizers on) bit for bit with the project's
NumPy reference, and within 1 LSB of PyTorch's own q/dq model per op."""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import REPO, needs_arm_gcc, needs_qemu
from test_ops_host import Fn, _bn
from torch import nn
from torchmcu.builder.firmware import build_firmware
from torchmcu.compiler import compile
from torchmcu.errors import TorchMCUError
from torchmcu.sim import runner


def calib(shapes: list[tuple[int, ...]], n: int = 16, seed: int = 0) -> list[tuple[np.ndarray, ...]]:
    rng = np.random.RandomState(seed)
    return [tuple(rng.randn(*s).astype(np.float32) for s in shapes) for _ in range(n)]


# name: (factory, input shapes, int8 op codes expected in the program)
CASES = {
    "linear": (lambda: Fn(lambda m, x: m[0](x), nn.Linear(16, 8)), [(1, 16)], {"LINEAR_S8"}),
    "linear_relu_chain": (lambda: Fn(lambda m, x: m[1](F.relu(m[0](x))), nn.Linear(12, 20), nn.Linear(20, 5)),
                          [(2, 12)], {"LINEAR_S8"}),
    "conv_bn_relu": (lambda: Fn(lambda m, x: F.relu(m[1](m[0](x))), nn.Conv2d(3, 8, 3, padding=1), _bn(8)),
                     [(1, 3, 8, 8)], {"CONV2D_S8"}),
    "conv_stride2_relu6": (lambda: Fn(lambda m, x: F.relu6(m[0](x)), nn.Conv2d(4, 6, 3, stride=2)),
                           [(1, 4, 9, 9)], {"CONV2D_S8"}),
    "conv_1xn_dilated": (lambda: Fn(lambda m, x: m[0](x), nn.Conv2d(2, 4, (1, 3), dilation=(1, 2), padding=(0, 2))),
                         [(1, 2, 5, 12)], {"CONV2D_S8"}),
    "depthwise": (lambda: Fn(lambda m, x: F.relu(m[0](x)), nn.Conv2d(6, 6, 3, groups=6, padding=1)),
                  [(1, 6, 7, 7)], {"DEPTHWISE_CONV2D_S8"}),
    "depthwise_mult2": (lambda: Fn(lambda m, x: m[0](x), nn.Conv2d(3, 6, 3, groups=3, stride=2)),
                        [(1, 3, 9, 9)], {"DEPTHWISE_CONV2D_S8"}),
    "add_two_convs_relu": (lambda: Fn(lambda m, x: F.relu(m[0](x) + m[1](x)), nn.Conv2d(3, 4, 1), nn.Conv2d(3, 4, 3, padding=1)),
                           [(1, 3, 6, 6)], {"ADD_S8", "CONV2D_S8"}),
    "add_inputs": (lambda: Fn(lambda m, x, y: x + y), [(2, 10), (2, 10)], {"ADD_S8"}),
    "mul_inputs_broadcast": (lambda: Fn(lambda m, x, y: x * y), [(3, 8), (1, 8)], {"MUL_S8"}),
    "maxpool": (lambda: Fn(lambda m, x: F.max_pool2d(m[0](x), 2), nn.Conv2d(2, 4, 3)), [(1, 2, 10, 10)],
                {"MAX_POOL2D_S8"}),
    "avgpool": (lambda: Fn(lambda m, x: F.avg_pool2d(m[0](x), 2), nn.Conv2d(2, 4, 3)), [(1, 2, 10, 10)],
                {"AVG_POOL2D_S8"}),
    "global_avgpool_linear_softmax": (
        lambda: Fn(lambda m, x: torch.softmax(m[1](torch.flatten(F.adaptive_avg_pool2d(F.relu(m[0](x)), 1), 1)), -1),
                   nn.Conv2d(3, 8, 3), nn.Linear(8, 4)),
        [(1, 3, 7, 7)], {"CONV2D_S8", "AVG_POOL2D_S8", "LINEAR_S8", "SOFTMAX_S8"}),
    "mean_spatial": (lambda: Fn(lambda m, x: m[0](x).mean((2, 3)), nn.Conv2d(3, 5, 3)), [(1, 3, 6, 6)],
                     {"AVG_POOL2D_S8"}),
    "softmax_wide": (lambda: Fn(lambda m, x: torch.softmax(m[0](x), -1), nn.Linear(8, 100)), [(2, 8)],
                     {"SOFTMAX_S8"}),
    "sigmoid_tanh_tables": (lambda: Fn(lambda m, x: (torch.sigmoid(m[0](x)), torch.tanh(m[1](x))),
                                       nn.Linear(6, 6), nn.Linear(6, 3)), [(1, 6)], {"LUT_S8"}),
    "standalone_relu_flatten": (lambda: Fn(lambda m, x: m[1](torch.flatten(F.relu(m[0](x) + x), 1)),
                                           nn.Conv2d(2, 2, 1), nn.Linear(2 * 4 * 4, 3)),
                                [(1, 2, 4, 4)], {"ADD_S8", "LINEAR_S8"}),
    "cat_channels": (lambda: Fn(lambda m, x: torch.cat([m[0](x), m[1](x)], 1), nn.Conv2d(2, 3, 1), nn.Conv2d(2, 4, 1)),
                     [(1, 2, 5, 5)], {"CONCAT", "CONV2D_S8"}),
    "pad_hw_then_conv": (lambda: Fn(lambda m, x: m[1](F.pad(m[0](x), (1, 2, 2, 0), value=0.25)),
                                    nn.Conv2d(2, 3, 1), nn.Conv2d(3, 4, 3)),
                         [(1, 2, 5, 5)], {"PAD", "CONV2D_S8"}),
    "pad_last_dim": (lambda: Fn(lambda m, x: m[0](F.pad(x, (3, 1), value=-1.0)), nn.Linear(12, 4)), [(2, 8)],
                     {"PAD", "LINEAR_S8"}),
    "maximum_minimum": (lambda: Fn(lambda m, x, y: (torch.maximum(m[0](x), y), torch.minimum(x, m[1](y))),
                                   nn.Linear(8, 8), nn.Linear(8, 8)), [(2, 8), (2, 8)],
                        {"MAXIMUM_S8", "MINIMUM_S8"}),
    "maximum_broadcast_nhwc": (lambda: Fn(lambda m, x, y: torch.maximum(m[0](x), y), nn.Conv2d(2, 3, 1)),
                               [(1, 2, 4, 4), (1, 3, 1, 1)], {"MAXIMUM_S8"}),
    "hardswish_after_conv": (lambda: Fn(lambda m, x: m[1](F.hardswish(m[0](x))), nn.Conv2d(3, 6, 3), nn.Conv2d(6, 4, 1)),
                             [(1, 3, 7, 7)], {"LUT_S8", "CONV2D_S8"}),
    "bmm_inputs": (lambda: Fn(lambda m, x, y: torch.bmm(x, y)), [(2, 3, 6), (2, 6, 5)], {"BATCH_MATMUL_S8"}),
    "matmul_attention_like": (lambda: Fn(lambda m, x: m[0](x) @ m[1](x).transpose(1, 2), nn.Linear(6, 6),
                                         nn.Linear(6, 6)), [(2, 4, 6)], {"BATCH_MATMUL_S8", "LINEAR_S8"}),
    "matmul_parameter": (lambda: Fn(lambda m, x: x @ m[0].weight, nn.Linear(6, 10, bias=False)), [(1, 3, 10)],
                         {"LINEAR_S8"}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_int8_bit_exact_with_reference(name: str, tmp_path: Path, host_runner) -> None:
    torch.manual_seed(sum(map(ord, name)))
    factory, shapes, codes = CASES[name]
    model = factory().eval()
    example = tuple(torch.randn(*s) for s in shapes)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no float fallback in these models
        c = compile(model, example, "mps3-an547", tmp_path, quant="int8", calibration=calib(shapes), reparam=False,  # ADD stays
                    progress=False)
    used = {op.code for op in c.graph.ops}
    assert codes <= used, used
    assert not any(code.endswith("_F32") for code in used), used  # all int8 inside
    samples = [list(s) for s in calib(shapes, n=4, seed=1)]
    batch = [np.stack([s[i] for s in samples]) for i in range(len(shapes))]
    res = runner.run(tmp_path, batch, sim="host")
    assert res.exit_code == 0, res.raw[-1500:]
    expected, tol = runner.expected(tmp_path, samples)
    assert tol is None
    mismatch, _ = runner.compare(res.outputs, expected, tol)
    assert mismatch is None, str(mismatch)
    # Against PyTorch's own q/dq model: the same quantization, float arithmetic.
    # One rounding step per int8 op at most; the chains here have up to three.
    lsb = runner.lsb_error(tmp_path, res.outputs, samples)
    assert max(lsb) <= 3, lsb


def test_int8_matches_pytorch_qdq_within_one_lsb_per_op(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU()).eval()
    shapes = [(1, 3, 8, 8)]
    compile(model, (torch.randn(1, 3, 8, 8),), "mps3-an547", tmp_path, quant="int8", calibration=calib(shapes),
            progress=False)
    samples = [list(s) for s in calib(shapes, n=8, seed=2)]
    res = runner.run(tmp_path, [np.stack([s[0] for s in samples])], sim="host")
    assert max(runner.lsb_error(tmp_path, res.outputs, samples)) <= 1 + 1e-4  # float noise in the ratio


def test_unquantizable_op_falls_back_to_float_with_a_warning(tmp_path: Path) -> None:
    # A grouped convolution has int8 and a16w8 kernels, but no W4A8 one.
    model = Fn(lambda m, x: m[1](m[0](x)), nn.Conv2d(4, 4, 3, groups=2), nn.Conv2d(4, 2, 1)).eval()
    with pytest.warns(UserWarning, match=r"conv2d \(conv2d\) has no int8 kernel.*in forward"):
        c = compile(model, (torch.randn(1, 4, 6, 6),), "mps3-an547", tmp_path, quant="int4",
                    calibration=calib([(1, 4, 6, 6)]), progress=False)
    report = json.loads((tmp_path / "report.json").read_text())
    backends = {op["code"]: op["backend"] for op in report["ops"]}
    assert backends["CONV2D_F32"] == "portable (float fallback)" and backends["CONV2D_S4"] == "portable"
    res = runner.run(tmp_path, [np.random.RandomState(0).randn(1, 4, 6, 6).astype(np.float32)], sim="host")
    assert res.exit_code == 0
    assert c.report["quant"] == "int4"


def test_calibration_of_the_wrong_shape_is_refused(tmp_path: Path) -> None:
    model = nn.Linear(4, 2).eval()
    with pytest.raises(TorchMCUError, match=r"shape \[3\]; expected \[1, 4\]"):
        compile(model, (torch.randn(1, 4),), "mps3-an547", tmp_path, quant="int8",
                calibration=[np.zeros(3, np.float32)], progress=False)
    with pytest.raises(TorchMCUError, match="int64; expected float32"):
        compile(model, (torch.randn(1, 4),), "mps3-an547", tmp_path, quant="int8",
                calibration={"x": np.zeros((5, 4), np.int64)}, progress=False)
    with pytest.raises(TorchMCUError, match=r"calibration file has arrays \['x', 'y'\]; the model takes 1 input"):
        compile(model, (torch.randn(1, 4),), "mps3-an547", tmp_path, quant="int8",
                calibration={"x": np.zeros((5, 4), np.float32), "y": np.zeros((5, 4), np.float32)}, progress=False)
    # NumPy's default float64 is what users make: taken as float32.
    compile(model, (torch.randn(1, 4),), "mps3-an547", tmp_path, quant="int8",
            calibration={"x": np.random.default_rng(0).random((5, 4))}, progress=False)


def test_calibration_npz_from_the_cli(tmp_path: Path) -> None:
    from torchmcu.cli import main

    xs = np.random.RandomState(0).rand(32, 64).astype(np.float32)
    np.savez(tmp_path / "calib.npz", anything=xs)
    out = tmp_path / "out"
    assert main(["compile", "examples/digits.py:make", "--board", "mps2-an505", "-o", str(out),
                 "--quant", "int8", "--calibration", str(tmp_path / "calib.npz")]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["quant"] == "int8" and [op["code"] for op in report["ops"]] == [
        "QUANTIZE_S8", "LINEAR_S8", "LINEAR_S8", "LINEAR_S8", "DEQUANTIZE_S8"]


@pytest.fixture(scope="module")
def digits():
    sys.path.insert(0, str(REPO / "examples"))
    import digits as d

    model, example = d.make()
    x_test, y_test = d.test_set()
    return model, example, x_test, y_test


@needs_qemu
@needs_arm_gcc
@pytest.mark.parametrize("board", ["mps3-an547", "mps2-an505", "mps2-an386"])
def test_int8_digits_in_qemu_bit_exact(board: str, digits, tmp_path: Path) -> None:
    """One program, the same bits on M55, M33 and M4."""
    model, example, x_test, y_test = digits
    compile(model, example, board, tmp_path, quant="int8", calibration=[x[None] for x in x_test[:64]],
            progress=False)
    build_firmware(tmp_path)
    batch = x_test[:40, None, :]
    res = runner.run(tmp_path, [batch], sim="qemu")
    assert res.exit_code == 0, res.raw[-1000:]
    samples = runner.split_samples(runner.load_meta(tmp_path), [batch])
    expected, tol = runner.expected(tmp_path, samples)
    mismatch, _ = runner.compare(res.outputs, expected, tol)
    assert mismatch is None, str(mismatch)
    acc = float((res.outputs[0][:, 0].argmax(1) == y_test[:40]).mean())
    assert acc >= 0.9


def test_int8_io_drops_the_float_edges(tmp_path: Path, host_runner) -> None:
    """With io="int8" the program takes and gives int8: no QUANTIZE/DEQUANTIZE,
    no float buffers (less RAM), and still the reference's bits."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(8, 4)).eval()
    shapes = [(1, 3, 16, 16)]
    example = (torch.randn(*shapes[0]),)
    f = compile(model, example, "mps3-an547", tmp_path / "f", quant="int8", calibration=calib(shapes), progress=False)
    q = compile(model, example, "mps3-an547", tmp_path / "q", quant="int8", calibration=calib(shapes),
                progress=False, io="int8")
    codes = [op.code for op in q.graph.ops]
    assert "QUANTIZE_S8" not in codes and "DEQUANTIZE_S8" not in codes
    assert q.plan.arena_bytes < f.plan.arena_bytes
    meta = runner.load_meta(tmp_path / "q")
    assert meta["inputs"][0]["dtype"] == "int8" and meta["outputs"][0]["dtype"] == "int8"
    samples = [list(s) for s in calib(shapes, n=3, seed=4)]
    batch = [np.stack([s[0] for s in samples])]  # float: the runner quantizes as the device would
    res = runner.run(tmp_path / "q", batch, sim="host")
    assert res.exit_code == 0 and res.outputs[0].dtype == np.int8
    expected, tol = runner.expected(tmp_path / "q", samples)
    assert runner.compare(res.outputs, expected, tol)[0] is None
    # The same numbers as the float-edged program, which dequantizes them.
    res_f = runner.run(tmp_path / "f", batch, sim="host")
    out_meta = meta["outputs"][0]
    np.testing.assert_array_equal(
        (res.outputs[0].astype(np.float32) - out_meta["zero_point"]) * np.float32(out_meta["scale"]), res_f.outputs[0])


def test_qat_model_compiles_as_it_is(tmp_path: Path, host_runner) -> None:
    """prepare_qat_pt2e with torchmcu's quantizer, a few training steps,
    convert_pt2e: compile takes the q/dq model without quantizing it again."""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_qat_pt2e
    from torchmcu.frontend.quantize import quantizer

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    x = torch.randn(64, 8)
    y = (x[:, :3] * 2).argmax(1)
    gm = torch.export.export(model, (x[:1],)).module()
    qat = prepare_qat_pt2e(gm, quantizer())
    opt = torch.optim.SGD(qat.parameters(), lr=0.05)
    for step in range(64):  # one sample per step: the graph was exported at batch 1
        i = step % 16
        opt.zero_grad()
        F.cross_entropy(qat(x[i:i + 1]), y[i:i + 1]).backward()
        opt.step()
    converted = convert_pt2e(qat)
    c = compile(converted, (x[:1],), "mps3-an547", tmp_path, quant="int8", progress=False)
    assert [op.code for op in c.graph.ops] == ["QUANTIZE_S8", "LINEAR_S8", "LINEAR_S8", "DEQUANTIZE_S8"]
    samples = [[x[i:i + 1].numpy()] for i in range(4)]
    res = runner.run(tmp_path, [np.stack([s[0] for s in samples])], sim="host")
    expected, tol = runner.expected(tmp_path, samples)
    assert runner.compare(res.outputs, expected, tol)[0] is None
    with torch.no_grad():  # the firmware computes what the QAT model computes, within an LSB
        assert max(runner.lsb_error(tmp_path, res.outputs, samples)) <= 2


def test_convert_folds_conv_bn_only_where_a_conv_feeds_a_batch_norm(monkeypatch: pytest.MonkeyPatch) -> None:
    """convert_pt2e's conv-bn folding traces 96 patterns whenever the graph
    has a batch norm; quantize skips it where no convolution feeds one (a
    lone BatchNorm1d), and still runs it where one does (QAT's conv-bn)."""
    from torchao.quantization.pt2e import quantize_pt2e
    from torchao.quantization.pt2e.quantize_pt2e import prepare_qat_pt2e
    from torchmcu.frontend import quantize as q

    calls = []

    def counted(m):  # the folding itself (2 minutes of pattern tracing) is torchao's; here, whether it runs
        calls.append(1)
        return m

    monkeypatch.setattr(quantize_pt2e, "_fold_conv_bn_qat", counted)
    torch.manual_seed(0)
    lone = nn.Sequential(nn.Tanh(), nn.BatchNorm1d(6)).eval()
    x = torch.randn(3, 6)
    qm = q.quantize(lone, (x,), [(torch.randn(3, 6),) for _ in range(4)], progress=False)
    assert calls == [] and quantize_pt2e._fold_conv_bn_qat is counted  # skipped, and put back afterwards
    with torch.no_grad():
        assert torch.allclose(qm(x), lone(x), atol=0.1)
    conv_bn = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)).train()
    gm = torch.export.export(conv_bn, (torch.randn(2, 3, 8, 8),)).module()
    prepared = prepare_qat_pt2e(gm, q._make_quantizer_class()(weights="int8", activations="int8", precision=None))
    prepared(torch.randn(2, 3, 8, 8))
    assert q._conv_feeds_batch_norm(prepared)
    q.convert(prepared)
    assert calls == [1]
