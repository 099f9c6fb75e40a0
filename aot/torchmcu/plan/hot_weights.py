"""Hot weights: constants read many times per byte, copied once at load into
RAM the plan left free when that RAM is faster than the program's memory."""

from __future__ import annotations

from ..ir import PGraph
from .lifetimes import _align
from .result import HotWeight, Plan

WEIGHT_OPERAND = {  # op code -> index of the operand read once per output element
    "CONV2D_S8": 1, "DEPTHWISE_CONV2D_S8": 1, "LINEAR_S8": 1,
    "CONV2D_S4": 1, "DEPTHWISE_CONV2D_S4": 1, "LINEAR_S4": 1,
    "CONV2D_F32": 1, "DEPTHWISE_CONV2D_F32": 1, "LINEAR_F32": 1,
    "BATCH_MATMUL_S8": 1, "BATCH_MATMUL_F32": 1,
}


def copy_hot_weights(p: PGraph, result: Plan, program_speed: int) -> list[HotWeight]:
    """Give weights that are read many times per byte the room the plan
    left in memories faster than the one the program is in. A copied
    weight is a buffer live for the whole program at the top of its arena;
    the runtime copies it there once, at load."""
    cands = []
    for op in p.ops:
        k = WEIGHT_OPERAND.get(op.code)
        if k is None or k >= len(op.inputs) or op.inputs[k] < 0:
            continue
        t = p.tensors[op.inputs[k]]
        if t.const is None or t.nbytes == 0:
            continue
        cands.append((op.macs / t.nbytes, op.inputs[k]))
    cands.sort(key=lambda c: (-c[0], c[1]))
    hot: list[HotWeight] = []
    taken: set[int] = set()
    for r, reg in enumerate(result.regions):
        if reg.speed >= program_speed or reg.persistent:
            continue
        top = _align(reg.arena_bytes)
        for reads, tid in cands:
            t = p.tensors[tid]
            if tid in taken or reads <= 1.0:
                continue
            size = _align(t.nbytes)
            if top + size > reg.capacity:
                continue
            hot.append(HotWeight(tid, r, top, t.nbytes, reads))
            taken.add(tid)
            top += size
        reg.hot_bytes = top - _align(reg.arena_bytes) if top > reg.arena_bytes else 0
        result.arena_bytes += max(0, top - reg.arena_bytes)
        reg.arena_bytes = max(reg.arena_bytes, top)
    result.hot = hot
    return hot
