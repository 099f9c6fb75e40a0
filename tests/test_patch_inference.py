"""Patch-based inference (plan/tiling.py) on a model we did not write:
torchvision's MobileNetV2 (width 0.35), whose first stages are runs of
convolutions, depthwise convolutions and the residual ADDs of inverted
residual blocks. The tiled program must lower the peak below the
layer-by-layer plan, recompute within its budget, and give the untiled
program's bits: in the reference interpreter, and on the firmware's fast
int8 kernels in QEMU (MVE on the M55, DSP on the M4), which see band views
with asymmetric padding and residual ADDs on row slices.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import needs_arm_gcc, needs_qemu
from torchmcu.builder.firmware import build_firmware
from torchmcu.compiler import compile
from torchmcu.frontend.compat import import_torchvision
from torchmcu.program.interpret import run_reference
from torchmcu.sim import runner

RES = 64


@pytest.fixture(scope="module")
def mnv2():
    tv = import_torchvision()
    torch.manual_seed(3)
    model = tv.models.mobilenet_v2(width_mult=0.35, num_classes=5)
    model.train()  # a train-mode model, as users hand them over: the compiler evaluates it
    for m in model.modules():  # non-trivial batch-norm statistics
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.2, 0.2)
            m.running_var.uniform_(0.5, 1.5)
    g = torch.Generator().manual_seed(4)
    calibration = [(torch.randn(1, 3, RES, RES, generator=g),) for _ in range(4)]
    return model, (torch.randn(1, 3, RES, RES, generator=g),), calibration


def _compile(mnv2, out: Path, **kw):
    model, example, calibration = mnv2
    return compile(model, example, kw.pop("board", "mps3-an547"), out, quant="int8", calibration=calibration,
                   io="int8", io_layout="nhwc", progress=False, **kw)


def _runs(ops) -> list[list[str]]:
    """The ops of each tiled run's first band (consecutive ".band0" ops)."""
    runs: list[list[str]] = []
    previous = False
    for op in ops:
        first = op.name.endswith(".band0")
        if first and not previous:
            runs.append([])
        if first:
            runs[-1].append(op.name.removesuffix(".band0"))
        previous = first
    return runs


class Blocks(torch.nn.Module):
    """A stem and torchvision's own inverted residual blocks at full
    resolution: the peak (the 6x expansion) is inside a block, so a run
    must hold the block's residual ADD, whose input is also the expansion's."""

    def __init__(self) -> None:
        super().__init__()
        ir = import_torchvision().models.mobilenetv2.InvertedResidual
        self.stem = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU6(inplace=True))
        self.blocks = torch.nn.Sequential(ir(8, 8, 1, 6), ir(8, 8, 1, 6), ir(8, 16, 2, 6))
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)).mean((2, 3)))


@pytest.fixture(scope="module")
def blocks():
    torch.manual_seed(7)
    g = torch.Generator().manual_seed(8)
    shape = (1, 3, 24, 20)
    return Blocks().eval(), (torch.randn(*shape, generator=g),), [(torch.randn(*shape, generator=g),)
                                                                   for _ in range(4)]


def test_a_run_holds_residual_adds(blocks, tmp_path: Path) -> None:
    off = _compile(blocks, tmp_path / "off", tile=False)
    on = _compile(blocks, tmp_path / "on", tile_recompute=0.10)
    runs = _runs(on.graph.ops)
    adds = [op for op in on.graph.ops if ".band" in op.name and op.code == "ADD_S8"]
    assert adds and max(len(r) for r in runs) >= 4, runs
    assert on.report["memory"]["activation_bytes"] < off.report["memory"]["activation_bytes"]
    g = np.random.default_rng(9)
    samples = [[g.integers(-128, 128, size=(1, 24, 20, 3), dtype=np.int8)] for _ in range(3)]
    assert all(np.array_equal(u, v) for u, v in zip(run_reference(off.pte, samples), run_reference(on.pte, samples)))


@pytest.fixture(scope="module")
def compiled(mnv2, tmp_path_factory):
    root = tmp_path_factory.mktemp("patch")
    off = _compile(mnv2, root / "off", tile=False, avg_pool_rounding="tflite")  # exported to .tflite
    on = _compile(mnv2, root / "on", tile_recompute=0.10, avg_pool_rounding="tflite")
    return off, on, root


def test_runs_span_several_layers_and_residual_adds(compiled) -> None:
    off, on, _ = compiled
    runs = _runs(on.graph.ops)
    assert runs, "nothing tiled"
    assert max(len(r) for r in runs) >= 3, runs
    kinds = {op.code for op in on.graph.ops if ".band" in op.name}
    assert {"CONV2D_S8", "DEPTHWISE_CONV2D_S8"} <= kinds, kinds
    peak_off = off.report["memory"]["activation_bytes"]
    peak_on = on.report["memory"]["activation_bytes"]
    assert peak_on <= 0.5 * off.report["memory"]["classic_lower_bound_bytes"], (peak_on, peak_off)
    assert on.report["macs"] == off.report["macs"] == off.report["macs_executed"]
    assert off.report["macs"] < on.report["macs_executed"] <= 1.10 * off.report["macs"]
    assert "executed: patch-based inference" in (on.out_dir / "report.txt").read_text()


def test_tiled_program_gives_the_untiled_bits_in_the_reference(compiled, mnv2) -> None:
    off, on, _ = compiled
    g = np.random.default_rng(5)
    samples = [[g.integers(-128, 128, size=(1, RES, RES, 3), dtype=np.int8)] for _ in range(3)]
    a = run_reference(off.pte, samples)
    b = run_reference(on.pte, samples)
    assert all(np.array_equal(u, v) for u, v in zip(a, b))


@needs_qemu
@needs_arm_gcc
# Two of the three in `make zoo` (CI runs it), to keep `make test` short.
@pytest.mark.parametrize("model,board", [pytest.param("mnv2", "mps3-an547", marks=pytest.mark.zoo),
                                         ("blocks", "mps3-an547"),
                                         pytest.param("blocks", "mps2-an386", marks=pytest.mark.zoo)])
def test_tiled_program_runs_bit_exact_on_the_fast_kernels(model: str, board: str, request, tmp_path: Path) -> None:
    c = _compile(request.getfixturevalue(model), tmp_path, board=board, tile_recompute=0.10)
    assert _runs(c.graph.ops)
    shape = tuple(c.report["io"]["inputs"][0]["shape"])  # logical NCHW: the runner permutes
    g = np.random.default_rng(6)
    x = g.integers(-128, 128, size=(2, *shape), dtype=np.int8)
    build_firmware(tmp_path)
    res = runner.run(tmp_path, [x], sim="qemu")
    assert res.exit_code == 0, res.raw[-800:]
    expected, tol = runner.expected(tmp_path, runner.split_samples(runner.load_meta(tmp_path), [x]))
    mismatch, _ = runner.compare(res.outputs, expected, tol)
    assert tol is None and mismatch is None, str(mismatch)


def test_a_tiled_program_is_not_exported_to_tflite(compiled) -> None:
    from torchmcu.export.tflite import ExportError, export_tflite

    off, on, _ = compiled
    with pytest.raises(ExportError, match=r"band by band .*--no-tile"):
        export_tflite(on.pte)
    assert export_tflite(off.pte)[4:8] == b"TFL3"
