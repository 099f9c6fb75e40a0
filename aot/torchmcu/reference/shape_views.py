"""Shape and data movement: the ops that move bytes without arithmetic
(PERMUTE, CONCAT, COPY, PAD, SLICE) and their runners."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np


def pad(x: np.ndarray, before, after, value) -> np.ndarray:
    """The PAD op (any dtype): constant padding of each dim."""
    x = np.asarray(x)
    return np.pad(x, list(zip(before, after)), constant_values=np.asarray(value, x.dtype))


def strided_slice(x: np.ndarray, begin, step, out_dims) -> np.ndarray:
    """The SLICE op (any dtype): output index i of dim d reads input index
    begin[d] + i * step[d]; step 0 repeats one index (a broadcast)."""
    x = np.asarray(x)
    index = [b + s * np.arange(n) for b, s, n in zip(begin, step, out_dims)]
    return x[np.ix_(*index)]


def gather(table: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """The GATHER op (any dtype): table rows by id, zeros for an id outside
    the table; [count, cols]."""
    table = np.asarray(table)
    table = table.reshape(table.shape[0], -1)
    ids = np.asarray(ids, np.int64).reshape(-1)
    ok = (ids >= 0) & (ids < table.shape[0])
    out = table[np.where(ok, ids, 0)]
    out[~ok] = 0
    return out


OPS: dict[str, Callable[[list, dict, list], Any]] = {
    "GATHER": lambda a, p, outs: gather(a[0], a[1]).reshape(outs[0]["dims"]),
    "PERMUTE": lambda a, p, outs: np.transpose(a[0], p["perm"]),
    "CONCAT": lambda a, p, outs: np.concatenate([x for x in a], p["axis"]),
    "COPY": lambda a, p, outs: a[0],
    "SLICE": lambda a, p, outs: strided_slice(a[0], p["begin"], p["step"], outs[0]["dims"]),
    "PAD": lambda a, p, outs: pad(a[0], p["before"], p["after"],
                                  p.get("qvalue", 0) if outs[0]["dtype"] == "I8" else p.get("value", 0.0)),
}
