"""Convolution, fully connected and matrix products.

ATen: conv1d / conv2d / convolution (a 1-D convolution is the 2-D one with
H = 1: see helpers.nhwc_in), conv_transpose1d / conv_transpose2d, linear,
batch_norm (also as _native_batch_norm_legit_no_training, which capture's
functionalization makes of it; folded into the conv or linear before it by
fusion.fold_batch_norm or fold_batch_norm_transposed here, else a
per-channel multiply-add), mm / bmm / matmul (an activation times a 2-D
parameter is a linear layer). Zero padding (F.pad, e.g. a causal
convolution's left padding) folds into the convolution after it
(fold_pad).
Program ops: CONV2D (grouped too) / DEPTHWISE_CONV2D / LINEAR at F32, S8,
S4 (W4A8) and S16 (a16w8); TRANSPOSE_CONV2D at F32, S8 and S16;
BATCH_MATMUL at F32 and S8. Reference twin: reference/conv.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ... import reference
from ..graph import INF, Graph, Node, QConst, drop_dead, replace_uses
from .family import Family
from .helpers import (
    act_params,
    act_q,
    act_q16,
    bias_q,
    bias_q64,
    identity,
    nhwc_in,
    nhwc_out,
    window_padded,
)

F = Family("conv")
aten = torch.ops.aten


# -- ATen -> logical ---------------------------------------------------------------------------

def _constant_weights(cv, w, b) -> None:
    if not isinstance(w, (np.ndarray, QConst)) or (b is not None and not isinstance(b, np.ndarray)):
        raise cv.fail("convolution weights must be constants (parameters)")


def _with_h1(w: Any) -> Any:
    """A 1-D convolution's weight [a, b, k] as the 2-D one's [a, b, 1, k]."""
    shape = (w.shape[0], w.shape[1], 1, w.shape[2])
    if isinstance(w, QConst):
        return QConst(w.data.reshape(shape), w.scale, w.zero_point, w.axis, w.bits)
    return w.reshape(shape)


def _spatial(v: Any, rank: int) -> tuple[int, ...]:
    """A stride/padding/dilation argument as one value per spatial dim."""
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    return tuple(int(x) for x in (v * rank if len(v) == 1 else v))


def _conv(cv, x, w, b, stride, padding, dilation, groups, rank: int):
    """conv1d (rank 1: H = 1) and conv2d to one "conv2d" node with 4-D weights."""
    x = cv.act(x)
    if len(cv.shape(x)) != rank + 2:
        raise cv.fail(f"only batched {rank}-D convolution ({'NCL' if rank == 1 else 'NCHW'} input) is supported")
    _constant_weights(cv, w, b)
    k = tuple(int(s) for s in w.shape[2:])
    stride, dilation = _spatial(stride, rank), _spatial(dilation, rank)
    if isinstance(padding, str):  # "same" pads the extra row/column after (PyTorch): the output's size says so
        pad = tuple(0 if padding == "valid" else d * (kk - 1) // 2 for kk, d in zip(k, dilation))
    else:
        pad = _spatial(padding, rank)
    if rank == 1:
        w, stride, pad, dilation = _with_h1(w), (1, *stride), (0, *pad), (1, *dilation)
    attrs = dict(stride=stride, padding=pad, dilation=dilation, groups=int(groups), act=(-INF, INF))
    return cv.emit("conv2d", [x, w, b if b is not None else None], attrs)


@F.rule(aten.conv2d.default, aten.conv2d.padding)
def conv2d(cv, x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    return _conv(cv, x, w, b, stride, padding, dilation, groups, 2)


@F.rule(aten.conv1d.default, aten.conv1d.padding)
def conv1d(cv, x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    return _conv(cv, x, w, b, stride, padding, dilation, groups, 1)


@F.rule(aten.conv_transpose2d.input, aten.conv_transpose1d.default)
def conv_transpose(cv, x, w, b=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """TFLite's TRANSPOSE_CONV, no dilation; groups > 1 as PyTorch's (the
    kernels read each group's input channels; the .tflite export has one
    group only). The output size (output_padding included) comes from the
    graph."""
    x = cv.act(x)
    rank = len(cv.shape(x)) - 2
    if rank not in (1, 2):
        raise cv.fail("only batched 1-D and 2-D transposed convolutions are supported")
    _constant_weights(cv, w, b)
    groups = int(groups)
    if groups < 1 or cv.shape(x)[1] % groups or w.shape[0] != cv.shape(x)[1]:
        raise cv.fail(f"transposed convolution with groups={groups} of {cv.shape(x)[1]} input channels")
    dil = _spatial(dilation, rank)
    if any(d != 1 for d in dil):
        shown = dil[0] if len(set(dil)) == 1 else dil
        raise cv.fail(f"transposed convolution with dilation={shown} is not supported (only 1, as TFLite's "
                      "TRANSPOSE_CONV)")
    stride, pad = _spatial(stride, rank), _spatial(padding, rank)
    if rank == 1:
        w, stride, pad = _with_h1(w), (1, *stride), (0, *pad)
    return cv.emit("conv_transpose2d", [x, w, b], dict(stride=stride, padding=pad, groups=groups, act=(-INF, INF)))


@F.rule(aten.convolution.default)
def convolution(cv, x, w, b, stride, padding, dilation, transposed, output_padding, groups):
    """The decomposed form of all of the above."""
    if transposed:
        return conv_transpose(cv, x, w, b, stride, padding, output_padding, groups, dilation)
    return _conv(cv, x, w, b, stride, padding, dilation, groups, len(cv.shape(x)) - 2)


@F.rule(aten.linear.default)
def linear(cv, x, w, b=None):
    if not isinstance(w, (np.ndarray, QConst)) or (b is not None and not isinstance(b, np.ndarray)):
        raise cv.fail("linear weights must be constants (parameters)")
    return cv.emit("linear", [cv.act(x), w, b], dict(act=(-INF, INF)))


@F.rule(aten.batch_norm.default)
def batch_norm(cv, x, weight, bias, mean, var, training=False, momentum=0.1, eps=1e-5, cudnn=False):
    if training:
        raise cv.fail("batch norm in training mode; call model.eval() before compiling")
    c = cv.shape(x)[1]
    weight = np.ones(c, np.float32) if weight is None else weight
    bias = np.zeros(c, np.float32) if bias is None else bias
    return cv.emit("batch_norm", [cv.act(x), weight, bias, mean, var], dict(eps=float(eps)), shape=cv.shape(x))


@F.rule(aten._native_batch_norm_legit_no_training.default)
def batch_norm_legit(cv, x, weight, bias, mean, var, momentum=0.1, eps=1e-5):
    """batch_norm as functionalization leaves it: (output, saved mean, saved
    rstd), of which the graph reads only the output (operator.getitem 0)."""
    return batch_norm(cv, x, weight, bias, mean, var, False, momentum, eps), None, None


# -- which instances have integer kernels ------------------------------------------------------

def _symmetric_int8(w: Any, axes: tuple) -> bool:
    """Symmetric integer weights (int8 storage) per channel along one of `axes`, or per tensor."""
    return (isinstance(w, QConst) and w.data.dtype == np.int8 and w.axis in (*axes, None)
            and not np.any(w.zero_point))


@F.int8("conv2d", "linear")
def _weighted_int8(g: Graph, n: Node, in_q: list, out_q: tuple) -> bool:
    """Symmetric int8 (or int4) weights per output channel; convolutions
    plain, depthwise or grouped (grouped: int8 weights, no W4A8 kernel)."""
    w = n.inputs[1]
    if not _symmetric_int8(w, (0,)):
        return False
    if n.op == "conv2d":
        groups, cin = n.attrs["groups"], g.shapes[n.inputs[0]][1]  # type: ignore[index]
        return groups == 1 or _depthwise(n, cin) or w.bits == 8
    return True


@F.int8("conv_transpose2d")
@F.int16("conv_transpose2d")
def _transposed_int(g: Graph, n: Node, in_q: list, out_q: tuple) -> bool:
    """int8 weights per output channel: axis 1 of PyTorch's [in, out, kh, kw]."""
    w = n.inputs[1]
    return _symmetric_int8(w, (1,)) and w.bits == 8


@F.int16("conv2d", "linear")
def _weighted_int16(g: Graph, n: Node, in_q: list, out_q: tuple) -> bool:
    """int8 weights (there is no W4A16)."""
    w = n.inputs[1]
    return isinstance(w, QConst) and w.bits == 8 and _weighted_int8(g, n, in_q, out_q)


# -- logical -> program ops --------------------------------------------------------------------

def _conv_params(a: dict[str, Any]) -> dict[str, Any]:
    return {"stride_h": a["stride"][0], "stride_w": a["stride"][1],
            "pad_top": a["padding"][0], "pad_left": a["padding"][1],
            "dilation_h": a["dilation"][0], "dilation_w": a["dilation"][1]}


def _weights(lay, n: Node, wt: np.ndarray, dtype: str, s_w: np.ndarray, axis: int) -> int:
    """A quantized weight constant with its per-channel scales (for exporters)."""
    wid = lay.constant(f"{n.name}_weight", wt, dtype)
    lay.p.tensors[wid].channel_scales = tuple(float(v) for v in s_w)
    lay.p.tensors[wid].channel_axis = axis
    return wid


def _scratch(lay, n: Node, ins: list[int], code: str, x: int, w_dims: tuple[int, ...], y_dims: tuple[int, ...],
             params: dict[str, Any], itemsize: int = 1) -> None:
    """The scratch RAM the backends' kernels for this op may ask for, as a
    planned operand live during the op (of the output's dtype)."""
    nbytes = lay.scratch(code, lay.p.tensors[x].dims, w_dims, y_dims, params)
    if nbytes > 0:
        ins.append(lay.activation(f"{n.name}_scratch", (nbytes // itemsize,), like=n.out))


def _depthwise(n: Node, cin: int) -> bool:
    """groups == in channels with one input channel per group (a channel multiplier)."""
    return n.attrs["groups"] == cin and cin > 1 and n.inputs[1].shape[1] == 1  # type: ignore[union-attr]


def _out_elements(lay, n: Node) -> int:
    return int(np.prod(lay.g.shapes[n.out]))


@F.lower("conv2d")
def _conv2d_f32(lay, n: Node) -> None:
    x, w, b = n.inputs
    w = w.dequantized() if isinstance(w, QConst) else w  # a float fallback of a quantized model
    xin = nhwc_in(lay, x, n)
    out = nhwc_out(lay, n)
    groups = n.attrs["groups"]
    cin = lay.g.shapes[x][1]
    cout, _, kh, kw = w.shape
    params = {**_conv_params(n.attrs), "groups": groups, **act_params(n.attrs["act"])}
    if _depthwise(n, cin):
        code, wt = "DEPTHWISE_CONV2D_F32", np.transpose(w, (1, 2, 3, 0))  # [1, kh, kw, cout]
        params["multiplier"] = cout // cin
    else:
        code, wt = "CONV2D_F32", np.transpose(w, (0, 2, 3, 1))  # OHWI
    ins = [xin, lay.constant(f"{n.name}_weight", wt)]
    if b is not None:
        ins.append(lay.constant(f"{n.name}_bias", b))
    macs = _out_elements(lay, n) * int(w.shape[1]) * kh * kw
    lay.emit(code, ins, [out], ("Conv2dParams", params), n, "conv2d", macs)


@F.lower("linear")
def _linear_f32(lay, n: Node) -> None:
    x, w, b = n.inputs
    w = w.dequantized() if isinstance(w, QConst) else w
    shape = lay.g.shapes[n.out]
    xin = lay.get(x, identity(len(lay.g.shapes[x])), n)
    out = lay.activation(n.name, shape)
    ins = [xin, lay.constant(f"{n.name}_weight", w)]
    if b is not None:
        ins.append(lay.constant(f"{n.name}_bias", b))
    lay.emit("LINEAR_F32", ins, [out], ("LinearParams", act_params(n.attrs["act"])), n, "linear",
             int(np.prod(shape)) * int(w.shape[1]))
    lay.val[n.out] = (out, identity(len(shape)))


@F.lower("qconv2d")
def _conv2d_s8(lay, n: Node) -> None:
    x, w, b = n.inputs
    assert isinstance(w, QConst)
    (s_in, zp_in), = n.attrs["in_q"]
    s_out, zp_out = n.attrs["out_q"]
    xin = nhwc_in(lay, x, n)
    out = nhwc_out(lay, n, like=n.out)
    cout, _, kh, kw = w.shape
    s_w = np.broadcast_to(np.asarray(w.scale, np.float64), (cout,))
    mult, shift = reference.conv_requant(s_in, s_w, s_out)
    lo, hi = act_q(n.attrs["act"], s_out, zp_out)
    a = n.attrs
    params = {**_conv_params(a), "input_offset": -zp_in, "output_offset": zp_out, "act_min": lo, "act_max": hi}
    cin = lay.g.shapes[x][1]
    depthwise = _depthwise(n, cin)
    if depthwise:
        code, wt = "DEPTHWISE_CONV2D_S8", np.transpose(w.data, (1, 2, 3, 0))
        params["multiplier"] = cout // cin
    else:  # grouped too: OHWI with I = cin / groups
        code, wt = "CONV2D_S8", np.transpose(w.data, (0, 2, 3, 1))
    wdtype = "I8"
    if w.bits == 4:  # W4A8: the same op with packed int4 weights
        code, wdtype = code[:-2] + "S4", "I4"
    bias = bias_q(b, s_in, s_w, cout)
    # Output channels: OHWI's first axis; the last of depthwise [1, kh, kw, C*m].
    wid = _weights(lay, n, wt, wdtype, s_w, 3 if depthwise else 0)
    ins = [xin, wid, lay.constant(f"{n.name}_bias", bias, "I32"),
           lay.constant(f"{n.name}_multiplier", mult, "I32"), lay.constant(f"{n.name}_shift", shift, "I32")]
    _scratch(lay, n, ins, code, xin, wt.shape, lay.p.tensors[out].dims, params)
    macs = _out_elements(lay, n) * int(w.shape[1]) * kh * kw
    lay.emit(code, ins, [out], ("QuantConv2dParams", params), n, "conv2d", macs)


@F.lower("qlinear")
def _linear_s8(lay, n: Node) -> None:
    x, w, b = n.inputs
    assert isinstance(w, QConst)
    (s_in, zp_in), = n.attrs["in_q"]
    s_out, zp_out = n.attrs["out_q"]
    shape = lay.g.shapes[n.out]
    xin = lay.get(x, identity(len(lay.g.shapes[x])), n)
    out = lay.activation(n.name, shape, like=n.out)
    cout = w.shape[0]
    s_w = np.broadcast_to(np.asarray(w.scale, np.float64), (cout,))
    mult, shift = reference.conv_requant(s_in, s_w, s_out)
    # The kernel sums: input_offset * sum(w) folded into the bias ahead of time.
    bias = bias_q(b, s_in, s_w, cout) + np.int64(-zp_in) * w.data.astype(np.int64).sum(1)
    lo, hi = act_q(n.attrs["act"], s_out, zp_out)
    code, wdtype = ("LINEAR_S4", "I4") if w.bits == 4 else ("LINEAR_S8", "I8")
    wid = _weights(lay, n, w.data, wdtype, s_w, 0)
    ins = [xin, wid, lay.constant(f"{n.name}_bias", bias, "I32"),
           lay.constant(f"{n.name}_multiplier", mult, "I32"), lay.constant(f"{n.name}_shift", shift, "I32")]
    params = {"input_offset": -zp_in, "output_offset": zp_out, "act_min": lo, "act_max": hi}
    _scratch(lay, n, ins, code, xin, w.shape, shape, params)
    lay.emit(code, ins, [out], ("QuantLinearParams", params), n, "linear",
             int(np.prod(shape)) * int(w.shape[1]))
    lay.val[n.out] = (out, identity(len(shape)))


@F.lower16("qconv2d")
def _conv2d_s16(lay, n: Node) -> None:
    x, w, b = n.inputs
    assert isinstance(w, QConst)
    (s_in, _), = n.attrs["in_q"]
    s_out, _ = n.attrs["out_q"]
    xin = nhwc_in(lay, x, n)
    out = nhwc_out(lay, n, like=n.out)
    cout, _, kh, kw = w.shape
    s_w = np.broadcast_to(np.asarray(w.scale, np.float64), (cout,))
    mult, shift = reference.conv_requant(s_in, s_w, s_out)
    lo, hi = act_q16(n.attrs["act"], s_out)
    a = n.attrs
    params = {**_conv_params(a), "input_offset": 0, "output_offset": 0, "act_min": lo, "act_max": hi}
    cin = lay.g.shapes[x][1]
    depthwise = _depthwise(n, cin)
    if depthwise:
        code, wt = "DEPTHWISE_CONV2D_S16", np.transpose(w.data, (1, 2, 3, 0))
        params["multiplier"] = cout // cin
    else:
        code, wt = "CONV2D_S16", np.transpose(w.data, (0, 2, 3, 1))
    wid = _weights(lay, n, wt, "I8", s_w, 3 if depthwise else 0)
    ins = [xin, wid, lay.constant(f"{n.name}_bias", bias_q64(b, s_in, s_w, cout), "I64"),
           lay.constant(f"{n.name}_multiplier", mult, "I32"), lay.constant(f"{n.name}_shift", shift, "I32")]
    _scratch(lay, n, ins, code, xin, wt.shape, lay.p.tensors[out].dims, params, itemsize=2)
    macs = _out_elements(lay, n) * int(w.shape[1]) * kh * kw
    lay.emit(code, ins, [out], ("QuantConv2dParams", params), n, "conv2d", macs)


# -- transposed convolution: weights [in, out, kh, kw] (PyTorch) -> [out, kh, kw, in] (TFLite) ---

def _transposed_weights(w: np.ndarray, groups: int) -> np.ndarray:
    """PyTorch's [in_c, out_c / groups, kh, kw] as [out_c, kh, kw, in_c / groups]:
    output channel g * (out_c / groups) + j of group g holds w[g * gc + i, j]."""
    cin, ocg, kh, kw = w.shape
    gc = cin // groups
    return np.ascontiguousarray(
        w.reshape(groups, gc, ocg, kh, kw).transpose(0, 2, 3, 4, 1).reshape(groups * ocg, kh, kw, gc))


def _transposed_macs(lay, n: Node) -> int:
    w = n.inputs[1]
    return int(np.prod(lay.g.shapes[n.inputs[0]])) * int(w.shape[1] * w.shape[2] * w.shape[3])  # type: ignore[union-attr]


@F.lower("conv_transpose2d")
def _conv_transpose_f32(lay, n: Node) -> None:
    x, w, b = n.inputs
    w = w.dequantized() if isinstance(w, QConst) else w
    xin = nhwc_in(lay, x, n)
    out = nhwc_out(lay, n)
    groups = n.attrs.get("groups", 1)
    params = {**_conv_params({**n.attrs, "dilation": (1, 1)}), "groups": groups, **act_params(n.attrs["act"])}
    ins = [xin, lay.constant(f"{n.name}_weight", _transposed_weights(w, groups))]
    if b is not None:
        ins.append(lay.constant(f"{n.name}_bias", b))
    lay.emit("TRANSPOSE_CONV2D_F32", ins, [out], ("Conv2dParams", params), n, "conv_transpose2d",
             _transposed_macs(lay, n))


def _conv_transpose_int(lay, n: Node, wide: bool) -> None:
    x, w, b = n.inputs
    assert isinstance(w, QConst)
    (s_in, zp_in), = n.attrs["in_q"]
    s_out, zp_out = n.attrs["out_q"]
    xin = nhwc_in(lay, x, n)
    out = nhwc_out(lay, n, like=n.out)
    groups = n.attrs.get("groups", 1)
    cout = w.shape[1] * groups  # per-channel scales along axis 1: out_c / groups of them, the same each group
    s_w = np.tile(np.broadcast_to(np.asarray(w.scale, np.float64), (w.shape[1],)), groups)
    mult, shift = reference.conv_requant(s_in, s_w, s_out)
    conv = _conv_params({**n.attrs, "dilation": (1, 1)})
    if wide:
        lo, hi = act_q16(n.attrs["act"], s_out)
        code, bias, bdtype, offsets = "TRANSPOSE_CONV2D_S16", bias_q64(b, s_in, s_w, cout), "I64", (0, 0)
    else:
        lo, hi = act_q(n.attrs["act"], s_out, zp_out)
        code, bias, bdtype, offsets = "TRANSPOSE_CONV2D_S8", bias_q(b, s_in, s_w, cout), "I32", (-zp_in, zp_out)
    params = {**conv, "input_offset": offsets[0], "output_offset": offsets[1], "act_min": lo, "act_max": hi}
    wt = _transposed_weights(w.data, groups)
    ins = [xin, _weights(lay, n, wt, "I8", s_w, 0), lay.constant(f"{n.name}_bias", bias, bdtype),
           lay.constant(f"{n.name}_multiplier", mult, "I32"), lay.constant(f"{n.name}_shift", shift, "I32")]
    _scratch(lay, n, ins, code, xin, wt.shape, lay.p.tensors[out].dims, params, itemsize=2 if wide else 1)
    lay.emit(code, ins, [out], ("QuantConv2dParams", params), n, "conv_transpose2d", _transposed_macs(lay, n))


@F.lower("qconv_transpose2d")
def _conv_transpose_s8(lay, n: Node) -> None:
    _conv_transpose_int(lay, n, wide=False)


@F.lower16("qconv_transpose2d")
def _conv_transpose_s16(lay, n: Node) -> None:
    _conv_transpose_int(lay, n, wide=True)


@F.lower16("qlinear")
def _linear_s16(lay, n: Node) -> None:
    x, w, b = n.inputs
    assert isinstance(w, QConst)
    (s_in, _), = n.attrs["in_q"]
    s_out, _ = n.attrs["out_q"]
    shape = lay.g.shapes[n.out]
    xin = lay.get(x, identity(len(lay.g.shapes[x])), n)
    out = lay.activation(n.name, shape, like=n.out)
    cout = w.shape[0]
    s_w = np.broadcast_to(np.asarray(w.scale, np.float64), (cout,))
    mult, shift = reference.conv_requant(s_in, s_w, s_out)
    bias = bias_q64(b, s_in, s_w, cout)
    lo, hi = act_q16(n.attrs["act"], s_out)
    wid = _weights(lay, n, w.data, "I8", s_w, 0)
    ins = [xin, wid, lay.constant(f"{n.name}_bias", bias, "I64"),
           lay.constant(f"{n.name}_multiplier", mult, "I32"), lay.constant(f"{n.name}_shift", shift, "I32")]
    params = {"input_offset": 0, "output_offset": 0, "act_min": lo, "act_max": hi}
    lay.emit("LINEAR_S16", ins, [out], ("QuantLinearParams", params), n, "linear",
             int(np.prod(shape)) * int(w.shape[1]))
    lay.val[n.out] = (out, identity(len(shape)))


# -- graph passes (run by passes.PASSES) --------------------------------------------------------

def fold_batch_norm_transposed(g: Graph) -> None:
    """A batch norm right after a transposed convolution (float weights, no
    other use) scales its weights per output channel (axis 1) and its bias,
    as fusion.fold_batch_norm does for a convolution."""
    producer = {n.out: n for n in g.nodes}
    keep: list[Node] = []
    for n in g.nodes:
        p = producer.get(n.inputs[0]) if n.op == "batch_norm" else None  # type: ignore[arg-type]
        if (p is None or p.op != "conv_transpose2d" or not isinstance(p.inputs[1], np.ndarray)
                or p.attrs.get("groups", 1) != 1 or len(g.users(p.out)) != 1 or g.is_output(p.out)):
            keep.append(n)
            continue
        _, weight, bias, mean, var = n.inputs
        scale = (weight / np.sqrt(var + n.attrs["eps"])).astype(np.float32)  # type: ignore[operator]
        w, b = p.inputs[1], p.inputs[2]
        p.inputs[1] = (w * scale.reshape(1, -1, 1, 1)).astype(np.float32)  # type: ignore[operator]
        p.inputs[2] = ((b if b is not None else 0) * scale + bias - mean * scale).astype(np.float32)  # type: ignore[operator]
        replace_uses(g, n.out, p.out)
    g.nodes = keep


def _requantized_pad(g: Graph, producer: dict, q: Node | None) -> Any:
    """x when q is quantize(pad(dequantize(x))) at x's own quantization (a
    pad with no integer kernel, between two integer ops), else None."""
    if q is None or q.op != "quantize":
        return None
    p = producer.get(q.inputs[0])
    d = producer.get(p.inputs[0]) if p is not None and p.op == "pad" else None
    if d is None or d.op != "dequantize" or len(g.users(p.out)) != 1 or len(g.users(d.out)) != 1:
        return None
    same = all(d.attrs.get(k) == q.attrs.get(k) for k in ("scale", "zero_point", "bits"))
    return d.inputs[0] if same else None


def fold_pad(g: Graph) -> None:
    """Zero padding of H and W (F.pad, e.g. a causal convolution's left
    padding) read only by a convolution becomes that convolution's padding,
    where the convolution kernels take it (check::window_padded). At int8
    the padded value is the zero point: taps there add 0 either way."""
    producer = {n.out: n for n in g.nodes}
    for n in g.nodes:
        if n.op not in ("conv2d", "qconv2d"):
            continue
        head = producer.get(n.inputs[0])  # type: ignore[arg-type]  # what the convolution reads
        if head is None:
            continue
        if head.op == "quantize":  # a16w8: quantize(pad(dequantize(x))), the pad in float
            x = _requantized_pad(g, producer, head)
            if x is None:
                continue
            p = producer[head.inputs[0]]  # type: ignore[index]
        elif head.op in ("pad", "qpad"):
            p, x = head, head.inputs[0]
        else:
            continue
        if p.attrs["value"] != 0.0 or len(g.users(head.out)) != 1 or g.is_output(head.out):
            continue
        rank = len(g.shapes[p.out])
        before, after = p.attrs["before"], p.attrs["after"]
        if any(before[d] or after[d] for d in range(2)):
            continue  # batch or channels padded
        spatial = list(range(2, rank))
        pad_hw = [0] * (4 - rank) + [before[d] for d in spatial]
        top, left = n.attrs["padding"][0] + pad_hw[0], n.attrs["padding"][1] + pad_hw[1]
        in_hw = g.shapes[x][2:] if rank == 4 else (1, g.shapes[x][2])  # type: ignore[index]
        out_hw = g.shapes[n.out][2:] if rank == 4 else (1, g.shapes[n.out][2])
        k = n.inputs[1].shape[2:]  # type: ignore[union-attr]
        if not all(window_padded(i, o, kk, s, pb, d) for i, o, kk, s, pb, d in zip(
                in_hw, out_hw, k, n.attrs["stride"], (top, left), n.attrs["dilation"])):
            continue
        n.inputs[0] = x
        n.attrs = dict(n.attrs, padding=(top, left))
    drop_dead(g)
