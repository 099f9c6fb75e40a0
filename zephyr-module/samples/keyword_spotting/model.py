"""The sample's model: MLPerf Tiny's DS-CNN keyword spotter as bundled in
examples/mlperf_tiny.py (seeded random weights, not trained), with its
calibration data and one input. The sample's CMakeLists.txt names these
functions in TORCHMCU_MODEL, TORCHMCU_CALIBRATION and TORCHMCU_INPUT."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
import mlperf_tiny

CALIBRATION_SAMPLES = 32


def make() -> tuple[nn.Module, tuple[torch.Tensor]]:
    return mlperf_tiny.make_ds_cnn()


def calibration() -> np.ndarray:
    """MFCC-like inputs, samples along axis 0, as tests/test_models_int8.py calibrates."""
    return mlperf_tiny.calibration_ds_cnn(CALIBRATION_SAMPLES, 0)


def sample_input() -> np.ndarray:
    """One input of another seed than the calibration: the sample the firmware runs."""
    return mlperf_tiny.calibration_ds_cnn(1, 3)
