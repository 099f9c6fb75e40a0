"""Reductions and softmax.

ATen: mean (dims, or all), softmax / _softmax. Program ops: MEAN_F32,
SOFTMAX at F32, S8 and S16 (the last axis); an integer global mean over
H and W is an average pool (pool_resize.pool_s8). Reference twin:
reference/reduce.py.
"""

from __future__ import annotations

import torch

from ... import reference
from ..graph import Graph, Node, dim
from .family import Family
from .helpers import identity

F = Family("reduce")
aten = torch.ops.aten


# -- ATen -> logical ---------------------------------------------------------------------------

@F.rule(aten.mean.dim)
def mean(cv, x, dims=None, keepdim=False, dtype=None):
    rank = len(cv.shape(x))
    dims = tuple(range(rank)) if dims is None else tuple(sorted(dim(int(d), rank) for d in dims))
    return cv.emit("mean", [cv.act(x)], dict(dims=dims))


@F.rule(aten.mean.default)
def mean_all(cv, x, dtype=None):
    return mean(cv, x)


@F.rule(aten.softmax.int, aten._softmax.default)
def softmax(cv, x, d, *rest):
    return cv.emit("softmax", [cv.act(x)], dict(dim=dim(int(d), len(cv.shape(x)))))


# -- which instances have integer kernels ------------------------------------------------------

@F.int8("mean", shared=True)
@F.int16("mean", shared=True)
def _mean_int(g: Graph, n: Node, in_q: list, out_q: tuple) -> bool:
    """A global average over H and W of an NCHW tensor (an average pool)."""
    return len(g.shapes[n.inputs[0]]) == 4 and tuple(n.attrs["dims"]) == (2, 3)  # type: ignore[index]


@F.int8("softmax")
def _softmax_int8(g: Graph, n: Node, in_q: list, out_q: tuple) -> bool:
    return n.attrs["dim"] == len(g.shapes[n.out]) - 1


@F.int16("softmax")
def _softmax_int16(g: Graph, n: Node, in_q: list, out_q: tuple) -> bool:
    """TFLite's int16 softmax: the last axis, output at 1/32768, rows of at most 2^15."""
    return (n.attrs["dim"] == len(g.shapes[n.out]) - 1 and out_q == (1 / 32768, 0)
            and g.shapes[n.out][-1] <= 32768)


# -- logical -> program ops --------------------------------------------------------------------

@F.lower("mean")
def _mean_f32(lay, n: Node) -> None:
    x = n.inputs[0]
    tid, perm = lay.val[x]
    in_dims = lay.p.tensors[tid].dims
    reduced = set(n.attrs["dims"])
    mask = sum(1 << j for j, d in enumerate(perm) if d in reduced)
    rank = len(perm)
    if len(lay.g.shapes[n.out]) == rank:  # keepdim
        out_perm = perm
        dims = tuple(1 if perm[j] in reduced else in_dims[j] for j in range(rank))
    else:
        kept = [d for d in range(rank) if d not in reduced]
        out_perm = tuple(kept.index(perm[j]) for j in range(rank) if perm[j] not in reduced)
        dims = tuple(in_dims[j] for j in range(rank) if perm[j] not in reduced) or (1,)
        if not kept:
            out_perm = (0,) if lay.g.shapes[n.out] else ()
    out = lay.activation(n.name, dims)
    lay.emit("MEAN_F32", [tid], [out], ("ReduceParams", {"axis_mask": mask}), n, "mean")
    lay.val[n.out] = (out, out_perm)


@F.lower("softmax")
def _softmax_f32(lay, n: Node) -> None:
    x = n.inputs[0]
    tid, perm = lay.val[x]
    out = lay.activation(n.name, lay.p.tensors[tid].dims)
    lay.emit("SOFTMAX_F32", [tid], [out], ("SoftmaxParams", {"axis": perm.index(n.attrs["dim"])}), n, "softmax")
    lay.val[n.out] = (out, perm)


@F.lower("qsoftmax")
def _softmax_s8(lay, n: Node) -> None:
    x = n.inputs[0]
    rank = len(lay.g.shapes[x])
    tid = lay.get(x, identity(rank), n)
    (s_in, _), = n.attrs["in_q"]
    out = lay.activation(n.name, lay.p.tensors[tid].dims, like=n.out)
    params = {k: int(v) for k, v in reference.softmax_params(s_in).items()}
    lay.emit("SOFTMAX_S8", [tid], [out], ("QuantSoftmaxParams", params), n, "softmax")
    lay.val[n.out] = (out, identity(rank))


@F.lower16("qsoftmax")
def _softmax_s16(lay, n: Node) -> None:
    x = n.inputs[0]
    rank = len(lay.g.shapes[x])
    tid = lay.get(x, identity(rank), n)
    (s_in, _), = n.attrs["in_q"]
    out = lay.activation(n.name, lay.p.tensors[tid].dims, like=n.out)
    exp_lut, one_lut = reference.softmax_luts_s16()
    params = {k: int(v) for k, v in reference.softmax_params_s16(s_in).items()}
    ins = [tid, lay.constant(f"{n.name}_exp_lut", exp_lut, "I16"), lay.constant(f"{n.name}_one_lut", one_lut, "I16")]
    lay.emit("SOFTMAX_S16", ins, [out], ("QuantSoftmaxParams", params), n, "softmax")
    lay.val[n.out] = (out, identity(rank))
