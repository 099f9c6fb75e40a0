"""Element-wise ops and activations: add, mul, maximum, minimum, clamp and
table lookups (sigmoid, tanh, hardswish as int8 tables), at int8 and int16,
and the interpreter's runners for their op codes, quantize and dequantize
included."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ._torch import act, t
from .quant import (
    INT16_MAX,
    INT16_MIN,
    _check_i32,
    _div_pow2,
    _f32,
    _mul_sat,
    _one_over_one_plus_x,
    _output,
    _round_half_away,
    _smaller_than_one,
    quantize,
    quantize_multiplier,
    quantize_s16,
    requantize,
)


def add_params(s1: float, zp1: int, s2: float, zp2: int, s_out: float, zp_out: int,
               act_min: int = -128, act_max: int = 127) -> dict:
    """QuantAddParams (schema/program.fbs) as TFLM's CalculateOpDataAdd: both
    inputs are brought to twice the larger input scale with left_shift = 20
    bits of headroom; every multiplier is < 1 (shifts <= 0)."""
    left_shift = 20
    twice_max = 2.0 * max(_f32(s1), _f32(s2))
    m1, sh1 = _smaller_than_one(_f32(s1) / twice_max)
    m2, sh2 = _smaller_than_one(_f32(s2) / twice_max)
    mo, sho = _smaller_than_one(twice_max / ((1 << left_shift) * _f32(s_out)))
    return dict(input1_offset=-int(zp1), input1_multiplier=m1, input1_shift=sh1,
                input2_offset=-int(zp2), input2_multiplier=m2, input2_shift=sh2,
                left_shift=left_shift, output_multiplier=mo, output_shift=sho,
                output_offset=int(zp_out), act_min=int(act_min), act_max=int(act_max))


def mul_params(s1: float, zp1: int, s2: float, zp2: int, s_out: float, zp_out: int,
               act_min: int = -128, act_max: int = 127) -> dict:
    """QuantMulParams as TFLM's mul Prepare: QuantizeMultiplier(s1 * s2 / s_out)."""
    m, sh = quantize_multiplier(_f32(s1) * _f32(s2) / _f32(s_out))
    return dict(input1_offset=-int(zp1), input2_offset=-int(zp2), output_multiplier=m,
                output_shift=sh, output_offset=int(zp_out), act_min=int(act_min),
                act_max=int(act_max))


def hardswish(x: np.ndarray) -> np.ndarray:
    """x * relu6(x + 3) / 6 in float32 (PyTorch's order: the product, then
    the division), the function lut_table tabulates for int8 hardswish."""
    x = np.asarray(x, dtype=np.float32)
    return (x * np.clip(x + np.float32(3), np.float32(0), np.float32(6)) / np.float32(6)).astype(np.float32)


def lut_table(fn: Callable[[np.ndarray], np.ndarray], s_in: float, zp_in: int, s_out: float,
              zp_out: int) -> np.ndarray:
    """int8[256] table for lut_s8: entry i is the output for input q = i - 128.

    As TFLite's LUTPopulateInt8 (tensorflow/lite/kernels/internal/common.h),
    all in float32: x = s_in * (q - zp_in); y = fn(x) (fn gets a float32
    array and its result is taken as float32); round_half_away(y * (1 /
    s_out)) + zp_out, clamped to int8. (TFLite orders its table by uint8(q);
    ours is by q + 128.) NaN maps to -128."""
    q = np.arange(-128, 128, dtype=np.int32)
    x = np.float32(s_in) * (q - np.int32(zp_in)).astype(np.float32)
    with np.errstate(all="ignore"):
        y = np.asarray(fn(x.astype(np.float32)), dtype=np.float32)
        inverse = np.float32(1.0) / np.float32(s_out)
        rescaled = _round_half_away(np.float32(y * inverse)).astype(np.float32)
        shifted = (rescaled + np.float32(zp_out)).astype(np.float64)
    q_out = np.clip(shifted, -128, 127)
    return np.where(np.isnan(q_out), -128, q_out).astype(np.int8)


def add(a: np.ndarray, b: np.ndarray, p: dict) -> np.ndarray:
    """add_s8 (TFLite's int8 Add, CMSIS-NN's arm_elementwise_add_s8), numpy
    broadcasting. p: the add_params dict."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    ls = np.int64(1) << p["left_shift"]
    a2 = requantize((a + p["input1_offset"]) * ls, p["input1_multiplier"], p["input1_shift"])
    b2 = requantize((b + p["input2_offset"]) * ls, p["input2_multiplier"], p["input2_shift"])
    return _output(a2 + b2, p["output_multiplier"], p["output_shift"], p["output_offset"],
                   p["act_min"], p["act_max"])


def mul(a: np.ndarray, b: np.ndarray, p: dict) -> np.ndarray:
    """mul_s8 (TFLite's int8 Mul, CMSIS-NN's arm_elementwise_mul_s8), numpy
    broadcasting. p: the mul_params dict."""
    a = np.asarray(a, dtype=np.int64) + p["input1_offset"]
    b = np.asarray(b, dtype=np.int64) + p["input2_offset"]
    return _output(a * b, p["output_multiplier"], p["output_shift"], p["output_offset"],
                   p["act_min"], p["act_max"])


def maximum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """maximum_s8 (TFLite's int8 MAXIMUM): the raw values, one shared
    quantization; numpy broadcasting."""
    return np.maximum(np.asarray(a, np.int8), np.asarray(b, np.int8)).astype(np.int8)


def minimum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """minimum_s8 (TFLite's int8 MINIMUM)."""
    return np.minimum(np.asarray(a, np.int8), np.asarray(b, np.int8)).astype(np.int8)


def clamp(x: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """clamp_s8."""
    return np.clip(np.asarray(x, dtype=np.int64), lo, hi).astype(np.int8)


def lut(x: np.ndarray, table: np.ndarray) -> np.ndarray:
    """lut_s8: table[x + 128]."""
    return np.asarray(table, dtype=np.int8)[np.asarray(x, dtype=np.int64) + 128]


def add_params_s16(s1: float, s2: float, s_out: float, act_min: int = INT16_MIN, act_max: int = INT16_MAX) -> dict:
    """QuantAddParams at int16 as TFLM's int16 ADD Prepare: add_params with
    left_shift 15 and zero offsets."""
    twice_max = 2.0 * max(_f32(s1), _f32(s2))
    m1, sh1 = _smaller_than_one(_f32(s1) / twice_max)
    m2, sh2 = _smaller_than_one(_f32(s2) / twice_max)
    mo, sho = _smaller_than_one(twice_max / ((1 << 15) * _f32(s_out)))
    return dict(input1_offset=0, input1_multiplier=m1, input1_shift=sh1, input2_offset=0, input2_multiplier=m2,
                input2_shift=sh2, left_shift=15, output_multiplier=mo, output_shift=sho, output_offset=0,
                act_min=int(act_min), act_max=int(act_max))


def add_s16(a: np.ndarray, b: np.ndarray, p: dict) -> np.ndarray:
    """add_s16 (arm_elementwise_add_s16, TFLM's int16 Add): add's arithmetic
    on int16 values, numpy broadcasting."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    ls = np.int64(1) << p["left_shift"]
    a2 = requantize((a + p["input1_offset"]) * ls, p["input1_multiplier"], p["input1_shift"])
    b2 = requantize((b + p["input2_offset"]) * ls, p["input2_multiplier"], p["input2_shift"])
    v = requantize(_check_i32(a2 + b2), p["output_multiplier"], p["output_shift"]) + p["output_offset"]
    return np.clip(v, p["act_min"], p["act_max"]).astype(np.int16)


def mul_s16(a: np.ndarray, b: np.ndarray, p: dict) -> np.ndarray:
    """mul_s16 (arm_elementwise_mul_s16, TFLM's int16 Mul): mul's arithmetic
    on int16 values (mul_params, offsets 0)."""
    a = np.asarray(a, dtype=np.int64) + p["input1_offset"]
    b = np.asarray(b, dtype=np.int64) + p["input2_offset"]
    v = requantize(_check_i32(a * b), p["output_multiplier"], p["output_shift"]) + p["output_offset"]
    return np.clip(v, p["act_min"], p["act_max"]).astype(np.int16)


def gen_lut_s16(fn: Callable[[np.ndarray], np.ndarray], input_min: float, input_max: float,
                output_min: float = -1.0, output_max: float = 1.0) -> np.ndarray:
    """TFLite's gen_lut<float, int16_t, int16_t>: 513 int16 values of fn over
    [input_min, input_max] (512 steps), each nudged by half the error of
    linear interpolation at its step's midpoint; float32 arithmetic."""
    f = np.float32
    steps = 512
    step = f(f(f(input_max) - f(input_min)) / f(steps))
    half = f(step / f(2))
    scale_inv = f(f(65536.0) / f(f(output_max) - f(output_min)))

    def rnd(v):
        return f(np.copysign(np.floor(np.abs(np.float64(v)) + 0.5), v))

    lut = np.zeros(steps + 1, np.int16)
    for i in range(steps):
        x0 = f(f(input_min) + f(f(i) * step))
        val = f(fn(x0))
        mid = f(fn(f(x0 + half)))
        nxt = f(fn(f(f(input_min) + f(f(i + 1) * step))))
        sample = rnd(f(val * scale_inv))
        interp = rnd(f(f(f(nxt * scale_inv) + sample) / f(2)))
        err = f(interp - rnd(f(mid * scale_inv)))
        bias = rnd(f(err / f(2)))
        lut[i] = int(np.clip(f(sample - bias), -32768, 32767))
    lut[steps] = int(np.clip(rnd(f(f(fn(f(input_max))) * scale_inv)), -32768, 32767))
    return lut


# ---- sub and div (TFLite's int8 SUB and DIV; SUB also at int16)

def sub_params(s1: float, zp1: int, s2: float, zp2: int, s_out: float, zp_out: int,
               act_min: int = -128, act_max: int = 127, bits: int = 8) -> dict:
    """QuantAddParams for SUB as TFLM's CalculateOpDataSub: add_params'
    scheme (left_shift 20 at int8, 15 at int16) with its ratios taken in
    float32, as TFLM computes them for SUB (then widened)."""
    f = np.float32
    left_shift = 20 if bits == 8 else 15
    twice_max = f(f(2) * max(f(s1), f(s2)))
    m1, sh1 = _smaller_than_one(float(f(f(s1) / twice_max)))
    m2, sh2 = _smaller_than_one(float(f(f(s2) / twice_max)))
    mo, sho = _smaller_than_one(float(f(twice_max / f(f(1 << left_shift) * f(s_out)))))
    return dict(input1_offset=-int(zp1), input1_multiplier=m1, input1_shift=sh1,
                input2_offset=-int(zp2), input2_multiplier=m2, input2_shift=sh2,
                left_shift=left_shift, output_multiplier=mo, output_shift=sho,
                output_offset=int(zp_out), act_min=int(act_min), act_max=int(act_max))


def sub(a: np.ndarray, b: np.ndarray, p: dict, dtype=np.int8) -> np.ndarray:
    """sub_s8 / sub_s16 (TFLite's SUB): add's arithmetic with the rescaled
    inputs subtracted; numpy broadcasting. p: sub_params (or add_params)."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    ls = np.int64(1) << p["left_shift"]
    a2 = requantize((a + p["input1_offset"]) * ls, p["input1_multiplier"], p["input1_shift"])
    b2 = requantize((b + p["input2_offset"]) * ls, p["input2_multiplier"], p["input2_shift"])
    v = requantize(_check_i32(a2 - b2), p["output_multiplier"], p["output_shift"]) + p["output_offset"]
    return np.clip(v, p["act_min"], p["act_max"]).astype(dtype)


def div_params(s1: float, zp1: int, s2: float, zp2: int, s_out: float, zp_out: int,
               act_min: int = -128, act_max: int = 127) -> dict:
    """QuantDivParams as TFLM's CalculateOpDataDiv: QuantizeMultiplier of
    s1 / (s2 * s_out), the ratio taken in float32."""
    f = np.float32
    m, sh = quantize_multiplier(float(f(f(s1) / f(f(s2) * f(s_out)))))
    return dict(input1_offset=-int(zp1), input2_offset=-int(zp2), output_multiplier=m, output_shift=sh,
                output_offset=int(zp_out), act_min=int(act_min), act_max=int(act_max))


def _bit_length(v: np.ndarray) -> np.ndarray:
    """Bits of non-negative int64 values (0 for 0)."""
    v = np.asarray(v, np.int64)
    out = np.zeros(v.shape, np.int64)
    for k in range(63):
        out += (v >> k) > 0
    return out


def div(a: np.ndarray, b: np.ndarray, p: dict) -> np.ndarray:
    """div_s8 (TFLite's reference_ops::Div on int8), numpy broadcasting:
    v1 = a + offset1, v2 = b + offset2 (signs moved so v2 > 0); the
    reciprocal of v2 in Q0.31 with its exponent (GetReciprocal); v1 scaled
    up by its headroom (CountLeadingSignBits), multiplied by the reciprocal,
    then by output_multiplier, and divided by 2^(recip_shift + headroom -
    output_shift), rounding half away from zero (an exponent beyond 31 gives
    0, where TFLite's shift is undefined). A zero divisor gives act_max,
    act_min or output_offset by the sign of v1 (x / 0: +-inf, 0 / 0)."""
    v1 = np.asarray(a, np.int64) + p["input1_offset"]
    v2 = np.asarray(b, np.int64) + p["input2_offset"]
    v1, v2 = np.broadcast_arrays(v1, v2)
    v1 = np.where(v2 < 0, -v1, v1)
    v2 = np.abs(v2)
    zero = v2 == 0
    v2 = np.where(zero, 1, v2)
    bl2 = _bit_length(v2)
    headroom_plus_one = 32 - bl2
    recip_shift = bl2 - 1
    shifted = (v2 << headroom_plus_one) - (1 << 31)
    inv = _one_over_one_plus_x(shifted)
    mag = np.where(v1 < 0, -v1 - 1, v1)
    headroom = 31 - _bit_length(mag)
    q = _mul_sat(v1 << headroom, inv)
    exponent = recip_shift + headroom - p["output_shift"]
    hi = _mul_sat(q, p["output_multiplier"])
    res = np.where(exponent > 31, 0, _div_pow2(hi, np.clip(exponent, 0, 31))) + p["output_offset"]
    res = np.where(zero, np.where(v1 > 0, p["act_max"], np.where(v1 < 0, p["act_min"], p["output_offset"])), res)
    return np.clip(res, p["act_min"], p["act_max"]).astype(np.int8)


# ---- the interpreter's runners


def _hardswish_f32(x):
    import torch.nn.functional as F

    return F.hardswish(x)


def masked_fill(x: np.ndarray, mask: np.ndarray, value: Any) -> np.ndarray:
    """MASKED_FILL: value where the (broadcast) mask is nonzero, else x; an
    integer x takes value as a raw value at its quantization."""
    x = np.asarray(x)
    return np.where(np.asarray(mask) != 0, np.asarray(value, x.dtype), x).astype(x.dtype)


COMPARE_OPS = (np.less, np.less_equal, np.greater, np.greater_equal, np.equal, np.not_equal)


def compare(a: np.ndarray, b: np.ndarray, op: int) -> np.ndarray:
    """COMPARE: a op b as U8 (1 or 0), broadcast; CompareParams.op indexes COMPARE_OPS."""
    with np.errstate(invalid="ignore"):
        return COMPARE_OPS[op](np.asarray(a), np.asarray(b)).astype(np.uint8)


OPS: dict[str, Callable[[list, dict, list], Any]] = {
    "MASKED_FILL": lambda a, p, outs: masked_fill(
        a[0], a[1], np.float32(p.get("value", 0.0)) if a[0].dtype == np.float32 else p.get("qvalue", 0)),
    "COMPARE": lambda a, p, outs: compare(a[0], a[1], p.get("op", 0)),
    "QUANTIZE_S8": lambda a, p, outs: quantize(a[0], outs[0]["scale"], outs[0]["zero_point"]),
    "QUANTIZE_S16": lambda a, p, outs: quantize_s16(a[0], outs[0]["scale"], outs[0]["zero_point"]),
    "ADD_S8": lambda a, p, outs: add(a[0], a[1], p),
    "MUL_S8": lambda a, p, outs: mul(a[0], a[1], p),
    "ADD_S16": lambda a, p, outs: add_s16(a[0], a[1], p),
    "MUL_S16": lambda a, p, outs: mul_s16(a[0], a[1], p),
    "CLAMP_S8": lambda a, p, outs: clamp(a[0], p["min"], p["max"]),
    "LUT_S8": lambda a, p, outs: lut(a[0], a[1]),
    "MAXIMUM_S8": lambda a, p, outs: maximum(a[0], a[1]),
    "MINIMUM_S8": lambda a, p, outs: minimum(a[0], a[1]),
    "CLAMP_F32": lambda a, p, outs: t(a[0]).clamp(p.get("min", -np.inf), p.get("max", np.inf)).numpy(),
    "SIGMOID_F32": lambda a, p, outs: t(a[0]).sigmoid().numpy(),
    "TANH_F32": lambda a, p, outs: t(a[0]).tanh().numpy(),
    "HARDSWISH_F32": lambda a, p, outs: _hardswish_f32(t(a[0])).numpy(),
    "ADD_F32": lambda a, p, outs: act(t(a[0]) + t(a[1]), p).numpy(),
    "MUL_F32": lambda a, p, outs: act(t(a[0]) * t(a[1]), p).numpy(),
    "MAXIMUM_F32": lambda a, p, outs: act(t(a[0]).maximum(t(a[1])), p).numpy(),
    "MINIMUM_F32": lambda a, p, outs: act(t(a[0]).minimum(t(a[1])), p).numpy(),
    "SUB_F32": lambda a, p, outs: act(t(a[0]) - t(a[1]), p).numpy(),
    "SUB_S8": lambda a, p, outs: sub(a[0], a[1], p),
    "SUB_S16": lambda a, p, outs: sub(a[0], a[1], p, np.int16),
    "DIV_F32": lambda a, p, outs: act(t(a[0]) / t(a[1]), p).numpy(),
    "DIV_S8": lambda a, p, outs: div(a[0], a[1], p),
}
