"""Shape and views: ops that move bytes, or only relabel them.

ATen: view / reshape / flatten / squeeze / unsqueeze (aliases of their
input's bytes), permute / transpose / t (a new order of the same bytes:
layout moves data only where an op needs another order), cat, pad /
constant_pad_nd, and the ops that are the identity on an exported graph
(dropout in eval, contiguous, clone, detach, alias). Program ops: PERMUTE,
CONCAT, PAD and COPY, for any dtype; integer ones share their input's
quantization. Reference twin: reference/shape_views.py.
"""

from __future__ import annotations

import numpy as np
import torch

from ... import reference
from ..graph import Node, const, dim, is_activation
from .family import Family, always
from .helpers import identity

F = Family("shape_views")
aten = torch.ops.aten


# -- ATen -> logical ---------------------------------------------------------------------------

@F.rule(aten.flatten.using_ints, aten.view.default, aten.reshape.default, aten._unsafe_view.default,
        aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default, aten.unsqueeze.default)
def reshape(cv, x, *rest):
    return cv.emit("reshape", [cv.act(x)])


@F.rule(aten.permute.default)
def permute(cv, x, dims):
    rank = len(cv.shape(x))
    return cv.emit("permute", [cv.act(x)], dict(perm=tuple(dim(int(d), rank) for d in dims)))


@F.rule(aten.transpose.int)
def transpose(cv, x, d0, d1):
    rank = len(cv.shape(x))
    perm = list(range(rank))
    a, b = dim(int(d0), rank), dim(int(d1), rank)
    perm[a], perm[b] = perm[b], perm[a]
    return permute(cv, x, perm)


@F.rule(aten.t.default)
def t(cv, x):
    return transpose(cv, x, 0, 1) if len(cv.shape(x)) == 2 else x


@F.rule(aten.cat.default)
def cat(cv, tensors, d=0):
    ins = list(tensors)
    if len(ins) > 8:
        raise cv.fail(f"cat of {len(ins)} tensors; at most 8 are supported")
    rank = len(cv.shape(ins[0]))
    ins = [x if is_activation(x) else const(x) for x in ins]
    return cv.emit("cat", ins, dict(dim=dim(int(d), rank)))


@F.rule(aten.constant_pad_nd.default)
def constant_pad(cv, x, pad, value=0.0):
    """F.pad's list: (before, after) pairs from the last dim backwards."""
    x = cv.act(x)
    rank = len(cv.shape(x))
    pad = [int(p) for p in pad]
    if len(pad) % 2 or len(pad) // 2 > rank:
        raise cv.fail(f"padding {pad} for a tensor of rank {rank}")
    if any(p < 0 for p in pad):
        raise cv.fail(f"negative padding {pad} (cropping) is not supported")
    before, after = [0] * rank, [0] * rank
    for i in range(len(pad) // 2):
        before[rank - 1 - i], after[rank - 1 - i] = pad[2 * i], pad[2 * i + 1]
    return cv.emit("pad", [x], dict(before=tuple(before), after=tuple(after), value=float(value)))


@F.rule(aten.pad.default)
def pad(cv, x, pad, mode="constant", value=None):
    if mode != "constant":
        raise cv.fail(f"padding mode {mode!r} is not supported (only constant padding)")
    return constant_pad(cv, x, pad, 0.0 if value is None else value)


@F.rule(aten.dropout.default, aten.contiguous.default, aten.clone.default, aten.detach.default,
        aten.alias.default, aten.lift_fresh_copy.default)
def identity_op(cv, x, *rest, **kw):
    return x


# -- integer kernels: bytes move at their input's quantization ---------------------------------

F.int8("reshape", "permute", "cat", "pad", shared=True)(always)
F.int16("reshape", "permute", shared=True)(always)


# -- logical -> program ops --------------------------------------------------------------------

@F.lower("reshape", "qreshape")
@F.lower16("qreshape")
def _reshape(lay, n: Node) -> None:
    x = n.inputs[0]
    shape = lay.g.shapes[n.out]
    tid = lay.get(x, identity(len(lay.g.shapes[x])), n)
    lay.val[n.out] = (lay.alias(tid, shape or (1,), n.name), identity(len(shape)))


@F.lower("permute", "qpermute")
@F.lower16("qpermute")
def _permute(lay, n: Node) -> None:
    tid, perm = lay.val[n.inputs[0]]
    q = n.attrs["perm"]
    lay.val[n.out] = (tid, tuple(q.index(d) for d in perm))


@F.lower("cat", "qcat")
def _cat(lay, n: Node) -> None:
    shape = lay.g.shapes[n.out]
    first = next(i for i in n.inputs if isinstance(i, int))
    perm = lay.val[first][1]
    ins = [lay.get(i, perm, n) if isinstance(i, int) else lay.const_operand(i, len(shape), perm, f"{n.name}_c")
           for i in n.inputs]
    out = lay.activation(n.name, tuple(shape[d] for d in perm), like=n.out)
    lay.emit("CONCAT", ins, [out], ("ConcatParams", {"axis": perm.index(n.attrs["dim"])}), n, "cat")
    lay.val[n.out] = (out, perm)


@F.lower("pad", "qpad")
def _pad(lay, n: Node) -> None:
    """Constant padding in the input's physical order (float or int8:
    an int8 value pads with the value quantized at its quantization)."""
    x = n.inputs[0]
    tid, perm = lay.val[x]
    shape = lay.g.shapes[n.out]
    out = lay.activation(n.name, tuple(shape[d] for d in perm), like=n.out)
    value = float(n.attrs["value"])
    qvalue = 0
    if n.out in lay.g.qparams:
        s_out, zp_out = lay.g.qparams[n.out]
        qvalue = int(reference.quantize(np.float32(value), s_out, zp_out))
    params = {"before": [int(n.attrs["before"][d]) for d in perm],
              "after": [int(n.attrs["after"][d]) for d in perm], "value": value, "qvalue": qvalue}
    lay.emit("PAD", [tid], [out], ("PadParams", params), n, "pad")
    lay.val[n.out] = (out, perm)
