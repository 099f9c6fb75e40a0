"""What the int8 fast-path tests (test_kernels_s8_fast*.py) share: the
calibration, seeded conv weights, and one run of a compiled model in QEMU
with the fast paths and again with the generic kernels."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torchmcu.builder.firmware import build_firmware
from torchmcu.sim import runner


def calibration(n: int, shape: tuple[int, ...], width: int) -> list[tuple[torch.Tensor]]:
    """n samples of `shape` (width last, left out), constant across the width."""
    g = np.random.default_rng(0)
    rows = g.uniform(0.0, 3.0, size=(n, *shape, 1)).astype(np.float32)
    return [(torch.from_numpy(np.repeat(r, width, axis=-1)),) for r in rows]


def conv_maker(seed: int):
    """nn.Conv2d(...) with weights scaled to keep activations in range."""
    g = torch.Generator().manual_seed(seed)

    def conv(*args, **kw) -> nn.Conv2d:
        c = nn.Conv2d(*args, **kw)
        with torch.no_grad():
            c.weight.copy_(torch.randn(c.weight.shape, generator=g) / (c.weight[0].numel() ** 0.5))
            if c.bias is not None:
                c.bias.copy_(torch.randn(c.bias.shape, generator=g) * 0.1)
        return c

    return conv


def fast_and_generic(out: Path, x: np.ndarray) -> tuple[list[dict], list[int], list[int], list[np.ndarray]]:
    """Builds and runs the compiled model in `out` on `x` in QEMU: bit-exact
    with the reference; then built with the generic kernels
    (-DTMCU_S8_GENERIC, kernels/fast/fast.h), the same outputs. Returns the report's
    ops, each op's kernel instructions fast and generic, and the outputs."""
    build_firmware(out)
    res = runner.run(out, [x], sim="qemu", profile=True)
    assert res.exit_code == 0, res.raw[-1000:]
    expected, tol = runner.expected(out, runner.split_samples(runner.load_meta(out), [x]))
    assert tol is None
    mismatch, _ = runner.compare(res.outputs, expected, tol)
    assert mismatch is None, str(mismatch)
    build_firmware(out, opt="-Os -DTMCU_S8_GENERIC")
    generic = runner.run(out, [x], sim="qemu", profile=True)
    assert generic.exit_code == 0, generic.raw[-1000:]
    for a, b in zip(res.outputs, generic.outputs):
        np.testing.assert_array_equal(a, b)
    ops = json.loads((out / "report.json").read_text())["ops"]
    return ops, res.kernel_instructions(), generic.kernel_instructions(), res.outputs
