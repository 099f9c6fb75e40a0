"""A NumPy model of the Cadence HiFi 4 NN library (nnlib) functions the hifi
backend calls, with nnlib's own arithmetic, and ports of its scratch-size
functions.

Written from the library's source (github.com/foss-xtensa/nnlib-hifi4, v4.x:
algo/common/include/xa_nnlib_quant_macros.h, algo/kernels/cnn/hifi4/,
algo/kernels/matXvec/hifi4/xa_nn_matmul_sym8sxasym8s.c), for the library
as its makefile builds it by default: TFLITE_SINGLE_ROUNDING=0 (the "double
rounding" requantization; a library built with SINGLE_ROUNDING=1 rounds
differently and is not what this models). Nothing of nnlib is copied here;
this is an independent description of what its code computes.

Requantization (nnlib's per-channel macro of the double-rounding build): for
shift s, l = max(s, 0) and r = max(-s, 0); then
  1. x = saturate32(acc * 2^l)                     (saturating left shift)
  2. h = (x * m + 2^30) >> 31, saturated            (Q31 multiply, rounding half up)
  3. t = (h * 2^32) >> r                            (h in the high word of a 64-bit
                                                     Q1.63 value, then an arithmetic shift;
                                                     r <= 31 leaves every bit of h)
  4. y = t / 2^32 rounded half away from zero, saturated to 32 bits
The instruction semantics behind steps 2-4 (AE_MULFP32X2RAS: Q1.31 product,
round asymmetric (half up), saturate; AE_CVT64F32_H: Q1.31 to Q1.63;
AE_SRAA64; AE_ROUND32X2F64SSYM: Q1.63 to Q1.31, round symmetric (half away
from zero), saturate) are read from the intrinsics' names and from nnlib
itself, not from Cadence's ISA manual, and no Xtensa tool was available to
run them. nnlib's code pins the 32-bit width of steps 3-4: the HiFi 4 variant
of its "smaller than one" requantization macro builds the same 64-bit value
by placing the product in the high word (a select with zero), where the HiFi 1
variant uses AE_CVT64F32_H; and its single-rounding macro rounds a 64-bit
integer product shifted left by 1 + l with AE_ROUND32X2F64SASYM, which is
TFLite's single rounding only if that drops 32 bits. Reading "F64" as the
56-bit Q17.47 of older HiFi cores (16 guard bits) would make nnlib truncate
before rounding for r > 16 and differ from the reference by one LSB there.

Step 1 saturates where the reference computes acc * 2^l * m exactly: when
acc * 2^l overflows 32 bits the two 32-bit results differ, but both are then
at least 2^29 in magnitude with the same sign, so the int8 outputs agree.
Steps 3-4 are exactly CMSIS-NN's/TFLite's rounding divide by 2^r (round half
away from zero) for every r in [0, 31]: with the int8 output, bit-exact with
torchmcu.reference.requantize for every multiplier and shift the compiler
emits (multiplier in [0, 2^31), shift in [-31, 30]).

Layouts (data format 0, as the backend calls them): activations HWC (NHWC with
batch 1), conv kernels [out_channels][kh][kw][in_channels] (OHWI), depthwise
kernels [kh][kw][in_channels * multiplier], matrices row-major [rows][cols].
nnlib takes input_zero_bias = -input_zero_point (in [-127, 128]) and
out_zero_bias = output_zero_point; its weights are symmetric (no zero point).
"""

from __future__ import annotations

import numpy as np

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1

# Bits below the product that nnlib's 64-bit stage keeps (Q1.63 over Q1.31).
GUARD_BITS = 32

# nnlib's enum of precisions (xa_nnlib_standards.h).
PREC_8 = 8
PREC_ASYM8S = -4
PREC_SYM8S = -5


class NnlibArgumentError(ValueError):
    """nnlib would return -1 for these arguments (its argument checks)."""


def _sat32(v: np.ndarray) -> np.ndarray:
    return np.clip(v, INT32_MIN, INT32_MAX)


def requantize(acc, multiplier, shift) -> np.ndarray:
    """nnlib's per-channel requantization (double-rounding build), elementwise
    with broadcasting; int64 out. See the module docstring for the steps."""
    acc = np.asarray(acc, dtype=np.int64)
    m = np.asarray(multiplier, dtype=np.int64)
    s = np.asarray(shift, dtype=np.int64)
    left = np.maximum(s, 0)
    right = np.maximum(-s, 0)
    x = _sat32(acc << left)
    h = _sat32((x * m + (np.int64(1) << 30)) >> 31)
    # Q1.63 holds h << 32; Python ints avoid int64 overflow there.
    t = [(int(v) << GUARD_BITS) >> int(r) for v, r in np.broadcast(h, right)]
    half = 1 << (GUARD_BITS - 1)
    y = np.array([((abs(v) + half) >> GUARD_BITS) * (1 if v >= 0 else -1) for v in t], dtype=np.int64)
    return _sat32(y.reshape(np.broadcast(h, right).shape))


def _check_shifts(shift) -> None:
    s = np.asarray(shift)
    if s.size and (s.min() < -31 or s.max() > 31):
        raise NnlibArgumentError("output shifts must lie in [-31, 31]")


def _finish(acc: np.ndarray, bias, multiplier, shift, out_zero_bias: int) -> np.ndarray:
    """Bias (a saturating 32-bit add), requantize, add the output zero bias
    (saturating), clamp to int8: the tail every int8-output kernel shares."""
    if acc.size and (acc.min() < INT32_MIN or acc.max() > INT32_MAX):
        raise OverflowError("accumulator beyond 32 bits")
    if bias is not None:
        acc = _sat32(acc + np.asarray(bias, dtype=np.int64))
    y = _sat32(requantize(acc, multiplier, shift) + int(out_zero_bias))
    return np.clip(y, -128, 127).astype(np.int8)


def _padded_input(inp: np.ndarray, y_padding: int, x_padding: int, need_h: int, need_w: int,
                  input_zero_bias: int) -> np.ndarray:
    """The input as nnlib's circular buffer holds it: padding rows and columns
    filled with -input_zero_bias (the input zero point), so that a padded tap
    contributes (pad + input_zero_bias) * w = 0. Rows and columns beyond what
    the output reads are dropped; missing ones at the bottom/right are padding."""
    h, w, c = inp.shape
    out = np.full((need_h, need_w, c), -int(input_zero_bias), dtype=np.int64)
    rows = max(0, min(h, need_h - y_padding))
    cols = max(0, min(w, need_w - x_padding))
    out[y_padding:y_padding + rows, x_padding:x_padding + cols] = inp[:rows, :cols]
    return out


def _check_common(input_zero_bias: int, out_zero_bias: int, x_stride: int, y_stride: int,
                  x_padding: int, y_padding: int, out_height: int, out_width: int) -> None:
    if not -127 <= input_zero_bias <= 128:
        raise NnlibArgumentError(f"input_zero_bias {input_zero_bias} outside [-127, 128]")
    if not -128 <= out_zero_bias <= 127:
        raise NnlibArgumentError(f"out_zero_bias {out_zero_bias} outside [-128, 127]")
    if x_stride <= 0 or y_stride <= 0 or x_padding < 0 or y_padding < 0 or out_height <= 0 or out_width <= 0:
        raise NnlibArgumentError("strides and output dims must be positive, paddings >= 0")


def conv2d_per_chan_sym8sxasym8s(inp, kernel, bias, *, x_stride: int, y_stride: int, x_padding: int,
                                 y_padding: int, out_height: int, out_width: int, input_zero_bias: int,
                                 out_multiplier, out_shift, out_zero_bias: int) -> np.ndarray:
    """xa_nn_conv2d_per_chan_sym8sxasym8s with kernel_channels == input_channels
    (one group), dilation 1, out_data_format 0. inp: int8 [H][W][C]; kernel:
    int8 [O][kh][kw][C]; bias: int32 [O] (required); per-channel multiplier and
    shift [O]. Returns int8 [out_height][out_width][O].

    Bottom and right padding are what the last output window reaches past the
    input (nnlib computes them and takes 0 where the windows stop short of the
    input's end: those rows and columns are never read)."""
    inp = np.asarray(inp, dtype=np.int64)
    kernel = np.asarray(kernel, dtype=np.int64)
    o, kh, kw, c = kernel.shape
    if inp.shape[2] != c:
        raise NnlibArgumentError("kernel_channels must equal input_channels here (one group)")
    if bias is None:
        raise NnlibArgumentError("p_bias must not be null")
    _check_common(input_zero_bias, out_zero_bias, x_stride, y_stride, x_padding, y_padding, out_height, out_width)
    _check_shifts(out_shift)
    need_h = kh + (out_height - 1) * y_stride
    need_w = kw + (out_width - 1) * x_stride
    xp = _padded_input(inp, y_padding, x_padding, need_h, need_w, input_zero_bias) + int(input_zero_bias)
    # im2col over the padded rows, then one matrix product per output channel (matXvec).
    cols = np.empty((out_height, out_width, kh, kw, c), dtype=np.int64)
    for ky in range(kh):
        for kx in range(kw):
            cols[:, :, ky, kx] = xp[ky:ky + (out_height - 1) * y_stride + 1:y_stride,
                                    kx:kx + (out_width - 1) * x_stride + 1:x_stride]
    acc = cols.reshape(out_height * out_width, -1) @ kernel.reshape(o, -1).T
    out = _finish(acc, bias, out_multiplier, out_shift, out_zero_bias)
    return out.reshape(out_height, out_width, o)


def conv2d_depthwise_per_chan_sym8sxasym8s(inp, kernel, bias, *, channels_multiplier: int, x_stride: int,
                                           y_stride: int, x_padding: int, y_padding: int, out_height: int,
                                           out_width: int, input_zero_bias: int, out_multiplier, out_shift,
                                           out_zero_bias: int) -> np.ndarray:
    """xa_nn_conv2d_depthwise_per_chan_sym8sxasym8s, inp_data_format 0 (NHWC)
    and out_data_format 0. inp: int8 [H][W][C]; kernel: int8 [kh][kw][C * m];
    output channel c * m + j reads input channel c. Returns int8
    [out_height][out_width][C * m]."""
    inp = np.asarray(inp, dtype=np.int64)
    kernel = np.asarray(kernel, dtype=np.int64)
    kh, kw, oc = kernel.shape
    h, w, c = inp.shape
    if channels_multiplier <= 0 or oc != c * channels_multiplier:
        raise NnlibArgumentError("kernel channels must be input_channels * channels_multiplier")
    if bias is None:
        raise NnlibArgumentError("p_bias must not be null")
    _check_common(input_zero_bias, out_zero_bias, x_stride, y_stride, x_padding, y_padding, out_height, out_width)
    _check_shifts(out_shift)
    need_h = max(kh + (out_height - 1) * y_stride, y_padding + h)
    need_w = max(kw + (out_width - 1) * x_stride, x_padding + w)
    xp = _padded_input(inp, y_padding, x_padding, need_h, need_w, input_zero_bias) + int(input_zero_bias)
    xp = np.repeat(xp, channels_multiplier, axis=2)
    acc = np.zeros((out_height, out_width, oc), dtype=np.int64)
    for ky in range(kh):
        for kx in range(kw):
            acc += xp[ky:ky + (out_height - 1) * y_stride + 1:y_stride,
                      kx:kx + (out_width - 1) * x_stride + 1:x_stride] * kernel[ky, kx]
    return _finish(acc, bias, out_multiplier, out_shift, out_zero_bias)


def matmul_per_chan_sym8sxasym8s_asym8s(mat1, vec1, bias, *, vec1_zero_bias: int, out_multiplier, out_shift,
                                        out_zero_bias: int) -> np.ndarray:
    """xa_nn_matmul_per_chan_sym8sxasym8s_asym8s with contiguous rows and
    vectors (row_stride1 = vec_offset = cols1) and the output laid out
    [vec_count][rows] (out_stride 1, out_offset rows). mat1: int8 [rows][cols];
    vec1: int8 [vec_count][cols]; bias int32 [rows] or None; per-row
    multiplier and shift. out[v][r] = requantize(bias[r] + sum_c mat1[r][c] *
    (vec1[v][c] + vec1_zero_bias)) + out_zero_bias, clamped to int8."""
    mat1 = np.asarray(mat1, dtype=np.int64)
    vec1 = np.asarray(vec1, dtype=np.int64)
    if not -127 <= vec1_zero_bias <= 128:
        raise NnlibArgumentError(f"vec1_zero_bias {vec1_zero_bias} outside [-127, 128]")
    if not -128 <= out_zero_bias <= 127:
        raise NnlibArgumentError(f"out_zero_bias {out_zero_bias} outside [-128, 127]")
    _check_shifts(out_shift)
    acc = (vec1 + int(vec1_zero_bias)) @ mat1.T
    return _finish(acc, bias, out_multiplier, out_shift, out_zero_bias)


def fully_connected_sym8sxasym8s_asym8s(weight, inp, bias, *, input_zero_bias: int, out_multiplier: int,
                                        out_shift: int, out_zero_bias: int) -> np.ndarray:
    """xa_nn_fully_connected_sym8sxasym8s_asym8s: one input vector, one
    (per-tensor) multiplier and shift. weight: int8 [out_depth][weight_depth];
    inp: int8 [weight_depth]."""
    return matmul_per_chan_sym8sxasym8s_asym8s(
        weight, np.asarray(inp)[None], bias, vec1_zero_bias=input_zero_bias, out_multiplier=out_multiplier,
        out_shift=out_shift, out_zero_bias=out_zero_bias)[0]


# ---------------------------------------------------------------------------------------------
# Scratch sizes. Ports of xa_nn_conv2d_getsize (xa_nn_conv2d_std_circ_buf.c) and
# xa_nn_conv2d_depthwise_getsize (xa_nn_conv2d_depthwise.c) for HiFi 4, with the sizes of
# nnlib's state structs on Xtensa (32-bit pointers): the convolution state holds six pointers
# (24 bytes), the depthwise state a circular buffer descriptor (three pointers, three int32)
# and a pointer (28 bytes). Two helper macros share a name with different meanings in those
# files: the convolution file's ALIGNED_SIZE(n, a) is n + a - 1 (room to align a pointer), the
# depthwise file's rounds n up to a multiple of a.

_ALIGNMENT = 8
_BUS_WIDTH = 8
_CONV_STATE_BYTES = 24
_DW_STATE_BYTES = 28


def _round_up(n: int, a: int) -> int:
    return (n + a - 1) & ~(a - 1)


def _slack(n: int, a: int) -> int:
    return n + a - 1


def conv2d_depthwise_getsize(input_height: int, input_width: int, input_channels: int, kernel_height: int,
                             kernel_width: int, channels_multiplier: int, x_stride: int, y_stride: int,
                             x_padding: int, y_padding: int, output_height: int, output_width: int,
                             circ_buf_precision: int = PREC_8) -> int:
    """xa_nn_conv2d_depthwise_getsize, NHWC input (inp_data_format 0), 8-bit data."""
    del input_width, x_stride, x_padding, output_width  # the NHWC size does not depend on them
    if circ_buf_precision not in (PREC_8, PREC_ASYM8S, PREC_SYM8S, -3):
        raise ValueError("8-bit depthwise only")
    bytewidth = 1
    height = max(kernel_height + (output_height - 1) * y_stride, y_padding + input_height)  # dilation 1
    channels = _round_up(input_channels * channels_multiplier, 4)
    circ = _round_up(bytewidth * height * channels * kernel_width, _ALIGNMENT)
    kernel = _round_up(bytewidth * kernel_height * kernel_width * 4, _ALIGNMENT)
    return _round_up(_DW_STATE_BYTES, _ALIGNMENT) + circ + kernel


def conv2d_getsize(input_height: int, input_width: int, input_channels: int, kernel_height: int,
                   kernel_width: int, kernel_channels: int, y_stride: int, y_padding: int, x_stride: int,
                   x_padding: int, out_height: int, out_width: int, output_channels: int,
                   input_precision: int = PREC_ASYM8S, out_data_format: int = 0, *,
                   padding_conv2d_std: bool) -> int:
    """xa_nn_conv2d_getsize for 8-bit asymmetric input. padding_conv2d_std is
    the library's ENABLE_PADDING_CONV2D_STD, which depends on the core
    configuration (set where the core lacks a circular-addressing load,
    xa_nnlib_hifi_isa_compat.h): with it, kernel channels are padded to 4 and
    a padded copy of the kernel is kept in scratch."""
    if input_precision != PREC_ASYM8S:
        raise ValueError("8-bit asymmetric input only")
    groups = input_channels // kernel_channels
    if groups <= 0 or input_channels % kernel_channels or output_channels % groups:
        raise ValueError("invalid grouping")
    if input_height == 1 and kernel_height == 1 and out_height == 1:  # a row: nnlib transposes it
        input_height, input_width = input_width, input_height
        kernel_height, kernel_width = kernel_width, kernel_height
        x_stride, y_stride = y_stride, x_stride
        x_padding, y_padding = y_padding, x_padding
        out_height, out_width = out_width, out_height
    if groups == input_channels and output_channels >= input_channels and out_data_format == 0:
        return (_ALIGNMENT + _round_up(output_channels * kernel_height * kernel_width, _ALIGNMENT)
                + conv2d_depthwise_getsize(input_height, input_width, input_channels, kernel_height, kernel_width,
                                           output_channels // input_channels, x_stride, y_stride, x_padding,
                                           y_padding, out_height, out_width, input_precision))
    size = _ALIGNMENT + _slack(_CONV_STATE_BYTES, _ALIGNMENT)
    input_bytes, align = 1, _ALIGNMENT >> 1
    bottom = max(kernel_height + (out_height - 1) * y_stride - (y_padding + input_height), 0)
    channels = _round_up(kernel_channels, align) if padding_conv2d_std else kernel_channels
    circ = (y_padding + input_height + bottom) * kernel_width * channels * input_bytes
    while circ % 16:
        circ += kernel_width * channels * input_bytes
    size += _slack(circ, _ALIGNMENT) + _BUS_WIDTH
    if padding_conv2d_std and channels != kernel_channels:
        size += _slack(kernel_height * kernel_width * channels * output_channels * input_bytes, _ALIGNMENT)
    return size


def conv2d_scratch_bytes(input_height: int, input_width: int, input_channels: int, kernel_height: int,
                         kernel_width: int, y_stride: int, y_padding: int, x_stride: int, x_padding: int,
                         out_height: int, out_width: int, output_channels: int) -> int:
    """The scratch a CONV2D_S8 needs on any HiFi 4 configuration: the larger of
    xa_nn_conv2d_getsize with and without ENABLE_PADDING_CONV2D_STD."""
    return max(conv2d_getsize(input_height, input_width, input_channels, kernel_height, kernel_width,
                              input_channels, y_stride, y_padding, x_stride, x_padding, out_height, out_width,
                              output_channels, padding_conv2d_std=p) for p in (False, True))
