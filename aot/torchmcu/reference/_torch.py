"""Float ops of the reference run through PyTorch on the program's NHWC data
(they match the firmware within the float tolerance only). PyTorch is
imported when a float op first runs: the command line starts without it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import torch


def t(x: np.ndarray) -> torch.Tensor:
    import torch

    return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))


def nchw(x: np.ndarray) -> torch.Tensor:
    return t(x).permute(0, 3, 1, 2)


def nhwc(y: torch.Tensor) -> np.ndarray:
    return y.permute(0, 2, 3, 1).numpy()


def act(y: torch.Tensor, p: dict[str, Any]) -> torch.Tensor:
    return y.clamp(p.get("act_min", -np.inf), p.get("act_max", np.inf))
