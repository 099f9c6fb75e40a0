"""Shape and data movement: the ops that move bytes without arithmetic
(PERMUTE, CONCAT, COPY, PAD) and their runners."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np


def pad(x: np.ndarray, before, after, value) -> np.ndarray:
    """The PAD op (any dtype): constant padding of each dim."""
    x = np.asarray(x)
    return np.pad(x, list(zip(before, after)), constant_values=np.asarray(value, x.dtype))


OPS: dict[str, Callable[[list, dict, list], Any]] = {
    "PERMUTE": lambda a, p, outs: np.transpose(a[0], p["perm"]),
    "CONCAT": lambda a, p, outs: np.concatenate([x for x in a], p["axis"]),
    "COPY": lambda a, p, outs: a[0],
    "PAD": lambda a, p, outs: pad(a[0], p["before"], p["after"],
                                  p.get("qvalue", 0) if outs[0]["dtype"] == "I8" else p.get("value", 0.0)),
}
