"""Reductions, softmax and log_softmax.

ATen: mean (dims, or all), softmax / _softmax, log_softmax / _log_softmax,
and torchmcu's attention softmax (frontend/attention.py: scaled by beta, a
constant mask). A mean over H and W of an NCHW tensor is a "mean" node (an
average pool at int8: pool_resize.py); any other is "mean_axes". Program
ops: MEAN_F32, MEAN_S8/S16 (TFLite's integer MEAN); SOFTMAX at F32, S8 and
S16 over any axis (the integer ones over the last physical axis: the input
is laid out so), with TFLite's beta; SOFTMAX_MASKED_S8/S16 for a constant
mask; LOG_SOFTMAX at F32 and S8 (TFLite's, output 16/256, 127). Reference
twin: reference/reduce.py. The int8 softmax takes the exponentials of its
256 possible differences as a table.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ... import reference
from ...frontend import attention
from ..graph import INF, Graph, Node, dim, is_activation
from .family import Family, always
from .helpers import act_params, act_q, act_q16

F = Family("reduce")
aten = torch.ops.aten


# -- ATen -> logical ---------------------------------------------------------------------------

@F.rule(aten.mean.dim)
def mean(cv, x, dims=None, keepdim=False, dtype=None):
    rank = len(cv.shape(x))
    dims = tuple(range(rank)) if dims is None or len(dims) == 0 else tuple(sorted(dim(int(d), rank) for d in dims))
    op = "mean" if rank == 4 and dims == (2, 3) else "mean_axes"
    return cv.emit(op, [cv.act(x)], dict(dims=dims))


@F.rule(aten.mean.default)
def mean_all(cv, x, dtype=None):
    return mean(cv, x)


@F.rule(aten.softmax.int, aten._softmax.default)
def softmax(cv, x, d, *rest):
    return cv.emit("softmax", [cv.act(x)], dict(dim=dim(int(d), len(cv.shape(x))), beta=1.0))


@F.rule(torch.ops.torchmcu.attention_softmax.default)
def attention_softmax(cv, x, beta=1.0, mask=None):
    """softmax(beta * x) over the last axis, entries where `mask` holds left
    out (frontend/attention.py)."""
    ins = [cv.act(x)]
    if is_activation(mask):  # computed from the inputs (a length, a padding mask): True = left out
        shape, ms = tuple(cv.shape(x)), tuple(cv.shape(mask))
        if cv.g.dtypes.get(mask) != "U8" or len(ms) > len(shape) or \
                tuple(np.broadcast_shapes(ms, shape)) != shape:
            raise cv.fail(f"an attention mask of shape {ms} computed from the inputs for scores {shape}: "
                          "a bool mask that broadcasts to them is supported")
        full = (1,) * (len(shape) - len(ms)) + ms
        if any(d != 1 for d in full[:-2]) or full[-1] != shape[-1]:
            # per batch or head (or broadcast over keys): the mask repeated to the scores' shape
            if full != ms:
                mask = cv.emit("reshape", [mask], shape=full)
            mask = cv.emit("slice", [mask], dict(begin=(0,) * len(shape),
                                                 step=tuple(0 if f == 1 and d != 1 else 1 for f, d in zip(full, shape))),
                           shape=shape)
        ins.append(mask)
    elif mask is not None:
        m = np.broadcast_to(np.asarray(mask, bool), cv.shape(x))
        if m.any():
            ins.append(np.ascontiguousarray(m))
    return cv.emit("softmax", ins, dict(dim=len(cv.shape(x)) - 1, beta=float(beta)))


@F.rule(aten.log_softmax.int, aten._log_softmax.default)
def log_softmax(cv, x, d, *rest):
    return cv.emit("log_softmax", [cv.act(x)], dict(dim=dim(int(d), len(cv.shape(x)))))


# -- which instances have integer kernels ------------------------------------------------------

@F.int8("mean", shared=True)
@F.int16("mean", shared=True)
def _mean_int(g: Graph, n: Node, in_q: list, out_q: tuple) -> bool:
    """A global average over H and W of an NCHW tensor (an average pool)."""
    return len(g.shapes[n.inputs[0]]) == 4 and tuple(n.attrs["dims"]) == (2, 3)  # type: ignore[index]


F.int8("mean_axes")(always)
F.int16("mean_axes")(always)


def _has_params(params, s_in: float, beta: float) -> bool:
    """Whether TFLite's fixed-point scaling exists for this input scale:
    beta * s_in * 2^26 above 1 (a scale not absurdly small) and its
    multiplier's shift at most 30 (a scale not absurdly large: scores masked
    with -1e8, as torchaudio's Emformer does, give steps of ~4e5)."""
    try:
        params(s_in, beta)
    except ValueError:
        return False
    return True


@F.int8("softmax")
def _softmax_int8(g: Graph, n: Node, in_q: list, out_q: tuple) -> bool:
    """TFLite's softmax_params exist for the input's scale (_has_params)."""
    return _has_params(reference.softmax_params, in_q[0][0], n.attrs.get("beta", 1.0))


@F.int16("softmax")
def _softmax_int16(g: Graph, n: Node, in_q: list, out_q: tuple) -> bool:
    """TFLite's int16 softmax: output at 1/32768, rows of at most 2^15."""
    return out_q == (1 / 32768, 0) and g.shapes[n.out][n.attrs["dim"]] <= 32768


@F.int8("log_softmax")
def _log_softmax_int8(g: Graph, n: Node, in_q: list, out_q: tuple) -> bool:
    """TFLite's int8 LOG_SOFTMAX: output at 16/256, zero point 127; rows below 4096."""
    return (out_q == (16 / 256, 127) and g.shapes[n.out][n.attrs["dim"]] < 4096
            and _has_params(reference.log_softmax_params, in_q[0][0], 1.0))


# -- logical -> program ops --------------------------------------------------------------------

def _reduced_layout(lay, n: Node) -> tuple[int, int, tuple[int, ...], tuple[int, ...]]:
    """(input tensor, axis mask over its physical dims, output dims, output
    order) of a mean over n's dims, reading the input where it is."""
    x = n.inputs[0]
    tid, perm = lay.val[x]
    in_dims = lay.p.tensors[tid].dims
    reduced = set(n.attrs["dims"])
    mask = sum(1 << j for j, d in enumerate(perm) if d in reduced)
    rank = len(perm)
    if len(lay.g.shapes[n.out]) == rank:  # keepdim
        return tid, mask, tuple(1 if perm[j] in reduced else in_dims[j] for j in range(rank)), perm
    kept = [d for d in range(rank) if d not in reduced]
    out_perm = tuple(kept.index(perm[j]) for j in range(rank) if perm[j] not in reduced)
    dims = tuple(in_dims[j] for j in range(rank) if perm[j] not in reduced) or (1,)
    if not kept:
        out_perm = (0,) if lay.g.shapes[n.out] else ()
    return tid, mask, dims, out_perm


@F.lower("mean", "mean_axes")
def _mean_f32(lay, n: Node) -> None:
    tid, mask, dims, out_perm = _reduced_layout(lay, n)
    out = lay.activation(n.name, dims)
    lay.emit("MEAN_F32", [tid], [out], ("ReduceParams", {"axis_mask": mask}), n, "mean")
    lay.val[n.out] = (out, out_perm)


def _mean_q(lay, n: Node, bits: int) -> None:
    tid, mask, dims, out_perm = _reduced_layout(lay, n)
    (s_in, zp_in), = n.attrs["in_q"]
    s_out, zp_out = n.attrs["out_q"]
    in_dims = lay.p.tensors[tid].dims
    count = int(np.prod([in_dims[j] for j in range(len(in_dims)) if mask >> j & 1], dtype=np.int64))
    lo, hi = (-128, 127) if bits == 8 else act_q16((-INF, INF), s_out)
    params = reference.mean_params(s_in, zp_in, s_out, zp_out, count, lo, hi)
    out = lay.activation(n.name, dims, like=n.out)
    lay.emit(f"MEAN_S{bits}", [tid], [out], ("QuantMeanParams", {"axis_mask": mask, **params}), n, "mean")
    lay.val[n.out] = (out, out_perm)


F.lower("qmean_axes")(lambda lay, n: _mean_q(lay, n, 8))
F.lower16("qmean_axes")(lambda lay, n: _mean_q(lay, n, 16))


def _last_axis(lay, n: Node) -> tuple[int, tuple[int, ...]]:
    """n's input with its reduced dim as the last physical axis (where it is
    already so, no data moves)."""
    x = n.inputs[0]
    d = n.attrs["dim"]
    tid, perm = lay.val[x]
    if perm[-1] == d:
        return tid, perm
    want = tuple(k for k in perm if k != d) + (d,)
    return lay.get(x, want, n), want


def _mask(lay, n: Node, order: tuple[int, ...], dtype: str = "U8") -> int:
    """The softmax mask in the input's physical order as [mask_rows, cols]:
    the fewest leading rows whose repetition is the whole mask."""
    if isinstance(n.inputs[1], int):  # computed (attention_softmax): [1 or queries, keys], repeated over the rest
        v = n.inputs[1]
        shape = lay.g.shapes[v]
        if tuple(order) != tuple(range(len(order))):
            raise lay.fail(n, "a computed attention mask over scores laid out in another order")
        rows = int(np.prod(shape[:-1], dtype=np.int64)) if len(shape) > 1 else 1
        return lay.alias(lay.get(v, tuple(range(len(shape))), n), (rows, shape[-1]))
    m = np.transpose(np.asarray(n.inputs[1], bool), order)
    full = m.reshape(-1, m.shape[-1])
    rows = full.shape[0]
    for k in range(1, rows + 1):
        if rows % k == 0 and np.array_equal(full, np.tile(full[:k], (rows // k, 1))):
            return lay.constant(f"{n.name}_mask", full[:k].astype(np.uint8), dtype)
    raise AssertionError("unreachable: k = rows always matches")


@F.lower("softmax")
def _softmax_f32(lay, n: Node) -> None:
    """A mask adds -inf where it holds (as PyTorch's attention does); beta
    multiplies first."""
    tid, perm = lay.val[n.inputs[0]]
    dims = lay.p.tensors[tid].dims
    rank = len(perm)
    beta = n.attrs.get("beta", 1.0)
    if beta != 1.0:
        scaled = lay.activation(f"{n.name}_scaled", dims)
        c = lay.const_operand(np.float32(beta), rank, perm, f"{n.name}_beta")
        lay.emit("MUL_F32", [tid, c], [scaled], ("BinaryParams", act_params((-INF, INF))), n, "mul")
        tid = scaled
    if len(n.inputs) > 1 and isinstance(n.inputs[1], int):  # a computed mask: -inf where it holds
        from . import operands

        masked = lay.activation(f"{n.name}_masked", dims)
        m = operands.activation(lay, n.inputs[1], rank, perm, n)
        lay.emit("MASKED_FILL", [tid, m], [masked], ("MaskedFillParams", {"value": -math.inf, "qvalue": 0}), n,
                 "masked_fill")
        tid = masked
    elif len(n.inputs) > 1:
        masked = lay.activation(f"{n.name}_masked", dims)
        bias = np.where(np.asarray(n.inputs[1], bool), -np.inf, 0.0).astype(np.float32)
        c = lay.constant(f"{n.name}_mask", np.ascontiguousarray(np.transpose(bias, perm)))
        lay.emit("ADD_F32", [tid, c], [masked], ("BinaryParams", act_params((-INF, INF))), n, "add")
        tid = masked
    out = lay.activation(n.name, dims)
    lay.emit("SOFTMAX_F32", [tid], [out], ("SoftmaxParams", {"axis": perm.index(n.attrs["dim"])}), n, "softmax")
    lay.val[n.out] = (out, perm)


@F.lower("qsoftmax")
def _softmax_s8(lay, n: Node) -> None:
    tid, order = _last_axis(lay, n)
    (s_in, _), = n.attrs["in_q"]
    out = lay.activation(n.name, lay.p.tensors[tid].dims, like=n.out)
    beta = n.attrs.get("beta", 1.0)
    params = {**{k: int(v) for k, v in reference.softmax_params(s_in, beta).items()}, "beta": beta}
    # The exponentials of the 256 int8 differences, tabulated (1 KB of flash):
    # a lookup per element instead of two fixed-point exponentials.
    table = lay.constant(f"{n.name}_exp", reference.reduce.softmax_exp_table(
        params["input_multiplier"], params["input_left_shift"], params["diff_min"]), "I32")
    if len(n.inputs) > 1:
        lay.emit("SOFTMAX_MASKED_S8", [tid, _mask(lay, n, order), table], [out], ("QuantSoftmaxParams", params), n,
                 "softmax")
    else:
        lay.emit("SOFTMAX_S8", [tid, table], [out], ("QuantSoftmaxParams", params), n, "softmax")
    lay.val[n.out] = (out, order)


@F.lower16("qsoftmax")
def _softmax_s16(lay, n: Node) -> None:
    tid, order = _last_axis(lay, n)
    (s_in, _), = n.attrs["in_q"]
    out = lay.activation(n.name, lay.p.tensors[tid].dims, like=n.out)
    exp_lut, one_lut = reference.softmax_luts_s16()
    beta = n.attrs.get("beta", 1.0)
    params = {**{k: int(v) for k, v in reference.softmax_params_s16(s_in, beta).items()}, "beta": beta}
    ins = [tid, lay.constant(f"{n.name}_exp_lut", exp_lut, "I16"), lay.constant(f"{n.name}_one_lut", one_lut, "I16")]
    code = "SOFTMAX_S16"
    if len(n.inputs) > 1:
        ins.append(_mask(lay, n, order))
        code = "SOFTMAX_MASKED_S16"
    lay.emit(code, ins, [out], ("QuantSoftmaxParams", params), n, "softmax")
    lay.val[n.out] = (out, order)


@F.lower("log_softmax")
def _log_softmax_f32(lay, n: Node) -> None:
    tid, perm = lay.val[n.inputs[0]]
    out = lay.activation(n.name, lay.p.tensors[tid].dims)
    lay.emit("LOG_SOFTMAX_F32", [tid], [out], ("SoftmaxParams", {"axis": perm.index(n.attrs["dim"])}), n,
             "log_softmax")
    lay.val[n.out] = (out, perm)


@F.lower("qlog_softmax")
def _log_softmax_s8(lay, n: Node) -> None:
    tid, order = _last_axis(lay, n)
    (s_in, _), = n.attrs["in_q"]
    out = lay.activation(n.name, lay.p.tensors[tid].dims, like=n.out)
    params = {k: int(v) for k, v in reference.log_softmax_params(s_in).items()}
    lay.emit("LOG_SOFTMAX_S8", [tid], [out], ("QuantLogSoftmaxParams", params), n, "log_softmax")
    lay.val[n.out] = (out, order)


__all__ = ["F", "act_q", "attention"]
