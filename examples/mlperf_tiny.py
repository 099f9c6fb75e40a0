"""The MLPerf Tiny v1.0 reference models in PyTorch, plus MobileNetV2 0.35.

Layer for layer and shape for shape as the Keras references in mlcommons/tiny
(tag v1.0, benchmark/training/*): keyword_spotting/keras_model.py (ds_cnn),
visual_wake_words/vww_model.py, image_classification/keras_model.py
(resnet_v1_eembc) and anomaly_detection/keras_model.py. Weights are seeded
random (not trained); batch-norm statistics are seeded and non-trivial: the
running mean/variance are measured on a seeded calibration batch and gamma/beta
drawn at random, so activations stay well scaled and folding matters.

    model         input           params   (Keras)     MACs         arena (float32)  task
    ds_cnn        [1, 1, 49, 10]   23,756   (24,908)    2,656,768     64,000 B        KWS, 12 classes
    mobilenet_v1  [1, 3, 96, 96]  216,322  (221,794)    7,489,664    221,184 B        VWW, alpha 0.25, 2 classes
    resnet8       [1, 3, 32, 32]   78,186   (78,666)   12,501,632    196,608 B        CIFAR-10, 10 classes
    autoencoder   [1, 640]        267,928  (269,992)      264,192      3,072 B        ToyCar anomaly detection
    mobilenet_v2  [1, 3, 96, 96]  398,690  (412,770)   10,656,688    552,960 B        alpha 0.35, 2 classes

"params" counts PyTorch parameters (weights, biases, BN gamma/beta); "(Keras)"
adds the BN moving mean/variance, as a Keras model summary of the reference
counts them. MACs are the conv and linear multiply-accumulates (`count_macs`
below; torchmcu's report gives the same). "arena" is torchmcu's planned float32
activation arena for mps3-an547 (each equal to the planner's lower bound when
written). `python examples/mlperf_tiny.py` prints the first columns.

Deviations from the references, all shape-preserving:
  * TensorFlow's padding='same' pads asymmetrically when the total padding is
    odd (the extra row/column at the bottom/right). torchmcu lowers symmetric
    padding only, so:
      - DS-CNN's first conv (10x4, stride 2) on 49x10: TF pads rows 4 top / 5
        bottom and columns 1 / 1 for a 25x5 output. Here padding=(5, 1): also
        25x5 (floor((49 + 10 - 10) / 2) + 1 = 25, floor((10 + 2 - 4) / 2) + 1 = 5);
        each window sits one input row earlier than TF's.
      - MobileNet stride-2 3x3 convs on even inputs: TF pads 0 top/left and 1
        bottom/right; here padding=1, giving the same output shape
        (floor((2k + 2 - 3) / 2) + 1 = k) with windows one row/column earlier.
      All stride-1 'same' convs have odd kernels: symmetric there, as in TF.
  * Dropout layers (identity at inference) are left out.
  * DS-CNN's final pool is AveragePooling2D(pool_size=(24, 5)) in the reference
    (int(49 / 2), int(10 / 2)) on a 25x5 map: it averages rows 0..23 and drops the
    last row. Reproduced as is (nn.AvgPool2d((24, 5))).
  * The VWW MobileNetV1 reference uses plain ReLU (not ReLU6), biases on every
    conv, a stride-2 3x3 stem with 8 filters and 13 depthwise-separable blocks
    (strides 1,2,1,2,1,2,1,1,1,1,1,2,1; filters 16,32,32,64,64,128 x6,256,256),
    then AveragePooling2D over the 3x3 map, flatten, dense 2, softmax.
  * MobileNetV2 0.35 is not an MLPerf Tiny model: the standard (torchvision /
    Keras applications) layout, channels _make_divisible(c * 0.35, 8), the first
    block with expansion 1 and the rest 6, ReLU6, bias-free convs, last conv 1280.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch
from torch import nn

SEED = 0

# ---------------------------------------------------------------------------------------------
# Building blocks


def conv_bn_relu(cin: int, cout: int, kernel, stride=1, padding=0, groups: int = 1,
                 bias: bool = True, act: type[nn.Module] = nn.ReLU) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, kernel, stride=stride, padding=padding, groups=groups, bias=bias),
                         nn.BatchNorm2d(cout), act())


def depthwise_separable(cin: int, cout: int, stride: int = 1) -> nn.Sequential:
    """Keras DepthwiseConv2D(3x3, 'same') + BN + ReLU, Conv2D(1x1) + BN + ReLU."""
    return nn.Sequential(conv_bn_relu(cin, cin, 3, stride, 1, groups=cin),
                         conv_bn_relu(cin, cout, 1))


# ---------------------------------------------------------------------------------------------
# Keyword spotting: DS-CNN


class DSCNN(nn.Module):
    def __init__(self, filters: int = 64, classes: int = 12) -> None:
        super().__init__()
        # 'same' with stride 2 pads 4/5 rows in TF; symmetric (5, 1) keeps the 25x5 output.
        self.stem = conv_bn_relu(1, filters, (10, 4), stride=2, padding=(5, 1))
        self.blocks = nn.Sequential(*[depthwise_separable(filters, filters) for _ in range(4)])
        self.pool = nn.AvgPool2d((24, 5))  # the reference's (int(49/2), int(10/2)) on 25x5
        self.fc = nn.Linear(filters, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.blocks(self.stem(x)))
        return torch.softmax(self.fc(torch.flatten(x, 1)), dim=-1)


# ---------------------------------------------------------------------------------------------
# Visual wake words: MobileNetV1, alpha 0.25

MOBILENET_V1_BLOCKS = [  # (filters out, stride) of the 13 depthwise-separable blocks at alpha 0.25
    (16, 1), (32, 2), (32, 1), (64, 2), (64, 1), (128, 2),
    (128, 1), (128, 1), (128, 1), (128, 1), (128, 1), (256, 2), (256, 1),
]


class MobileNetV1(nn.Module):
    def __init__(self, classes: int = 2) -> None:
        super().__init__()
        self.stem = conv_bn_relu(3, 8, 3, stride=2, padding=1)
        layers, cin = [], 8
        for cout, stride in MOBILENET_V1_BLOCKS:
            layers.append(depthwise_separable(cin, cout, stride))
            cin = cout
        self.blocks = nn.Sequential(*layers)
        self.pool = nn.AvgPool2d(3)  # AveragePooling2D(pool_size=x.shape[1:3]) on 3x3
        self.fc = nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.blocks(self.stem(x)))
        return torch.softmax(self.fc(torch.flatten(x, 1)), dim=-1)


# ---------------------------------------------------------------------------------------------
# Image classification: ResNet-8 (resnet_v1_eembc)


class ResidualStack(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = conv_bn_relu(cin, cout, 3, stride, 1)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1)
        self.bn2 = nn.BatchNorm2d(cout)
        # The reference's 1x1 stride-2 shortcut conv has no batch norm.
        self.shortcut = nn.Conv2d(cin, cout, 1, stride) if stride != 1 or cin != cout else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.bn2(self.conv2(self.conv1(x)))
        if self.shortcut is not None:
            x = self.shortcut(x)
        return torch.relu(x + y)


class ResNet8(nn.Module):
    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.stem = conv_bn_relu(3, 16, 3, 1, 1)
        self.stacks = nn.Sequential(ResidualStack(16, 16, 1), ResidualStack(16, 32, 2), ResidualStack(32, 64, 2))
        self.pool = nn.AvgPool2d(8)
        self.fc = nn.Linear(64, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.stacks(self.stem(x)))
        return torch.softmax(self.fc(torch.flatten(x, 1)), dim=-1)


# ---------------------------------------------------------------------------------------------
# Anomaly detection: the DCASE FC autoencoder


class AutoEncoder(nn.Module):
    """Dense + BN + ReLU for 128, 128, 128, 128, 8, 128, 128, 128, 128; then Dense 640, linear."""

    def __init__(self, dim: int = 640) -> None:
        super().__init__()
        widths = [dim, 128, 128, 128, 128, 8, 128, 128, 128, 128]
        layers: list[nn.Module] = []
        for a, b in zip(widths[:-1], widths[1:]):
            layers += [nn.Linear(a, b), nn.BatchNorm1d(b), nn.ReLU()]
        layers.append(nn.Linear(128, dim))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


# ---------------------------------------------------------------------------------------------
# MobileNetV2, alpha 0.35 (VWW-style 96x96x3, 2 classes)


def _make_divisible(v: float, divisor: int = 8) -> int:
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        layers: list[nn.Module] = []
        if expand != 1:
            layers.append(conv_bn_relu(cin, hidden, 1, bias=False, act=nn.ReLU6))
        layers += [conv_bn_relu(hidden, hidden, 3, stride, 1, groups=hidden, bias=False, act=nn.ReLU6),
                   nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.conv = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        return x + y if self.residual else y


MOBILENET_V2_SETTINGS = [  # (expansion, channels, repeats, first stride)
    (1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1),
]


class MobileNetV2(nn.Module):
    def __init__(self, alpha: float = 0.35, classes: int = 2, last: int = 1280) -> None:
        super().__init__()
        cin = _make_divisible(32 * alpha)
        layers: list[nn.Module] = [conv_bn_relu(3, cin, 3, 2, 1, bias=False, act=nn.ReLU6)]
        for t, c, n, s in MOBILENET_V2_SETTINGS:
            cout = _make_divisible(c * alpha)
            for i in range(n):
                layers.append(InvertedResidual(cin, cout, s if i == 0 else 1, t))
                cin = cout
        layers.append(conv_bn_relu(cin, last, 1, bias=False, act=nn.ReLU6))
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(last, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x).mean((2, 3))
        return torch.softmax(self.fc(x), dim=-1)


# ---------------------------------------------------------------------------------------------
# Realistic (synthetic, seeded) inputs


def _mfcc_like(rng: np.random.RandomState, n: int, frames: int = 49, coeffs: int = 10,
               mel_bins: int = 40) -> np.ndarray:
    """MFCCs as the KWS reference computes them (tf.signal.mfccs_from_log_mel_spectrograms
    of log(mel magnitude + 1e-6), first 10 of 40) from smooth random mel spectrograms."""
    level = rng.normal(-1.0, 1.5, size=(n, 1, 1))  # loudness of the clip
    spectral = np.cumsum(rng.normal(0, 0.4, size=(n, 1, mel_bins)), axis=2)  # smooth spectral envelope
    temporal = np.cumsum(rng.normal(0, 0.3, size=(n, frames, 1)), axis=1)  # loudness over time
    log_mel = level + spectral + temporal + rng.normal(0, 0.5, size=(n, frames, mel_bins))
    k = np.arange(coeffs)[:, None]
    m = np.arange(mel_bins)[None, :]
    dct = 2.0 * np.cos(np.pi * k * (2 * m + 1) / (2 * mel_bins)) / np.sqrt(2.0 * mel_bins)  # DCT-II, TF scaling
    mfcc = log_mel @ dct.T
    return mfcc[:, None].astype(np.float32)  # [n, 1, 49, 10]: NCHW, one channel


def _images(rng: np.random.RandomState, n: int, size: int, scale: float) -> np.ndarray:
    """Smooth random RGB images (a blurred noise field plus per-image colour) in [0, scale]."""
    coarse = rng.uniform(0, 1, size=(n, 3, size // 8 + 1, size // 8 + 1))
    img = np.repeat(np.repeat(coarse, 8, axis=2), 8, axis=3)[:, :, :size, :size]
    img = 0.6 * img + 0.25 * rng.uniform(0, 1, size=(n, 3, 1, 1)) + 0.15 * rng.uniform(0, 1, size=img.shape)
    return (np.clip(img, 0, 1) * scale).astype(np.float32)


# calibration_<name>(n, seed): float32 [n, *input_shape], i.e. n samples each shaped
# like the example input (batch axis of 1 included): what runner.run takes as a
# batch and compile(quant="int8", calibration=...) takes as a calibration set.


def calibration_ds_cnn(n: int, seed: int = 0) -> np.ndarray:
    return _mfcc_like(np.random.RandomState(seed), n)[:, None]  # [n, 1, 1, 49, 10]


def calibration_mobilenet_v1(n: int, seed: int = 0) -> np.ndarray:
    return _images(np.random.RandomState(seed), n, 96, 1.0)[:, None]  # VWW reference: pixels / 255


def calibration_resnet8(n: int, seed: int = 0) -> np.ndarray:
    return _images(np.random.RandomState(seed), n, 32, 255.0)[:, None]  # IC reference: raw 0..255 floats


def calibration_autoencoder(n: int, seed: int = 0) -> np.ndarray:
    """5 frames x 128 log-mel bands in dB (10 log10 of mel power), as the DCASE baseline."""
    rng = np.random.RandomState(seed)
    band = -30.0 + np.cumsum(rng.normal(0, 1.0, size=(n, 1, 128)), axis=2) + rng.normal(0, 8, size=(n, 1, 1))
    frames = band + rng.normal(0, 3.0, size=(n, 5, 128))
    return frames.reshape(n, 1, 640).astype(np.float32)


def calibration_mobilenet_v2(n: int, seed: int = 0) -> np.ndarray:
    return _images(np.random.RandomState(seed), n, 96, 1.0)[:, None]


# ---------------------------------------------------------------------------------------------
# Seeded weights and batch-norm statistics


def _init(model: nn.Module, calibration: np.ndarray, seed: int) -> nn.Module:
    """Seeded random weights; BN gamma/beta random, running mean/var measured on
    `calibration` (one pass in training mode, cumulative averages)."""
    torch.manual_seed(seed)
    for m in model.modules():
        if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
            with torch.no_grad():
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0.0, 0.25)
            m.reset_running_stats()
            m.momentum = None
    model.train()
    with torch.no_grad():
        model(torch.from_numpy(calibration))
    return model.eval()


def _make(cls: Callable[[], nn.Module], calibration: Callable[[int, int], np.ndarray], seed: int,
          n_stats: int = 32) -> tuple[nn.Module, tuple[torch.Tensor]]:
    torch.manual_seed(seed)
    model = _init(cls(), calibration(n_stats, seed + 1)[:, 0], seed)  # one batch of n_stats
    example = torch.from_numpy(calibration(1, seed + 2)[0])
    return model, (example,)


def make_ds_cnn() -> tuple[nn.Module, tuple[torch.Tensor]]:
    return _make(DSCNN, calibration_ds_cnn, SEED)


def make_mobilenet_v1() -> tuple[nn.Module, tuple[torch.Tensor]]:
    return _make(MobileNetV1, calibration_mobilenet_v1, SEED)


def make_resnet8() -> tuple[nn.Module, tuple[torch.Tensor]]:
    return _make(ResNet8, calibration_resnet8, SEED)


def make_autoencoder() -> tuple[nn.Module, tuple[torch.Tensor]]:
    return _make(AutoEncoder, calibration_autoencoder, SEED, n_stats=64)


def make_mobilenet_v2() -> tuple[nn.Module, tuple[torch.Tensor]]:
    return _make(MobileNetV2, calibration_mobilenet_v2, SEED)


MODELS: dict[str, Callable[[], tuple[nn.Module, tuple[torch.Tensor]]]] = {
    "ds_cnn": make_ds_cnn,
    "mobilenet_v1": make_mobilenet_v1,
    "resnet8": make_resnet8,
    "autoencoder": make_autoencoder,
    "mobilenet_v2": make_mobilenet_v2,
}

CALIBRATION: dict[str, Callable[[int, int], np.ndarray]] = {
    "ds_cnn": calibration_ds_cnn,
    "mobilenet_v1": calibration_mobilenet_v1,
    "resnet8": calibration_resnet8,
    "autoencoder": calibration_autoencoder,
    "mobilenet_v2": calibration_mobilenet_v2,
}


# ---------------------------------------------------------------------------------------------
# Sizes


def count_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def count_macs(model: nn.Module, example: tuple[torch.Tensor, ...]) -> int:
    """Multiply-accumulates of the conv and linear layers for one inference."""
    total = 0

    def hook(m: nn.Module, inp, out) -> None:
        nonlocal total
        if isinstance(m, nn.Conv2d):
            kh, kw = m.kernel_size
            total += out.numel() // out.shape[0] * (m.in_channels // m.groups) * kh * kw
        elif isinstance(m, nn.Linear):
            total += out.numel() // out.shape[0] * m.in_features

    handles = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    try:
        with torch.no_grad():
            model(*example)
    finally:
        for h in handles:
            h.remove()
    return total


if __name__ == "__main__":
    for name, make in MODELS.items():
        model, example = make()
        out = model(*example)
        print(f"{name:<13} {str(list(example[0].shape)):<17} {count_params(model):>9,} "
              f"{count_macs(model, example):>12,}  -> {list(out.shape)}")
