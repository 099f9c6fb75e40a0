"""Aliasing passes: they rewrite which buffer a tensor lives in, so that no
bytes are copied and fewer bytes are live (see the package docstring)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import ops
from ..ir import PGraph
from .lifetimes import lifetimes

# Element-wise ops whose kernels accept an output that is exactly one of their
# inputs (same bytes, same dims): each output element depends only on the
# input elements at its own index (the op table's `inplace`; COPY too, but a
# copy onto its own input is no copy, so it is not made so here).
INPLACE_CODES = frozenset(c for c in ops.INPLACE if c != "COPY")


def _move_buffer(p: PGraph, src: int, dst: int, offset: int) -> None:
    """Every tensor of buffer `src` now lives in `dst` at `offset` more."""
    for t in p.tensors:
        if t.buffer == src:
            t.buffer = dst
            t.offset += offset
    p.buffers[src] = 0


def _whole(p: PGraph, tid: int) -> bool:
    t = p.tensors[tid]
    return t.buffer is not None and t.offset == 0 and t.nbytes == p.buffers[t.buffer]


def concat_in_place(p: PGraph) -> int:
    """Inputs of a CONCAT along its outermost non-unit physical axis are
    produced directly in their slices of the output; the op is removed.
    Returns the number of CONCAT ops removed."""
    io = {p.tensors[t].buffer for t in p.inputs + p.outputs + p.state}
    removed = 0
    keep = []
    claimed: set[int] = set()
    for op in p.ops:
        if op.code != "CONCAT" or not _concat_ok(p, op, io, claimed):
            keep.append(op)
            continue
        out = p.tensors[op.outputs[0]]
        offset = out.offset
        for tid in op.inputs:
            t = p.tensors[tid]
            claimed.add(t.buffer)
            _move_buffer(p, t.buffer, out.buffer, offset)
            offset += t.nbytes
        removed += 1
    p.ops[:] = keep
    return removed


def _concat_ok(p: PGraph, op: Any, io: set, claimed: set[int]) -> bool:
    out = p.tensors[op.outputs[0]]
    axis = op.params[1]["axis"]
    if out.buffer is None or int(np.prod(out.dims[:axis], dtype=np.int64)) != 1:
        return False  # slices along an inner axis interleave: not contiguous
    bufs = []
    for tid in op.inputs:
        t = p.tensors[tid]
        if t.buffer is None or not _whole(p, tid) or t.dtype != out.dtype or t.buffer in io:
            return False  # a constant, a slice, a model input or output
        if t.buffer in claimed or t.buffer == out.buffer or t.buffer in bufs:
            return False
        if (t.scale, t.zero_point) != (out.scale, out.zero_point):
            return False
        bufs.append(t.buffer)
    return True


def elementwise_in_place(p: PGraph) -> int:
    """An element-wise op writes over an input whose buffer dies at it.
    Returns the number of ops rewritten."""
    inputs = {p.tensors[t].buffer for t in p.inputs + p.state}  # (a state's bytes must outlive the execution)
    life = lifetimes(p)
    rewritten = 0
    for i, op in enumerate(p.ops):
        if op.code not in INPLACE_CODES or len(op.outputs) != 1 or not _whole(p, op.outputs[0]):
            continue
        o = p.tensors[op.outputs[0]]
        if o.buffer in inputs:
            continue
        for tid in op.inputs:
            if tid < 0:
                continue
            t = p.tensors[tid]
            if t.buffer is None or t.buffer in inputs or t.buffer == o.buffer or life[t.buffer][1] != i:
                continue
            if t.dims != o.dims or t.nbytes != o.nbytes:
                continue  # broadcast, or another dtype
            others = [p.tensors[u] for u in op.inputs if u >= 0 and u != tid and p.tensors[u].buffer == t.buffer]
            if any(u.offset != t.offset or u.nbytes != t.nbytes for u in others):
                continue  # another operand overlaps part of it
            dst, lo = t.buffer, life[t.buffer][0]
            src_life = life.pop(o.buffer)
            _move_buffer(p, o.buffer, dst, t.offset)
            life[dst] = (lo, src_life[1])
            rewritten += 1
            break
    return rewritten


def compact(p: PGraph) -> int:
    """Drops tensors no op, input or output refers to (left by the passes);
    returns how many went."""
    used = sorted({t for op in p.ops for t in op.inputs + op.outputs if t >= 0} | set(p.inputs) | set(p.outputs))
    if len(used) == len(p.tensors):
        return 0
    new = {old: k for k, old in enumerate(used)}
    dropped = len(p.tensors) - len(used)
    p.tensors[:] = [p.tensors[t] for t in used]
    for op in p.ops:
        op.inputs = [new[t] if t >= 0 else t for t in op.inputs]
        op.outputs = [new[t] for t in op.outputs]
    p.inputs[:] = [new[t] for t in p.inputs]
    p.outputs[:] = [new[t] for t in p.outputs]
    p.state[:] = [new[t] for t in p.state]
    return dropped
