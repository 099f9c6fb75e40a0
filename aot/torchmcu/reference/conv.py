"""Convolution, fully connected and matrix products: the integer twins of
firmware/kernels/portable/conv/conv2d_s8.cc, linear_s8.cc, attention_norm/batch_matmul_s8.cc,
conv2d_s16.cc (and the s4 kernels, which run the same math on unpacked
weights), and the interpreter's runners for their op codes.

Layouts (as the C kernels): activations NHWC, convolution weights OHWI,
depthwise weights [1][kh][kw][out_channels] (or [kh][kw][out_channels]),
linear weights [out_features][in_features]. Kernels take input_offset =
-input_zero_point and output_offset = output_zero_point.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ._torch import act, nchw, nhwc, t
from .quant import INT16_MAX, INT16_MIN, _check_i32, _output, _output_s16


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


def _conv_acc(x: np.ndarray, w: np.ndarray, stride, pad, dilation, out_hw) -> np.ndarray:
    """sum over taps and input channels of x * w (int64), grouped: groups =
    x channels / w input channels, output channel o reads group o // (O / groups)."""
    o, kh, kw, ci = w.shape
    groups = x.shape[3] // ci
    outs = []
    for g in range(groups):
        xg, wg = x[..., g * ci:(g + 1) * ci], w[g * (o // groups):(g + 1) * (o // groups)]
        acc = None
        for ky, kx, view in _windows(xg, kh, kw, stride, pad, dilation, out_hw, 0):
            term = np.tensordot(view, wg[:, ky, kx, :], axes=([3], [1]))
            acc = term if acc is None else acc + term
        outs.append(acc)
    return outs[0] if groups == 1 else np.concatenate(outs, axis=3)


def conv2d(x: np.ndarray, w: np.ndarray, bias, multiplier, shift, *, stride=(1, 1),
           pad=(0, 0), dilation=(1, 1), input_offset: int, output_offset: int,
           act_min: int = -128, act_max: int = 127, out_hw=None) -> np.ndarray:
    """conv2d_s8 (TFLite's ConvPerChannel, CMSIS-NN's arm_convolve_s8).

    x: int8 NHWC; w: int8 OHWI with I = x channels / groups (grouped when
    smaller: output channel o reads input channels of group o // (O /
    groups)); bias: int32[O] or None; multiplier/shift: int32[O]; pad =
    (top, left); out_hw defaults to the symmetric-padding output size (the
    bottom and right padding follow from it). Padded taps contribute 0."""
    x = np.asarray(x, dtype=np.int64) + input_offset
    acc = _conv_acc(x, np.asarray(w, dtype=np.int64), stride, pad, dilation, out_hw)
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


def fold_linear_bias(bias, w: np.ndarray, input_offset: int) -> np.ndarray:
    """The bias operand linear_s8 expects: bias[o] + input_offset * sum_i w[o][i]
    (int32; bias None is zero)."""
    w = np.asarray(w, dtype=np.int64)
    b = np.zeros(w.shape[0], dtype=np.int64) if bias is None else np.asarray(bias, np.int64)
    return _check_i32(b + int(input_offset) * w.sum(axis=1)).astype(np.int32)


def conv2d_s16(x: np.ndarray, w: np.ndarray, bias, multiplier, shift, *, stride=(1, 1), pad=(0, 0),
               dilation=(1, 1), act_min: int = INT16_MIN, act_max: int = INT16_MAX, out_hw=None) -> np.ndarray:
    """conv2d_s16 (CMSIS-NN's arm_convolve_s16 with an int64 bias, TFLite's
    int16x8 ConvPerChannel): acc = bias[c] + sum x * w in int64 (no offsets:
    zero points are 0), requantize_s64 per output channel, clamp. x: int16
    NHWC; w: int8 OHWI, grouped as conv2d."""
    acc = _conv_acc(np.asarray(x, dtype=np.int64), np.asarray(w, dtype=np.int64), stride, pad, dilation, out_hw)
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


def _transpose_acc(x: np.ndarray, w: np.ndarray, stride, pad, out_hw) -> np.ndarray:
    """The scatter of a transposed convolution (int64): input pixel (iy, ix)
    adds x * w[:, ky, kx, :] to output pixel (iy * sh - pt + ky, ix * sw - pl
    + kx) where that lies in out_hw. w: [out_c, kh, kw, in_c / groups]:
    grouped, output channel c of group c // (out_c / groups) reads that
    group's in_c / groups input channels (PyTorch's groups)."""
    n, h, wd, cin = x.shape
    o, kh, kw, gc = w.shape
    if gc != cin:
        groups = cin // gc
        ocg = o // groups
        return np.concatenate([_transpose_acc(x[..., g * gc:(g + 1) * gc], w[g * ocg:(g + 1) * ocg], stride, pad,
                                              out_hw) for g in range(groups)], axis=3)
    (sh, sw), (pt, pl), (oh, ow) = stride, pad, out_hw
    acc = np.zeros((n, oh, ow, o), dtype=np.int64)
    for ky in range(kh):
        oy = np.arange(h) * sh - pt + ky
        ys = (oy >= 0) & (oy < oh)
        for kx in range(kw):
            ox = np.arange(wd) * sw - pl + kx
            xs = (ox >= 0) & (ox < ow)
            if not ys.any() or not xs.any():
                continue
            term = np.tensordot(x[:, ys][:, :, xs], w[:, ky, kx, :], axes=([3], [1]))
            acc[:, oy[ys][:, None], ox[xs][None, :]] += term  # each (ky, kx) reaches distinct pixels
    return acc


def transpose_conv2d(x: np.ndarray, w: np.ndarray, bias, multiplier, shift, *, stride=(1, 1), pad=(0, 0),
                     input_offset: int, output_offset: int, act_min: int = -128, act_max: int = 127,
                     out_hw) -> np.ndarray:
    """transpose_conv2d_s8 (TFLite's int8 TRANSPOSE_CONV, reference_integer_ops::
    TransposeConv; CMSIS-NN's arm_transpose_conv_wrapper_s8): acc = bias[c] +
    sum of (x + input_offset) * w over the taps that reach the output pixel,
    requantized per output channel. x: int8 NHWC; w: int8 [out_c, kh, kw,
    in_c]; out_hw: the output's size (rows past the last tap get the bias)."""
    acc = _transpose_acc(np.asarray(x, dtype=np.int64) + input_offset, np.asarray(w, dtype=np.int64), stride,
                         pad, out_hw)
    if bias is not None:
        acc = acc + np.asarray(bias, dtype=np.int64)
    return _output(acc, np.asarray(multiplier), np.asarray(shift), output_offset, act_min, act_max)


def transpose_conv2d_s16(x: np.ndarray, w: np.ndarray, bias, multiplier, shift, *, stride=(1, 1), pad=(0, 0),
                         act_min: int = INT16_MIN, act_max: int = INT16_MAX, out_hw) -> np.ndarray:
    """transpose_conv2d_s16 (TFLite's int16x8 TRANSPOSE_CONV with an int64
    bias): transpose_conv2d's sum on int16 x without offsets, requantize_s64."""
    acc = _transpose_acc(np.asarray(x, dtype=np.int64), np.asarray(w, dtype=np.int64), stride, pad, out_hw)
    if bias is not None:
        acc = acc + np.asarray(bias, dtype=np.int64)
    return _output_s16(acc, multiplier, shift, act_min, act_max)


# ---- the interpreter's runners (args, params, output tensors) -> output

def _conv_common(p: dict, out: dict) -> dict:
    return dict(stride=(p["stride_h"], p["stride_w"]), pad=(p["pad_top"], p["pad_left"]),
                dilation=(p["dilation_h"], p["dilation_w"]), input_offset=p["input_offset"],
                output_offset=p["output_offset"], act_min=p["act_min"], act_max=p["act_max"],
                out_hw=tuple(out["dims"][1:3]))


def _conv2d_s8(a, p, outs):
    return conv2d(a[0], a[1], a[2], a[3], a[4], **_conv_common(p, outs[0]))


def _depthwise_s8(a, p, outs):
    return depthwise_conv2d(a[0], a[1], a[2], a[3], a[4], depth_multiplier=p["multiplier"],
                                **_conv_common(p, outs[0]))


def _linear_s8(a, p, outs):
    x = a[0].reshape(-1, a[0].shape[-1])
    return linear(x, a[1], a[2], a[3], a[4], output_offset=p["output_offset"], act_min=p["act_min"],
                      act_max=p["act_max"])


def _conv_s16(p: dict, out: dict) -> dict:
    c = _conv_common(p, out)
    del c["input_offset"], c["output_offset"]  # int16: zero points are 0
    return c


def _padded_nchw(x: np.ndarray, k: tuple, p: dict, out: dict):
    """The NHWC input as NCHW, padded (or cropped) so that a convolution
    without padding gives the output's size: pad_top / pad_left before, the
    rest after (the bottom and right padding follow from the output)."""
    import torch.nn.functional as F

    (kh, kw), (oh, ow) = k, out["dims"][1:3]
    need_h = (oh - 1) * p["stride_h"] + (kh - 1) * p["dilation_h"] + 1
    need_w = (ow - 1) * p["stride_w"] + (kw - 1) * p["dilation_w"] + 1
    h, w = x.shape[1:3]
    pads = (p["pad_left"], need_w - w - p["pad_left"], p["pad_top"], need_h - h - p["pad_top"])
    return F.pad(nchw(x), pads)
def _bias(a):
    """The float bias operand: absent as -1 (None) or left out of the operand list."""
    return None if len(a) < 3 or a[2] is None else t(a[2])


def _conv2d_f32(a, p, outs):
    import torch.nn.functional as F

    w = t(a[1]).permute(0, 3, 1, 2)
    y = F.conv2d(_padded_nchw(a[0], w.shape[2:], p, outs[0]), w, _bias(a),
                 (p["stride_h"], p["stride_w"]), 0, (p["dilation_h"], p["dilation_w"]), p["groups"])
    return nhwc(act(y, p))


def _depthwise_f32(a, p, outs):
    import torch.nn.functional as F

    w = t(a[1]).permute(3, 0, 1, 2)  # [1, kh, kw, C*m] -> [C*m, 1, kh, kw]
    c = a[0].shape[3]
    y = F.conv2d(_padded_nchw(a[0], w.shape[2:], p, outs[0]), w, _bias(a),
                 (p["stride_h"], p["stride_w"]), 0, (p["dilation_h"], p["dilation_w"]), c)
    return nhwc(act(y, p))


def _transpose_conv_f32(a, p, outs):
    """The full transposed convolution, cropped at (pad_top, pad_left) to the
    output (zeros where it reaches past the full result), plus the bias."""
    import torch.nn.functional as F

    o, kh, kw, gc = a[1].shape
    groups = a[0].shape[3] // gc
    # [out_c, kh, kw, in_c / groups] -> [in_c, out_c / groups, kh, kw]
    w = t(a[1]).reshape(groups, o // groups, kh, kw, gc).permute(0, 4, 1, 2, 3).reshape(groups * gc, o // groups, kh, kw)
    full = F.conv_transpose2d(nchw(a[0]), w, None, (p["stride_h"], p["stride_w"]), groups=groups)
    oh, ow = outs[0]["dims"][1:3]
    pt, pl = p["pad_top"], p["pad_left"]
    y = F.pad(full, (-pl, ow + pl - full.shape[3], -pt, oh + pt - full.shape[2]))
    bias = _bias(a)
    if bias is not None:
        y = y + bias.view(1, -1, 1, 1)
    return nhwc(act(y, p))


def _linear_f32(a, p, outs):
    import torch.nn.functional as F

    return act(F.linear(t(a[0]), t(a[1]), _bias(a)), p).numpy()


OPS: dict[str, Callable[[list, dict, list], Any]] = {
    "CONV2D_S8": _conv2d_s8,
    "DEPTHWISE_CONV2D_S8": _depthwise_s8,
    "LINEAR_S8": _linear_s8,
    # W4A8: the same integer math on the unpacked int4 weights
    "CONV2D_S4": _conv2d_s8,
    "DEPTHWISE_CONV2D_S4": _depthwise_s8,
    "LINEAR_S4": _linear_s8,
    "LINEAR_F32": _linear_f32,
    "CONV2D_F32": _conv2d_f32,
    "DEPTHWISE_CONV2D_F32": _depthwise_f32,
    "CONV2D_S16": lambda a, p, outs: conv2d_s16(a[0], a[1], a[2], a[3], a[4], **_conv_s16(p, outs[0])),
    "DEPTHWISE_CONV2D_S16": lambda a, p, outs: depthwise_conv2d_s16(
        a[0], a[1], a[2], a[3], a[4], depth_multiplier=p["multiplier"], **_conv_s16(p, outs[0])),
    "TRANSPOSE_CONV2D_F32": _transpose_conv_f32,
    "TRANSPOSE_CONV2D_S8": lambda a, p, outs: transpose_conv2d(
        a[0], a[1], a[2], a[3], a[4], stride=(p["stride_h"], p["stride_w"]), pad=(p["pad_top"], p["pad_left"]),
        input_offset=p["input_offset"], output_offset=p["output_offset"], act_min=p["act_min"],
        act_max=p["act_max"], out_hw=tuple(outs[0]["dims"][1:3])),
    "TRANSPOSE_CONV2D_S16": lambda a, p, outs: transpose_conv2d_s16(
        a[0], a[1], a[2], a[3], a[4], stride=(p["stride_h"], p["stride_w"]), pad=(p["pad_top"], p["pad_left"]),
        act_min=p["act_min"], act_max=p["act_max"], out_hw=tuple(outs[0]["dims"][1:3])),
    "LINEAR_S16": lambda a, p, outs: linear_s16(a[0].reshape(-1, a[0].shape[-1]), a[1], a[2], a[3], a[4],
                                                act_min=p["act_min"], act_max=p["act_max"]),
}
