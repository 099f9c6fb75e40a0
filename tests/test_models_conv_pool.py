"""Models we did not write that need the conv1d, transposed-convolution,
resizing and pooling ops: torchvision's LRASPP segmentation head (adaptive
pooling, sigmoid gate, bilinear upsampling) and Mask R-CNN's mask predictor
(a stride-2 ConvTranspose2d decoder), torchaudio's Tacotron2 postnet and
WaveRNN MelResNet (Conv1d + BatchNorm1d stacks), and a small U-Net built
from torch.nn pieces (ConvTranspose2d, nn.Upsample bilinear and nearest,
skip connections).

Each is compiled at float32 (within the float tolerance of PyTorch) and at
int8 and a16w8 (bit for bit with the NumPy reference, every op integer),
and run on the host runner. tests/test_cmsis_nn_conv_pool.py runs them in
QEMU.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import assert_close, run_on_host
from test_quant import calib
from torch import nn
from torchmcu.compiler import compile
from torchmcu.frontend.compat import import_torchaudio, import_torchvision
from torchmcu.sim import runner


def _reestimate_batch_norm(model: nn.Module, shapes: list[tuple[int, ...]], batches: int = 4) -> nn.Module:
    """Random weights leave batch-norm statistics at their defaults; a few
    random batches in train mode give realistic ones (activations that do not
    vanish), then eval."""
    model.train()
    with torch.no_grad():
        for _ in range(batches):
            model(*[torch.randn(8, *s[1:]) for s in shapes])
    return model.eval()


class TinyUNet(nn.Module):
    """Two levels down (max pool), up by a ConvTranspose2d and by nn.Upsample
    (bilinear, then nearest for the side output), skip connections by cat."""

    def __init__(self, c: int = 8) -> None:
        super().__init__()

        def block(i: int, o: int) -> nn.Sequential:
            return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU())

        self.e1, self.e2, self.mid = block(3, c), block(c, 2 * c), block(2 * c, 2 * c)
        self.pool = nn.MaxPool2d(2)
        self.up1 = nn.ConvTranspose2d(2 * c, c, 2, stride=2)
        self.d1 = block(3 * c, c)
        self.up2 = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        self.d2 = block(2 * c, c)
        self.head = nn.Conv2d(c, 2, 1)
        self.side = nn.Sequential(nn.Conv2d(2 * c, 2, 1), nn.Upsample(scale_factor=4, mode="nearest"))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a = self.e1(x)
        b = self.e2(self.pool(a))
        m = self.mid(self.pool(b))
        d = self.d1(torch.cat([self.up1(m), b], 1))
        d = self.d2(torch.cat([self.up2(d), a], 1))
        return self.head(d), self.side(m)


class Lraspp(nn.Module):
    """torchvision's LRASPPHead on a low- and a high-resolution feature map,
    upsampled to the input size as LRASPP.forward does."""

    def __init__(self) -> None:
        super().__init__()
        tv = import_torchvision()
        self.head = tv.models.segmentation.lraspp.LRASPPHead(8, 16, 3, 16)

    def forward(self, low: torch.Tensor, high: torch.Tensor) -> torch.Tensor:
        out = self.head({"low": low, "high": high})
        return F.interpolate(out, size=(32, 32), mode="bilinear", align_corners=False)


def _mask_head() -> nn.Module:
    tv = import_torchvision()
    return tv.models.detection.mask_rcnn.MaskRCNNPredictor(16, 8, 3)


def _postnet() -> nn.Module:
    import_torchaudio()
    from torchaudio.models.tacotron2 import _Postnet

    return _Postnet(16, 32, 5, 3)


def _melresnet() -> nn.Module:
    ta = import_torchaudio()
    return ta.models.wavernn.MelResNet(n_res_block=2, n_freq=16, n_hidden=24, n_output=16, kernel_size=5)


# name: (factory, input shapes, op codes the int8 program holds)
MODELS = {
    "unet": (TinyUNet, [(1, 3, 16, 16)], {"TRANSPOSE_CONV2D", "RESIZE_BILINEAR", "RESIZE_NEAREST", "MAX_POOL2D"}),
    "lraspp_head": (Lraspp, [(1, 8, 16, 16), (1, 16, 4, 4)], {"RESIZE_BILINEAR"}),
    "maskrcnn_predictor": (_mask_head, [(1, 16, 7, 7)], {"TRANSPOSE_CONV2D"}),
    "tacotron2_postnet": (_postnet, [(1, 16, 20)], {"CONV2D"}),
    "wavernn_melresnet": (_melresnet, [(1, 16, 24)], {"CONV2D"}),
}


def _out_of_place(model: nn.Module) -> nn.Module:
    """torchvision's and torchaudio's ReLU(inplace=True) export as relu_,
    which capture takes once it functionalizes in-place ops (issue 15, item
    1); until then the flag is turned off, the arithmetic unchanged."""
    for m in model.modules():
        if getattr(m, "inplace", False):
            m.inplace = False
    return model


def make(name: str) -> tuple[nn.Module, list[tuple[int, ...]]]:
    torch.manual_seed(sum(map(ord, name)))
    factory, shapes, _ = MODELS[name]
    return _reestimate_batch_norm(_out_of_place(factory()), shapes), shapes


@pytest.mark.parametrize("name", sorted(MODELS))
def test_float_matches_pytorch(name: str, tmp_path: Path, host_runner) -> None:
    model, shapes = make(name)
    got, expected = run_on_host(model, tuple(torch.randn(*s) for s in shapes), tmp_path)
    assert_close(got, expected)


@pytest.mark.parametrize("quant, suffix", [("int8", "_S8"), ("a16w8", "_S16")])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_integer_bit_exact_on_host(name: str, quant: str, suffix: str, tmp_path: Path, host_runner) -> None:
    if (name, quant) == ("tacotron2_postnet", "a16w8"):
        pytest.skip("tanh has no int16 kernel: its float fallback (expf-based in the firmware, PyTorch's in the "
                    "reference) between two int16 convolutions is not bit-exact")
    model, shapes = make(name)
    with warnings.catch_warnings():
        # int8: every op integer. a16w8: sigmoid and tanh have no int16 kernel yet
        # (another family's); this family's ops must all be integer.
        warnings.simplefilter("error" if quant == "int8" else "ignore")
        c = compile(model, tuple(torch.randn(*s) for s in shapes), "mps3-an547", tmp_path, quant=quant,
                    calibration=calib(shapes), progress=False)
    used = {op.code for op in c.graph.ops}
    codes = MODELS[name][2]
    assert {code if code == "RESIZE_NEAREST" else code + suffix for code in codes} <= used, used
    mine = ("CONV2D", "TRANSPOSE_CONV2D", "RESIZE", "POOL2D")
    assert not any(code.endswith("_F32") and any(k in code for k in mine) for code in used), used
    if quant == "int8":
        assert not any(code.endswith("_F32") for code in used), used
    samples = [list(s) for s in calib(shapes, n=3, seed=1)]
    batch = [np.stack([s[i] for s in samples]) for i in range(len(shapes))]
    res = runner.run(tmp_path, batch, sim="host")
    assert res.exit_code == 0, res.raw[-1500:]
    expected, tol = runner.expected(tmp_path, samples)
    mismatch, _ = runner.compare(res.outputs, expected, tol)
    assert mismatch is None, str(mismatch)
