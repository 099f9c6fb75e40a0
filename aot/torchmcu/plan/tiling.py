"""Row-band tiling: large early activations that never exist whole.

Take two spatial ops in a row, A then B, where A's output X is read by B
alone. Classic plans keep all of X live while B runs. Split B's output
rows into bands instead: for each band, A computes just the rows of X the
band needs (its receptive field, clipped to X) into a small buffer, then B
computes the band's rows straight into their place in its output. X never
exists whole; the rows neighbouring bands share are computed twice.

Every output element is the same sum over the same inputs as before, so
the result is bit-exact; only the padding changes, because a band's input
view starts at another row. NHWC with a batch of one makes a band of rows
a contiguous slice of its tensor, so bands are plain tensors at an offset
in their buffer and need nothing from the runtime.

The pass picks, while it lowers the program's liveness lower bound, the
pair whose X is live at the peak and the fewest bands that give the best
bound.
"""

from __future__ import annotations

from dataclasses import replace

from ..ir import PGraph, POp
from .lifetimes import _align, lifetimes

SPATIAL = frozenset({
    "CONV2D_S8", "DEPTHWISE_CONV2D_S8", "MAX_POOL2D_S8", "AVG_POOL2D_S8",
    "CONV2D_F32", "DEPTHWISE_CONV2D_F32",
})  # float pools: their divisor assumes symmetric padding
_BANDS = (2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
MAX_ROUNDS = 8


def _rows(p: PGraph, op: POp) -> tuple[int, int, int]:
    """(effective kernel height, stride, pad_top) of a spatial op."""
    params = op.params[1]
    if "kernel_h" in params:
        k = params["kernel_h"]
    else:
        k = p.tensors[op.inputs[1]].dims[1]  # OHWI, or [1, kh, kw, cout] for depthwise
    d = params.get("dilation_h", 1)
    return (k - 1) * d + 1, params.get("stride_h", 1), params.get("pad_top", 0)


def _need(k: int, s: int, pad: int, o0: int, o1: int, height: int) -> tuple[int, int]:
    """Input rows [i0, i1) that output rows [o0, o1) read, clipped to the input."""
    return max(0, o0 * s - pad), min(height, (o1 - 1) * s - pad + k)


def _whole4(p: PGraph, tid: int) -> bool:
    t = p.tensors[tid]
    return (t.buffer is not None and t.offset == 0 and t.nbytes == p.buffers[t.buffer]
            and len(t.dims) == 4 and t.dims[0] == 1)


def _candidates(p: PGraph) -> list[int]:
    """Indices i such that ops i, i+1 form a tileable pair."""
    uses: dict[int, int] = {}
    for op in p.ops:
        for t in op.inputs + op.outputs:
            if t >= 0 and p.tensors[t].buffer is not None:
                uses[p.tensors[t].buffer] = uses.get(p.tensors[t].buffer, 0) + 1
    io = {p.tensors[t].buffer for t in p.inputs + p.outputs}
    out = []
    for i in range(len(p.ops) - 1):
        a, b = p.ops[i], p.ops[i + 1]
        if a.code not in SPATIAL or b.code not in SPATIAL or len(a.outputs) != 1 or len(b.outputs) != 1:
            continue
        x, big, y = a.inputs[0], a.outputs[0], b.outputs[0]
        if b.inputs[0] != big or not all(_whole4(p, t) for t in (big, y)):
            continue
        xt = p.tensors[x]
        if xt.buffer is None or len(xt.dims) != 4 or xt.dims[0] != 1:
            continue
        X = p.tensors[big].buffer
        if X in io or uses.get(X, 0) != 2 or any(t == big for t in b.inputs[1:]):
            continue  # X read elsewhere, or a model input/output
        out.append(i)
    return out


def _tile(p: PGraph, i: int, bands: int) -> PGraph | None:
    """A copy of p with ops i, i+1 split into `bands` row bands (None when
    the geometry gives fewer than two)."""
    a, b = p.ops[i], p.ops[i + 1]
    x, big, y = p.tensors[a.inputs[0]], p.tensors[a.outputs[0]], p.tensors[b.outputs[0]]
    ka, sa, pa = _rows(p, a)
    kb, sb, pb = _rows(p, b)
    hb = y.dims[1]
    if bands < 2 or bands > hb:
        return None
    q = PGraph(list(p.tensors), list(p.ops[:i]), list(p.inputs), list(p.outputs), list(p.buffers))
    edges = [hb * j // bands for j in range(bands + 1)]
    x_row = x.nbytes // x.dims[1]
    y_row = y.nbytes // y.dims[1]
    big_row = big.nbytes // big.dims[1]
    total_a, total_b = big.dims[1], hb
    for j in range(bands):
        b0, b1 = edges[j], edges[j + 1]
        x0, x1 = _need(kb, sb, pb, b0, b1, big.dims[1])
        i0, i1 = _need(ka, sa, pa, x0, x1, x.dims[1])
        if x1 <= x0 or i1 <= i0:
            return None
        xin = len(q.tensors)
        q.tensors.append(replace(x, name=f"{x.name}[{i0}:{i1}]", dims=(1, i1 - i0, *x.dims[2:]),
                                 offset=x.offset + i0 * x_row, const=None))
        mid = len(q.tensors)
        q.tensors.append(replace(big, name=f"{big.name}[{x0}:{x1}]", dims=(1, x1 - x0, *big.dims[2:]),
                                 buffer=len(q.buffers), offset=0))
        q.buffers.append((x1 - x0) * big_row)
        yout = len(q.tensors)
        q.tensors.append(replace(y, name=f"{y.name}[{b0}:{b1}]", dims=(1, b1 - b0, *y.dims[2:]),
                                 offset=y.offset + b0 * y_row))
        pa_j = pa + i0 - x0 * sa
        pb_j = pb + x0 - b0 * sb
        q.ops.append(replace(a, inputs=[xin, *a.inputs[1:]], outputs=[mid],
                             params=(a.params[0], {**a.params[1], "pad_top": pa_j}),
                             name=f"{a.name}.band{j}", macs=a.macs * (x1 - x0) // total_a))
        q.ops.append(replace(b, inputs=[mid, *b.inputs[1:]], outputs=[yout],
                             params=(b.params[0], {**b.params[1], "pad_top": pb_j}),
                             name=f"{b.name}.band{j}", macs=b.macs * (b1 - b0) // total_b))
    q.buffers[big.buffer] = 0
    q.ops += p.ops[i + 2:]
    return q


def _profile_key(p: PGraph) -> tuple[int, ...]:
    """The highest live-byte counts, highest first: lowering any peak step
    without raising the others makes it smaller."""
    life = lifetimes(p)
    sizes = {k: _align(p.buffers[k]) for k in life}
    steps = [0] * (len(p.ops) + 2)
    for k, (lo, hi) in life.items():
        for s in range(lo + 1, hi + 2):
            steps[s] += sizes[k]
    return tuple(sorted(steps, reverse=True)[:8])


def tile_graph(p: PGraph) -> int:
    """Tile `p` in place where that lowers its liveness lower bound.
    Returns the number of op pairs tiled (0: p unchanged).

    Each round tiles the pair, and the fewest bands, that lower the highest
    steps of the live-bytes profile most; a model with several equal peaks
    needs a round for each. If the bound is no lower in the end, nothing
    is kept: recomputing rows costs instructions."""
    original = (list(p.tensors), list(p.ops), list(p.buffers))
    start = key = _profile_key(p)
    tiled = 0
    for _ in range(MAX_ROUNDS):
        best: tuple[tuple[int, ...], PGraph] | None = None
        for i in _candidates(p):
            for n in _BANDS:
                q = _tile(p, i, n)
                if q is None:
                    break
                k = _profile_key(q)
                if k < key and (best is None or k < best[0]):
                    best = (k, q)
        if best is None:
            break
        key, q = best
        p.tensors[:], p.ops[:], p.buffers[:] = q.tensors, q.ops, q.buffers
        tiled += 1
    if tiled and key[0] >= start[0]:
        p.tensors[:], p.ops[:], p.buffers[:] = original
        return 0
    return tiled
