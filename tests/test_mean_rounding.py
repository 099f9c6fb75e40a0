"""The int8 global mean (a "mean" node: AVG_POOL2D_S8 over the whole plane,
input and output sharing one quantization) against PyTorch's q/dq mean.

PyTorch's q/dq model rounds the real mean half to even (torch.round in
quantize_per_tensor): relative to the zero point. The kernel and its NumPy
twin (reference/pool_resize.py, TFLite's AveragePool) round the raw int8 sum
half away from zero: with zero_point -128 (a ReLU or hardswish output) the
sums are negative and every tie rounds down, a bias of up to -0.12 LSB per
output on MobileNetV3's squeeze-excite means and its final pool (issue #26:
12.0 dB against PyTorch's 14.4 dB; rounding ties to even relative to the
zero point gives 14.8 dB). Strict xfail until the mean's rounding is fixed.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401  quantize_per_tensor
from torchmcu.reference import pool_resize


@pytest.mark.xfail(strict=True, reason="issue #26: the int8 mean rounds ties on the raw sum, not as PyTorch")
def test_global_mean_rounds_as_the_qdq_model() -> None:
    scale, zp = 0.02, -128  # a ReLU / hardswish output's quantization: sums far below zero
    rng = np.random.default_rng(0)
    q = rng.integers(-128, -100, size=(1, 2, 2, 64)).astype(np.int8)  # NHWC, 2x2 plane: ties are frequent
    ours = pool_resize.avg_pool2d(q, (2, 2), (1, 1)).reshape(-1).astype(np.int32)
    real = (torch.from_numpy(q.astype(np.float32)) - zp) * scale
    theirs = torch.ops.quantized_decomposed.quantize_per_tensor(real.mean((1, 2)), scale, zp, -128, 127, torch.int8)
    diff = ours - theirs.reshape(-1).numpy().astype(np.int32)
    assert (diff == 0).all(), f"{np.count_nonzero(diff)} of {diff.size} outputs off, mean {diff.mean():+.3f} LSB"
