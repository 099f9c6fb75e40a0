"""Pooling and resizing: the integer twins of firmware/kernels/portable/
pool_resize/ (pool2d_s8.cc, pool2d_s16.cc, resize.cc), and the interpreter's runners
for their op codes."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ._torch import act, nchw, nhwc
from .conv import _windows
from .quant import INT16_MAX, INT16_MIN


def max_pool2d(x: np.ndarray, kernel, stride, pad=(0, 0), *, act_min: int = -128,
               act_max: int = 127, out_hw=None, dilation=(1, 1)) -> np.ndarray:
    """max_pool2d_s8 (TFLite's int8 MaxPool, CMSIS-NN's arm_max_pool_s8;
    PyTorch's dilated windows): max over the in-bounds taps, clamped. A
    window without any is act_min."""
    return _max_pool_int(x, kernel, stride, pad, act_min, act_max, out_hw, dilation).astype(np.int8)


def _max_pool_int(x, kernel, stride, pad, act_min: int, act_max: int, out_hw, dilation=(1, 1)) -> np.ndarray:
    """Max pools on integers (int8, int16), in int64."""
    x = np.asarray(x, dtype=np.int64)
    best = None
    for _, _, view in _windows(x, kernel[0], kernel[1], stride, pad, dilation, out_hw, -1 << 40):
        best = view if best is None else np.maximum(best, view)
    return np.clip(best, act_min, act_max)


def avg_pool2d(x: np.ndarray, kernel, stride, pad=(0, 0), *, act_min: int = -128,
               act_max: int = 127, out_hw=None, count_include_pad: bool = False, divisor_override: int = 0,
               pad_after=None, zero_point: int = 0, round_half_even: bool = False) -> np.ndarray:
    """avg_pool2d_s8 (TFLite's int8 AveragePool, CMSIS-NN's arm_avgpool_s8,
    with PyTorch's divisors): sum of the in-bounds taps / divisor, rounding
    half away from zero ((sum +- divisor/2) / divisor, C division), clamped;
    with round_half_even, PyTorch's q/dq rounding instead (rounded_mean).
    The divisor: divisor_override when > 0; with count_include_pad the
    window's taps inside [-pad_top, H + pad_bottom) x [-pad_left, W +
    pad_right) (pad_after = (bottom, right), PyTorch's padding: the top and
    left ones by default); else the in-bounds taps (a window without any gives
    clamp(0)). Each tap the divisor counts beyond the in-bounds ones adds
    zero_point to the sum (PyTorch pads with real 0)."""
    return _avg_pool_int(x, kernel, stride, pad, act_min, act_max, out_hw, count_include_pad, divisor_override,
                         pad_after, zero_point, round_half_even).astype(np.int8)


def _padded_count(size: int, k: int, s: int, before: int, after: int, out: int) -> np.ndarray:
    """Per output position, PyTorch's count_include_pad window size along one
    axis: min(start + k, size + after) - start with start = o * s - before."""
    start = np.arange(out) * s - before
    return np.minimum(start + k, size + after) - start


def _avg_pool_int(x, kernel, stride, pad, act_min: int, act_max: int, out_hw, count_include_pad: bool = False,
                  divisor_override: int = 0, pad_after=None, zero_point: int = 0,
                  round_half_even: bool = False) -> np.ndarray:
    """Average pools on integers (int8, int16), in int64."""
    x = np.asarray(x, dtype=np.int64)
    ones = np.ones(x.shape[:3] + (1,), dtype=np.int64)
    total = count = None
    taps = zip(_windows(x, kernel[0], kernel[1], stride, pad, (1, 1), out_hw, 0),
               _windows(ones, kernel[0], kernel[1], stride, pad, (1, 1), out_hw, 0))
    for (_, _, xv), (_, _, cv) in taps:
        total = xv if total is None else total + xv
        count = cv if count is None else count + cv
    inside = count
    if divisor_override:
        count = np.full_like(count, int(divisor_override))
    elif count_include_pad:
        pb, pr = pad_after if pad_after is not None else pad
        oh, ow = total.shape[1:3]
        ch = _padded_count(x.shape[1], kernel[0], stride[0], pad[0], pb, oh)
        cw = _padded_count(x.shape[2], kernel[1], stride[1], pad[1], pr, ow)
        count = (ch[:, None] * cw[None, :])[None, :, :, None]
    total = total + np.where(inside > 0, (count - inside) * int(zero_point), 0)
    return rounded_mean(total, count, act_min, act_max, zero_point if round_half_even else None)


def rounded_mean(total: np.ndarray, count: np.ndarray, act_min: int, act_max: int,
                 even_at: int | None = None) -> np.ndarray:
    """total / count (count >= 1; 0 reads as 1) rounded, clamped. even_at
    None: half away from zero on the raw sum (TFLite's AveragePool). Else
    the zero point zp of the shared quantization, and the mean rounded as
    PyTorch's q/dq model rounds the real one (torch.round: half to even):
    zp + round_half_even((total - count * zp) / count). In integers: with
    q = floor(total / count), r = total - q * count in [0, count), that is q
    + 1 when 2r > count or (2r == count and q - zp is odd), else q."""
    if even_at is not None:
        div = np.maximum(count, 1)
        q = total // div  # floor
        twice = 2 * (total - q * div)
        up = (twice > div) | ((twice == div) & (((q ^ int(even_at)) & 1) == 1))
        return np.clip(q + up, act_min, act_max)
    half = count // 2
    div = np.maximum(count, 1)
    num = np.where(total > 0, total + half, total - half)
    avg = np.sign(num) * (np.abs(num) // div)  # C division truncates toward zero
    return np.clip(avg, act_min, act_max)


def max_pool2d_s16(x, kernel, stride, pad=(0, 0), *, act_min: int = INT16_MIN, act_max: int = INT16_MAX,
                   out_hw=None, dilation=(1, 1)) -> np.ndarray:
    """max_pool2d_s16 (arm_max_pool_s16): max_pool2d on int16 values."""
    return _max_pool_int(x, kernel, stride, pad, act_min, act_max, out_hw, dilation).astype(np.int16)


def avg_pool2d_s16(x, kernel, stride, pad=(0, 0), *, act_min: int = INT16_MIN, act_max: int = INT16_MAX,
                   out_hw=None, count_include_pad: bool = False, divisor_override: int = 0,
                   pad_after=None, zero_point: int = 0, round_half_even: bool = False) -> np.ndarray:
    """avg_pool2d_s16 (arm_avgpool_s16): avg_pool2d's divisors and rounding on int16 values."""
    return _avg_pool_int(x, kernel, stride, pad, act_min, act_max, out_hw, count_include_pad, divisor_override,
                         pad_after, zero_point, round_half_even).astype(np.int16)


# ---- adaptive average pooling

def adaptive_windows(size: int, out: int) -> tuple[np.ndarray, np.ndarray]:
    """PyTorch's adaptive pooling windows along one axis: [floor(i * size /
    out), ceil((i + 1) * size / out)) for i < out."""
    i = np.arange(out, dtype=np.int64)
    return (i * size) // out, -((-(i + 1) * size) // out)


def adaptive_avg_pool2d(x: np.ndarray, out_hw, *, act_min: int = -128, act_max: int = 127,
                        dtype=np.int8) -> np.ndarray:
    """adaptive_avg_pool2d_s8 / _s16: each window of PyTorch's adaptive
    pooling (adaptive_windows) averaged as avg_pool2d (its taps all in
    bounds), clamped. x: NHWC integers."""
    x = np.asarray(x, dtype=np.int64)
    (h0, h1), (w0, w1) = adaptive_windows(x.shape[1], out_hw[0]), adaptive_windows(x.shape[2], out_hw[1])
    total = np.zeros((x.shape[0], out_hw[0], out_hw[1], x.shape[3]), dtype=np.int64)
    count = np.zeros((1, out_hw[0], out_hw[1], 1), dtype=np.int64)
    for i in range(out_hw[0]):
        for j in range(out_hw[1]):
            total[:, i, j] = x[:, h0[i]:h1[i], w0[j]:w1[j]].sum(axis=(1, 2))
            count[0, i, j, 0] = (h1[i] - h0[i]) * (w1[j] - w0[j])
    return rounded_mean(total, count, act_min, act_max).astype(dtype)


# ---- resizing (TFLite's RESIZE_NEAREST_NEIGHBOR / RESIZE_BILINEAR)

def nearest_index(out: int, size: int, half_pixel_centers: bool) -> np.ndarray:
    """TFLite's GetNearestNeighbor without align_corners, in float32 as the
    kernels compute it: min(floor((o + h) * (size / out)), size - 1), h = 0.5
    with half_pixel_centers (and then at least 0) else 0. PyTorch's nearest
    (h = 0) and nearest-exact (h = 0.5) compute the same float32 values."""
    scale = np.float32(size) / np.float32(out)
    o = np.arange(out, dtype=np.float32)
    v = (o + np.float32(0.5)) * scale if half_pixel_centers else o * scale
    idx = np.minimum(np.floor(v).astype(np.int64), size - 1)
    return np.maximum(idx, 0)


def resize_nearest(x: np.ndarray, out_hw, half_pixel_centers: bool = False) -> np.ndarray:
    """resize_nearest (any dtype): y[n, i, j] = x[n, rows[i], cols[j]]."""
    rows = nearest_index(out_hw[0], x.shape[1], half_pixel_centers)
    cols = nearest_index(out_hw[1], x.shape[2], half_pixel_centers)
    return np.asarray(x)[:, rows][:, :, cols]


def _cdiv(a: np.ndarray, b: int) -> np.ndarray:
    """C's integer division (truncation toward zero)."""
    return np.sign(a) * (np.abs(a) // b)


def bilinear_scale10(size: int, out: int, align_corners: bool) -> int:
    """ResizeBilinearInteger's scale in 1/1024 units, rounded to nearest."""
    if align_corners and out > 1:
        return ((1 << 10) * (size - 1) + (out - 1) // 2) // (out - 1)
    return ((1 << 10) * size + out // 2) // out


def _bilinear_axis(out: int, size: int, align_corners: bool, half_pixel_centers: bool):
    """Per output position: the source position in 1/1024 units and its two
    neighbours (ComputeInterpolationValuesInteger)."""
    s10 = bilinear_scale10(size, out, align_corners)
    v = np.arange(out, dtype=np.int64) * s10
    if half_pixel_centers:
        v = v + s10 // 2 - (1 << 9)
    lo = np.maximum(_cdiv(v, 1 << 10), 0)
    hi = np.minimum(_cdiv(v + (1 << 10) - 1, 1 << 10), size - 1)
    return v, lo, hi


def resize_bilinear(x: np.ndarray, out_hw, align_corners: bool = False, half_pixel_centers: bool = False,
                    dtype=np.int8) -> np.ndarray:
    """resize_bilinear_s8 (TFLite's ResizeBilinearInteger, double
    rounding): per output pixel the four neighbours' raw values weighted by
    (1024 - fy) (1024 - fx), fy (1024 - fx), (1024 - fy) fx and fy fx in
    int64 (f: the source position's distance from the lower neighbour in
    1/1024 units), divided by 2^20 rounding half away from zero. The output
    keeps the input's quantization."""
    x = np.asarray(x, dtype=np.int64)
    vy, y0, y1 = _bilinear_axis(out_hw[0], x.shape[1], align_corners, half_pixel_centers)
    vx, x0, x1 = _bilinear_axis(out_hw[1], x.shape[2], align_corners, half_pixel_centers)
    fy = (vy - (y0 << 10))[None, :, None, None]
    fx = (vx - (x0 << 10))[None, None, :, None]
    one = 1 << 10
    acc = (x[:, y0][:, :, x0] * (one - fy) * (one - fx) + x[:, y1][:, :, x0] * fy * (one - fx)
           + x[:, y0][:, :, x1] * (one - fy) * fx + x[:, y1][:, :, x1] * fy * fx)
    r = np.where(acc > 0, 1 << 19, -(1 << 19))
    return _cdiv(acc + r, 1 << 20).astype(dtype)


def _bilinear_axis16(out: int, size: int, align_corners: bool, half_pixel_centers: bool):
    """Per output position: the lower and upper neighbours and the fraction
    of the exact source position (PyTorch's) in 1/65536 units, rounded."""
    o = np.arange(out, dtype=np.int64)
    if align_corners:
        t, den = (o * (size - 1), out - 1) if out > 1 else (o * 0, 1)
    elif half_pixel_centers:
        t, den = np.maximum((2 * o + 1) * size - out, 0), 2 * out
    else:
        t, den = o * size, out
    lo = t // den
    f = ((t - lo * den) * 65536 + den // 2) // den
    return lo, np.minimum(lo + 1, size - 1), f


def resize_bilinear_s16(x: np.ndarray, out_hw, align_corners: bool = False,
                        half_pixel_centers: bool = False) -> np.ndarray:
    """resize_bilinear_s16: the exact source positions (_bilinear_axis16),
    weights in 1/2^32 units, the int64 sum divided by 2^32 rounding half away
    from zero."""
    x = np.asarray(x, dtype=np.int64)
    y0, y1, fy = _bilinear_axis16(out_hw[0], x.shape[1], align_corners, half_pixel_centers)
    x0, x1, fx = _bilinear_axis16(out_hw[1], x.shape[2], align_corners, half_pixel_centers)
    fy, fx = fy[None, :, None, None], fx[None, None, :, None]
    one = 1 << 16
    acc = (x[:, y0][:, :, x0] * (one - fy) * (one - fx) + x[:, y1][:, :, x0] * fy * (one - fx)
           + x[:, y0][:, :, x1] * (one - fy) * fx + x[:, y1][:, :, x1] * fy * fx)
    r = np.where(acc > 0, 1 << 31, -(1 << 31))
    return _cdiv(acc + r, 1 << 32).astype(np.int16)


# ---- the interpreter's runners

def _pool_int(fn: Callable) -> Callable:
    def run(a, p, outs):
        kw: dict[str, Any] = dict(act_min=p["act_min"], act_max=p["act_max"], out_hw=tuple(outs[0]["dims"][1:3]))
        if fn in (max_pool2d, max_pool2d_s16):
            kw["dilation"] = (p.get("dilation_h", 1), p.get("dilation_w", 1))
        else:
            kw.update(count_include_pad=bool(p.get("count_include_pad", False)),
                      divisor_override=p.get("divisor_override", 0),
                      pad_after=(p.get("pad_bottom", 0), p.get("pad_right", 0)), zero_point=p.get("zero_point", 0),
                      round_half_even=bool(p.get("round_half_even", False)))
        return fn(a[0], (p["kernel_h"], p["kernel_w"]), (p["stride_h"], p["stride_w"]),
                  (p["pad_top"], p["pad_left"]), **kw)
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


def _resize_f32(a, p, outs):
    import torch.nn.functional as F

    oh, ow = outs[0]["dims"][1:3]
    if not p.get("align_corners") and not p.get("half_pixel_centers"):
        raise ValueError("RESIZE_BILINEAR_F32 without align_corners or half_pixel_centers: no PyTorch mode")
    y = F.interpolate(nchw(a[0]), size=(oh, ow), mode="bilinear", align_corners=bool(p.get("align_corners")))
    return nhwc(y)


def _adaptive_f32(a, p, outs):
    import torch.nn.functional as F

    return nhwc(act(F.adaptive_avg_pool2d(nchw(a[0]), tuple(outs[0]["dims"][1:3])), p))


def _resize_s8(a, p, outs):
    return resize_bilinear(a[0], tuple(outs[0]["dims"][1:3]), bool(p.get("align_corners")),
                           bool(p.get("half_pixel_centers")))


def _adaptive_int(dtype) -> Callable:
    return lambda a, p, outs: adaptive_avg_pool2d(a[0], tuple(outs[0]["dims"][1:3]), act_min=p["act_min"],
                                                  act_max=p["act_max"], dtype=dtype)


OPS: dict[str, Callable[[list, dict, list], Any]] = {
    "MAX_POOL2D_S8": _pool_int(max_pool2d),
    "AVG_POOL2D_S8": _pool_int(avg_pool2d),
    "MAX_POOL2D_F32": lambda a, p, outs: _pool_f32(a, p, outs, "max"),
    "AVG_POOL2D_F32": lambda a, p, outs: _pool_f32(a, p, outs, "avg"),
    "MAX_POOL2D_S16": _pool_int(max_pool2d_s16),
    "AVG_POOL2D_S16": _pool_int(avg_pool2d_s16),
    "RESIZE_NEAREST": lambda a, p, outs: resize_nearest(a[0], tuple(outs[0]["dims"][1:3]),
                                                        bool(p.get("half_pixel_centers"))),
    "RESIZE_BILINEAR_F32": _resize_f32,
    "RESIZE_BILINEAR_S8": _resize_s8,
    "RESIZE_BILINEAR_S16": lambda a, p, outs: resize_bilinear_s16(a[0], tuple(outs[0]["dims"][1:3]),
                                                                 bool(p.get("align_corners")),
                                                                 bool(p.get("half_pixel_centers"))),
    "ADAPTIVE_AVG_POOL2D_F32": _adaptive_f32,
    "ADAPTIVE_AVG_POOL2D_S8": _adaptive_int(np.int8),
    "ADAPTIVE_AVG_POOL2D_S16": _adaptive_int(np.int16),
}
