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
   a memory's budget. Filling memories one by one can lose the reuse of
   bytes between them; the memories are also planned as one address space
   (fastest first, no buffer across two) and, unless the user pinned
   buffers, each alone; the plan taking the fewest bytes in all wins: a
   plan over several memories is never above the one-memory plan when one
   memory could hold it.
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

from ..errors import CompileError
from ..ir import PGraph
from .aliasing import INPLACE_CODES, compact, concat_in_place, elementwise_in_place
from .hot_weights import WEIGHT_OPERAND, copy_hot_weights
from .lifetimes import _sizes, lifetimes, live_profile, lower_bound
from .placement import assign_concatenated, assign_regions, operand_regions, place_offsets, resolve_pins
from .result import HotWeight, Plan, PlanOptions, RegionPlan, RegionSpec
from .state import make_state, place_state, state_buffers
from .state import offsets as state_offsets
from .tiling import tile_graph

__all__ = ["HotWeight", "INPLACE_CODES", "Plan", "PlanOptions", "RegionPlan", "RegionSpec", "WEIGHT_OPERAND",
           "compact", "concat_in_place", "copy_hot_weights", "elementwise_in_place", "lifetimes", "live_profile",
           "lower_bound", "make_state", "place_offsets", "plan"]


def _place(p: PGraph, sizes: dict[int, int], life: dict[int, tuple[int, int]], regions: list[RegionSpec],
           pins: dict[int, int], allowed: dict[int, frozenset[int]]
           ) -> tuple[dict[int, int], dict[int, tuple[dict[int, int], int]]]:
    """The placement taking the fewest bytes in all: memory by memory
    (assign_regions), the memories as one address space, or, without pins,
    one memory alone."""
    try:
        best = assign_regions(p, sizes, life, regions, pins, allowed)
        failure = None
    except CompileError as e:  # fragmentation: another placement may still fit
        if len(regions) == 1:
            raise
        best, failure = None, e
    if len(regions) > 1:
        others = [assign_concatenated(p, sizes, life, regions, pins, allowed)]
        if not pins:  # pins say where the user wants buffers: one memory for all would overrule them
            others += [_one_memory(sizes, life, regions, r, allowed) for r in range(len(regions))]
        for other in others:
            if other is not None and (best is None or _total(other) < _total(best)):
                best = other
    if best is None:
        assert failure is not None
        raise failure
    return best


def _total(placement: tuple[dict[int, int], dict[int, tuple[dict[int, int], int]]]) -> int:
    return sum(top for _, top in placement[1].values())


def _one_memory(sizes: dict[int, int], life: dict[int, tuple[int, int]], regions: list[RegionSpec], r: int,
                allowed: dict[int, frozenset[int]]) -> tuple[dict[int, int], dict[int, tuple[dict[int, int], int]]] | None:
    """Every buffer in memory r, when reach and its capacity allow."""
    if any(r not in ok for ok in allowed.values()):
        return None
    offsets, top = place_offsets(list(life), sizes, life)
    if top > regions[r].capacity:
        return None
    return {b: r for b in life}, {r: (offsets, top)}


def plan(p: PGraph, regions: list[RegionSpec] | None = None, options: PlanOptions | None = None) -> Plan:
    """Plan `p` (its tensors' buffers may be rewritten by the aliasing
    passes). Without `regions`, one unbounded arena."""
    options = options or PlanOptions()
    state = state_buffers(p)  # placed apart, in a persistent region
    life0 = {b: s for b, s in lifetimes(p).items() if b not in state}
    classic = lower_bound(_sizes(p, life0), life0)
    aliasing = {}
    model_macs = sum(op.macs for op in p.ops)
    if options.tile:
        aliasing["tiled_runs"] = tile_graph(p, options.max_recompute)
    if options.inplace:
        aliasing["concat_in_place"] = concat_in_place(p)
        aliasing["elementwise_in_place"] = elementwise_in_place(p)
    compact(p)
    state = state_buffers(p)
    life = {b: s for b, s in lifetimes(p).items() if b not in state}
    sizes = _sizes(p, life)
    if regions is None:
        regions = [RegionSpec("arena", 0, 1 << 62)]
    pins = resolve_pins(p, options.pins, regions)
    allowed = operand_regions(p, options.operand_memories, regions)
    region_of, planned = _place(p, sizes, life, regions, pins, allowed)
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
    arena_bytes = sum(r.arena_bytes for r in out_regions)
    region_index = {b: index[region_of[b]] for b in region_of}
    persistent = place_state(p, regions, {r.name: r.arena_bytes for r in out_regions})
    if persistent is not None:  # the last arena; its buffers live across executions
        offsets.update(state_offsets(p, persistent))
        region_index.update({b: len(out_regions) for b in persistent.buffers})
        life = {**life, **{b: (-1, len(p.ops)) for b in persistent.buffers}}
        out_regions.append(persistent)
    result = Plan(offsets, life, arena_bytes, lower_bound(sizes, {b: life[b] for b in sizes}),
                  region_index, out_regions, classic, aliasing, model_macs=model_macs)
    return result
