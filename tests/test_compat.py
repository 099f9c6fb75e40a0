"""torchvision's and torchaudio's models beside the CPU-only torch
(torchmcu.frontend.compat): the imports that fail plainly work, the models
build and run, and the compiled operators stay unavailable with their own
error."""

from __future__ import annotations

import importlib.util

import pytest
import torch
from torchmcu.frontend.compat import import_torchaudio, import_torchvision

needs_tv = pytest.mark.skipif(importlib.util.find_spec("torchvision") is None,
                              reason="torchvision not installed (make setup installs 0.28.0)")
needs_ta = pytest.mark.skipif(importlib.util.find_spec("torchaudio") is None,
                              reason="torchaudio not installed (make setup installs 2.11.0)")


@needs_tv
def test_torchvision_models_build_and_run() -> None:
    tv = import_torchvision()
    model = tv.models.mobilenet_v3_small(num_classes=10).eval()
    with torch.no_grad():
        assert model(torch.randn(1, 3, 64, 64)).shape == (1, 10)
    assert import_torchvision() is tv  # a second call is the same module


@needs_tv
def test_torchvision_compiled_ops_still_say_they_are_missing() -> None:
    tv = import_torchvision()
    try:
        tv.ops.nms(torch.rand(3, 4), torch.rand(3), 0.5)
    except RuntimeError as e:
        assert "C++ ops" in str(e) or "nms" in str(e)
    # (where torchvision's own library loads, nms simply runs)


@needs_ta
def test_torchaudio_conformer_builds_and_runs() -> None:
    ta = import_torchaudio()
    model = ta.models.Conformer(input_dim=80, num_heads=4, ffn_dim=128, num_layers=2,
                                depthwise_conv_kernel_size=31).eval()
    with torch.no_grad():
        out, lengths = model(torch.randn(1, 49, 80), torch.tensor([49]))
    assert out.shape == (1, 49, 80) and lengths.tolist() == [49]
