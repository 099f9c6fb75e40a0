"""Reductions and softmax: TFLite's int8 softmax (CMSIS-NN's
arm_softmax_s8) and int16 softmax, and the interpreter's runners for mean
and softmax."""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ._torch import t
from .elementwise import gen_lut_s16
from .quant import INT32_MAX, _div_pow2, _f32, _mul_pow2, _mul_sat, quantize_multiplier, requantize


def softmax_params(input_scale: float, beta: float = 1.0) -> dict:
    """QuantSoftmaxParams as TFLM's CalculateSoftmaxParams for int8:
    PreprocessSoftmaxScaling(beta, input_scale, 5 integer bits), i.e.
    QuantizeMultiplierGreaterThanOne(min(beta * scale * 2^26, 2^31 - 1)), and
    diff_min = -CalculateInputRadius(5, input_left_shift, 31) =
    -floor(31 * 2^26 / 2^input_left_shift). beta is a float32 option."""
    real = min(_f32(beta) * _f32(input_scale) * float(1 << 26), float((1 << 31) - 1))
    if not real > 1.0:
        raise ValueError(f"softmax input scale {input_scale} (beta {beta}) is too small")
    m, left_shift = quantize_multiplier(real)
    radius = math.floor(31.0 * float(1 << 26) / float(1 << left_shift))
    return dict(input_multiplier=m, input_left_shift=left_shift, diff_min=-int(radius))


def _exp_on_negative_values(val):
    """exp(val) for val <= 0 in Q5.26, result Q0.31 (CMSIS-NN's
    arm_nn_exp_on_negative_values, gemmlowp's exp_on_negative_values)."""
    val = np.asarray(val, dtype=np.int64)
    mod = (val & ((1 << 24) - 1)) - (1 << 24)
    remainder = mod - val
    x = mod * 32 + (1 << 28)
    x2 = _mul_sat(x, x)
    x3 = _mul_sat(x2, x)
    x4_4 = _div_pow2(_mul_sat(x2, x2), 2)
    poly = _div_pow2(_mul_sat(x4_4 + x3, 715827883) + x2, 1)
    result = 1895147668 + _mul_sat(1895147668, x + poly)
    for k, factor in enumerate((1672461947, 1302514674, 790015084, 290630308, 39332535,
                                720401, 242)):
        result = np.where(remainder & (1 << (24 + k)), _mul_sat(result, factor), result)
    return np.where(val == 0, INT32_MAX, result)


def _one_over_one_plus_x(val):
    """1 / (1 + val) for val in [0, 1) Q0.31 (arm_nn_one_over_one_plus_x_for_x_in_0_1)."""
    s = np.asarray(val, dtype=np.int64) + INT32_MAX
    half_den = np.where(s >= 0, (s + 1) // 2, -((-s + 1) // 2))  # C division toward zero
    x = 1515870810 + _mul_sat(half_den, -1010580540)
    for _ in range(3):
        x = x + _mul_pow2(_mul_sat(x, (1 << 29) - _mul_sat(half_den, x)), 2)
    return _mul_pow2(x, 1)


def softmax(x: np.ndarray, input_multiplier: int, input_left_shift: int,
            diff_min: int) -> np.ndarray:
    """softmax_s8 over the last axis (CMSIS-NN's arm_softmax_s8, TFLite's int8
    Softmax; output scale 1/256, zero point -128). Parameters from
    softmax_params.

    Per row: d = x - max; terms with d < diff_min are 0 (-128); e =
    exp(mul_sat(d * 2^left_shift, multiplier)) in Q0.31; sum of e / 2^12
    (rounded); out = e * (1/sum) rescaled by 2^(35 - clz(sum)) - 128. Rows
    whose sum reaches 2^28 (512+ values near the maximum) give all -128 (there
    CMSIS-NN/TFLM shift by more than 31, undefined); exact for rows below 8192
    values."""
    x = np.asarray(x, dtype=np.int64)
    shape = x.shape
    x = x.reshape(-1, shape[-1])
    d = x - x.max(axis=1, keepdims=True)
    valid = d >= diff_min
    scaled = _mul_sat(d * (1 << input_left_shift), input_multiplier)
    e = _exp_on_negative_values(np.where(valid, scaled, 0))
    total = np.where(valid, _div_pow2(e, 12), 0).sum(axis=1, keepdims=True)
    bit_length = sum(((total >> k) > 0).astype(np.int64) for k in range(40))
    headroom = np.maximum(32 - bit_length, 0)  # clz of the 32-bit sum
    bits = 12 - headroom + 23
    shifted = (total << headroom) - (1 << 31)
    scale = _one_over_one_plus_x(shifted)
    res = _div_pow2(_mul_sat(scale, e), np.minimum(bits, 31)) - 128
    res = np.clip(res, -128, 127)
    res = np.where(valid & (bits <= 31), res, -128)
    return res.reshape(shape).astype(np.int8)


def softmax_luts_s16() -> tuple[np.ndarray, np.ndarray]:
    """TFLM's int16 softmax tables: exp over [-10, 0] and 1 / (1 + x) over [0, 1]."""
    return (gen_lut_s16(lambda v: np.exp(v, dtype=np.float32), -10.0, 0.0),
            gen_lut_s16(lambda v: np.float32(1.0) / (np.float32(1.0) + v), 0.0, 1.0))


def softmax_params_s16(input_scale: float, beta: float = 1.0) -> dict:
    """QuantSoftmaxParams at int16 as TFLM's int16 softmax Prepare:
    QuantizeMultiplier(input_scale * beta / (10 / 65535)), so that input
    differences [-65535, 0] span [-10, 0]; diff_min unused (0)."""
    m, shift = quantize_multiplier(_f32(input_scale) * _f32(beta) / (10.0 / 65535.0))
    return dict(input_multiplier=m, input_left_shift=shift, diff_min=0)


def _lut_s16(v: np.ndarray, lut: np.ndarray) -> np.ndarray:
    """TFLite's generic_int16_table_lookup: base lut[256 + (v >> 7)] plus the
    slope to the next entry times (v & 127) / 128, rounded (int16 wrap)."""
    v = np.asarray(v, np.int64)
    lut = np.asarray(lut, np.int64)
    index = 256 + (v >> 7)
    base = lut[index]
    slope = ((lut[index + 1] - base + 32768) & 0xFFFF) - 32768
    delta = (slope * (v & 127) + 64) >> 7
    return ((base + delta + 32768) & 0xFFFF) - 32768


def softmax_s16(x: np.ndarray, input_multiplier: int, input_left_shift: int, exp_lut: np.ndarray,
                one_lut: np.ndarray) -> np.ndarray:
    """softmax_s16 over the last axis (TFLM's int16 SoftmaxInt16; output scale
    1/32768, zero point 0): exp(x - max) from exp_lut, their sum's
    reciprocal from one_lut (1 / (1 + x) on the sum normalised to [1, 2)),
    the products rounded and clamped to [0, 32767]. The sum's leading-zero
    count is clamped to [1, 31] (tables are data: any values stay defined)."""
    x = np.asarray(x, np.int64)
    shape = x.shape
    rows = x.reshape(-1, shape[-1])
    diff = rows - rows.max(axis=1, keepdims=True)
    scaled = requantize(diff, input_multiplier, input_left_shift)
    sym = np.clip(scaled + 32767, -32768, 32767)
    e = _lut_s16(sym, exp_lut)
    total = e.sum(axis=1).astype(np.int64)  # within int32: at most 32768 columns (checked)
    u = total & 0xFFFFFFFF
    lz = np.array([32 - int(t).bit_length() for t in u], np.int64)
    head = np.clip(lz, 1, 31)
    shifted = ((total << (head - 1)) + (1 << 13)) >> 14
    recip = _lut_s16(np.clip(shifted - 98304, -32768, 32767), one_lut)
    rs = (31 - head)[:, None]
    rounding = np.where(rs > 0, np.int64(1) << np.maximum(rs - 1, 0), 0)
    out = (e * recip[:, None] + rounding) >> rs
    return np.clip(out, 0, 32767).astype(np.int16).reshape(shape)


# ---- the interpreter's runners

def _mean_f32(a, p, outs):
    axes = tuple(d for d in range(a[0].ndim) if p["axis_mask"] >> d & 1)
    return t(a[0]).mean(axes).numpy()


OPS: dict[str, Callable[[list, dict, list], Any]] = {
    "MEAN_F32": _mean_f32,
    "SOFTMAX_F32": lambda a, p, outs: t(a[0]).softmax(p["axis"]).numpy(),
    "SOFTMAX_S8": lambda a, p, outs: softmax(a[0], p["input_multiplier"], p["input_left_shift"], p["diff_min"]),
    "SOFTMAX_S16": lambda a, p, outs: softmax_s16(a[0], p["input_multiplier"], p["input_left_shift"], a[1], a[2]),
}
