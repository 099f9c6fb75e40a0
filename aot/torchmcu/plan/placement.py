"""Placement: buffers over the board's memories (fastest first, within each
one's capacity at every step), then offsets inside each region."""

from __future__ import annotations

import numpy as np

from ..errors import CompileError
from ..ir import PGraph
from .lifetimes import lower_bound
from .result import RegionSpec


def _first_fit(order: list[int], sizes: dict[int, int], life: dict[int, tuple[int, int]],
               fixed: dict[int, int] | None = None) -> tuple[dict[int, int], int]:
    offsets: dict[int, int] = dict(fixed or {})
    for b in order:
        if b in offsets:
            continue
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
    top = max((offsets[b] + sizes[b] for b in offsets), default=0)
    return offsets, top


def place_offsets(buffers: list[int], sizes: dict[int, int], life: dict[int, tuple[int, int]]) -> tuple[dict[int, int], int]:
    """Offsets for `buffers` in one arena: the best of several first-fit
    orders (each is a known good heuristic; none dominates)."""
    if not buffers:
        return {}, 0
    dur = {b: life[b][1] - life[b][0] + 1 for b in buffers}
    orders = [
        sorted(buffers, key=lambda b: (-sizes[b], life[b][0], b)),  # greedy by size
        sorted(buffers, key=lambda b: (-sizes[b] * dur[b], b)),  # by area
        sorted(buffers, key=lambda b: (-dur[b], -sizes[b], b)),  # longest lived first
        sorted(buffers, key=lambda b: (life[b][0], -sizes[b], b)),  # in order of birth
    ]
    bound = lower_bound(sizes, life, buffers)
    best: tuple[dict[int, int], int] | None = None
    for order in orders:
        offsets, top = _first_fit(order, sizes, life)
        if best is None or top < best[1]:
            best = (offsets, top)
        if top <= bound:
            break
    assert best is not None
    return best


def _touches(p: PGraph) -> dict[int, int]:
    n: dict[int, int] = {}
    for op in p.ops:
        for t in op.inputs + op.outputs:
            if t >= 0 and p.tensors[t].buffer is not None:
                b = p.tensors[t].buffer
                n[b] = n.get(b, 0) + 1
    for t in p.inputs + p.outputs:
        b = p.tensors[t].buffer
        n[b] = n.get(b, 0) + 1
    return n


def resolve_pins(p: PGraph, pins: dict[str, str], regions: list[RegionSpec]) -> dict[int, int]:
    """Buffer -> region index for each pin. A pin names a tensor (its
    buffer) or an op (its outputs and scratch buffers)."""
    names = {r.name: i for i, r in enumerate(regions)}
    out: dict[int, int] = {}
    for what, mem in pins.items():
        if mem not in names:
            raise CompileError(f"pin {what}={mem}: memory {mem!r} cannot hold activations here; "
                               f"memories that can: {', '.join(names) or '(none)'}")
        bufs = {t.buffer for t in p.tensors if t.name == what and t.buffer is not None}
        for op in p.ops:
            if op.name == what:
                bufs |= {p.tensors[t].buffer for t in op.outputs if p.tensors[t].buffer is not None}
                bufs |= {p.tensors[t].buffer for t in op.inputs
                         if t >= 0 and p.tensors[t].name.endswith("_scratch") and p.tensors[t].buffer is not None}
        if not bufs:
            known = sorted({op.name for op in p.ops} | {t.name for t in p.tensors if t.buffer is not None})
            raise CompileError(f"pin {what}={mem}: no activation tensor or op is named {what!r}; "
                               f"names: {', '.join(known[:40])}{' ...' if len(known) > 40 else ''}")
        for b in bufs:
            if out.get(b, names[mem]) != names[mem]:
                raise CompileError(f"pin {what}={mem}: its buffer is already pinned to {regions[out[b]].name}")
            out[b] = names[mem]
    return out


def _describe_step(p: PGraph, step: int) -> str:
    if step < 0:
        return "before the first op (the model's inputs)"
    if step >= len(p.ops):
        return "after the last op (the model's outputs)"
    op = p.ops[step]
    return f"at op #{step} {op.name} ({op.kind}" + (f"; {op.source}" if op.source else "") + ")"


def operand_regions(p: PGraph, reach: dict[str, tuple[str, ...]], regions: list[RegionSpec]) -> dict[int, frozenset[int]]:
    """Buffer -> the region indices it may use, for the activation operands
    of ops whose code `reach` limits to some memories (an accelerator that
    masters only some of the board's buses, e.g. an Ethos-U and not the
    TCMs). A buffer several such ops touch may use the memories all allow."""
    names = {r.name: i for i, r in enumerate(regions)}
    out: dict[int, frozenset[int]] = {}
    for op in p.ops:
        memories = reach.get(op.code)
        if memories is None:
            continue
        ok = frozenset(names[m] for m in memories if m in names)
        for t in op.inputs + op.outputs:
            b = p.tensors[t].buffer if t >= 0 else None
            if b is None:
                continue
            out[b] = out.get(b, ok) & ok
            if not out[b]:
                raise CompileError(
                    f"op {op.name} ({op.code}) reads and writes only {', '.join(memories)}, but none of them may "
                    f"hold its buffer {_buffer_names(p, b)} here (memories for activations: "
                    f"{', '.join(names) or '(none)'}); raise their --budget")
    return out


def assign_regions(p: PGraph, sizes: dict[int, int], life: dict[int, tuple[int, int]],
                   regions: list[RegionSpec], pins: dict[int, int], allowed: dict[int, frozenset[int]] | None = None,
                   ) -> tuple[dict[int, int], dict[int, tuple[dict[int, int], int]]]:
    """Buffer -> region index, and each region's offsets and arena size.
    `allowed` limits some buffers to some regions (operand_regions)."""
    allowed = allowed or {}
    if not regions:
        raise CompileError("the board has no memory that may hold activation arenas")
    steps = len(p.ops) + 2  # -1 .. len(ops)
    profile = [np.zeros(steps, np.int64) for _ in regions]
    touches = _touches(p)
    order = sorted(life, key=lambda b: (b not in pins, -touches.get(b, 0) / max(sizes[b], 1), -sizes[b], b))
    region_of: dict[int, int] = {}
    evicted: dict[int, int] = {}  # buffer -> first region it may use (after eviction)

    def fits(b: int, r: int) -> bool:
        lo, hi = life[b]
        return (b not in allowed or r in allowed[b]) and \
            int(profile[r][lo + 1: hi + 2].max()) + sizes[b] <= regions[r].capacity

    def put(b: int) -> None:
        if b in pins:
            r = pins[b]
            if b in allowed and r not in allowed[b]:
                raise CompileError(f"pin of {_buffer_names(p, b)} to {regions[r].name}: the op using it reaches only "
                                   f"{', '.join(regions[k].name for k in sorted(allowed[b]))}")
            if not fits(b, r):
                lo, hi = life[b]
                raise CompileError(
                    f"pinned buffer {_buffer_names(p, b)} ({sizes[b]:,} B) does not fit in {regions[r].name} "
                    f"({regions[r].capacity:,} B available) beside the buffers already there, {_describe_step(p, lo)}")
        else:
            r = next((r for r in range(evicted.get(b, 0), len(regions)) if fits(b, r)), -1)
            if r < 0:
                raise _no_room(p, b, sizes, life, regions)
        lo, hi = life[b]
        profile[r][lo + 1: hi + 2] += sizes[b]
        region_of[b] = r

    for b in order:
        put(b)
    # Offsets per region; a region whose arena outgrows its capacity (the
    # first-fit orders fragment) gives its least useful buffer to a slower one.
    while True:
        planned: dict[int, tuple[dict[int, int], int]] = {}
        moved = False
        for r in range(len(regions)):
            bufs = [b for b in region_of if region_of[b] == r]
            offsets, top = place_offsets(bufs, sizes, life)
            if top > regions[r].capacity:
                movable = [b for b in bufs if b not in pins]
                if not movable or r + 1 >= len(regions):
                    raise CompileError(
                        f"the buffers planned in {regions[r].name} need {top:,} B once laid out but it has "
                        f"{regions[r].capacity:,} B; add room (a larger budget) or another memory")
                victim = min(movable, key=lambda b: (touches.get(b, 0) / max(sizes[b], 1), -sizes[b]))
                lo, hi = life[victim]
                profile[r][lo + 1: hi + 2] -= sizes[victim]
                del region_of[victim]
                evicted[victim] = r + 1
                put(victim)
                moved = True
                break
            planned[r] = (offsets, top)
        if not moved:
            return region_of, planned


def assign_concatenated(p: PGraph, sizes: dict[int, int], life: dict[int, tuple[int, int]],
                        regions: list[RegionSpec], pins: dict[int, int],
                        allowed: dict[int, frozenset[int]] | None = None,
                        ) -> tuple[dict[int, int], dict[int, tuple[dict[int, int], int]]] | None:
    """The memories as one address space, fastest first: region k spans
    [start_k, start_k + capacity_k). One first-fit plan over it reuses bytes
    across all buffers, as a single memory would, so its total stays at the
    one-memory plan's; a buffer never straddles two memories, and pinned or
    reach-limited buffers stay in their memories. None when it does not fit.

    assign_regions fills the fast memories first buffer by buffer, which can
    fragment the reuse between memories and end above the one-memory bound
    (ResNet-8 on a 16 KiB block RAM beside SRAM); plan() keeps whichever of
    the two totals less."""
    allowed = allowed or {}
    starts, at = [], 0
    for r in regions:
        starts.append(at)
        at += r.capacity
    ends = [s + r.capacity for s, r in zip(starts, regions)]
    touches = _touches(p)
    buffers = list(life)
    dur = {b: life[b][1] - life[b][0] + 1 for b in buffers}
    orders = [
        sorted(buffers, key=lambda b: (-sizes[b], life[b][0], b)),  # greedy by size
        sorted(buffers, key=lambda b: (-sizes[b] * dur[b], b)),  # by area
        sorted(buffers, key=lambda b: (-touches.get(b, 0) / max(sizes[b], 1), -sizes[b], b)),  # hottest first
    ]
    best: tuple[int, float, dict[int, int]] | None = None  # (total, -bytes touched in fast memory, addresses)
    for order in orders:
        addr: dict[int, int] = {}
        for b in sorted(order, key=lambda b: b not in pins):  # pinned buffers first, as assign_regions
            ok = [r for r in range(len(regions)) if (b not in allowed or r in allowed[b])
                  and (b not in pins or r == pins[b])]
            lo, hi = life[b]
            busy = sorted((addr[o], addr[o] + sizes[o]) for o in addr if not (life[o][1] < lo or hi < life[o][0]))
            placed = None
            for r in ok:
                a = starts[r]
                for s, e in busy:
                    if e <= a:
                        continue
                    if a + sizes[b] <= s:
                        break
                    a = max(a, e)
                if a + sizes[b] <= ends[r]:
                    placed = a
                    break
            if placed is None:
                break
            addr[b] = placed
        if len(addr) != len(buffers):
            continue
        region_of = {b: next(r for r in range(len(regions)) if starts[r] <= a < ends[r]) for b, a in addr.items()}
        used = {r: max(addr[b] + sizes[b] for b in addr if region_of[b] == r) - starts[r]
                for r in set(region_of.values())}
        total = sum(used.values())
        fast = -sum(touches.get(b, 0) * regions[region_of[b]].speed for b in addr)
        if best is None or (total, -fast) < (best[0], -best[1]):
            best = (total, fast, addr)
    if best is None:
        return None
    addr = best[2]
    region_of = {b: next(r for r in range(len(regions)) if starts[r] <= a < ends[r]) for b, a in addr.items()}
    planned: dict[int, tuple[dict[int, int], int]] = {}
    for r in sorted(set(region_of.values())):
        offs = {b: addr[b] - starts[r] for b in addr if region_of[b] == r}
        planned[r] = (offs, max(o + sizes[b] for b, o in offs.items()))
    return region_of, planned


def _buffer_names(p: PGraph, b: int) -> str:
    names = [t.name for t in p.tensors if t.buffer == b]
    return names[0] if len(names) == 1 else f"{names[0]} (and {len(names) - 1} aliases)"


def _no_room(p: PGraph, b: int, sizes: dict[int, int], life: dict[int, tuple[int, int]],
             regions: list[RegionSpec]) -> CompileError:
    lo, hi = life[b]
    steps = np.zeros(len(p.ops) + 2, np.int64)
    for o, (l, h) in life.items():
        steps[l + 1: h + 2] += sizes[o]
    window = steps[lo + 1: hi + 2]
    worst = lo + int(window.argmax())
    need = int(window.max())
    total = sum(r.capacity for r in regions)
    caps = ", ".join(f"{r.name} {r.capacity:,} B" for r in regions)
    hints = ["raise a --budget", "let patch-based inference recompute more (--tile-recompute 0.25)"]
    # Only a model that is not quantized already: an int8 model's float input or output is not its bulk.
    if not any(op.code.endswith(("_S8", "_S4", "_S16")) for op in p.ops):
        hints.append("quantize (--quant int8)")
    short = f"short by {need - total:,} B" if need > total else \
        f"buffer {_buffer_names(p, b)} ({sizes[b]:,} B) finds no memory with room beside the others"
    return CompileError(
        f"the model does not fit in the board's RAM: {need:,} B of activations are live {_describe_step(p, worst)}, "
        f"but the memories that may hold arenas give {total:,} B ({caps}): {short}. "
        f"To fix: {', '.join(hints[:-1])} or {hints[-1]}")
