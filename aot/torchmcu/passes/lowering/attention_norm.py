"""Attention and normalisation: matrix products, attention, layer norm and
a batch norm that follows no conv or linear.

ATen: mm / bmm / matmul (an activation times a 2-D parameter is a linear
layer, conv.py's; otherwise a "bmm" of two activations or of an activation
and a constant of any rank, batch dims broadcast), baddbmm,
scaled_dot_product_attention (q @ k^T, a softmax scaled by beta with a
constant mask, @ v: the float model's composite taken apart here; for an
integer model frontend/attention.py takes it apart before calibration, so
that the scores and probabilities have ranges), layer_norm /
native_layer_norm, and the "affine" nodes fusion.fold_batch_norm makes of a
lone batch norm. Program ops: BATCH_MATMUL at F32, S8 and S16 (b given
transposed where that moves no data, or where a copy is needed anyway:
CMSIS-NN's form); LAYER_NORM at F32, S8 and S16 (torchmcu's integer
scheme: reference/attention_norm.py); a lone batch norm at int8/int16 is a
1x1 depthwise convolution (DEPTHWISE_CONV2D_S8/S16, TFLite's). Reference
twin: reference/attention_norm.py.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from ... import reference
from ..graph import INF, Graph, Node, QConst, const, is_activation
from .family import Family, always
from .helpers import act_params, act_q, act_q16, bias_q, bias_q64, identity, same_bytes
from .operands import activation, at_rank, quantized_constant

F = Family("attention_norm")
aten = torch.ops.aten


# -- ATen -> logical ---------------------------------------------------------------------------

def _float(v: Any) -> Any:
    """An activation as it is; a constant as a float array (a QConst dequantized)."""
    if is_activation(v):
        return v
    return v.dequantized() if isinstance(v, QConst) else const(v)


@F.rule(aten.bmm.default, aten.mm.default, aten.matmul.default)
def matmul(cv, a, b):
    """An activation times a 2-D constant [K, N] (a parameter): a linear
    layer. Otherwise a batched product of rank >= 2 operands, batch dims
    broadcast (numpy's rules), either operand possibly a constant."""
    from .conv import linear

    sa, sb = cv.shape(a), cv.shape(b)
    if len(sa) < 2 or len(sb) < 2:
        raise cv.fail("matmul with a 1-D operand (a vector) is not supported; make it a [K, 1] or [1, K] matrix")
    if is_activation(a) and not is_activation(b) and len(sb) == 2:
        if isinstance(b, QConst):  # per-channel along N (axis 1) becomes axis 0 of [N, K]
            w: Any = QConst(np.ascontiguousarray(b.data.T), b.scale, b.zero_point,
                            None if b.axis is None else 1 - b.axis, b.bits)
        else:
            w = np.ascontiguousarray(const(b).T)
        return linear(cv, a, w, None)
    if not is_activation(a) and not is_activation(b):
        raise cv.fail("matmul of two constants")
    return cv.emit("bmm", [_float(a), _float(b)])


@F.rule(aten.baddbmm.default)
def baddbmm(cv, x, b1, b2, beta=1, alpha=1):
    """beta * x + alpha * (b1 @ b2)."""
    shape = cv.out_shape()
    s = cv.emit("bmm", [_float(b1), _float(b2)], shape=shape)
    if alpha != 1:
        s = cv.emit("mul", [s, np.asarray(alpha, np.float32)], dict(act=(-INF, INF)), shape=shape)
    if beta == 0:
        return s
    if is_activation(x):
        return cv.emit("add", [s, x], dict(act=(-INF, INF), alpha=float(beta)), shape=shape)
    return cv.emit("add", [s, np.asarray(const(x) * np.float32(beta), np.float32)], dict(act=(-INF, INF)),
                   shape=shape)


@F.rule(aten.scaled_dot_product_attention.default)
def scaled_dot_product_attention(cv, q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, *, scale=None,
                                 enable_gqa=False):
    """softmax(q @ k^T * scale + mask) @ v, as the program's ops (see
    frontend/attention.py for the mask's reading)."""
    from ...frontend.attention import split_mask

    if enable_gqa or dropout_p:
        raise cv.fail("attention with grouped-query heads or dropout is not supported")
    computed = attn_mask if is_activation(attn_mask) else None  # from the inputs (a length, a padding mask)
    attn_mask = None if computed is not None else attn_mask
    sq, sk, sv = cv.shape(q), cv.shape(k), cv.shape(v)
    scale = 1.0 / math.sqrt(sq[-1]) if scale is None else float(scale)
    mask = None if attn_mask is None else torch.as_tensor(np.asarray(attn_mask))
    masked, finite = split_mask(mask, bool(is_causal), (sq[-2], sk[-2]))
    batch = tuple(np.broadcast_shapes(sq[:-2], sk[:-2]))
    rank = len(sk)
    perm = tuple(range(rank - 2)) + (rank - 1, rank - 2)
    kt = cv.emit("permute", [cv.act(k)], dict(perm=perm), shape=sk[:-2] + (sk[-1], sk[-2]))
    s_shape = batch + (sq[-2], sk[-2])
    s = cv.emit("bmm", [_float(q), kt], shape=s_shape)
    if finite is not None:
        s = cv.emit("add", [s, (finite.numpy() / scale).astype(np.float32)], dict(act=(-INF, INF)), shape=s_shape)
    if computed is not None:
        s = _computed_mask(cv, s, computed, scale, s_shape)
    ins = [s]
    if masked is not None and bool(masked.any()):
        ins.append(np.ascontiguousarray(np.broadcast_to(masked.numpy(), s_shape)))
    p = cv.emit("softmax", ins, dict(dim=len(s_shape) - 1, beta=scale), shape=s_shape)
    return cv.emit("bmm", [p, _float(v)], shape=tuple(np.broadcast_shapes(batch, sv[:-2])) + (sq[-2], sv[-1]))


def _computed_mask(cv, s, mask, scale: float, s_shape: tuple[int, ...]):
    """Scores with a mask the model computes: a boolean one (True: attend)
    as -inf where it is False (MASKED_FILL), an additive one added at 1 /
    scale (the softmax multiplies by scale)."""
    from .elementwise import COMPARE

    if tuple(np.broadcast_shapes(cv.shape(mask), s_shape)) != tuple(s_shape):
        raise cv.fail(f"an attention mask of shape {tuple(cv.shape(mask))} for scores {tuple(s_shape)}")
    if cv.g.dtypes.get(mask) == "U8":
        excluded = cv.emit("compare", [mask, np.zeros((), np.uint8)], dict(op=COMPARE["eq"]), shape=cv.shape(mask))
        cv.g.dtypes[excluded] = "U8"
        return cv.emit("masked_fill", [s, excluded], dict(value=-math.inf), shape=s_shape)
    if mask in cv.g.dtypes:
        raise cv.fail(f"an attention mask of dtype {cv.g.dtypes[mask]}: a bool or float mask is supported")
    add = cv.emit("mul", [mask, np.asarray(1.0 / scale, np.float32)], dict(act=(-INF, INF)), shape=cv.shape(mask))
    return cv.emit("add", [s, add], dict(act=(-INF, INF), alpha=1.0), shape=s_shape)


@F.rule(aten.layer_norm.default)
def layer_norm(cv, x, normalized_shape, weight=None, bias=None, eps=1e-5, cudnn_enable=True):
    x = cv.act(x)
    ndims = len(normalized_shape)
    cols = int(np.prod(cv.shape(x)[-ndims:], dtype=np.int64))
    if is_activation(weight) or is_activation(bias):
        raise cv.fail("layer norm weight and bias must be constants (parameters)")
    w = None if weight is None else _float(weight).reshape(cols)
    b = None if bias is None else _float(bias).reshape(cols)
    return cv.emit("layer_norm", [x, w, b], dict(eps=float(eps), ndims=ndims))


@F.rule(aten.native_layer_norm.default)
def native_layer_norm(cv, x, normalized_shape, weight, bias, eps):
    """The output only (its mean and rstd are for training)."""
    return layer_norm(cv, x, normalized_shape, weight, bias, eps), None, None


@F.rule(aten.group_norm.default)
def group_norm(cv, x, num_groups, weight=None, bias=None, eps=1e-5, cudnn_enabled=True):
    """x [N, C, *] in `num_groups` groups of C / num_groups channels, each
    normalised over its channels and all positions; weight and bias per channel."""
    x = cv.act(x)
    shape = cv.shape(x)
    if len(shape) < 2 or num_groups < 1 or shape[1] % num_groups:
        raise cv.fail(f"group norm of {num_groups} groups needs [N, C, ...] with C divisible by it")
    if is_activation(weight) or is_activation(bias):
        raise cv.fail("group norm weight and bias must be constants (parameters)")
    w = None if weight is None else _float(weight).reshape(shape[1])
    b = None if bias is None else _float(bias).reshape(shape[1])
    return cv.emit("group_norm", [x, w, b], dict(eps=float(eps), groups=int(num_groups)))


# -- which instances have integer kernels ------------------------------------------------------

def _float_constants(n: Node) -> bool:
    return all(isinstance(i, (int, np.ndarray)) or i is None for i in n.inputs)


def _depth(g: Graph, n: Node) -> int:
    a = n.inputs[0]
    return int(g.shapes[a][-1] if isinstance(a, int) else np.asarray(a).shape[-1])  # type: ignore[index]


@F.int8("bmm")
def _bmm_int8(g: Graph, n: Node, in_q: list, out_q: tuple) -> bool:
    """The int32 accumulator: K products of at most 255 * 255."""
    return _float_constants(n) and _depth(g, n) * 255 * 255 <= 2 ** 31 - 1


@F.int16("bmm")
def _bmm_int16(g: Graph, n: Node, in_q: list, out_q: tuple) -> bool:
    """The int64 accumulator below 2^47 (requantize_s64's range): K < 2^17."""
    return _float_constants(n) and _depth(g, n) < 2 ** 17


@F.int8("layer_norm")
@F.int16("layer_norm")
def _layer_norm_int(g: Graph, n: Node, in_q: list, out_q: tuple) -> bool:
    return int(np.prod(g.shapes[n.out][-n.attrs["ndims"]:])) <= reference.attention_norm.LN_MAX_COLS


@F.int8("group_norm")
@F.int16("group_norm")
def _group_norm_int(g: Graph, n: Node, in_q: list, out_q: tuple) -> bool:
    """Layer norm's scheme over each group's values: at most LN_MAX_COLS of them."""
    shape = g.shapes[n.out]
    return int(np.prod(shape[1:], dtype=np.int64)) // n.attrs["groups"] <= reference.attention_norm.LN_MAX_COLS


F.int8("affine")(always)
F.int16("affine")(always)


# -- logical -> program ops --------------------------------------------------------------------

def _rhs_transposed(rank: int) -> tuple[int, ...]:
    return tuple(range(rank - 2)) + (rank - 1, rank - 2)


def _rhs(lay, n: Node, rank: int, bits: int = 0) -> tuple[int, bool, float, int]:
    """b of a product: (tensor, adj_y, scale, zero point). Given as [.., K, N]
    where its bytes are so, else as [.., N, K] (adj_y: free for k^T in
    attention, and CMSIS-NN's form where a copy is needed anyway); a
    constant transposed ahead of time."""
    b = n.inputs[1]
    if not isinstance(b, int):
        data = np.swapaxes(at_rank(np.asarray(b, np.float32), rank, identity(rank)), -1, -2)
        if not bits:
            return lay.constant(f"{n.name}_b", np.ascontiguousarray(data)), True, 0.0, 0
        tid, s, zp = quantized_constant(lay, f"{n.name}_b", data, bits, rank, identity(rank))
        return tid, True, s, zp
    s, zp = _in_q(n, b)
    shape = lay.g.shapes[b]
    if len(shape) == rank and same_bytes(shape, lay.val[b][1], identity(rank)):
        return lay.get(b, identity(rank), n), False, s, zp
    return activation(lay, b, rank, _rhs_transposed(rank), n), True, s, zp


def _in_q(n: Node, v: int) -> tuple[float, int]:
    if "in_q" not in n.attrs:
        return 0.0, 0
    acts = [i for i in n.inputs if isinstance(i, int)]
    return n.attrs["in_q"][acts.index(v)]


def _lhs(lay, n: Node, rank: int, bits: int = 0) -> tuple[int, float, int]:
    a = n.inputs[0]
    if isinstance(a, int):
        return (activation(lay, a, rank, identity(rank), n), *_in_q(n, a))
    if not bits:
        return lay.constant(f"{n.name}_a", at_rank(np.asarray(a, np.float32), rank, identity(rank))), 0.0, 0
    return quantized_constant(lay, f"{n.name}_a", np.asarray(a), bits, rank, identity(rank))


def _bmm(lay, n: Node, bits: int) -> None:
    shape = lay.g.shapes[n.out]
    rank = len(shape)
    ain, s1, z1 = _lhs(lay, n, rank, bits)
    bin_, adj_y, s2, z2 = _rhs(lay, n, rank, bits)
    out = lay.activation(n.name, shape, like=n.out if bits else None)
    macs = int(np.prod(shape)) * int(lay.p.tensors[ain].dims[-1])
    if not bits:
        lay.emit("BATCH_MATMUL_F32", [ain, bin_], [out], ("BatchMatmulParams", {"adj_y": adj_y}), n, "bmm", macs)
    else:
        s_out, zp_out = n.attrs["out_q"]
        lo, hi = (-128, 127) if bits == 8 else act_q16((-INF, INF), s_out)
        params = reference.batch_matmul_params(s1, z1, s2, z2, s_out, zp_out, lo, hi, adj_y)
        code = f"BATCH_MATMUL_S{bits}"
        ins = [ain, bin_]
        nbytes = lay.scratch(code, lay.p.tensors[ain].dims, lay.p.tensors[bin_].dims, shape, params)
        if nbytes > 0:  # CMSIS-NN's (MVE) kernel sums of b's rows, as int8 bytes
            ins.append(lay.activation(f"{n.name}_scratch", (nbytes,), like=n.out))
        lay.emit(code, ins, [out], ("QuantBatchMatmulParams", {k: (bool(v) if k == "adj_y" else int(v))
                                                                for k, v in params.items()}), n, "bmm", macs)
    lay.val[n.out] = (out, identity(rank))


F.lower("bmm")(lambda lay, n: _bmm(lay, n, 0))
F.lower("qbmm")(lambda lay, n: _bmm(lay, n, 8))
F.lower16("qbmm")(lambda lay, n: _bmm(lay, n, 16))


def _rows(lay, n: Node) -> tuple[int, tuple[int, ...], int]:
    """x as [..., cols] in PyTorch's order (the normalised dims flattened)."""
    x = n.inputs[0]
    shape = lay.g.shapes[x]
    k = n.attrs["ndims"]
    cols = int(np.prod(shape[-k:], dtype=np.int64))
    tid = lay.get(x, identity(len(shape)), n)
    return lay.alias(tid, tuple(shape[:-k]) + (cols,)), tuple(shape), cols


@F.lower("layer_norm")
def _layer_norm_f32(lay, n: Node) -> None:
    tid, shape, cols = _rows(lay, n)
    _, w, b = n.inputs
    ins = [tid] + [-1 if c is None else lay.constant(f"{n.name}_{k}", np.asarray(c, np.float32))
                   for k, c in (("weight", w), ("bias", b))]
    out = lay.activation(n.name, lay.p.tensors[tid].dims)
    lay.emit("LAYER_NORM_F32", ins, [out], ("LayerNormParams", {"eps": n.attrs["eps"]}), n, "layer_norm")
    lay.val[n.out] = (lay.alias(out, shape), identity(len(shape)))


def _layer_norm_q(lay, n: Node, bits: int) -> None:
    tid, shape, cols = _rows(lay, n)
    _, w, b = n.inputs
    (s_in, zp_in), = n.attrs["in_q"]
    s_out, zp_out = n.attrs["out_q"]
    gq, bq, s_gamma = reference.layer_norm_constants(w, b, cols)
    lo, hi = (-128, 127) if bits == 8 else act_q16((-INF, INF), s_out)
    params = reference.layer_norm_params(s_in, zp_in, s_gamma, s_out, zp_out, cols, n.attrs["eps"], lo, hi)
    ins = [tid, lay.constant(f"{n.name}_weight", gq, "I8"), lay.constant(f"{n.name}_bias", bq, "I32")]
    out = lay.activation(n.name, lay.p.tensors[tid].dims, like=n.out)
    lay.emit(f"LAYER_NORM_S{bits}", ins, [out], ("QuantLayerNormParams", {k: int(v) for k, v in params.items()}),
             n, "layer_norm", int(np.prod(shape)))
    lay.val[n.out] = (lay.alias(out, shape), identity(len(shape)))


F.lower("qlayer_norm")(lambda lay, n: _layer_norm_q(lay, n, 8))
F.lower16("qlayer_norm")(lambda lay, n: _layer_norm_q(lay, n, 16))


def _pixels(lay, n: Node) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    """x channels last as [N, positions, C]; the output tensor's physical
    dims and order."""
    x = n.inputs[0]
    shape = lay.g.shapes[x]
    order = _channels_last(len(shape))
    tid = lay.get(x, order, n)
    flat = (shape[0], int(np.prod(shape[2:], dtype=np.int64)), shape[1])
    return lay.alias(tid, flat), tuple(shape[d] for d in order), order


@F.lower("group_norm")
def _group_norm_f32(lay, n: Node) -> None:
    xin, dims, order = _pixels(lay, n)
    _, w, b = n.inputs
    ins = [xin] + [-1 if c is None else lay.constant(f"{n.name}_{k}", np.asarray(c, np.float32))
                   for k, c in (("weight", w), ("bias", b))]
    out = lay.activation(n.name, dims)
    lay.emit("GROUP_NORM_F32", ins, [lay.alias(out, lay.p.tensors[xin].dims)],
             ("GroupNormParams", {"eps": n.attrs["eps"], "groups": n.attrs["groups"]}), n, "group_norm")
    lay.val[n.out] = (out, order)


def _group_norm_q(lay, n: Node, bits: int) -> None:
    xin, dims, order = _pixels(lay, n)
    _, w, b = n.inputs
    batch, positions, channels = lay.p.tensors[xin].dims
    (s_in, zp_in), = n.attrs["in_q"]
    s_out, zp_out = n.attrs["out_q"]
    gq, bq, s_gamma = reference.layer_norm_constants(w, b, channels)
    lo, hi = (-128, 127) if bits == 8 else act_q16((-INF, INF), s_out)
    count = positions * channels // n.attrs["groups"]
    params = reference.layer_norm_params(s_in, zp_in, s_gamma, s_out, zp_out, count, n.attrs["eps"], lo, hi)
    ins = [xin, lay.constant(f"{n.name}_weight", gq, "I8"), lay.constant(f"{n.name}_bias", bq, "I32")]
    out = lay.activation(n.name, dims, like=n.out)
    lay.emit(f"GROUP_NORM_S{bits}", ins, [lay.alias(out, lay.p.tensors[xin].dims)],
             ("QuantGroupNormParams", {"groups": n.attrs["groups"], **{k: int(v) for k, v in params.items()}}),
             n, "group_norm", batch * positions * channels)
    lay.val[n.out] = (out, order)


F.lower("qgroup_norm")(lambda lay, n: _group_norm_q(lay, n, 8))
F.lower16("qgroup_norm")(lambda lay, n: _group_norm_q(lay, n, 16))


def _channels_last(rank: int) -> tuple[int, ...]:
    return (0,) + tuple(range(2, rank)) + (1,)


@F.lower("affine")
def _affine_f32(lay, n: Node) -> None:
    """x * scale + shift per channel (dim 1), as fold_batch_norm made it."""
    x, scale, shift = n.inputs
    shape = lay.g.shapes[n.out]
    rank = len(shape)
    tid, order = lay.val[x]
    mid = lay.activation(f"{n.name}_scaled", lay.p.tensors[tid].dims)
    out = lay.activation(n.name, lay.p.tensors[tid].dims)
    per_channel = (1, -1) + (1,) * (rank - 2)
    params = ("BinaryParams", act_params((-INF, INF)))
    lay.emit("MUL_F32", [tid, lay.const_operand(np.reshape(scale, per_channel), rank, order, f"{n.name}_scale")],
             [mid], params, n, "mul")
    lay.emit("ADD_F32", [mid, lay.const_operand(np.reshape(shift, per_channel), rank, order, f"{n.name}_shift")],
             [out], params, n, "add")
    lay.val[n.out] = (out, order)


def _affine_q(lay, n: Node, bits: int) -> None:
    """A 1x1 depthwise convolution: weights +-127 (+-1 at s_w = |scale| / 127
    per channel), bias shift / (s_in * s_w)."""
    x, scale, shift = n.inputs
    shape = lay.g.shapes[n.out]
    rank = len(shape)
    order = _channels_last(rank)
    channels = shape[1]
    spatial = int(np.prod(shape[2:], dtype=np.int64))
    xin = lay.alias(lay.get(x, order, n), (shape[0], 1, spatial, channels))
    (s_in, zp_in), = n.attrs["in_q"]
    s_out, zp_out = n.attrs["out_q"]
    scale = np.asarray(scale, np.float64).reshape(-1)
    s_w = np.where(scale != 0, np.abs(scale) / 127.0, 1.0 / 127.0).astype(np.float32).astype(np.float64)
    w = np.where(scale > 0, 127, np.where(scale < 0, -127, 0)).astype(np.int8).reshape(1, 1, 1, channels)
    mult, shift_q = reference.conv_requant(s_in, s_w, s_out)
    b = np.asarray(shift, np.float32).reshape(-1)
    if bits == 8:
        lo, hi = act_q((-INF, INF), s_out, zp_out)
        bias, btype, code = bias_q(b, s_in, s_w, channels), "I32", "DEPTHWISE_CONV2D_S8"
        offsets = {"input_offset": -zp_in, "output_offset": zp_out}
    else:
        lo, hi = act_q16((-INF, INF), s_out)
        bias, btype, code = bias_q64(b, s_in, s_w, channels), "I64", "DEPTHWISE_CONV2D_S16"
        offsets = {"input_offset": 0, "output_offset": 0}
    params = {"stride_h": 1, "stride_w": 1, "pad_top": 0, "pad_left": 0, "dilation_h": 1, "dilation_w": 1,
              "multiplier": 1, **offsets, "act_min": lo, "act_max": hi}
    wid = lay.constant(f"{n.name}_weight", w, "I8")
    lay.p.tensors[wid].channel_scales = tuple(float(v) for v in s_w)
    lay.p.tensors[wid].channel_axis = 3
    ins = [xin, wid, lay.constant(f"{n.name}_bias", bias, btype), lay.constant(f"{n.name}_multiplier", mult, "I32"),
           lay.constant(f"{n.name}_shift", shift_q, "I32")]
    out4 = (shape[0], 1, spatial, channels)
    nbytes = lay.scratch(code, out4, w.shape, out4, params)
    out = lay.activation(n.name, tuple(shape[d] for d in order), like=n.out)
    if nbytes > 0:
        ins.append(lay.activation(f"{n.name}_scratch", (nbytes // (1 if bits == 8 else 2),), like=n.out))
    lay.emit(code, ins, [lay.alias(out, out4)], ("QuantConv2dParams", params), n, "batch_norm",
             int(np.prod(shape)))
    lay.val[n.out] = (out, order)


F.lower("qaffine")(lambda lay, n: _affine_q(lay, n, 8))
F.lower16("qaffine")(lambda lay, n: _affine_q(lay, n, 16))
