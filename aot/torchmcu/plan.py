"""Memory planning: an offset in an arena for every activation buffer.

A buffer lives from the op that first writes it to the last op that reads it
(model inputs from the start, outputs to the end). Buffers whose lifetimes
overlap must not overlap in memory. Greedy by size: place the largest
first, each at the lowest 16-byte-aligned offset clear of every placed
buffer it is live with. The lower bound any plan can reach is the largest
sum of sizes live at one step; the report gives both.
"""

from __future__ import annotations

from dataclasses import dataclass

from .layout import PGraph

ALIGN = 16


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


@dataclass
class Plan:
    offsets: dict[int, int]  # buffer -> byte offset in the arena
    lifetimes: dict[int, tuple[int, int]]  # buffer -> (first op, last op), inclusive
    arena_bytes: int
    lower_bound_bytes: int


def lifetimes(p: PGraph) -> dict[int, tuple[int, int]]:
    last_step = len(p.ops)
    life: dict[int, list[int]] = {}

    def touch(tid: int, step: int) -> None:
        buf = p.tensors[tid].buffer
        if buf is None:
            return
        span = life.setdefault(buf, [step, step])
        span[0], span[1] = min(span[0], step), max(span[1], step)

    for t in p.inputs:
        touch(t, -1)
    for i, op in enumerate(p.ops):
        for t in op.inputs + op.outputs:
            if t >= 0:
                touch(t, i)
    for t in p.outputs:
        touch(t, last_step)
    return {b: (s[0], s[1]) for b, s in life.items()}


def plan(p: PGraph) -> Plan:
    life = lifetimes(p)
    sizes = {b: _align(p.buffers[b]) for b in life}
    order = sorted(life, key=lambda b: (-sizes[b], life[b][0], b))
    offsets: dict[int, int] = {}
    for b in order:
        lo, hi = life[b]
        busy = sorted(
            (offsets[o], offsets[o] + sizes[o]) for o in offsets
            if not (life[o][1] < lo or hi < life[o][0])
        )
        at = 0
        for start, end in busy:
            if at + sizes[b] <= start:
                break
            at = max(at, end)
        offsets[b] = at
    arena = max((offsets[b] + sizes[b] for b in offsets), default=0)
    steps = range(-1, len(p.ops) + 1)
    bound = max((sum(sizes[b] for b in life if life[b][0] <= s <= life[b][1]) for s in steps), default=0)
    return Plan(offsets, life, arena, bound)
