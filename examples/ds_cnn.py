"""DS-CNN keyword spotting (MLPerf Tiny KWS): `torchmcu compile examples/ds_cnn.py:make`.

The model is defined in mlperf_tiny.py (seeded random weights);
`calibration(n, seed)` gives n realistic inputs for int8 calibration.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mlperf_tiny  # noqa: E402


def make() -> tuple[nn.Module, tuple[torch.Tensor]]:
    return mlperf_tiny.make_ds_cnn()


def calibration(n: int = 100, seed: int = 0) -> np.ndarray:
    return mlperf_tiny.calibration_ds_cnn(n, seed)
