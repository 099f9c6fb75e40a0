"""The int8 depthwise fast paths (firmware/kernels/fast/conv/dwconv_s8.h:
the row-group paths, MVE on the M55 and SMLAD on the M4/M33, and the
per-pixel paths they fall back to) bit for bit against the NumPy reference,
in QEMU on the M4 (mps2-an386), the M33 (mps2-an505) and the M55
(mps3-an547). The host and the M3 build the generic kernels, which
test_kernels_s8.py checks.

One firmware per board runs a model of depthwise convolutions in the shapes
the paths treat differently: 3x3 with padding 1 at strides 1 and 2, output
heights that are no multiple of the 4-row groups (13, 7, 3: the tail group
repeats its last row) and narrow and odd widths (the last buffer column
alone), channel counts 1, 2, 11, 24 (no multiple of 4 or 16), kernels 3x1,
1x3, 2x2 (even: asymmetric windows), an unpadded 3x3, a height dilation
(the row path) and a width dilation, a 5x5 kernel, stride 3, a depth
multiplier of 2 and a row wider than the buffer (the per-pixel and generic
fallbacks), input zero points -128 (after a ReLU: the padded value -128)
and others, a ReLU6 clamp, and a second output whose multipliers exceed 1
(positive shifts: its calibration cancels the taps, its test inputs do not,
so its outputs saturate). Two images per batch; several samples, random
inputs beyond the calibration range.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import needs_arm_gcc, needs_qemu
from fast_s8_runs import calibration, conv_maker, fast_and_generic
from torch import nn
from torchmcu.compiler import compile

H, W = 25, 70  # input: the stem's stride (2, 10) makes 13 x 7; the wide branch keeps 70


class DepthwisePaths(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        conv = conv_maker(23)

        def dw(c: int, k, **kw) -> nn.Conv2d:
            return conv(c, kw.pop("out", c), k, groups=c, **kw)

        self.stem = conv(2, 11, 3, stride=(2, 10), padding=1)  # 13 x 7 x 11
        self.dw1 = dw(11, 3, padding=1)  # 13 rows: 3 groups of 4 and a tail of 1; 11 channels
        self.dw2 = dw(11, 3, stride=2, padding=1)  # 7 x 4: stride 2, a tail of 3 rows
        self.up = conv(11, 24, 1)
        self.dw3 = dw(24, (3, 1), padding=(1, 0))  # 3x1
        self.dw4 = dw(24, (1, 3), padding=(0, 1))  # 1x3
        self.dw5 = dw(24, 2, padding=1)  # 2x2: 8 x 5
        self.dw6 = dw(24, 3)  # no padding: 6 x 3
        self.dw7 = dw(24, 3, padding=(2, 1), dilation=(2, 1))  # height dilation: the row path
        self.dw8 = dw(24, 3, padding=2, dilation=2)  # width dilation: the per-pixel path
        self.dw9 = dw(24, 5, padding=2)  # 5x5: the per-pixel path
        self.dw10 = dw(24, 3, stride=3, padding=1)  # stride 3: the per-pixel path, 2 x 1
        self.dw11 = dw(24, 3, padding=1, out=48)  # depth multiplier 2: the generic kernel
        self.dw12 = dw(48, 3, padding=1)  # 2 x 1 x 48 (3 rows: one tail group)
        self.wide = dw(2, 3, padding=1)  # 25 x 70 x 2: wider than the buffers (per-pixel path)
        self.wide2 = dw(2, 3, stride=2, padding=1)  # 13 x 15 x 2: two channels, the row paths
        # Second output: taps +a and -a across the width on 2 channels;
        # calibration inputs are constant across the width, so the
        # calibrated output range is the bias alone, the output scale the
        # quantizer's floor 2^-12, and the multipliers exceed 1.
        self.cancel = nn.Conv2d(2, 2, (1, 2), groups=2, bias=True)
        with torch.no_grad():
            a = torch.tensor([0.5, 12.0])
            self.cancel.weight.copy_(torch.stack([a, -a], 1).reshape(2, 1, 1, 2))
            self.cancel.bias.copy_(torch.tensor([-3e-5, 3e-5]))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        y = torch.relu(self.stem(x))
        y = self.dw1(y)
        y = torch.relu(self.dw2(y))
        y = self.up(y)
        y = torch.clamp(self.dw3(y), 0, 6)
        y = self.dw4(y)
        y = self.dw5(y)
        y = torch.relu(self.dw6(y))
        y = self.dw7(y)
        y = self.dw8(y)
        y = self.dw9(y)
        y = self.dw10(y)
        y = self.dw12(self.dw11(y))
        wide = self.wide2(torch.relu(self.wide(x))[:, :, :, :30])
        return y, wide, self.cancel(x[:, :, :, :16])


# The row paths' ops: on the M55 (MVE) kernels up to 4x4 with at least 16
# outputs per channel; on the M4 and M33 (DSP) 3x3 kernels.
ROW_PATH = {
    "mve": ["conv2d_1", "conv2d_2", "conv2d_4", "conv2d_5", "conv2d_6", "conv2d_7", "conv2d_8", "conv2d_15",
            "conv2d_16"],
    "dsp": ["conv2d_1", "conv2d_2", "conv2d_7", "conv2d_8", "conv2d_15"],
}


@needs_qemu
@needs_arm_gcc
# The M33 runs the M4's DSP paths: in `make zoo` (CI runs it), to keep `make test` short.
@pytest.mark.parametrize("board", ["mps2-an386", pytest.param("mps2-an505", marks=pytest.mark.zoo), "mps3-an547"])
def test_depthwise_fast_paths_bit_exact_in_qemu(board: str, tmp_path: Path) -> None:
    model = DepthwisePaths().eval()
    example = (torch.zeros(2, 2, H, W),)
    c = compile(model, example, board, tmp_path, quant="int8", calibration=calibration(16, (2, 2, H), W), progress=False,
                io="int8")
    codes = [op.code for op in c.graph.ops]
    assert codes.count("DEPTHWISE_CONV2D_S8") == 15, codes
    g = np.random.default_rng(1)
    # Beyond the calibration range (negative values clamp to the zero point
    # -128 region after the ReLUs), and not constant across the width.
    x = g.uniform(-1.0, 4.0, size=(3, 2, 2, H, W)).astype(np.float32)
    ops, fast_k, slow_k, outputs = fast_and_generic(tmp_path, x)
    # The third output saturates somewhere (its multipliers exceed 1).
    assert (np.abs(outputs[2].astype(np.int32)) >= 127).any()
    # The fast paths ran: they cost less than the generic kernels in the depthwise ops.
    names = [op["name"] for op in ops]
    fast_ops, slow_ops = dict(zip(names, fast_k)), dict(zip(names, slow_k))
    for name in names:
        if name.startswith("conv2d"):
            print(f"{board} {name}: {fast_ops[name]:,} instructions fast, {slow_ops[name]:,} generic")
    for name in ROW_PATH["mve" if board == "mps3-an547" else "dsp"]:
        assert fast_ops[name] < 0.5 * slow_ops[name], (name, fast_ops[name], slow_ops[name])
