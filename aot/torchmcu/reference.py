"""NumPy reference of the int8 kernels (firmware/kernels/portable/portable_s8.h)
and the quantization parameter math the compiler needs.

Every kernel function here has the semantics of its C twin, bit for bit: the
integer arithmetic of CMSIS-NN (non single-rounding build) and of TensorFlow
Lite Micro's reference kernels. Intermediates are int64, so nothing wraps;
accumulators are checked to fit int32 as the C kernels assume.

Layouts (as the C kernels): activations NHWC, convolution weights OHWI,
depthwise weights [1][kh][kw][out_channels] (or [kh][kw][out_channels]),
linear weights [out_features][in_features]. Quantization: real = scale * (q -
zero_point); kernels take input_offset = -input_zero_point and output_offset =
output_zero_point.

The parameter functions mirror TFLite's (tensorflow/lite/kernels/internal/
quantization_util.cc and the TFLM kernels' Prepare): scales are float32 (as
stored in a .tflite file) widened to double before any arithmetic.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1


# ------------------------------------------------------------ parameter math


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


def batch_matmul_params(s_a: float, zp_a: int, s_b: float, zp_b: int, s_out: float, zp_out: int,
                        act_min: int = -128, act_max: int = 127) -> dict:
    """QuantBatchMatmulParams as TFLM's BATCH_MATMUL Prepare
    (GetQuantizedConvolutionMultipler): QuantizeMultiplier(s_a * s_b / s_out)."""
    m, sh = quantize_multiplier(_f32(s_a) * _f32(s_b) / _f32(s_out))
    return dict(lhs_offset=-int(zp_a), rhs_offset=-int(zp_b), output_multiplier=m, output_shift=sh,
                output_offset=int(zp_out), act_min=int(act_min), act_max=int(act_max))


def hardswish(x: np.ndarray) -> np.ndarray:
    """x * relu6(x + 3) / 6 in float32 (PyTorch's order: the product, then
    the division), the function lut_table tabulates for int8 hardswish."""
    x = np.asarray(x, dtype=np.float32)
    return (x * np.clip(x + np.float32(3), np.float32(0), np.float32(6)) / np.float32(6)).astype(np.float32)


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


def fold_linear_bias(bias, w: np.ndarray, input_offset: int) -> np.ndarray:
    """The bias operand linear_s8 expects: bias[o] + input_offset * sum_i w[o][i]
    (int32; bias None is zero)."""
    w = np.asarray(w, dtype=np.int64)
    b = np.zeros(w.shape[0], dtype=np.int64) if bias is None else np.asarray(bias, np.int64)
    return _check_i32(b + int(input_offset) * w.sum(axis=1)).astype(np.int32)


# ---------------------------------------------------------------------- int4


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


# ------------------------------------------------------------- requantization


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


# ----------------------------------------------------------------- conv/linear


def _out_size(size, kernel, stride, pad, dilation):
    return (size + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1


def _pad_nhwc(x: np.ndarray, pad_top: int, pad_left: int, need_h: int, need_w: int,
              value) -> np.ndarray:
    n, h, w, c = x.shape
    out = np.full((n, max(need_h, pad_top + h), max(need_w, pad_left + w), c), value,
                  dtype=x.dtype)
    out[:, pad_top:pad_top + h, pad_left:pad_left + w] = x
    return out


def _windows(x: np.ndarray, kh: int, kw: int, stride: tuple, pad: tuple, dilation: tuple,
             out_hw: tuple | None, value):
    """Yields (ky, kx, view [N, OH, OW, C]) of the padded input per tap."""
    sh, sw = stride
    pt, pl = pad
    dh, dw = dilation
    n, h, w, c = x.shape
    if out_hw is None:
        out_hw = (_out_size(h, kh, sh, pt, dh), _out_size(w, kw, sw, pl, dw))
    oh, ow = out_hw
    xp = _pad_nhwc(x, pt, pl, (oh - 1) * sh + (kh - 1) * dh + 1,
                   (ow - 1) * sw + (kw - 1) * dw + 1, value)
    for ky in range(kh):
        for kx in range(kw):
            y0, x0 = ky * dh, kx * dw
            yield ky, kx, xp[:, y0:y0 + (oh - 1) * sh + 1:sh, x0:x0 + (ow - 1) * sw + 1:sw]


def conv2d(x: np.ndarray, w: np.ndarray, bias, multiplier, shift, *, stride=(1, 1),
           pad=(0, 0), dilation=(1, 1), input_offset: int, output_offset: int,
           act_min: int = -128, act_max: int = 127, out_hw=None) -> np.ndarray:
    """conv2d_s8 (TFLite's ConvPerChannel, CMSIS-NN's arm_convolve_s8).

    x: int8 NHWC; w: int8 OHWI (groups == 1); bias: int32[O] or None;
    multiplier/shift: int32[O]; pad = (top, left); out_hw defaults to the
    symmetric-padding output size. Padded taps contribute 0."""
    x = np.asarray(x, dtype=np.int64) + input_offset
    w = np.asarray(w, dtype=np.int64)
    o, kh, kw, _ = w.shape
    acc = None
    for ky, kx, view in _windows(x, kh, kw, stride, pad, dilation, out_hw, 0):
        term = np.tensordot(view, w[:, ky, kx, :], axes=([3], [1]))
        acc = term if acc is None else acc + term
    if bias is not None:
        acc = acc + np.asarray(bias, dtype=np.int64)
    return _output(acc, np.asarray(multiplier), np.asarray(shift), output_offset, act_min,
                   act_max)


def depthwise_conv2d(x: np.ndarray, w: np.ndarray, bias, multiplier, shift, *,
                     depth_multiplier: int = 1, stride=(1, 1), pad=(0, 0), dilation=(1, 1),
                     input_offset: int, output_offset: int, act_min: int = -128,
                     act_max: int = 127, out_hw=None) -> np.ndarray:
    """depthwise_conv2d_s8 (TFLite's DepthwiseConvPerChannel, CMSIS-NN's
    arm_depthwise_conv_s8). w: int8 [1][kh][kw][C * depth_multiplier] (or
    without the leading 1); output channel c reads input channel c //
    depth_multiplier."""
    w = np.asarray(w, dtype=np.int64)
    if w.ndim == 4:
        w = w[0]
    kh, kw, _ = w.shape
    x = np.repeat(np.asarray(x, dtype=np.int64) + input_offset, depth_multiplier, axis=3)
    acc = None
    for ky, kx, view in _windows(x, kh, kw, stride, pad, dilation, out_hw, 0):
        term = view * w[ky, kx]
        acc = term if acc is None else acc + term
    if bias is not None:
        acc = acc + np.asarray(bias, dtype=np.int64)
    return _output(acc, np.asarray(multiplier), np.asarray(shift), output_offset, act_min,
                   act_max)


def linear(x: np.ndarray, w: np.ndarray, bias, multiplier, shift, *, output_offset: int,
           act_min: int = -128, act_max: int = 127) -> np.ndarray:
    """linear_s8 (TFLite's FullyConnected / FullyConnectedPerChannel,
    CMSIS-NN's arm_fully_connected_s8). x: int8 [batch][in]; w: int8
    [out][in]; bias: int32[out] with the input offset already folded in (see
    fold_linear_bias), or None; multiplier/shift: length 1 (per-tensor) or
    out (per-channel)."""
    x = np.asarray(x, dtype=np.int64)
    w = np.asarray(w, dtype=np.int64)
    acc = x @ w.T
    if bias is not None:
        acc = acc + np.asarray(bias, dtype=np.int64)
    return _output(acc, np.asarray(multiplier), np.asarray(shift), output_offset, act_min,
                   act_max)


# ---------------------------------------------------------------- elementwise


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


def batch_matmul(a: np.ndarray, b: np.ndarray, p: dict) -> np.ndarray:
    """batch_matmul_s8 (TFLite's int8 BATCH_MATMUL, reference kernel): a [..., M, K],
    b [..., K, N]; acc = sum_k (a + lhs_offset) * (b + rhs_offset) in int32, then
    requantized per tensor. p: the batch_matmul_params dict."""
    a = np.asarray(a, dtype=np.int64) + p["lhs_offset"]
    b = np.asarray(b, dtype=np.int64) + p["rhs_offset"]
    return _output(np.matmul(a, b), p["output_multiplier"], p["output_shift"], p["output_offset"],
                   p["act_min"], p["act_max"])


def pad(x: np.ndarray, before, after, value) -> np.ndarray:
    """The PAD op (any dtype): constant padding of each dim."""
    x = np.asarray(x)
    return np.pad(x, list(zip(before, after)), constant_values=np.asarray(value, x.dtype))


# ---------------------------------------------------------------------- pools


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


# -------------------------------------------------------------------- softmax


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


# ------------------------------------------------------------------- quantize


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


def clamp(x: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """clamp_s8."""
    return np.clip(np.asarray(x, dtype=np.int64), lo, hi).astype(np.int8)


def lut(x: np.ndarray, table: np.ndarray) -> np.ndarray:
    """lut_s8: table[x + 128]."""
    return np.asarray(table, dtype=np.int8)[np.asarray(x, dtype=np.int64) + 128]


# ------------------------------------------------------- a16w8 (int16 activations)
# portable_s16.h's twins. Activations int16, symmetric (zero point 0); weights
# int8; conv/linear biases int64.

INT16_MIN, INT16_MAX = -32768, 32767


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


def conv2d_s16(x: np.ndarray, w: np.ndarray, bias, multiplier, shift, *, stride=(1, 1), pad=(0, 0),
               dilation=(1, 1), act_min: int = INT16_MIN, act_max: int = INT16_MAX, out_hw=None) -> np.ndarray:
    """conv2d_s16 (CMSIS-NN's arm_convolve_s16 with an int64 bias, TFLite's
    int16x8 ConvPerChannel): acc = bias[c] + sum x * w in int64 (no offsets:
    zero points are 0), requantize_s64 per output channel, clamp. x: int16
    NHWC; w: int8 OHWI."""
    x = np.asarray(x, dtype=np.int64)
    w = np.asarray(w, dtype=np.int64)
    _, kh, kw, _ = w.shape
    acc = None
    for ky, kx, view in _windows(x, kh, kw, stride, pad, dilation, out_hw, 0):
        term = np.tensordot(view, w[:, ky, kx, :], axes=([3], [1]))
        acc = term if acc is None else acc + term
    if bias is not None:
        acc = acc + np.asarray(bias, dtype=np.int64)
    return _output_s16(acc, multiplier, shift, act_min, act_max)


def depthwise_conv2d_s16(x: np.ndarray, w: np.ndarray, bias, multiplier, shift, *, depth_multiplier: int = 1,
                         stride=(1, 1), pad=(0, 0), dilation=(1, 1), act_min: int = INT16_MIN,
                         act_max: int = INT16_MAX, out_hw=None) -> np.ndarray:
    """depthwise_conv2d_s16 (arm_depthwise_conv_s16): as conv2d_s16 with
    depthwise_conv2d's layout, w [1][kh][kw][C * depth_multiplier]."""
    w = np.asarray(w, dtype=np.int64)
    if w.ndim == 4:
        w = w[0]
    kh, kw, _ = w.shape
    x = np.repeat(np.asarray(x, dtype=np.int64), depth_multiplier, axis=3)
    acc = None
    for ky, kx, view in _windows(x, kh, kw, stride, pad, dilation, out_hw, 0):
        term = view * w[ky, kx]
        acc = term if acc is None else acc + term
    if bias is not None:
        acc = acc + np.asarray(bias, dtype=np.int64)
    return _output_s16(acc, multiplier, shift, act_min, act_max)


def linear_s16(x: np.ndarray, w: np.ndarray, bias, multiplier, shift, *, act_min: int = INT16_MIN,
               act_max: int = INT16_MAX) -> np.ndarray:
    """linear_s16 (arm_fully_connected_s16, TFLite's int16x8
    FullyConnected): x int16 [batch][in], w int8 [out][in], bias int64[out];
    multiplier/shift of length 1 (per tensor, as CMSIS-NN) or out."""
    acc = np.asarray(x, dtype=np.int64) @ np.asarray(w, dtype=np.int64).T
    if bias is not None:
        acc = acc + np.asarray(bias, dtype=np.int64)
    return _output_s16(acc, multiplier, shift, act_min, act_max)


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


def max_pool2d_s16(x, kernel, stride, pad=(0, 0), *, act_min: int = INT16_MIN, act_max: int = INT16_MAX,
                   out_hw=None) -> np.ndarray:
    """max_pool2d_s16 (arm_max_pool_s16): max_pool2d on int16 values."""
    return _max_pool_int(x, kernel, stride, pad, act_min, act_max, out_hw).astype(np.int16)


def avg_pool2d_s16(x, kernel, stride, pad=(0, 0), *, act_min: int = INT16_MIN, act_max: int = INT16_MAX,
                   out_hw=None) -> np.ndarray:
    """avg_pool2d_s16 (arm_avgpool_s16): avg_pool2d's rounding on int16 values."""
    return _avg_pool_int(x, kernel, stride, pad, act_min, act_max, out_hw).astype(np.int16)


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


def requantize_tensor(x: np.ndarray, src: dict, dst: dict) -> np.ndarray:
    """REQUANTIZE (TFLite's Requantize, QUANTIZE from an integer input): x at
    src's quantization to dst's (program tensor dicts: dtype I8/I16, scale,
    zero_point): clamp(requantize(x - zp_in, m, s) + zp_out) with (m, s) =
    QuantizeMultiplier(s_in / s_out)."""
    m, s = quantize_multiplier(_f32(src["scale"]) / _f32(dst["scale"]))
    lo, hi, dt = (-128, 127, np.int8) if dst["dtype"] == "I8" else (INT16_MIN, INT16_MAX, np.int16)
    v = requantize(np.asarray(x, np.int64) - int(src["zero_point"]), m, s) + int(dst["zero_point"])
    return np.clip(v, lo, hi).astype(dt)


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


__all__ = [
    "quantize_multiplier", "conv_requant", "add_params", "mul_params", "softmax_params",
    "lut_table", "fold_linear_bias", "requantize", "conv2d", "depthwise_conv2d", "linear",
    "add", "mul", "max_pool2d", "avg_pool2d", "softmax", "quantize", "dequantize", "clamp",
    "lut", "batch_matmul_params", "hardswish", "maximum", "minimum", "batch_matmul", "pad",
]
