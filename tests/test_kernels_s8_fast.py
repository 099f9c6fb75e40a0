"""The int8 fast paths (firmware/kernels/fast/conv/conv2d_s8.h, dwconv_s8.h: SMLAD on
DSP targets, MVE on the M55) bit for bit against the NumPy reference, in QEMU
on the M4 (mps2-an386), the M33 (mps2-an505) and the M55 (mps3-an547). The
host and the M3 build the generic kernels, which test_kernels_s8.py checks.

One firmware per board runs a model made of the shapes the fast paths treat
differently: one input channel and a tall kernel (the stem of DS-CNN),
padding, strides, dilation, channel counts that are no multiple of 4 or 16
(the GEMM's remainder channels, the MVE tails), an odd pixel count (the last
pixel alone), more than 64 output channels (two chunks of folded biases),
1x1 kernels read in place (strided too), a residual ADD (MVE, binary_s8.cc),
a dilated patch beyond the im2col buffer (K = 630: the K-tiled path), ReLUs (zero point -128: the pad
value -128) and a second output whose multipliers exceed 1 (positive
shifts: its calibration cancels the taps, its test inputs do not, so
the outputs saturate). Several samples, random inputs beyond the
calibration range.
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

H, W = 13, 7  # the stem's output: 13 x 7 = 91 pixels, an odd count


class FastPaths(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        conv = conv_maker(19)

        self.stem = conv(1, 11, (5, 3), stride=(2, 1), padding=(2, 1))  # K = 15, in place of DS-CNN's 10x4
        self.dw = conv(11, 11, 3, padding=1, groups=11)  # 11 channels: MVE tail of 3
        self.pw = conv(11, 21, 1)  # K = 11 < 16, 21 = 5 x 4 + 1 output channels
        self.res = conv(21, 21, 1)  # y + res(y): ADD of equal shapes, 1911 = 4 x 477 + 3 elements
        self.pw_s2 = conv(21, 21, 1, stride=2)  # 1x1 in place, strided: 4 x 4
        self.dw_s2 = conv(21, 21, 3, stride=2, padding=1, groups=21)  # 16 + 5 channels, stride 2: 2 x 2
        self.up = conv(21, 70, 1)  # 70 output channels: two chunks
        self.dil = conv(70, 9, 3, padding=2, dilation=2)  # K = 630 > 576: K-tiled (run_wide)
        self.mix = conv(9, 13, 3, padding=1)  # K = 81, 13 output channels
        # Second output: taps +a and -a across the width; calibration inputs
        # are constant across the width, so the calibrated output range is
        # the bias alone, the output scale the quantizer's floor 2^-12, and
        # the multipliers of the larger a exceed 1 (shifts -5 to 3).
        self.cancel = nn.Conv2d(1, 6, (1, 2), bias=True)
        with torch.no_grad():
            a = torch.linspace(0.05, 16.0, 6)
            self.cancel.weight.copy_(torch.stack([a, -a], 1).reshape(6, 1, 1, 2))
            self.cancel.bias.copy_(torch.linspace(-3e-5, 3e-5, 6))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.relu(self.stem(x))
        y = torch.relu(self.dw(y))
        y = self.pw(y)
        y = y + self.res(y)
        y = torch.relu(self.pw_s2(y))
        y = torch.clamp(self.dw_s2(y), 0, 6)
        y = torch.relu(self.up(y))
        y = self.dil(y)
        y = self.mix(y)
        return y, self.cancel(x)


@needs_qemu
@needs_arm_gcc
# The M33 runs the M4's DSP paths: in `make zoo` (CI runs it), to keep `make test` short.
@pytest.mark.parametrize("board", ["mps2-an386", pytest.param("mps2-an505", marks=pytest.mark.zoo), "mps3-an547"])
def test_fast_paths_bit_exact_in_qemu(board: str, tmp_path: Path) -> None:
    model = FastPaths().eval()
    example = (torch.zeros(1, 1, 2 * H - 1, W),)
    c = compile(model, example, board, tmp_path, quant="int8", calibration=calibration(16, (1, 1, 2 * H - 1), W), progress=False,
                io="int8")
    codes = {op.code for op in c.graph.ops}
    assert {"CONV2D_S8", "DEPTHWISE_CONV2D_S8"} <= codes, codes
    g = np.random.default_rng(1)
    # Beyond the calibration range (negative values clamp to the zero point
    # -128 region), and not constant across the width.
    x = g.uniform(-1.0, 4.0, size=(4, 1, 1, 2 * H - 1, W)).astype(np.float32)
    ops, fast_k, slow_k, outputs = fast_and_generic(tmp_path, x)
    # The second output saturates somewhere (its multipliers exceed 1).
    assert (np.abs(outputs[1].astype(np.int32)) >= 127).any()
    # The fast paths ran: they cost less than the generic kernels in the ops
    # they take (all convolutions, the K = 630 one too, and the ADD).
    fast_convs = [i for i, op in enumerate(ops) if op["kind"] in ("conv2d", "add")]
    fast = sum(fast_k[i] for i in fast_convs)
    slow = sum(slow_k[i] for i in fast_convs)
    print(f"{board}: convolutions {fast:,} instructions fast, {slow:,} generic")
    assert fast < 0.6 * slow, (fast, slow)
