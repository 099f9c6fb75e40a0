"""Pooling: the integer twins of firmware/kernels/portable/pool2d_s8.cc and
the int16 pools, and the interpreter's runners for the pool op codes."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ._torch import act, nchw, nhwc
from .conv import _windows
from .quant import INT16_MAX, INT16_MIN


def max_pool2d(x: np.ndarray, kernel, stride, pad=(0, 0), *, act_min: int = -128,
               act_max: int = 127, out_hw=None) -> np.ndarray:
    """max_pool2d_s8 (TFLite's int8 MaxPool, CMSIS-NN's arm_max_pool_s8): max
    over the in-bounds taps, clamped. A window without any is act_min."""
    return _max_pool_int(x, kernel, stride, pad, act_min, act_max, out_hw).astype(np.int8)


def _max_pool_int(x, kernel, stride, pad, act_min: int, act_max: int, out_hw) -> np.ndarray:
    """Max pools on integers (int8, int16), in int64."""
    x = np.asarray(x, dtype=np.int64)
    best = None
    for _, _, view in _windows(x, kernel[0], kernel[1], stride, pad, (1, 1), out_hw, -1 << 40):
        best = view if best is None else np.maximum(best, view)
    return np.clip(best, act_min, act_max)


def avg_pool2d(x: np.ndarray, kernel, stride, pad=(0, 0), *, act_min: int = -128,
               act_max: int = 127, out_hw=None) -> np.ndarray:
    """avg_pool2d_s8 (TFLite's int8 AveragePool, CMSIS-NN's arm_avgpool_s8):
    sum of the in-bounds taps / their count, rounding half away from zero
    ((sum +- count/2) / count, C division), clamped. A window without any
    in-bounds tap gives clamp(0)."""
    return _avg_pool_int(x, kernel, stride, pad, act_min, act_max, out_hw).astype(np.int8)


def _avg_pool_int(x, kernel, stride, pad, act_min: int, act_max: int, out_hw) -> np.ndarray:
    """Average pools on integers (int8, int16), in int64."""
    x = np.asarray(x, dtype=np.int64)
    ones = np.ones(x.shape[:3] + (1,), dtype=np.int64)
    total = count = None
    taps = zip(_windows(x, kernel[0], kernel[1], stride, pad, (1, 1), out_hw, 0),
               _windows(ones, kernel[0], kernel[1], stride, pad, (1, 1), out_hw, 0))
    for (_, _, xv), (_, _, cv) in taps:
        total = xv if total is None else total + xv
        count = cv if count is None else count + cv
    half = count // 2
    div = np.maximum(count, 1)
    num = np.where(total > 0, total + half, total - half)
    avg = np.sign(num) * (np.abs(num) // div)  # C division truncates toward zero
    return np.clip(avg, act_min, act_max)


def max_pool2d_s16(x, kernel, stride, pad=(0, 0), *, act_min: int = INT16_MIN, act_max: int = INT16_MAX,
                   out_hw=None) -> np.ndarray:
    """max_pool2d_s16 (arm_max_pool_s16): max_pool2d on int16 values."""
    return _max_pool_int(x, kernel, stride, pad, act_min, act_max, out_hw).astype(np.int16)


def avg_pool2d_s16(x, kernel, stride, pad=(0, 0), *, act_min: int = INT16_MIN, act_max: int = INT16_MAX,
                   out_hw=None) -> np.ndarray:
    """avg_pool2d_s16 (arm_avgpool_s16): avg_pool2d's rounding on int16 values."""
    return _avg_pool_int(x, kernel, stride, pad, act_min, act_max, out_hw).astype(np.int16)


# ---- the interpreter's runners

def _pool_s8(fn: Callable) -> Callable:
    def run(a, p, outs):
        return fn(a[0], (p["kernel_h"], p["kernel_w"]), (p["stride_h"], p["stride_w"]),
                  (p["pad_top"], p["pad_left"]), act_min=p["act_min"], act_max=p["act_max"],
                  out_hw=tuple(outs[0]["dims"][1:3]))
    return run


def _pool_f32(a, p, outs, fn):
    import torch.nn.functional as F

    oh, ow = outs[0]["dims"][1:3]
    x = nchw(a[0])
    k, s, pad = (p["kernel_h"], p["kernel_w"]), (p["stride_h"], p["stride_w"]), (p["pad_top"], p["pad_left"])
    if fn == "max":
        floor_h = (x.shape[2] + 2 * pad[0] - p["dilation_h"] * (k[0] - 1) - 1) // s[0] + 1
        y = F.max_pool2d(x, k, s, pad, (p["dilation_h"], p["dilation_w"]), ceil_mode=oh != floor_h)
    else:
        floor_h = (x.shape[2] + 2 * pad[0] - k[0]) // s[0] + 1
        y = F.avg_pool2d(x, k, s, pad, ceil_mode=oh != floor_h, count_include_pad=p["count_include_pad"],
                         divisor_override=p["divisor_override"] or None)
    return nhwc(act(y, p))


OPS: dict[str, Callable[[list, dict, list], Any]] = {
    "MAX_POOL2D_S8": _pool_s8(max_pool2d),
    "AVG_POOL2D_S8": _pool_s8(avg_pool2d),
    "MAX_POOL2D_F32": lambda a, p, outs: _pool_f32(a, p, outs, "max"),
    "AVG_POOL2D_F32": lambda a, p, outs: _pool_f32(a, p, outs, "avg"),
    "MAX_POOL2D_S16": _pool_s8(max_pool2d_s16),
    "AVG_POOL2D_S16": _pool_s8(avg_pool2d_s16),
}
