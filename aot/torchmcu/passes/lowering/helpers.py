"""What the families' emitters share: layouts, and the integer forms of
activation ranges and biases (TFLite's arithmetic)."""

from __future__ import annotations

import numpy as np

from ...reference import INT16_MAX, INT16_MIN

NHWC = (0, 2, 3, 1)


def identity(rank: int) -> tuple[int, ...]:
    return tuple(range(rank))


def same_bytes(shape: tuple[int, ...], p: tuple[int, ...], q: tuple[int, ...]) -> bool:
    """Two orders of one tensor lay out the same bytes when they agree on the
    order of every dim larger than 1."""
    return [d for d in p if shape[d] != 1] == [d for d in q if shape[d] != 1]


def round_away(x: float) -> int:
    return int(np.sign(x) * np.floor(abs(x) + 0.5))


def act_q(act: tuple[float, float], scale: float, zero_point: int) -> tuple[int, int]:
    """A float activation range as int8 bounds, as TFLite's
    CalculateActivationRangeQuantized (zero_point + round(x / scale))."""
    lo = -128 if act[0] == -np.inf else max(-128, zero_point + round_away(act[0] / scale))
    hi = 127 if act[1] == np.inf else min(127, zero_point + round_away(act[1] / scale))
    return lo, hi


def bias_q(b: np.ndarray | None, s_in: float, s_w: np.ndarray, cout: int) -> np.ndarray:
    """Float bias at scale s_in * s_w[c], as int32 (zero when absent)."""
    if b is None:
        return np.zeros(cout, np.int64)
    q = np.round(b.astype(np.float64) / (s_in * s_w.astype(np.float64)))
    return np.clip(q, -(2 ** 31), 2 ** 31 - 1).astype(np.int64)


def act_params(act: tuple[float, float]) -> dict[str, float]:
    return {"act_min": float(act[0]), "act_max": float(act[1])}


def act_q16(act: tuple[float, float], scale: float) -> tuple[int, int]:
    """A float activation range as int16 bounds (zero point 0), as TFLite's
    CalculateActivationRangeQuantized."""
    def q(v: float) -> int:
        return int(np.sign(v) * np.floor(abs(v) / scale + 0.5))
    lo = INT16_MIN if act[0] == -np.inf else max(INT16_MIN, q(act[0]))
    hi = INT16_MAX if act[1] == np.inf else min(INT16_MAX, q(act[1]))
    return lo, hi


def bias_q64(b: np.ndarray | None, s_in: float, s_w: np.ndarray, cout: int) -> np.ndarray:
    """Float bias at scale s_in * s_w[c], as int64 (TFLite's int16x8 bias)."""
    if b is None:
        return np.zeros(cout, np.int64)
    q = np.round(b.astype(np.float64) / (s_in * s_w.astype(np.float64)))
    return np.clip(q, -(2 ** 47), 2 ** 47 - 1).astype(np.int64)


# -- spatial ops on 4-D (NCHW) and 3-D (NCL) activations ------------------------------------
# A 3-D activation [N, C, L] is the 2-D case with H = 1: laid out [N, L, C]
# (perm NCL), it is the same bytes as NHWC [N, 1, L, C], so every 2-D kernel
# serves the 1-D op and chains of 1-D ops move no data.

NCL = (0, 2, 1)


def spatial_hw(shape: tuple[int, ...]) -> tuple[int, int]:
    """(H, W) of a 4-D shape, (1, L) of a 3-D one."""
    return (shape[2], shape[3]) if len(shape) == 4 else (1, shape[2])


def nhwc_in(lay, v: int, node) -> int:
    """Activation v as an NHWC tensor (4-D dims)."""
    shape = lay.g.shapes[v]
    if len(shape) == 3:
        return lay.alias(lay.get(v, NCL, node), (shape[0], 1, shape[2], shape[1]))
    return lay.get(v, NHWC, node)


def nhwc_out(lay, node, like: int | None = None) -> int:
    """The node's output as a new NHWC tensor (4-D dims), recorded as the
    value's layout (NHWC, or NCL for a 3-D value)."""
    shape = lay.g.shapes[node.out]
    if len(shape) == 3:
        out = lay.activation(node.name, (shape[0], 1, shape[2], shape[1]), like=like)
        lay.val[node.out] = (lay.alias(out, (shape[0], shape[2], shape[1])), NCL)
    else:
        out = lay.activation(node.name, tuple(shape[d] for d in NHWC), like=like)
        lay.val[node.out] = (out, NHWC)
    return out


def window_padded(size: int, out: int, k: int, stride: int, before: int, dilation: int) -> bool:
    """check::window_padded of firmware/kernels/check.h: the padding after the
    input that out windows reach is at most max(before, reach - 1) and more
    than -stride."""
    reach = dilation * (k - 1) + 1
    after = (out - 1) * stride + reach - size - before
    return size >= 1 and out >= 1 and before >= 0 and -stride < after <= max(before, reach - 1)
