"""The bundled example: an MLP digit classifier on scikit-learn's 8x8 digits.

`make()` trains it (deterministic seed, a few seconds on a CPU) and returns
(module, example_inputs), the form `torchmcu compile examples/digits.py:make`
expects. `test_set()` gives the held-out digits the demo runs on the device.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

SEED = 0
TEST_FRACTION = 0.2


class DigitsMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(64, 64), nn.ReLU(),
            nn.Linear(64, 32), nn.ReLU(),
            nn.Linear(32, 10),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def _split() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)  # pixels 0..16 -> 0..1
    y = digits.target.astype(np.int64)
    order = np.random.RandomState(SEED).permutation(len(x))
    n_test = int(len(x) * TEST_FRACTION)
    test, train = order[:n_test], order[n_test:]
    return x[train], y[train], x[test], y[test]


def train(epochs: int = 300) -> DigitsMLP:
    torch.manual_seed(SEED)
    x_train, y_train, _, _ = _split()
    model = DigitsMLP()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x, y = torch.from_numpy(x_train), torch.from_numpy(y_train)
    for _ in range(epochs):  # full batch: deterministic and fast at this size
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    return model.eval()


def train_set() -> tuple[np.ndarray, np.ndarray]:
    x_train, y_train, _, _ = _split()
    return x_train, y_train


def test_set() -> tuple[np.ndarray, np.ndarray]:
    _, _, x_test, y_test = _split()
    return x_test, y_test


def make() -> tuple[nn.Module, tuple[torch.Tensor]]:
    x_test, _ = test_set()
    return train(), (torch.from_numpy(x_test[:1]),)
