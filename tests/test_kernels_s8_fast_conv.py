"""The int8 conv2d fast path (firmware/kernels/fast/conv/conv2d_s8.h: a GEMM of
2 output channels x 4 pixels with VMLADAVA on the M55, 1 x 4 or 1 x 2 with SMLAD on
the DSP targets, over an interleaved im2col buffer) bit for bit against the NumPy
reference, in QEMU on the M4 (mps2-an386), the M33 (mps2-an505) and the M55
(mps3-an547), and against the same firmware built with the generic kernels.

The shapes are the ones the fast path treats differently: K = kh * kw * C of
1, 2, 8, 13, 20, 27, 70, 144, 288, 576 (MVE: lead bytes 15 down to 0, one
chunk to 36; DSP: tails of 1 to 3 taps, the weights' tail word from bytes when
K < 4, 4 pixels up to K = 288 and 2 beyond), 1x1 kernels read in place (strided
too, with a tail: copied first), padding on every side, stride 2, dilation 2
(the per-tap gather; MVE's gathers by offsets for K <= 64), pixel counts that are no multiple of 4 (the last group
of 1 to 3 pixels) and a batch of 2, odd output channel counts (MVE's single
channel block), 70 output channels (two chunks of folded biases), patches
beyond the buffer (K = 630, 840 and 1050: the K-tiled path, run_wide; MVE
chunks of up to 576 with the last one's lead bytes, DSP chunks of up to 224
taps with tails of 2, blocks of 32 output channels, 37 of them: a second
block of 5, odd; 6 pixels: a last group of 2), ReLUs (zero
point -128: the pad value -128), a conv whose channels share one multiplier
(per-tensor in effect) and an output whose multipliers exceed 1 (positive
shifts: its calibration cancels the taps, its test inputs do not).
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

N, H, W = 2, 17, 13


class ConvPaths(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        conv = conv_maker(7)

        self.expand = conv(1, 3, 1)  # K = 1
        self.stem3 = conv(3, 8, 3, stride=2, padding=1)  # K = 27: 9 x 7 = 63 pixels per image
        self.stem1 = conv(1, 11, (5, 4), stride=2, padding=(2, 1))  # K = 20, 9 x 6 = 54 pixels
        self.pw = conv(8, 13, 1)  # K = 8, 13 output channels
        self.pw_s2 = conv(13, 5, 1, stride=2)  # K = 13 in place, strided: 5 x 4
        self.up = conv(13, 16, 1)
        self.same = conv(16, 16, 3, padding=1)  # K = 144, one multiplier for all channels
        with torch.no_grad():  # every channel's largest |w| equal: equal weight scales
            w = self.same.weight
            w.mul_(1.0 / w.abs().amax(dim=(1, 2, 3), keepdim=True))
        self.dil = conv(16, 7, 3, padding=2, dilation=2)  # K = 144, taps 2 apart
        self.dil_small = conv(16, 5, 2, padding=1, dilation=2)  # K = 64: MVE's offset gathers, dilated
        self.down = conv(16, 32, 3, stride=2, padding=1)  # 5 x 4
        self.wide = conv(32, 70, 3, padding=1)  # K = 288, 70 output channels
        self.pw70 = conv(70, 64, 1)  # K = 70
        self.deep = conv(64, 9, 3, padding=1)  # K = 576
        self.big = conv(70, 9, 3, padding=1)  # K = 630: K-tiled (run_wide), 2 MVE chunks, 3 DSP ones
        self.huge = conv(70, 37, (3, 5), stride=(2, 1), padding=(1, 2))  # K = 1050, 37 channels, 3 x 4 pixels
        self.tall = conv(70, 6, (3, 4))  # K = 840, 3 x 1 pixels per image (6: a last group of 2)
        # Taps +a and -a across the width; calibration inputs are constant
        # across the width, so the output scale is the quantizer's floor and
        # the larger a's multipliers exceed 1 (positive shifts). K = 2.
        self.cancel = nn.Conv2d(1, 6, (1, 2), bias=True)
        with torch.no_grad():
            a = torch.linspace(0.05, 16.0, 6)
            self.cancel.weight.copy_(torch.stack([a, -a], 1).reshape(6, 1, 1, 2))
            self.cancel.bias.copy_(torch.linspace(-3e-5, 3e-5, 6))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        s = torch.relu(self.stem3(torch.relu(self.expand(x))))
        p = self.pw(s)
        u = torch.relu(self.up(p))
        v = torch.relu(self.same(u))
        f = torch.relu(self.wide(torch.relu(self.down(v))))
        h = self.deep(torch.relu(self.pw70(f))) + self.big(f)
        return (torch.clamp(self.stem1(x), 0, 6), self.pw_s2(torch.relu(p)), self.dil(v), self.dil_small(u), h,
                self.cancel(x), self.huge(f), self.tall(f))


@needs_qemu
@needs_arm_gcc
# The M33 runs the M4's DSP paths: in `make zoo` (CI runs it), to keep `make test` short.
@pytest.mark.parametrize("board", ["mps2-an386", pytest.param("mps2-an505", marks=pytest.mark.zoo), "mps3-an547"])
def test_conv_fast_path_bit_exact_in_qemu(board: str, tmp_path: Path) -> None:
    model = ConvPaths().eval()
    example = (torch.zeros(N, 1, H, W),)
    c = compile(model, example, board, tmp_path, quant="int8", calibration=calibration(16, (N, 1, H), W), progress=False,
                io="int8")
    convs = [op for op in c.graph.ops if op.code == "CONV2D_S8"]
    assert len(convs) == 17, [op.code for op in c.graph.ops]
    g = np.random.default_rng(1)
    # Beyond the calibration range and not constant across the width.
    x = g.uniform(-1.0, 4.0, size=(3, N, 1, H, W)).astype(np.float32)
    report_ops, fast_k, slow_k, outputs = fast_and_generic(tmp_path, x)
    # The cancelling output saturates somewhere (its multipliers exceed 1).
    assert (np.abs(outputs[5].astype(np.int32)) >= 127).any()
    # The fast path ran: it costs far less than the generic kernels in every
    # convolution, the K-tiled ones too.
    ops = [(i, op) for i, op in enumerate(report_ops) if op["kind"] == "conv2d"]
    lines = []
    for i, op in ops:
        lines.append(f"{op['name']}: {op.get('macs', 0):,} MACs, {fast_k[i]:,} fast, {slow_k[i]:,} generic")
        assert fast_k[i] < 0.7 * slow_k[i], lines[-1]
    print(f"{board}:\n  " + "\n  ".join(lines))
