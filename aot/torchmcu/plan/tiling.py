"""Patch-based inference: large early activations that never exist whole.

Take a run of ops S, spatial (convolutions, pools) and element-wise (the
residual ADD of an inverted-residual block, activations), whose tensors
are read only inside S except the last op's output Y. A classic plan keeps
each tensor of S whole while its readers run. Split Y's rows into bands
instead: for each band, every op of S computes just the rows of its output
that the band needs (its consumers' receptive fields, clipped to the
tensor) into a small buffer, and the last op writes the band's rows of Y in
place. The tensors inside S never exist whole; the rows neighbouring bands
share are computed again by each (the halo), which costs MACs.

Every output element is the same sum over the same inputs as before, so the
result is bit-exact; only the padding changes, because a band's input view
starts at another row. NHWC with a batch of one makes a band of rows a
contiguous slice of its tensor, so bands are plain tensors at an offset in
their buffer and need nothing from the runtime: no kernel knows it runs on
a patch.

The search (MCUNetV2's idea, over our ops): each round takes, among the
runs holding the current peak step and their numbers of bands, the one
that recomputes the fewest MACs among those giving (within 1 %) the lowest
peak, within a budget of recomputed MACs (`max_recompute`: 0.1 is at most
10 % more MACs for the whole model). Rounds go on while the peak drops (or
one of several equal peaks goes). If the peak is no lower in the end,
nothing is kept.
"""

from __future__ import annotations

from dataclasses import replace

from ..ir import PGraph, POp
from .lifetimes import live_profile

SPATIAL = frozenset({
    "CONV2D_S8", "DEPTHWISE_CONV2D_S8", "MAX_POOL2D_S8", "AVG_POOL2D_S8",
    "CONV2D_F32", "DEPTHWISE_CONV2D_F32",
})  # float pools: their divisor assumes symmetric padding
# Element-wise ops whose output row r depends on input row r alone (same dims).
ROWWISE = frozenset({
    "ADD_S8", "SUB_S8", "MUL_S8", "MAXIMUM_S8", "MINIMUM_S8", "LUT_S8", "CLAMP_S8",
    "ADD_F32", "SUB_F32", "MUL_F32", "MAXIMUM_F32", "MINIMUM_F32", "CLAMP_F32", "SIGMOID_F32", "TANH_F32",
    "HARDSWISH_F32", "ACTIVATION_F32",
})
_BANDS = (2, 3, 4, 6, 8, 12, 16, 24)
MAX_RUN = 12  # ops in one run
MAX_ROUNDS = 8
DEFAULT_MAX_RECOMPUTE = 0.10


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


def _rowed(p: PGraph, tid: int) -> bool:
    """A 4-D activation of batch 1 whose rows are contiguous in its buffer."""
    t = p.tensors[tid]
    return t.buffer is not None and t.const is None and len(t.dims) == 4 and t.dims[0] == 1


def _data_inputs(p: PGraph, op: POp) -> list[int] | None:
    """The inputs of `op` read by rows (None: the op cannot run on bands)."""
    if len(op.outputs) != 1 or not _rowed(p, op.outputs[0]) or not op.backend.startswith("portable"):
        return None  # a delegate's (HiFi) ops keep the calls it planned
    if op.code in SPATIAL:
        x = op.inputs[0]
        if not _rowed(p, x) or any(t >= 0 and _rowed(p, t) for t in op.inputs[1:]):
            return None  # weights and bias are constants; a scratch buffer (1-D) is shared by the bands
        return [x]
    if op.code in ROWWISE:
        dims = p.tensors[op.outputs[0]].dims
        data = []
        for t in op.inputs:
            if t < 0:
                continue
            tt = p.tensors[t]
            if tt.buffer is None:  # a constant (a LUT's table, a scalar): rows do not index it
                if len(tt.dims) == 4 and tt.dims[1] > 1:
                    return None
                continue
            if tt.dims != dims or not _rowed(p, t):
                return None  # a broadcast activation
            data.append(t)
        return data
    return None


class _Index:
    """Who reads each buffer, and where, for the run checks."""

    def __init__(self, p: PGraph) -> None:
        self.readers: dict[int, list[int]] = {}  # buffer -> op indices reading or writing it
        for i, op in enumerate(p.ops):
            for t in op.inputs + op.outputs:
                if t >= 0 and p.tensors[t].buffer is not None:
                    self.readers.setdefault(p.tensors[t].buffer, []).append(i)
        self.io = {p.tensors[t].buffer for t in p.inputs + p.outputs + p.state}
        self.tensors_of: dict[int, int] = {}
        for t in p.tensors:
            if t.buffer is not None:
                self.tensors_of[t.buffer] = self.tensors_of.get(t.buffer, 0) + 1


def _run_ok(p: PGraph, ix: _Index, i: int, j: int) -> bool:
    """Can ops i..j (inclusive) run band by band?"""
    ops = p.ops[i:j + 1]
    if any(".band" in op.name or _data_inputs(p, op) is None for op in ops):
        return False
    y = ops[-1].outputs[0]
    if not _whole4(p, y):
        return False
    for op in ops[:-1]:
        t = op.outputs[0]
        b = p.tensors[t].buffer
        if not _whole4(p, t) or b in ix.io or ix.tensors_of.get(b, 0) != 1:
            return False  # kept whole: read through another tensor, or a model input/output
        if any(r < i or r > j for r in ix.readers[b]):
            return False  # read after the run
    # the run must feed Y: every op's output is read inside the run
    return all(ix.readers[p.tensors[op.outputs[0]].buffer][-1] > i + k for k, op in enumerate(ops[:-1]))


def _tile(p: PGraph, i: int, j: int, bands: int) -> PGraph | None:
    """A copy of p with ops i..j run in `bands` row bands of the last op's
    output (None when the geometry does not allow it)."""
    ops = p.ops[i:j + 1]
    y = ops[-1].outputs[0]
    hy = p.tensors[y].dims[1]
    if bands < 2 or bands > hy:
        return None
    inner = {op.outputs[0] for op in ops[:-1]}
    q = PGraph(list(p.tensors), list(p.ops[:i]), list(p.inputs), list(p.outputs), list(p.buffers), list(p.state))
    edges = [hy * n // bands for n in range(bands + 1)]

    def row_bytes(t: int) -> int:
        tt = p.tensors[t]
        return tt.nbytes // tt.dims[1]

    def view(t: int, base: int, base_row: int, r0: int, r1: int, buffer: int, name: str) -> int:
        """A tensor of rows [r0, r1) of t, held in `buffer` from row base_row at byte base."""
        q.tensors.append(replace(p.tensors[t], name=name, dims=(1, r1 - r0, *p.tensors[t].dims[2:]),
                                 buffer=buffer, offset=base + (r0 - base_row) * row_bytes(t), const=None))
        return len(q.tensors) - 1

    for n in range(bands):
        need: dict[int, tuple[int, int]] = {y: (edges[n], edges[n + 1])}
        reads: list[dict[int, tuple[int, int]]] = []
        for op in reversed(ops):
            o0, o1 = need[op.outputs[0]]
            r: dict[int, tuple[int, int]] = {}
            for t in _data_inputs(p, op):
                if op.code in SPATIAL:
                    k, s, pad = _rows(p, op)
                    r[t] = _need(k, s, pad, o0, o1, p.tensors[t].dims[1])
                else:
                    r[t] = (o0, o1)
                if r[t][1] <= r[t][0]:
                    return None
                lo, hi = need.get(t, r[t])
                need[t] = (min(lo, r[t][0]), max(hi, r[t][1]))
            reads.append(r)
        reads.reverse()
        band: dict[int, int] = {}  # inner tensor -> its band tensor
        for op, r in zip(ops, reads):
            out = op.outputs[0]
            o0, o1 = need[out]
            ot = p.tensors[out]
            if out in inner:
                q.buffers.append((o1 - o0) * row_bytes(out))
                nt = view(out, 0, o0, o0, o1, len(q.buffers) - 1, f"{ot.name}[{o0}:{o1}]")
                band[out] = nt
            else:
                nt = view(out, ot.offset, 0, o0, o1, ot.buffer, f"{ot.name}[{o0}:{o1}]")
            inputs = list(op.inputs)
            for pos, t in enumerate(op.inputs):
                if t >= 0 and t not in r and p.tensors[t].buffer is not None:
                    # A scratch buffer: one per band op, so that it lives
                    # for that op alone, not across the whole run.
                    q.buffers.append(p.buffers[p.tensors[t].buffer])
                    q.tensors.append(replace(p.tensors[t], buffer=len(q.buffers) - 1))
                    inputs[pos] = len(q.tensors) - 1
                if t not in r:
                    continue
                r0, r1 = r[t]
                tt = p.tensors[t]
                if t in band:
                    b0 = need[t][0]
                    src = band[t] if (r0, r1) == need[t] else view(t, 0, b0, r0, r1, q.tensors[band[t]].buffer,
                                                                   f"{tt.name}[{r0}:{r1}]")
                else:
                    src = view(t, tt.offset, 0, r0, r1, tt.buffer, f"{tt.name}[{r0}:{r1}]")
                inputs[pos] = src
            params = op.params
            if op.code in SPATIAL:
                _, s, pad = _rows(p, op)
                r0 = r[op.inputs[0]][0]
                params = (op.params[0], {**op.params[1], "pad_top": pad + r0 - o0 * s})
            q.ops.append(replace(op, inputs=inputs, outputs=[nt], params=params, name=f"{op.name}.band{n}",
                                 macs=op.macs * (o1 - o0) // ot.dims[1]))
    for t in inner:
        q.buffers[p.tensors[t].buffer] = 0
    q.ops += p.ops[j + 1:]
    return q


def _key(steps: list[int]) -> tuple[int, int]:
    """(peak, steps at the peak): a model with several equal peaks needs a
    run tiled for each before its peak drops."""
    peak = max(steps)
    return peak, steps.count(peak)


def _choose(found: list[tuple[tuple[int, int], int, PGraph, list[int]]]
            ) -> tuple[tuple[int, ...], int, PGraph, list[int]] | None:
    """The tiling with the fewest recomputed MACs among those whose peak is
    within 1 % of the lowest: a few bytes are not worth much recomputation
    (early layers cost several instructions per MAC)."""
    if not found:
        return None
    lowest = min(f[0][0] for f in found)
    near = [f for f in found if f[0][0] <= lowest + max(64, lowest // 100)]
    return min(near, key=lambda f: (f[1], f[0]))


def tile_graph(p: PGraph, max_recompute: float = DEFAULT_MAX_RECOMPUTE) -> int:
    """Run ops of `p` band by band where that lowers its liveness lower
    bound, within `max_recompute` more MACs in all. Returns the number of
    runs tiled (0: p unchanged)."""
    original = (list(p.tensors), list(p.ops), list(p.buffers))
    macs0 = sum(op.macs for op in p.ops)
    limit = macs0 * (1 + max_recompute)
    steps = live_profile(p)
    start = key = _key(steps)
    tiled = 0
    for _ in range(MAX_ROUNDS):
        ix = _Index(p)
        peak = max(steps)
        hot = [s - 1 for s, v in enumerate(steps) if v == peak]  # ops live at the peak
        macs = sum(op.macs for op in p.ops)
        found: list[tuple[tuple[int, int], int, PGraph, list[int]]] = []
        for i in range(len(p.ops)):
            for j in range(i + 1, min(len(p.ops), i + MAX_RUN)):
                if not any(i <= h <= j for h in hot):
                    continue
                if not _run_ok(p, ix, i, j):
                    continue
                run_macs = sum(op.macs for op in p.ops[i:j + 1])
                for n in _BANDS:
                    q = _tile(p, i, j, n)
                    if q is None:
                        break
                    extra = sum(op.macs for op in q.ops[i:len(q.ops) - (len(p.ops) - j - 1)]) - run_macs
                    if macs + extra > limit:
                        break  # more bands recompute more
                    qs = live_profile(q)
                    k = _key(qs)
                    if k < key:
                        found.append((k, extra, q, qs))
        best = _choose(found)
        if best is None:
            break
        key, _, q, steps = best
        p.tensors[:], p.ops[:], p.buffers[:] = q.tensors, q.ops, q.buffers
        tiled += 1
    if tiled and key[0] >= start[0]:
        p.tensors[:], p.ops[:], p.buffers[:] = original
        return 0
    return tiled
