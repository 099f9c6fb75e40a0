"""Memory planning: a (region, offset) for every activation buffer.

Three steps, each with one job:

1. **Aliasing passes** rewrite which buffer a tensor lives in, so that no
   bytes are copied and fewer bytes are live:
   - reshape/flatten/view are aliases already (layout gives them the
     producer's buffer);
   - ``concat_in_place``: a concatenation along its outermost non-unit
     axis has contiguous slices, so each input is produced directly in its
     slice of the output and the CONCAT op disappears;
   - ``elementwise_in_place``: an element-wise op whose input buffer dies
     at that op writes its output over that input (same bytes, same dims).
2. **Placement over the board's memories** (hierarchical): buffers are
   taken in order of benefit (touches per byte: the ops that read or write
   them) and go to the fastest memory whose live bytes stay within its
   capacity at every step of their lifetime; the rest spill to slower
   memories. Users can pin a tensor or an op's buffers to a memory and cap
   a memory's budget.
3. **Offsets inside each region**: buffers whose lifetimes overlap must not
   overlap in memory. Several orders are tried (largest first, longest
   lived first, ...), each placing a buffer at the lowest 16-byte aligned
   offset clear of the live buffers already placed; the best wins. If a
   region still ends up above its capacity (fragmentation), its least
   useful buffer moves to the next memory and the region is planned again.

The lower bound any plan can reach in a region is the largest sum of the
sizes of its buffers live at one step; the report gives both, and the
lower bound of the program before the aliasing passes (the classic bound).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import CompileError
from .layout import PGraph

ALIGN = 16


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


@dataclass(frozen=True)
class RegionSpec:
    """A memory the plan may use for arenas, fastest first."""
    name: str
    speed: int
    capacity: int  # bytes the arena may take there (after stack, reserves and budgets)


@dataclass
class RegionPlan:
    name: str
    speed: int
    capacity: int
    arena_bytes: int = 0
    lower_bound_bytes: int = 0
    buffers: list[int] = field(default_factory=list)
    hot_bytes: int = 0  # weights copied here at init (--copy-hot-weights), part of arena_bytes


@dataclass
class HotWeight:
    tensor: int
    region: int  # index into Plan.regions
    offset: int
    nbytes: int
    reads_per_byte: float


@dataclass
class Plan:
    offsets: dict[int, int]  # buffer -> byte offset in its region's arena
    lifetimes: dict[int, tuple[int, int]]  # buffer -> (first op, last op), inclusive
    arena_bytes: int  # all regions
    lower_bound_bytes: int  # the program's liveness lower bound in one memory
    region_of: dict[int, int] = field(default_factory=dict)  # buffer -> index into regions
    regions: list[RegionPlan] = field(default_factory=list)  # the arenas, in program order
    classic_lower_bound_bytes: int = 0  # before the aliasing passes
    aliasing: dict[str, int] = field(default_factory=dict)  # pass -> ops rewritten
    hot: list[HotWeight] = field(default_factory=list)

    @property
    def single_region(self) -> bool:
        return len(self.regions) <= 1


# -- lifetimes ---------------------------------------------------------------------------------

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


# -- aliasing passes ---------------------------------------------------------------------------

# Element-wise ops whose kernels accept an output that is exactly one of their
# inputs (same bytes, same dims): each output element depends only on the
# input elements at its own index.
INPLACE_CODES = frozenset({
    "CLAMP_F32", "CLAMP_S8", "SIGMOID_F32", "TANH_F32", "HARDSWISH_F32", "LUT_S8",
    "ADD_F32", "MUL_F32", "MAXIMUM_F32", "MINIMUM_F32",
    "ADD_S8", "MUL_S8", "MAXIMUM_S8", "MINIMUM_S8",
})


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
    io = {p.tensors[t].buffer for t in p.inputs + p.outputs}
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
    inputs = {p.tensors[t].buffer for t in p.inputs}
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
    return dropped


# -- offsets -----------------------------------------------------------------------------------

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


# -- placement over memories -------------------------------------------------------------------

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
    hints = ["raise a --budget", "enable tiling (--tile)"]
    if any(t.dtype == "F32" for t in p.tensors if t.buffer is not None):
        hints.append("quantize (--quant int8)")
    short = f"short by {need - total:,} B" if need > total else \
        f"buffer {_buffer_names(p, b)} ({sizes[b]:,} B) finds no memory with room beside the others"
    return CompileError(
        f"the model does not fit in the board's RAM: {need:,} B of activations are live {_describe_step(p, worst)}, "
        f"but the memories that may hold arenas give {total:,} B ({caps}): {short}. "
        f"To fix: {', '.join(hints[:-1])} or {hints[-1]}")


# -- the planner -------------------------------------------------------------------------------

@dataclass
class PlanOptions:
    budgets: dict[str, int] = field(default_factory=dict)  # memory -> cap in bytes
    pins: dict[str, str] = field(default_factory=dict)  # tensor or op name -> memory
    inplace: bool = True  # concat into slices, element-wise ops over dying inputs
    copy_hot_weights: bool = False
    tile: bool = False  # row bands over the first layers (tiling.py)
    # op code -> the memories its activation operands may live in (an accelerator's reach)
    operand_memories: dict[str, tuple[str, ...]] = field(default_factory=dict)


def plan(p: PGraph, regions: list[RegionSpec] | None = None, options: PlanOptions | None = None) -> Plan:
    """Plan `p` (its tensors' buffers may be rewritten by the aliasing
    passes). Without `regions`, one unbounded arena."""
    options = options or PlanOptions()
    life0 = lifetimes(p)
    classic = lower_bound(_sizes(p, life0), life0)
    aliasing = {}
    if options.tile:
        from .tiling import tile_graph

        aliasing["tiled_pairs"] = tile_graph(p)
    if options.inplace:
        aliasing["concat_in_place"] = concat_in_place(p)
        aliasing["elementwise_in_place"] = elementwise_in_place(p)
    compact(p)
    life = lifetimes(p)
    sizes = _sizes(p, life)
    if regions is None:
        regions = [RegionSpec("arena", 0, 1 << 62)]
    pins = resolve_pins(p, options.pins, regions)
    allowed = operand_regions(p, options.operand_memories, regions)
    region_of, planned = assign_regions(p, sizes, life, regions, pins, allowed)
    used = sorted({region_of[b] for b in region_of}) or [0]
    index = {r: k for k, r in enumerate(used)}  # memory -> arena index, fastest first
    offsets: dict[int, int] = {}
    out_regions = []
    for r in used:
        offs, top = planned.get(r, ({}, 0))
        offsets.update(offs)
        bufs = sorted(offs)
        out_regions.append(RegionPlan(regions[r].name, regions[r].speed, regions[r].capacity, top,
                                      lower_bound(sizes, life, bufs), bufs))
    result = Plan(offsets, life, sum(r.arena_bytes for r in out_regions), lower_bound(sizes, life),
                  {b: index[region_of[b]] for b in region_of}, out_regions, classic, aliasing)
    return result


# -- hot weights -------------------------------------------------------------------------------

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
        if reg.speed >= program_speed:
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
