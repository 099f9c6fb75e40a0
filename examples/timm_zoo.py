"""timm's MCU-class families as a user takes them, with seeded random weights.

    model                  family       input
    mobilenetv3_small_050  MobileNetV3  [1, 3, 64, 64]
    lcnet_050              LCNet        [1, 3, 64, 64]
    tinynet_e              TinyNet      [1, 3, 64, 64]
    mnasnet_small          MNASNet      [1, 3, 64, 64]
    ghostnet_050           GhostNet     [1, 3, 64, 64]
    repghostnet_050        RepGhost     [1, 3, 64, 64]
    mobileone_s0           MobileOne    [1, 3, 64, 64]
    mobilevit_xxs          MobileViT    [1, 3, 64, 64]
    efficientvit_m0        EfficientViT [1, 3, 64, 64]
    regnetx_002            RegNet       [1, 3, 64, 64]
    resnet10t              ResNet-T     [1, 3, 64, 64]

The smallest variant of each family, `timm.create_model(name,
pretrained=False, num_classes=10)` (timm 1.0.31; an MCU-sized head, the
feature extractors are timm's own), in eval mode with its batch-norm
statistics re-estimated on random batches (torchmcu.frontend.batchnorm).
Every one also takes 32x32; 64x64 keeps the later stages' feature maps
larger than one pixel (MobileViT's 2x2 patches, EfficientViT's 16x stem).
MobileOne and RepGhost are built as timm builds them for training (their
re-parameterizable branches unfolded): what a user gets from create_model.
timm imports torchvision, so a model file imports it through
torchmcu.frontend.compat first (its CUDA wheel's operators do not load
beside the CPU torch; no model here needs them).

Used by tests/test_zoo_timm.py (`make zoo`), which compiles each as a user
would: `torchmcu compile examples/timm_zoo.py:make_lcnet_050 --board
mps3-an547 -o out --quant int8 --calibration cal.npz`.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torchmcu.frontend.batchnorm import reestimate_batch_norm
from torchmcu.frontend.compat import import_torchvision

NUM_CLASSES = 10
SIDE = 64

# name: family
MODELS: dict[str, str] = {
    "mobilenetv3_small_050": "MobileNetV3",
    "lcnet_050": "LCNet",
    "tinynet_e": "TinyNet",
    "mnasnet_small": "MNASNet",
    "ghostnet_050": "GhostNet",
    "repghostnet_050": "RepGhost",
    "mobileone_s0": "MobileOne",
    "mobilevit_xxs": "MobileViT",
    "efficientvit_m0": "EfficientViT",
    "regnetx_002": "RegNet",
    "resnet10t": "ResNet-T",
}


def _timm() -> Any:
    import_torchvision()  # before timm, which imports torchvision
    import timm
    return timm


def make(name: str) -> tuple[torch.nn.Module, tuple[torch.Tensor]]:
    """The model (eval mode, BN re-estimated) and an example input, seeded by name."""
    if name not in MODELS:
        raise KeyError(f"{name}: not in the timm zoo ({', '.join(MODELS)})")
    torch.manual_seed(sum(map(ord, name)))
    model = _timm().create_model(name, pretrained=False, num_classes=NUM_CLASSES)
    model = reestimate_batch_norm(model, [torch.randn(8, 3, SIDE, SIDE) for _ in range(2)])
    return model, (torch.randn(1, 3, SIDE, SIDE),)


def calibration(name: str, n: int = 8, seed: int = 0) -> list[tuple[torch.Tensor]]:
    """n random calibration samples shaped as the model's input."""
    g = torch.Generator().manual_seed(seed + sum(map(ord, name)))
    return [(torch.randn(1, 3, SIDE, SIDE, generator=g),) for _ in range(n)]


def _maker(name: str) -> Callable[[], tuple[torch.nn.Module, tuple[torch.Tensor]]]:
    return lambda: make(name)


make_mobilenetv3_small_050 = _maker("mobilenetv3_small_050")
make_lcnet_050 = _maker("lcnet_050")
make_tinynet_e = _maker("tinynet_e")
make_mnasnet_small = _maker("mnasnet_small")
make_ghostnet_050 = _maker("ghostnet_050")
make_repghostnet_050 = _maker("repghostnet_050")
make_mobileone_s0 = _maker("mobileone_s0")
make_mobilevit_xxs = _maker("mobilevit_xxs")
make_efficientvit_m0 = _maker("efficientvit_m0")
make_regnetx_002 = _maker("regnetx_002")
make_resnet10t = _maker("resnet10t")
