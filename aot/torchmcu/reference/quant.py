"""The integer arithmetic every family shares: TFLite's quantization
parameter math, requantization (CMSIS-NN's arm_nn_requantize and its 64-bit
twin), quantize/dequantize at int8 and int16, int4 packing, and gemmlowp's
fixed-point helpers.

The parameter functions mirror TFLite's (tensorflow/lite/kernels/internal/
quantization_util.cc and the TFLM kernels' Prepare): scales are float32 (as
stored in a .tflite file) widened to double before any arithmetic.
"""

from __future__ import annotations

import math

import numpy as np

INT16_MIN, INT16_MAX = -32768, 32767
INT32_MIN = -(1 << 31)


INT32_MAX = (1 << 31) - 1


def quantize_multiplier(real: float) -> tuple[int, int]:
    """TFLite's QuantizeMultiplier (double-rounding build): real ~=
    multiplier * 2^(shift - 31) with multiplier in [2^30, 2^31) (0 for real ==
    0 or real < 2^-32, where TFLite flushes to zero) and shift in [-31, 30].

    frexp, then round half away from zero of q * 2^31 (TfLiteRound); a
    mantissa that rounds up to 2^31 is halved and the shift incremented."""
    real = float(real)
    if real < 0 or not math.isfinite(real):
        raise ValueError(f"multiplier must be finite and >= 0, got {real}")
    if real == 0.0:
        return 0, 0
    q, shift = math.frexp(real)
    q_fixed = int(math.floor(q * (1 << 31) + 0.5))  # q > 0: half away from zero
    if q_fixed == (1 << 31):
        q_fixed //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    if shift > 30:
        raise ValueError(f"multiplier {real} >= 2^30 cannot be requantized")
    return q_fixed, shift


def _f32(x) -> float:
    """A scale as stored in a .tflite file (float32), widened to double."""
    return float(np.float32(x))


def conv_requant(s_in: float, s_w, s_out: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-output-channel (multiplier, shift) int32 arrays for conv, depthwise
    and linear: QuantizeMultiplier(s_in * s_w[c] / s_out) as TFLite's
    PopulateConvolutionQuantizationParams (and FULLY_CONNECTED's per-channel
    Prepare). A scalar s_w gives arrays of length 1 (per-tensor)."""
    s_w = np.atleast_1d(np.asarray(s_w, dtype=np.float32))
    pairs = [quantize_multiplier(_f32(s_in) * float(s) / _f32(s_out)) for s in s_w]
    return (np.array([m for m, _ in pairs], dtype=np.int32),
            np.array([s for _, s in pairs], dtype=np.int32))


def _smaller_than_one(real: float) -> tuple[int, int]:
    # TFLite's QuantizeMultiplierSmallerThanOneExp.
    if not 0.0 < real < 1.0:
        raise ValueError(f"multiplier {real} must lie in (0, 1)")
    return quantize_multiplier(real)


def _round_half_away(v: np.ndarray) -> np.ndarray:
    """std::round of float32 values (exact: done in float64, where |v| + 0.5
    cannot round for any float32 that is not already an integer)."""
    v = np.asarray(v, dtype=np.float64)
    return np.copysign(np.floor(np.abs(v) + 0.5), v)


def _float_to_int8(r: np.ndarray, zero_point: int) -> np.ndarray:
    """clamp(r + zero_point, -128, 127) for integral float r, with NaN -> -128
    (as quantize_f32_s8 in C)."""
    r = np.asarray(r, dtype=np.float64)
    q = np.clip(r + zero_point, -128, 127)
    q = np.where(np.isnan(q), -128, q)
    return q.astype(np.int8)


def _check_i32(a: np.ndarray) -> np.ndarray:
    if a.size and (a.min() < INT32_MIN or a.max() > INT32_MAX):
        raise OverflowError("int32 accumulator overflow")
    return a


def requantize(x, multiplier, shift) -> np.ndarray:
    """CMSIS-NN's arm_nn_requantize = TFLite's MultiplyByQuantizedMultiplier
    (double rounding), elementwise with broadcasting, int64 out.

    hi = floor((x * 2^left * m + 2^30) / 2^31) with left = max(shift, 0) (the
    rounding doubling high multiply; ties round up, as
    arm_nn_doubling_high_mult_no_sat and gemmlowp's
    SaturatingRoundingDoublingHighMul), computed exactly and saturated to
    int32; then a division by 2^max(-shift, 0) rounding half away from zero
    (arm_nn_divide_by_power_of_two / RoundingDivideByPOT). x: int32 values;
    multiplier in [0, 2^31); shift in [-31, 30]."""
    x = np.asarray(x, dtype=np.int64)
    m = np.asarray(multiplier, dtype=np.int64)
    s = np.asarray(shift, dtype=np.int64)
    left = np.maximum(s, 0)
    right = np.maximum(-s, 0)
    # floor((x * m * 2^left + 2^30) / 2^31) == floor((x * m + 2^(30-left)) / 2^(31-left))
    hi = (x * m + (np.int64(1) << (30 - left))) >> (31 - left)
    hi = np.clip(hi, INT32_MIN, INT32_MAX)
    mask = (np.int64(1) << right) - 1
    threshold = (mask >> 1) + (hi < 0)
    return (hi >> right) + ((hi & mask) > threshold)


def _output(acc: np.ndarray, multiplier, shift, output_offset: int, act_min: int,
            act_max: int) -> np.ndarray:
    v = requantize(_check_i32(acc), multiplier, shift) + output_offset
    return np.clip(v, act_min, act_max).astype(np.int8)


def requantize_s64(acc, multiplier, shift) -> np.ndarray:
    """CMSIS-NN's arm_nn_requantize_s64 (= TFLite's 64-bit
    MultiplyByQuantizedMultiplier): the multiplier reduced to 16 bits
    (round(m / 2^16), 0x7FFF from 0x7FFF0000 up), acc * reduced (int64,
    wrapping), shifted right by 14 - shift (clamped to [0, 63]), truncated to
    int32 (wrapping), then (r + 1) >> 1 in 64 bits."""
    acc = np.asarray(acc, dtype=np.int64)
    m = np.asarray(multiplier, dtype=np.int64)
    reduced = np.where(m < 0x7FFF0000, (m + (1 << 15)) >> 16, 0x7FFF)
    total = np.clip(14 - np.asarray(shift, dtype=np.int64), 0, 63)
    with np.errstate(over="ignore"):
        prod = acc * reduced
    r = (prod >> total).astype(np.int32).astype(np.int64)  # the low 32 bits, as C's conversion
    return (r + 1) >> 1


def _output_s16(acc: np.ndarray, multiplier, shift, act_min: int, act_max: int) -> np.ndarray:
    return np.clip(requantize_s64(acc, multiplier, shift), act_min, act_max).astype(np.int16)


def quantize(x: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    """quantize_f32_s8 (TFLite's AffineQuantize): round_half_away(x / scale)
    in float32 (a division, not a reciprocal multiply) + zero_point, clamped
    to int8; NaN -> -128."""
    x = np.asarray(x, dtype=np.float32)
    with np.errstate(all="ignore"):
        r = _round_half_away(x / np.float32(scale))
    return _float_to_int8(r, int(zero_point))


def dequantize(q: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    """dequantize_s8_f32 (TFLite's Dequantize): float32((q - zp) * scale),
    one rounding (the product is exact in float64)."""
    q = np.asarray(q, dtype=np.int64)
    return ((q - zero_point).astype(np.float64) * _f32(scale)).astype(np.float32)


def quantize_s16(x: np.ndarray, scale: float, zero_point: int = 0) -> np.ndarray:
    """quantize_f32_s16: quantize's rounding, clamped to int16; NaN -> -32768."""
    x = np.asarray(x, dtype=np.float32)
    with np.errstate(all="ignore"):
        r = _round_half_away(x / np.float32(scale)).astype(np.float64)
    q = np.clip(r + zero_point, INT16_MIN, INT16_MAX)
    return np.where(np.isnan(q), INT16_MIN, q).astype(np.int16)


def dequantize_s16(q: np.ndarray, scale: float, zero_point: int = 0) -> np.ndarray:
    """dequantize_s16_f32: float32((q - zp) * scale)."""
    return dequantize(q, scale, zero_point)


def requantize_tensor(x: np.ndarray, src: dict, dst: dict) -> np.ndarray:
    """REQUANTIZE (TFLite's Requantize, QUANTIZE from an integer input): x at
    src's quantization to dst's (program tensor dicts: dtype I8/I16, scale,
    zero_point): clamp(requantize(x - zp_in, m, s) + zp_out) with (m, s) =
    QuantizeMultiplier(s_in / s_out)."""
    m, s = quantize_multiplier(_f32(src["scale"]) / _f32(dst["scale"]))
    lo, hi, dt = (-128, 127, np.int8) if dst["dtype"] == "I8" else (INT16_MIN, INT16_MAX, np.int16)
    v = requantize(np.asarray(x, np.int64) - int(src["zero_point"]), m, s) + int(dst["zero_point"])
    return np.clip(v, lo, hi).astype(dt)


def _mul_sat(a, b):
    # arm_nn_doubling_high_mult / gemmlowp SaturatingRoundingDoublingHighMul.
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    r = (a * b + (1 << 30)) >> 31
    return np.where((a == INT32_MIN) & (b == INT32_MIN), INT32_MAX, r)


def _div_pow2(x, e):
    # arm_nn_divide_by_power_of_two / gemmlowp RoundingDivideByPOT.
    x = np.asarray(x, dtype=np.int64)
    e = np.asarray(e, dtype=np.int64)
    mask = (np.int64(1) << e) - 1
    threshold = (mask >> 1) + (x < 0)
    return (x >> e) + ((x & mask) > threshold)


def _mul_pow2(x, e: int):
    # arm_nn_mult_by_power_of_two: saturating x * 2^e.
    x = np.asarray(x, dtype=np.int64)
    thresh = (1 << (31 - e)) - 1
    return np.where(x > thresh, INT32_MAX, np.where(x < -thresh, INT32_MIN, x << e))


def _one_over_one_plus_x(val):
    """1 / (1 + val) for val in [0, 1) Q0.31 (arm_nn_one_over_one_plus_x_for_x_in_0_1)."""
    s = np.asarray(val, dtype=np.int64) + INT32_MAX
    half_den = np.where(s >= 0, (s + 1) // 2, -((-s + 1) // 2))  # C division toward zero
    x = 1515870810 + _mul_sat(half_den, -1010580540)
    for _ in range(3):
        x = x + _mul_pow2(_mul_sat(x, (1 << 29) - _mul_sat(half_den, x)), 2)
    return _mul_pow2(x, 1)


def pack_int4(values: np.ndarray) -> bytes:
    """int4 values (-8..7, any shape) packed two per byte over the flattened
    elements: element 2i in the low nibble of byte i, 2i + 1 in the high
    nibble; an odd count leaves the last high nibble 0. CMSIS-NN's s4
    kernels read this layout (a weight row may start mid-byte when the
    row length is odd), and so does TFLite's packed kTfLiteInt4."""
    v = np.asarray(values).reshape(-1).astype(np.int64)
    if v.size and (v.min() < -8 or v.max() > 7):
        raise ValueError("int4 values must lie in [-8, 7]")
    nib = (v & 0xF).astype(np.uint8)
    if nib.size % 2:
        nib = np.append(nib, np.uint8(0))
    return (nib[0::2] | (nib[1::2] << 4)).astype(np.uint8).tobytes()


def unpack_int4(data: bytes | np.ndarray, count: int) -> np.ndarray:
    """The first `count` int4 values of packed bytes, as int8 (pack_int4's inverse)."""
    b = np.frombuffer(bytes(data), dtype=np.uint8) if not isinstance(data, np.ndarray) else data.view(np.uint8)
    nib = np.empty(b.size * 2, np.int16)
    nib[0::2], nib[1::2] = b & 0xF, b >> 4
    return (((nib[:count] ^ 8) - 8)).astype(np.int8)
