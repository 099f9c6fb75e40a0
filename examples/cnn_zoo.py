"""torchvision CNNs as a user takes them, with seeded random weights.

    model                 input          constructor
    mobilenet_v2          [1, 3, 96, 96] mobilenet_v2(width_mult=0.35)
    mobilenet_v3_small    [1, 3, 96, 96] mobilenet_v3_small()
    shufflenet_v2_x0_5    [1, 3, 96, 96] shufflenet_v2_x0_5()
    squeezenet1_1         [1, 3, 96, 96] squeezenet1_1()
    mnasnet0_5            [1, 3, 96, 96] mnasnet0_5()
    efficientnet_b0       [1, 3, 64, 64] efficientnet_b0()
    resnet18              [1, 3, 64, 64] resnet18()

Each with a 10-class head (an MCU-sized one; the feature extractors are
torchvision's own) and its batch-norm statistics re-estimated on random
batches (torchmcu.frontend.batchnorm), without which a random network's
activations vanish and int8 rounds them all to zero. resnet18 and
efficientnet_b0 take 64x64: at 96x96 their MACs (334 M, 70 M) make a float
run in QEMU minutes long. torchvision imports through
torchmcu.frontend.compat (its CUDA wheel's operators do not load beside the
CPU torch; the model definitions need none of them).

Used by tests/test_zoo_cnn.py (`make zoo`) and bench/zoo.py (`make bench`).
`torchmcu compile examples/cnn_zoo.py:make_mobilenet_v2 --board mps3-an547 ...`
compiles one from the command line.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torchmcu.frontend.batchnorm import reestimate_batch_norm
from torchmcu.frontend.compat import import_torchvision

NUM_CLASSES = 10


def _tv() -> Any:
    return import_torchvision().models


# name: (constructor, input side)
MODELS: dict[str, tuple[Callable[[], torch.nn.Module], int]] = {
    "mobilenet_v2": (lambda: _tv().mobilenet_v2(width_mult=0.35, num_classes=NUM_CLASSES), 96),
    "mobilenet_v3_small": (lambda: _tv().mobilenet_v3_small(num_classes=NUM_CLASSES), 96),
    "shufflenet_v2_x0_5": (lambda: _tv().shufflenet_v2_x0_5(num_classes=NUM_CLASSES), 96),
    "squeezenet1_1": (lambda: _tv().squeezenet1_1(num_classes=NUM_CLASSES), 96),
    "mnasnet0_5": (lambda: _tv().mnasnet0_5(num_classes=NUM_CLASSES), 96),
    "efficientnet_b0": (lambda: _tv().efficientnet_b0(num_classes=NUM_CLASSES), 64),
    "resnet18": (lambda: _tv().resnet18(num_classes=NUM_CLASSES), 64),
}


def make(name: str) -> tuple[torch.nn.Module, tuple[torch.Tensor]]:
    """The model (eval mode, BN re-estimated) and an example input, seeded by name."""
    build, side = MODELS[name]
    torch.manual_seed(sum(map(ord, name)))
    model = reestimate_batch_norm(build(), [torch.randn(8, 3, side, side) for _ in range(2)])
    return model, (torch.randn(1, 3, side, side),)


def calibration(name: str, n: int = 8, seed: int = 0) -> list[tuple[torch.Tensor]]:
    """n random calibration samples shaped as the model's input."""
    side = MODELS[name][1]
    g = torch.Generator().manual_seed(seed + sum(map(ord, name)))
    return [(torch.randn(1, 3, side, side, generator=g),) for _ in range(n)]


def _maker(name: str) -> Callable[[], tuple[torch.nn.Module, tuple[torch.Tensor]]]:
    return lambda: make(name)


make_mobilenet_v2 = _maker("mobilenet_v2")
make_mobilenet_v3_small = _maker("mobilenet_v3_small")
make_shufflenet_v2_x0_5 = _maker("shufflenet_v2_x0_5")
make_squeezenet1_1 = _maker("squeezenet1_1")
make_mnasnet0_5 = _maker("mnasnet0_5")
make_efficientnet_b0 = _maker("efficientnet_b0")
make_resnet18 = _maker("resnet18")
