"""Buffer lifetimes over the op order, and the liveness lower bound: the
largest sum of sizes live at one step, which no plan can go below."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..ir import PGraph

ALIGN = 16


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def lifetimes(p: PGraph) -> dict[int, tuple[int, int]]:
    """Buffer -> (first step, last step). Model inputs live from step -1
    (written before the first op), outputs to step len(ops)."""
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


def _sizes(p: PGraph, life: dict[int, tuple[int, int]]) -> dict[int, int]:
    return {b: _align(p.buffers[b]) for b in life}


def lower_bound(sizes: dict[int, int], life: dict[int, tuple[int, int]], buffers: Iterable[int] | None = None) -> int:
    """The largest sum of sizes live at one step."""
    bufs = list(life if buffers is None else buffers)
    if not bufs:
        return 0
    lo = min(life[b][0] for b in bufs)
    hi = max(life[b][1] for b in bufs)
    profile = np.zeros(hi - lo + 1, np.int64)
    for b in bufs:
        profile[life[b][0] - lo: life[b][1] - lo + 1] += sizes[b]
    return int(profile.max())


def live_profile(p: PGraph) -> list[int]:
    """Bytes live at each step -1 .. len(ops)."""
    life = lifetimes(p)
    sizes = _sizes(p, life)
    profile = np.zeros(len(p.ops) + 2, np.int64)
    for b, (lo, hi) in life.items():
        profile[lo + 1: hi + 2] += sizes[b]
    return [int(v) for v in profile]
