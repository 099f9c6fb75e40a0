"""Convolutional and attention models of the sequence zoo, with seeded random weights.

    model                  input          layers
    tcn_kws                [1, 10, 49]    Conv1d 10->40 (1x1); 4 residual blocks of causal dilated
                                          Conv1d(40, 40, 3, dilation 1, 2, 4, 8) + BatchNorm1d + ReLU;
                                          mean over time; Linear -> 12
    conformer              [1, 16, 80]    torchaudio's Conformer (input_dim 80, 4 heads, ffn_dim 128,
                                          2 layers, depthwise kernel 31) on 16 frames, no padding mask
    transformer_post       [1, 32, 64]    nn.TransformerEncoder: 2 nn.TransformerEncoderLayer(d_model 64,
    transformer_pre                       4 heads, FFN 128, batch_first), norm_first False / True
    kwt                    [1, 16, 16]    keyword-transformer-style tiny ViT (TinyViT("linear") below,
                                          also tests/test_attention.py's): each frame's 16 bins embedded by a Linear,
                                          a class token concatenated, learned position embedding,
                                          2 pre-norm encoder layers, head on the class token -> 12

The TCN's batch norms are re-estimated on random batches (as
torchmcu.frontend.batchnorm explains) so that int8 means something.
The Conformer is bench/transformer.py's wrapper (its layers on a full-length
sequence: the padding mask's .item() on the lengths cannot be exported).

Usage: `torchmcu compile examples/sequence_zoo.py:make_tcn_kws --board mps3-an547 ...`
(`make_*` return (model, example_inputs)); `calibration(name, n)` gives seeded
calibration samples shaped as the model's inputs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

REPO = Path(__file__).resolve().parents[1]
MFCC, FRAMES, CLASSES, CHANNELS = 10, 49, 12, 40


class CausalBlock(nn.Module):
    """A residual block: causal dilated conv (left padding only: no frame
    sees the future), batch norm, ReLU, added to its input."""

    def __init__(self, channels: int, dilation: int, kernel: int = 3) -> None:
        super().__init__()
        self.pad = (kernel - 1) * dilation
        self.conv = nn.Conv1d(channels, channels, kernel, dilation=dilation)
        self.bn = nn.BatchNorm1d(channels)

    def forward(self, x):
        return x + F.relu(self.bn(self.conv(F.pad(x, (self.pad, 0)))))


class TcnKws(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv1d(MFCC, CHANNELS, 1)
        self.blocks = nn.Sequential(*(CausalBlock(CHANNELS, d) for d in (1, 2, 4, 8)))
        self.fc = nn.Linear(CHANNELS, CLASSES)

    def forward(self, x):  # [N, MFCC, frames]
        return self.fc(self.blocks(self.stem(x)).mean(2))


def _bench_conformer() -> type[nn.Module]:
    sys.path.insert(0, str(REPO / "bench"))
    try:
        from transformer import Conformer  # bench/transformer.py
    finally:
        sys.path.remove(str(REPO / "bench"))
    return Conformer


class TinyViT(nn.Module):
    """Keyword-transformer style: patches embedded by a linear layer (over the
    frequency bins of each frame) or a strided conv, a class token (a
    parameter expanded and concatenated), learned position embeddings, two
    encoder layers, a head on the class token."""

    def __init__(self, patches: str) -> None:
        super().__init__()
        self.patches = patches
        self.embed = nn.Linear(16, 64) if patches == "linear" else nn.Conv2d(1, 64, 4, stride=4)
        self.cls = nn.Parameter(torch.randn(1, 1, 64) * 0.5)
        self.pos = nn.Parameter(torch.randn(1, 17, 64) * 0.5)
        layer = nn.TransformerEncoderLayer(64, 4, 128, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(64)
        self.head = nn.Linear(64, 12)

    def forward(self, x):  # [1, 16, 16]: frames x frequency bins
        if self.patches == "linear":
            h = self.embed(x)
        else:
            h = self.embed(x.unsqueeze(1)).flatten(2).transpose(1, 2)
        h = torch.cat([self.cls.expand(x.shape[0], -1, -1), h], 1) + self.pos
        return self.head(self.norm(self.encoder(h)[:, 0]))


def make_tcn_kws():
    from torchmcu.frontend.batchnorm import reestimate_batch_norm

    torch.manual_seed(11)
    model = reestimate_batch_norm(TcnKws(), [torch.randn(8, MFCC, FRAMES) for _ in range(2)])
    return model, (torch.randn(1, MFCC, FRAMES),)


def make_conformer():
    torch.manual_seed(12)
    return _bench_conformer()().eval(), (torch.randn(1, 16, 80),)


def _encoder(norm_first: bool, seed: int):
    torch.manual_seed(seed)
    layer = nn.TransformerEncoderLayer(64, 4, 128, batch_first=True, norm_first=norm_first)
    model = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
    return model, (torch.randn(1, 32, 64),)


def make_transformer_post():
    return _encoder(False, 13)


def make_transformer_pre():
    return _encoder(True, 14)


def make_kwt():
    torch.manual_seed(15)
    return TinyViT("linear").eval(), (torch.randn(1, 16, 16),)


MODELS = {"tcn_kws": make_tcn_kws, "conformer": make_conformer, "transformer_post": make_transformer_post,
          "transformer_pre": make_transformer_pre, "kwt": make_kwt}


def calibration(name: str, n: int, seed: int = 0) -> list[tuple[torch.Tensor, ...]]:
    """n seeded samples shaped as model `name`'s inputs (standard normal:
    features normalised per coefficient)."""
    _, example = MODELS[name]()
    g = torch.Generator().manual_seed(2000 + seed)
    return [tuple(torch.randn(*x.shape, generator=g) for x in example) for _ in range(n)]


if __name__ == "__main__":
    for name, make in MODELS.items():
        model, example = make()
        print(f"{name:17s} {list(example[0].shape)}  params {sum(p.numel() for p in model.parameters()):,}")
