"""Operands of the element-wise, activation and attention emitters: an
activation or a constant at the output's rank (broadcasting a lower-rank
one with leading 1s) in a given physical order, and constants quantized as
TFLite quantizes a constant input (int8 per tensor from its min/max with 0
in range; int16 symmetric, zero point 0)."""

from __future__ import annotations

import numpy as np

from ... import reference
from ..graph import Node
from .helpers import identity, same_bytes


def order_of(lay, n: Node) -> tuple[int, ...]:
    """The physical order of n's output: that of its first activation input
    of the output's rank (no data moves for it), else PyTorch's."""
    rank = len(lay.g.shapes[n.out])
    for i in n.inputs:
        if isinstance(i, int) and len(lay.g.shapes[i]) == rank:
            return lay.val[i][1]
    return identity(rank)


def activation(lay, v: int, rank: int, order: tuple[int, ...], n: Node) -> int:
    """Activation v as a tensor of `rank` dims (leading 1s for a lower rank,
    numpy's broadcasting) laid out in `order`."""
    shape = lay.g.shapes[v]
    if len(shape) == rank:
        return lay.get(v, order, n)
    ext = (1,) * (rank - len(shape)) + tuple(shape)
    tid = lay.alias(lay.get(v, identity(len(shape)), n), ext or (1,))
    dims = tuple(ext[d] for d in order)
    if same_bytes(ext, identity(rank), order):
        return lay.alias(tid, dims)
    out = lay.activation(f"{n.name}_in_{v}_r{rank}", dims, like=v)
    lay.emit("PERMUTE", [tid], [out], ("PermuteParams", {"perm": list(order)}), n, "permute")
    return out


def at_rank(data: np.ndarray, rank: int, order: tuple[int, ...]) -> np.ndarray:
    """A constant broadcast to `rank` dims (leading 1s), in `order`."""
    data = np.asarray(data)
    return np.ascontiguousarray(np.transpose(data.reshape((1,) * (rank - data.ndim) + data.shape), order))


def const_q(data: np.ndarray, bits: int = 8) -> tuple[np.ndarray, float, int]:
    """(values, scale, zero point) of a float constant: int8 over [min(0, lo),
    max(0, hi)] as PT2E's MinMaxObserver, so that a scalar is exact but for
    float32 rounding (scale 1 for all zeros); int16 symmetric over max |v|."""
    data = np.asarray(data, np.float32)
    if bits == 16:
        top = float(np.abs(data).max()) if data.size else 0.0
        scale = float(np.float32(top / 32767.0)) if top > 0 else 1.0
        return reference.quantize_s16(data, scale, 0), scale, 0
    lo = min(0.0, float(data.min())) if data.size else 0.0
    hi = max(0.0, float(data.max())) if data.size else 0.0
    scale = float(np.float32((hi - lo) / 255.0)) if hi > lo else 1.0
    zp = int(np.clip(-128 - round(lo / scale), -128, 127))
    return reference.quantize(data, scale, zp), scale, zp


def quantized_constant(lay, name: str, data: np.ndarray, bits: int, rank: int,
                       order: tuple[int, ...]) -> tuple[int, float, int]:
    """A float constant quantized (const_q) as a tensor at `rank` in `order`:
    (tensor, scale, zero point)."""
    q, scale, zp = const_q(data, bits)
    tid = lay.constant(name, at_rank(q, rank, order), "I16" if bits == 16 else "I8")
    lay.p.tensors[tid].scale, lay.p.tensors[tid].zero_point = scale, zp
    return tid, scale, zp


def operand_q(lay, n: Node, k: int, rank: int, order: tuple[int, ...], bits: int
              ) -> tuple[int, float, int]:
    """Input k of an integer op as (tensor, scale, zero point): an activation
    at its quantization (in_q), or a float constant quantized here."""
    v = n.inputs[k]
    if isinstance(v, int):
        acts = [i for i in n.inputs if isinstance(i, int)]
        s, zp = n.attrs["in_q"][acts.index(v)]
        return activation(lay, v, rank, order, n), s, zp
    return quantized_constant(lay, f"{n.name}_c{k}", np.asarray(v), bits, rank, order)


def operand_at(lay, n: Node, k: int, rank: int, order: tuple[int, ...], q: tuple[float, int]) -> int:
    """Input k of an int8 op whose inputs and output share quantization q: an
    activation (at q already), or a float constant quantized at q (clamped
    to int8: a bound beyond q's range clamps as the float op would)."""
    v = n.inputs[k]
    if isinstance(v, int):
        return activation(lay, v, rank, order, n)
    data = reference.quantize(np.asarray(v, np.float32), q[0], q[1])
    tid = lay.constant(f"{n.name}_c{k}", at_rank(data, rank, order), "I8")
    lay.p.tensors[tid].scale, lay.p.tensors[tid].zero_point = q
    return tid
