"""Convolution, fully connected and matrix products.

ATen: conv2d, linear, batch_norm (folded into the conv or linear before it
by fusion.fold_batch_norm, else a per-channel multiply-add), mm / bmm /
matmul (an activation times a 2-D parameter is a linear layer).
Program ops: CONV2D / DEPTHWISE_CONV2D / LINEAR at F32, S8, S4 (W4A8) and
S16 (a16w8); BATCH_MATMUL at F32 and S8. Reference twin: reference/conv.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ... import reference
from ..graph import INF, Graph, Node, QConst, pair
from .family import Family
from .helpers import NHWC, act_params, act_q, act_q16, bias_q, bias_q64, identity

F = Family("conv")
aten = torch.ops.aten


# -- ATen -> logical ---------------------------------------------------------------------------

@F.rule(aten.conv2d.default, aten.conv2d.padding)
def conv2d(cv, x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    x = cv.act(x)
    if len(cv.shape(x)) != 4:
        raise cv.fail("only batched 2-D convolution (NCHW input) is supported")
    if not isinstance(w, (np.ndarray, QConst)) or (b is not None and not isinstance(b, np.ndarray)):
        raise cv.fail("convolution weights must be constants (parameters)")
    kh, kw = w.shape[2], w.shape[3]
    dh, dw = pair(dilation)
    if isinstance(padding, str):
        if padding == "valid":
            ph, pw = 0, 0
        else:  # "same": PyTorch pads the extra row/column at the end; symmetric only here
            th, tw = dh * (kh - 1), dw * (kw - 1)
            if th % 2 or tw % 2:
                raise cv.fail("padding='same' with an even kernel pads unevenly; not supported")
            ph, pw = th // 2, tw // 2
    else:
        ph, pw = pair(padding)
    attrs = dict(stride=pair(stride), padding=(ph, pw), dilation=(dh, dw), groups=int(groups), act=(-INF, INF))
    return cv.emit("conv2d", [x, w, b if b is not None else None], attrs)


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
    return cv.emit("batch_norm", [cv.act(x), weight, bias, mean, var], dict(eps=float(eps)))


# -- which instances have integer kernels ------------------------------------------------------

@F.int8("conv2d", "linear")
def _weighted_int8(g: Graph, n: Node, in_q: list, out_q: tuple) -> bool:
    """Symmetric int8 (or int4) weights per output channel; convolutions
    plain or depthwise (groups neither 1 nor C run in float)."""
    w = n.inputs[1]
    if not (isinstance(w, QConst) and w.data.dtype == np.int8 and w.axis in (0, None)
            and not np.any(w.zero_point)):
        return False
    if n.op == "conv2d":
        groups, cin = n.attrs["groups"], g.shapes[n.inputs[0]][1]  # type: ignore[index]
        return groups == 1 or (groups == cin and w.shape[1] == 1)
    return True


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


@F.lower("conv2d")
def _conv2d_f32(lay, n: Node) -> None:
    x, w, b = n.inputs
    w = w.dequantized() if isinstance(w, QConst) else w  # a float fallback of a quantized model
    out_shape = lay.g.shapes[n.out]
    xin = lay.get(x, NHWC, n)
    out = lay.activation(n.name, tuple(out_shape[d] for d in NHWC))
    groups = n.attrs["groups"]
    cin = lay.g.shapes[x][1]
    cout, _, kh, kw = w.shape
    params = {**_conv_params(n.attrs), "groups": groups, **act_params(n.attrs["act"])}
    if groups > 1 and groups == cin and w.shape[1] == 1:
        code, wt = "DEPTHWISE_CONV2D_F32", np.transpose(w, (1, 2, 3, 0))  # [1, kh, kw, cout]
        params["multiplier"] = cout // cin
    else:
        code, wt = "CONV2D_F32", np.transpose(w, (0, 2, 3, 1))  # OHWI
    ins = [xin, lay.constant(f"{n.name}_weight", wt)]
    if b is not None:
        ins.append(lay.constant(f"{n.name}_bias", b))
    macs = int(np.prod(out_shape)) * int(w.shape[1]) * kh * kw
    lay.emit(code, ins, [out], ("Conv2dParams", params), n, "conv2d", macs)
    lay.val[n.out] = (out, NHWC)


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
    out_shape = lay.g.shapes[n.out]
    xin = lay.get(x, NHWC, n)
    out = lay.activation(n.name, tuple(out_shape[d] for d in NHWC), like=n.out)
    cout, _, kh, kw = w.shape
    s_w = np.broadcast_to(np.asarray(w.scale, np.float64), (cout,))
    mult, shift = reference.conv_requant(s_in, s_w, s_out)
    lo, hi = act_q(n.attrs["act"], s_out, zp_out)
    a = n.attrs
    params = {**_conv_params(a), "input_offset": -zp_in, "output_offset": zp_out, "act_min": lo, "act_max": hi}
    cin = lay.g.shapes[x][1]
    if a["groups"] > 1:
        code, wt = "DEPTHWISE_CONV2D_S8", np.transpose(w.data, (1, 2, 3, 0))
        params["multiplier"] = cout // cin
    else:
        code, wt = "CONV2D_S8", np.transpose(w.data, (0, 2, 3, 1))
    wdtype = "I8"
    if w.bits == 4:  # W4A8: the same op with packed int4 weights
        code, wdtype = code[:-2] + "S4", "I4"
    bias = bias_q(b, s_in, s_w, cout)
    # Output channels: OHWI's first axis; the last of depthwise [1, kh, kw, C*m].
    wid = _weights(lay, n, wt, wdtype, s_w, 3 if a["groups"] > 1 else 0)
    ins = [xin, wid, lay.constant(f"{n.name}_bias", bias, "I32"),
           lay.constant(f"{n.name}_multiplier", mult, "I32"), lay.constant(f"{n.name}_shift", shift, "I32")]
    _scratch(lay, n, ins, code, xin, wt.shape, lay.p.tensors[out].dims, params)
    macs = int(np.prod(out_shape)) * int(w.shape[1]) * kh * kw
    lay.emit(code, ins, [out], ("QuantConv2dParams", params), n, "conv2d", macs)
    lay.val[n.out] = (out, NHWC)


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
    out_shape = lay.g.shapes[n.out]
    xin = lay.get(x, NHWC, n)
    out = lay.activation(n.name, tuple(out_shape[d] for d in NHWC), like=n.out)
    cout, _, kh, kw = w.shape
    s_w = np.broadcast_to(np.asarray(w.scale, np.float64), (cout,))
    mult, shift = reference.conv_requant(s_in, s_w, s_out)
    lo, hi = act_q16(n.attrs["act"], s_out)
    a = n.attrs
    params = {**_conv_params(a), "input_offset": 0, "output_offset": 0, "act_min": lo, "act_max": hi}
    cin = lay.g.shapes[x][1]
    if a["groups"] > 1:
        code, wt = "DEPTHWISE_CONV2D_S16", np.transpose(w.data, (1, 2, 3, 0))
        params["multiplier"] = cout // cin
    else:
        code, wt = "CONV2D_S16", np.transpose(w.data, (0, 2, 3, 1))
    wid = _weights(lay, n, wt, "I8", s_w, 3 if a["groups"] > 1 else 0)
    ins = [xin, wid, lay.constant(f"{n.name}_bias", bias_q64(b, s_in, s_w, cout), "I64"),
           lay.constant(f"{n.name}_multiplier", mult, "I32"), lay.constant(f"{n.name}_shift", shift, "I32")]
    _scratch(lay, n, ins, code, xin, wt.shape, lay.p.tensors[out].dims, params, itemsize=2)
    macs = int(np.prod(out_shape)) * int(w.shape[1]) * kh * kw
    lay.emit(code, ins, [out], ("QuantConv2dParams", params), n, "conv2d", macs)
    lay.val[n.out] = (out, NHWC)


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
