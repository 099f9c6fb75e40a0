"""The int8 global mean (a "mean" node: AVG_POOL2D_S8 over the whole plane,
input and output sharing one quantization) and the average pools against
PyTorch's q/dq model.

PyTorch's q/dq model rounds the real mean half to even (torch.round in
quantize_per_tensor): relative to the zero point. TFLite's AveragePool (and
CMSIS-NN's arm_avgpool_s8) round the raw int8 sum half away from zero: with
zero_point -128 (a ReLU or hardswish output) the sums are negative and every
tie rounds down, a bias of up to -0.12 LSB per output on MobileNetV3's
squeeze-excite means and its final pool (issue #26: 12.0 dB against
PyTorch's 14.4 dB). The lowering sets QuantPool2dParams.round_half_even
(compile's avg_pool_rounding="pytorch", the default): the reference, the
kernels and their fast paths (tests/test_kernels_s8_fast_fcadd.py) round
as PyTorch; avg_pool_rounding="tflite" keeps TFLite's bits (what the .tflite
export needs, which refuses the other).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401  quantize_per_tensor
from conftest import needs_arm_gcc, needs_qemu
from torch import nn
from torchmcu.builder.firmware import build_firmware
from torchmcu.compiler import compile
from torchmcu.errors import CompileError
from torchmcu.reference import pool_resize
from torchmcu.sim import runner

qd = torch.ops.quantized_decomposed


def _qdq_mean(q: np.ndarray, scale: float, zp: int) -> np.ndarray:
    """PyTorch's q/dq mean over H, W of NHWC int8 values."""
    real = (torch.from_numpy(q.astype(np.float32)) - zp) * scale
    return qd.quantize_per_tensor(real.mean((1, 2)), scale, zp, -128, 127, torch.int8).numpy()


@pytest.mark.parametrize("zp", [-128, 0, 5])
def test_global_mean_rounds_as_the_qdq_model(zp: int) -> None:
    """With a power-of-two scale PyTorch's float arithmetic is exact, and its
    q/dq mean is exactly the half-even one; TFLite's rounding is not."""
    scale = 2.0**-6  # zp -128: a ReLU / hardswish output's quantization, raw sums far below zero
    rng = np.random.default_rng(0)
    q = rng.integers(zp, min(zp + 28, 128), size=(1, 2, 2, 256)).astype(np.int8)  # a 2x2 plane: ties are frequent
    ours = pool_resize.avg_pool2d(q, (2, 2), (1, 1), zero_point=zp, round_half_even=True).reshape(-1)
    theirs = _qdq_mean(q, scale, zp).reshape(-1)
    diff = ours.astype(np.int32) - theirs.astype(np.int32)
    assert (diff == 0).all(), f"{np.count_nonzero(diff)} of {diff.size} outputs off, mean {diff.mean():+.3f} LSB"
    tflite = pool_resize.avg_pool2d(q, (2, 2), (1, 1)).reshape(-1)  # differs on these ties: the test can fail
    assert (tflite != theirs).any()


@pytest.mark.parametrize("zp", [-128, 0, 5])
def test_the_mean_is_unbiased_against_the_qdq_model(zp: int) -> None:
    """Other scales: PyTorch's float sum decides exact ties either way (one
    LSB off there, a small bias of its own), TFLite's rounding is further off
    and more biased (issue #26: zero point -128 rounds every tie down)."""
    scale = 0.0173
    rng = np.random.default_rng(1)
    q = rng.integers(zp, min(zp + 28, 128), size=(1, 2, 2, 4096)).astype(np.int8)
    theirs = _qdq_mean(q, scale, zp).reshape(-1).astype(np.int32)
    ours = pool_resize.avg_pool2d(q, (2, 2), (1, 1), zero_point=zp, round_half_even=True).reshape(-1) - theirs
    tflite = pool_resize.avg_pool2d(q, (2, 2), (1, 1)).reshape(-1) - theirs
    assert np.abs(ours).max() <= 1 and abs(ours.mean()) < 0.3 * abs(tflite.mean()), (ours.mean(), tflite.mean())
    assert np.count_nonzero(ours) < 0.6 * np.count_nonzero(tflite), (np.count_nonzero(ours), np.count_nonzero(tflite))


def _half_even(t: np.ndarray, d: int) -> np.ndarray:
    """round_half_even(t / d) in exact rationals (Python's round)."""
    from fractions import Fraction

    return np.array([round(Fraction(int(v), d)) for v in t.reshape(-1)]).reshape(t.shape)


@pytest.mark.parametrize("zp", [-128, -1, 0, 5, 127])
@pytest.mark.parametrize("d", [1, 2, 3, 4, 6, 9, 10, 36, 49, 196])
def test_rounded_mean_is_the_exact_half_even_mean(zp: int, d: int) -> None:
    """Every sum of d int8 values near the ties: zp + round_half_even((s - d zp) / d)."""
    s = np.concatenate([np.arange(-128 * d, -128 * d + 3 * d), np.arange(-3 * d, 3 * d),
                        np.arange(127 * d - 3 * d, 127 * d + 1)]).astype(np.int64)
    got = pool_resize.rounded_mean(s, np.full_like(s, d), -(1 << 40), 1 << 40, even_at=zp)
    np.testing.assert_array_equal(got, zp + _half_even(s - d * zp, d))


class SqueezeExcite(nn.Module):
    """MobileNetV3's squeeze-excite and final pool on ReLU / hardswish outputs
    (zero point -128): global means over 6x6 (36 taps), 7x7 and 2x2 planes, an
    ordinary 2x2 average pool, the channel counts with MVE and DSP tails."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(3, 21, 3, padding=1)
        self.fc1 = nn.Conv2d(21, 8, 1)
        self.fc2 = nn.Conv2d(8, 21, 1)
        self.conv2 = nn.Conv2d(21, 19, 3, stride=2)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        y = torch.relu(self.conv(x))  # [1, 21, 12, 12]
        y = nn.functional.avg_pool2d(y, 2)  # 6x6
        s = y.mean((2, 3), keepdim=True)
        y = y * nn.functional.hardsigmoid(self.fc2(torch.relu(self.fc1(s))))
        z = nn.functional.hardswish(self.conv2(y))  # [1, 19, 2, 2]
        return y.mean((2, 3)), z.mean((2, 3)), nn.functional.adaptive_avg_pool2d(y, 1).flatten(1)


def _compiled(tmp_path, board: str, **kw):
    torch.manual_seed(1)
    calib = [(torch.rand(1, 3, 12, 12) * 2,) for _ in range(4)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = compile(SqueezeExcite().eval(), calib[0], board, tmp_path, quant="int8", calibration=calib,
                    progress=False, tile=False, **kw)
    return c, calib


def test_compile_sets_the_rounding_and_the_option_keeps_tflites(tmp_path) -> None:
    from torchmcu.export.tflite import ExportError, export_tflite

    ours, _ = _compiled(tmp_path / "pytorch", "mps3-an547")
    pools = [op for op in ours.graph.ops if op.code == "AVG_POOL2D_S8"]
    assert len(pools) == 5 and all(op.params[1]["round_half_even"] for op in pools)
    theirs, _ = _compiled(tmp_path / "tflite", "mps3-an547", avg_pool_rounding="tflite")
    assert not any(op.params[1].get("round_half_even") for op in theirs.graph.ops if op.code == "AVG_POOL2D_S8")
    # The export refuses PyTorch's rounding (no TFLite op rounds so), takes TFLite's.
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1)).eval()
    calib = [(torch.rand(1, 3, 8, 8),) for _ in range(4)]
    for rounding in ("pytorch", "tflite"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            c = compile(model, calib[0], "mps3-an547", tmp_path / f"export-{rounding}", quant="int8",
                        calibration=calib, progress=False, tile=False, avg_pool_rounding=rounding)
        if rounding == "pytorch":
            with pytest.raises(ExportError, match="avg_pool_rounding='tflite'"):
                export_tflite(c.pte)
        else:
            assert export_tflite(c.pte)[4:8] == b"TFL3"
    with pytest.raises(CompileError, match="avg_pool_rounding"):
        _compiled(tmp_path / "bad", "mps3-an547", avg_pool_rounding="even")


@needs_qemu
@needs_arm_gcc
@pytest.mark.parametrize("board", ["mps3-an547", "mps2-an386"])
def test_the_firmware_rounds_as_the_reference(tmp_path, board: str) -> None:
    """Fast paths (MVE, DSP) and the generic kernels (-DTMCU_S8_GENERIC) in
    QEMU, bit-exact with the reference, which rounds as PyTorch."""
    c, calib = _compiled(tmp_path, board)
    x = torch.stack([s[0] for s in calib]).numpy()  # [N, 1, 3, 12, 12]: N samples
    for opt in (None, "-Os -DTMCU_S8_GENERIC"):
        build_firmware(tmp_path, **({"opt": opt} if opt else {}))
        res = runner.run(tmp_path, [x], sim="qemu")
        assert res.exit_code == 0, res.raw[-1000:]
        expected, tol = runner.expected(tmp_path, runner.split_samples(runner.load_meta(tmp_path), [x]))
        mismatch, _ = runner.compare(res.outputs, expected, tol)
        assert tol is None and mismatch is None, (opt, str(mismatch))


def test_ethos_u_takes_only_tflites_rounding() -> None:
    """TOSA's RESCALE rounds ties up or away from zero: the NPU takes the pools
    of avg_pool_rounding='tflite' only (PyTorch's stay on the CPU)."""
    pytest.importorskip("tosa_serializer")
    from torchmcu.backends.ethos_u.tosa_lower import check_op
    from torchmcu.frontend.capture import capture
    from torchmcu.frontend.quantize import quantize
    from torchmcu.passes import lower, to_program_graph

    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1)).eval()
    example = (torch.rand(1, 3, 8, 8),)
    q = quantize(model, example, None, progress=False)
    for rounding, reason in (("pytorch", "half to even"), ("tflite", None)):
        pg = to_program_graph(lower(capture(q, example), "float"), avg_pool_rounding=rounding)
        i = next(i for i, op in enumerate(pg.ops) if op.code == "AVG_POOL2D_S8")
        got = check_op(pg, i)
        assert (got is None) if reason is None else (reason in got), got


def test_cli_rounding_flag_and_tflite_export(tmp_path) -> None:
    """As users run it, in fresh processes: `compile` rounds average pools as
    PyTorch by default, and `export --tflite` then refuses in one line naming
    the flag; `compile --avg-pool-rounding tflite` exports."""
    from test_c_api import cli

    src = tmp_path / "pooled.py"
    src.write_text("import torch\nfrom torch import nn\n\n\ndef make():\n"
                   "    m = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),\n"
                   "                      nn.Linear(8, 4)).eval()\n"
                   "    return m, (torch.randn(1, 3, 10, 10),)\n")
    for rounding in ("pytorch", "tflite"):
        out = tmp_path / rounding
        cli("compile", f"{src}:make", "--board", "mps3-an547", "--quant", "int8", "--avg-pool-rounding", rounding,
            "-o", str(out))
        proc = cli("export", str(out), "--tflite", str(tmp_path / f"{rounding}.tflite"), check=False)
        if rounding == "pytorch":
            assert proc.returncode == 2, proc.stdout + proc.stderr
            assert "--avg-pool-rounding tflite" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, \
                proc.stderr
            assert not (tmp_path / "pytorch.tflite").exists()
        else:
            assert proc.returncode == 0, proc.stdout + proc.stderr
            assert (tmp_path / "tflite.tflite").stat().st_size > 0
