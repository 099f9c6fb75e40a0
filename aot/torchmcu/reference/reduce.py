"""Reductions and softmax: TFLite's int8 softmax (CMSIS-NN's
arm_softmax_s8) and int16 softmax, and the interpreter's runners for mean
and softmax."""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ._torch import t
from .elementwise import gen_lut_s16
from .quant import (
    INT32_MAX,
    _div_pow2,
    _f32,
    _mul_sat,
    _one_over_one_plus_x,
    quantize_multiplier,
    requantize,
)


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


def softmax_exp_table(input_multiplier: int, input_left_shift: int, diff_min: int) -> np.ndarray:
    """SOFTMAX_S8's optional exp table: int32 [256], entry d + 255 the Q0.31
    exponential softmax computes for an int8 difference d >= diff_min (0
    below: never read)."""
    d = np.arange(-255, 1, dtype=np.int64)
    valid = d >= diff_min
    e = _exp_on_negative_values(_mul_sat(np.where(valid, d, 0) * (1 << input_left_shift), input_multiplier))
    return np.where(valid, e, 0).astype(np.int32)


def softmax(x: np.ndarray, input_multiplier: int, input_left_shift: int,
            diff_min: int, mask: np.ndarray | None = None, table: np.ndarray | None = None) -> np.ndarray:
    """softmax_s8 over the last axis (CMSIS-NN's arm_softmax_s8, TFLite's int8
    Softmax; output scale 1/256, zero point -128). Parameters from
    softmax_params.

    Per row: d = x - max; terms with d < diff_min are 0 (-128); e =
    exp(mul_sat(d * 2^left_shift, multiplier)) in Q0.31; sum of e / 2^12
    (rounded); out = e * (1/sum) rescaled by 2^(35 - clz(sum)) - 128. Rows
    whose sum reaches 2^28 (512+ values near the maximum) give all -128 (there
    CMSIS-NN/TFLM shift by more than 31, undefined); exact for rows below 8192
    values.

    mask (SOFTMAX_MASKED_S8): nonzero entries, broadcast over the rows as
    masked_rows, take no part (the max and the sum are over the others) and
    output -128; a row with every entry masked is all -128."""
    x = np.asarray(x, dtype=np.int64)
    shape = x.shape
    x = x.reshape(-1, shape[-1])
    masked = np.zeros(x.shape, bool) if mask is None else masked_rows(mask, x.shape[0])
    d = x - np.where(masked, -128, x).max(axis=1, keepdims=True)
    valid = (d >= diff_min) & ~masked
    if table is not None:  # the program's exponentials (softmax_exp_table's, or whatever it holds)
        e = np.asarray(table, np.int64)[np.clip(d, -255, 0) + 255]
    else:
        scaled = _mul_sat(np.where(valid, d, 0) * (1 << input_left_shift), input_multiplier)
        e = _exp_on_negative_values(scaled)
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
                one_lut: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """softmax_s16 over the last axis (TFLM's int16 SoftmaxInt16; output scale
    1/32768, zero point 0): exp(x - max) from exp_lut, their sum's
    reciprocal from one_lut (1 / (1 + x) on the sum normalised to [1, 2)),
    the products rounded and clamped to [0, 32767]. The sum's leading-zero
    count is clamped to [1, 31] (tables are data: any values stay defined).
    mask (SOFTMAX_MASKED_S16) as softmax's: masked entries are left out of
    the max and the sum, and output 0."""
    x = np.asarray(x, np.int64)
    shape = x.shape
    rows = x.reshape(-1, shape[-1])
    masked = np.zeros(rows.shape, bool) if mask is None else masked_rows(mask, rows.shape[0])
    diff = rows - np.where(masked, -32768, rows).max(axis=1, keepdims=True)
    scaled = requantize(diff, input_multiplier, input_left_shift)
    sym = np.clip(scaled + 32767, -32768, 32767)
    e = np.where(masked, 0, _lut_s16(sym, exp_lut))
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


def masked_rows(mask: np.ndarray, rows: int) -> np.ndarray:
    """A [mask_rows, cols] mask for `rows` rows: row r takes mask row r % mask_rows."""
    m = np.asarray(mask)
    m = m.reshape(-1, m.shape[-1]) != 0
    return np.tile(m, (rows // m.shape[0], 1))


# ---- log_softmax: TFLite's int8 LOG_SOFTMAX (gemmlowp fixed point)

def log_softmax_params(input_scale: float, beta: float = 1.0) -> dict:
    """QuantLogSoftmaxParams as TFLM's LOG_SOFTMAX Prepare
    (PreprocessLogSoftmaxScalingExp, 5 integer bits): softmax_params'
    multiplier, shift and diff_min, and the reverse scaling divisor
    QuantizeMultiplierSmallerThanOneExp(2^(31 - left_shift) / multiplier),
    its shift stored negated (a right shift) as TFLM does."""
    p = softmax_params(input_scale, beta)
    real = float(1 << (31 - p["input_left_shift"])) / float(p["input_multiplier"])
    if not 0.0 < real < 1.0:
        raise ValueError(f"log_softmax input scale {input_scale} has no reverse scaling divisor")
    div, left = quantize_multiplier(real)
    return dict(p, reverse_scaling_divisor=div, reverse_scaling_right_shift=-left)


def _wrap32(v):
    v = np.asarray(v, np.int64)
    return ((v + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def _sat32(v):
    return np.clip(np.asarray(v, np.int64), -(1 << 31), INT32_MAX)


def _pot(x, e):
    """gemmlowp's SaturatingRoundingMultiplyByPOTParam for exponents e >= 0."""
    x = np.asarray(x, np.int64)
    e = np.asarray(e, np.int64)
    threshold = (np.int64(1) << (31 - e)) - 1
    out = np.where(x > threshold, INT32_MAX, np.where(x < -threshold, -(1 << 31), x << e))
    return np.where(e == 0, x, out)


def _clz32(v):
    v = np.asarray(v, np.int64) & 0xFFFFFFFF
    return 32 - sum(((v >> k) > 0).astype(np.int64) for k in range(32))


def _half_sum(a, b):
    """gemmlowp's RoundingHalfSum: (a + b + sign) / 2, C's truncating division."""
    s = np.asarray(a, np.int64) + np.asarray(b, np.int64)
    s = s + np.where(s >= 0, 1, -1)
    return np.where(s >= 0, s // 2, -((-s) // 2))


def _log_q5(x):
    """log(x) for x >= 1 given in Q12.19 (raw), as Q5.26: TFLite's
    log_x_for_x_greater_than_or_equal_to_1<5>, in gemmlowp's arithmetic (raw
    adds wrap, products are SaturatingRoundingDoublingHighMul)."""
    log_2, sqrt_sqrt_half, sqrt_half = 1488522236, 1805811301, 1518500250
    alpha_n, alpha_d, alpha_i, alpha_f = 117049297, 127690142, 1057819769, 638450708
    quarter = _div_pow2(536870912, 6)  # Rescale<6> of 1/4
    z_a = np.asarray(x, np.int64)
    hp1 = _clz32(z_a)
    r_a = _pot(_mul_sat(_pot(z_a, hp1 - 1), sqrt_half), 1)
    pow_a = _sat32(_pot(12 - hp1, 25) + quarter)
    hb = _clz32(_mul_sat(z_a, sqrt_half)) - 1
    r_b = _pot(z_a, hb)
    pow_b = _sat32(_pot(12 - hb, 25) - quarter)
    r = np.minimum(r_a, r_b)
    z_pow = np.maximum(pow_a, pow_b)
    p = _half_sum(r, sqrt_sqrt_half)
    q = _wrap32(2 * _wrap32(r - sqrt_sqrt_half))
    sq = _mul_sat(q, q)
    num = _wrap32(_mul_sat(q, r) + _mul_sat(_mul_sat(q, sq), alpha_n))
    den = _wrap32(_mul_sat(p, _wrap32(_wrap32(alpha_i + q) + _mul_sat(alpha_d, sq))) + _mul_sat(alpha_f, q))
    acc = _wrap32(_mul_sat(z_pow, log_2) + _mul_sat(_div_pow2(num, 6), _one_over_one_plus_x(den)))
    return _pot(acc, 1)


def log_softmax(x: np.ndarray, p: dict) -> np.ndarray:
    """log_softmax_s8 over the last axis (TFLite's LogSoftmaxQuantized on
    int8; output scale 16/256, zero point 127): per row, the sum of exp(d)
    over d = x - max >= diff_min (exp_on_negative_values of d rescaled to
    Q5.26, each term to Q12.19) and its log in Q5.26; out = (d rescaled -
    log) / 2^22 (rounded) + 127 for d > the adjusted diff_min (max(diff_min -
    1, the log's range limit in input units)), else -128."""
    x = np.asarray(x, np.int64)
    shape = x.shape
    rows = x.reshape(-1, shape[-1])
    d = rows - rows.max(axis=1, keepdims=True)
    valid = d >= p["diff_min"]
    scaled = requantize(np.where(valid, d, 0), p["input_multiplier"], p["input_left_shift"])
    e = _div_pow2(_exp_on_negative_values(scaled), 12)
    total = np.where(valid, e, 0).sum(axis=1, keepdims=True)  # Q12.19: below 2^31 for rows up to 4096
    log_sum = _log_q5(_wrap32(total))
    limit = requantize(_wrap32(log_sum - (1 << 31)), p["reverse_scaling_divisor"],
                       -p["reverse_scaling_right_shift"])
    adjusted = np.maximum(p["diff_min"] - 1, limit)
    out = np.clip(_div_pow2(_wrap32(scaled - log_sum), 22) + 127, -128, 127)
    out = np.where(d > adjusted, out, -128)
    return out.reshape(shape).astype(np.int8)


# ---- mean over any axes: TFLite's integer MEAN (QuantizedMeanOrSum)

def mean_params(s_in: float, zp_in: int, s_out: float, zp_out: int, count: int,
                act_min: int = -128, act_max: int = 127) -> dict:
    """QuantMeanParams (but axis_mask) as TFLM's MEAN on integers:
    QuantizeMultiplier(s_in / s_out), then 1 / count folded in as
    QuantizedMeanOrSum does: k = min(floor(log2 count), 32, 31 + shift);
    multiplier = (multiplier << k) // count; shift -= k."""
    m, sh = quantize_multiplier(_f32(s_in) / _f32(s_out))
    k = min(int(count).bit_length() - 1, 32, 31 + sh)
    return dict(input_zero_point=int(zp_in), output_zero_point=int(zp_out), multiplier=(m << k) // int(count),
                shift=sh - k, act_min=int(act_min), act_max=int(act_max))


def mean_q(x: np.ndarray, axis_mask: int, p: dict, dtype=np.int8) -> np.ndarray:
    """mean_s8 / mean_s16 over the axes set in axis_mask: sum - count *
    input_zero_point (int32), requantized, + output_zero_point, clamped."""
    x = np.asarray(x, np.int64)
    axes = tuple(d for d in range(x.ndim) if axis_mask >> d & 1)
    count = int(np.prod([x.shape[d] for d in axes], dtype=np.int64))
    total = x.sum(axis=axes) - count * p["input_zero_point"]
    out = requantize(total, p["multiplier"], p["shift"]) + p["output_zero_point"]
    return np.clip(out, p["act_min"], p["act_max"]).astype(dtype)


# ---- the interpreter's runners

def _mean_f32(a, p, outs):
    axes = tuple(d for d in range(a[0].ndim) if p["axis_mask"] >> d & 1)
    return t(a[0]).mean(axes).numpy()


OPS: dict[str, Callable[[list, dict, list], Any]] = {
    "MEAN_F32": _mean_f32,
    "SOFTMAX_F32": lambda a, p, outs: t(a[0]).softmax(p["axis"]).numpy(),
    "SOFTMAX_S8": lambda a, p, outs: softmax(a[0], p["input_multiplier"], p["input_left_shift"], p["diff_min"],
                                             table=a[1] if len(a) > 1 else None),
    "SOFTMAX_S16": lambda a, p, outs: softmax_s16(a[0], p["input_multiplier"], p["input_left_shift"], a[1], a[2]),
    "SOFTMAX_MASKED_S8": lambda a, p, outs: softmax(a[0], p["input_multiplier"], p["input_left_shift"],
                                                    p["diff_min"], a[1], a[2] if len(a) > 2 else None),
    "SOFTMAX_MASKED_S16": lambda a, p, outs: softmax_s16(a[0], p["input_multiplier"], p["input_left_shift"],
                                                         a[1], a[2], a[3]),
    "LOG_SOFTMAX_F32": lambda a, p, outs: t(a[0]).log_softmax(p["axis"]).numpy(),
    "LOG_SOFTMAX_S8": lambda a, p, outs: log_softmax(a[0], p),
    "MEAN_S8": lambda a, p, outs: mean_q(a[0], p["axis_mask"], p),
    "MEAN_S16": lambda a, p, outs: mean_q(a[0], p["axis_mask"], p, np.int16),
}
