"""What the planner takes (regions, options) and gives (the plan)."""

from __future__ import annotations

from dataclasses import dataclass, field


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
    persistent: bool = False  # the model's state (plan/state.py): kept across executions, never shared


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
    arena_bytes: int  # all activation regions (the persistent state's region apart)
    lower_bound_bytes: int  # the program's liveness lower bound in one memory
    region_of: dict[int, int] = field(default_factory=dict)  # buffer -> index into regions
    regions: list[RegionPlan] = field(default_factory=list)  # the arenas, in program order
    classic_lower_bound_bytes: int = 0  # before the aliasing passes
    aliasing: dict[str, int] = field(default_factory=dict)  # pass -> ops rewritten
    hot: list[HotWeight] = field(default_factory=list)
    model_macs: int = 0  # before patch-based inference's recomputation (the ops' sum after it is higher)

    @property
    def single_region(self) -> bool:
        return len(self.regions) <= 1


@dataclass
class PlanOptions:
    budgets: dict[str, int] = field(default_factory=dict)  # memory -> cap in bytes
    pins: dict[str, str] = field(default_factory=dict)  # tensor or op name -> memory
    inplace: bool = True  # concat into slices, element-wise ops over dying inputs
    copy_hot_weights: bool = False
    tile: bool = False  # patch-based inference: runs of early layers band by band (tiling.py)
    max_recompute: float = 0.10  # tiling's budget: at most this much more MACs in all
    # op code -> the memories its activation operands may live in (an accelerator's reach)
    operand_memories: dict[str, tuple[str, ...]] = field(default_factory=dict)
