"""Compiled models as firmware in QEMU on the three reference boards,
compared with PyTorch; instruction counts read back per inference and per op."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import REPO, needs_arm_gcc, needs_qemu
from torch import nn
from torchmcu.builder.firmware import build_firmware
from torchmcu.builder.size import elf_size
from torchmcu.compiler import compile
from torchmcu.sim import runner

pytestmark = [needs_qemu, needs_arm_gcc]

BOARDS = ["mps3-an547", "mps2-an505", "mps2-an386"]


@pytest.fixture(scope="session")
def digits():
    sys.path.insert(0, str(REPO / "examples"))
    import digits as d

    model, example = d.make()
    x_test, y_test = d.test_set()
    return model, example, x_test, y_test


@pytest.mark.parametrize("board", BOARDS)
def test_digits_mlp_on_board(board: str, digits, tmp_path: Path) -> None:
    model, example, x_test, _ = digits
    compile(model, example, board, tmp_path)
    elf = build_firmware(tmp_path)
    batch = x_test[:24, None, :]
    res = runner.run(tmp_path, [batch], sim="qemu", profile=True)
    assert res.exit_code == 0, res.raw[-1000:]
    expected = runner.reference(tmp_path, runner.split_samples(runner.load_meta(tmp_path), [batch]))
    mismatch, worst = runner.compare(res.outputs, expected, {"rtol": 1e-5, "atol_scale": 1e-5})
    assert mismatch is None, str(mismatch)
    # Nearly the same work every inference (the clamps branch on the data); the
    # counts move by whole SysTick periods (31.25 to 50 instructions).
    counts = [res.instructions(t) for t in res.sample_ticks]
    assert len(counts) == 24 and counts[0] > 1000 and max(counts) - min(counts) <= 0.02 * counts[0]
    # Per-op counts (the kernels' own: the profiler's cost taken out) cover
    # nearly all of the inference: the rest is the executor's per-op work, a
    # few dozen instructions. Each count is within a SysTick period.
    ops = res.kernel_instructions()
    tick = float(res.instructions_per_tick)
    assert len(ops) == 3 and 0.75 * counts[0] <= sum(ops) <= counts[0] + 4 * tick
    assert elf_size(elf).text > len((tmp_path / "model.pte").read_bytes())


class ConvNet(nn.Module):
    """conv + bn + relu, depthwise, pools, concat, softmax: the kernels on target."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.pw = nn.Conv2d(8, 6, 1)
        self.fc = nn.Linear(14, 5)

    def forward(self, x):
        x = torch.relu(self.bn(self.c1(x)))
        y = nn.functional.relu6(self.dw(x))
        y = nn.functional.max_pool2d(self.pw(y), 2)
        z = nn.functional.avg_pool2d(x, 2)
        feats = torch.cat([y, z], 1).mean((2, 3))
        return torch.softmax(self.fc(torch.tanh(feats)), -1), torch.sigmoid(feats)


@pytest.mark.parametrize("board", BOARDS)
def test_convnet_on_board(board: str, tmp_path: Path) -> None:
    torch.manual_seed(3)
    model = ConvNet().eval()
    x = torch.randn(1, 3, 16, 16)
    compile(model, (x,), board, tmp_path)
    build_firmware(tmp_path)
    xs = np.random.RandomState(0).randn(3, 1, 3, 16, 16).astype(np.float32)
    res = runner.run(tmp_path, [xs], sim="qemu")
    assert res.exit_code == 0, res.raw[-1000:]
    expected = runner.reference(tmp_path, runner.split_samples(runner.load_meta(tmp_path), [xs]))
    mismatch, worst = runner.compare(res.outputs, expected, {"rtol": 1e-5, "atol_scale": 1e-5})
    assert mismatch is None, str(mismatch)


def test_selective_build_links_only_used_kernels(digits, tmp_path: Path) -> None:
    import subprocess

    model, example, _, _ = digits
    compile(model, example, "mps3-an547", tmp_path)
    elf = build_firmware(tmp_path)
    syms = subprocess.run(["arm-none-eabi-nm", "-C", str(elf)], capture_output=True, text=True,
                          check=True).stdout
    assert "portable::linear_f32" in syms
    for unused in ("conv2d_f32", "max_pool2d_f32", "softmax_f32", "permute"):
        assert f"portable::{unused}(" not in syms, unused
    assert (tmp_path / "kernels.txt").read_text().split() == ["LINEAR_F32"]
