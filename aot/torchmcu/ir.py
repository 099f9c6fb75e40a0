"""The program graph: what lowering produces and planning, the backends and
serialization consume. Tensors are physical (dims in memory order, NHWC for
4-D activations), each activation in a buffer the planner places; ops carry
their program op code (program/schema/program.fbs) and params table."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

NP_DTYPES = {"F32": np.float32, "I8": np.int8, "I32": np.int32, "I4": np.int8, "I16": np.int16, "I64": np.int64,
             "U8": np.uint8}  # I4: values, packed on serialize


@dataclass
class PTensor:
    name: str
    dims: tuple[int, ...]  # physical
    dtype: str = "F32"
    buffer: int | None = None  # activation storage; tensors sharing it alias
    const: np.ndarray | None = None  # constants, already in physical layout
    scale: float = 0.0  # int8: real = scale * (q - zero_point)
    zero_point: int = 0
    channel_scales: tuple[float, ...] = ()  # per-channel int8 weights
    channel_axis: int = -1
    offset: int = 0  # byte offset in its buffer (a slice: concat inputs, in-place outputs, tiles)

    @property
    def nbytes(self) -> int:
        n = int(np.prod(self.dims, dtype=np.int64))
        if self.dtype == "I4":  # two per byte (reference.pack_int4)
            return (n + 1) // 2
        return n * {"F32": 4, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "I64": 8}[self.dtype]


@dataclass
class POp:
    code: str
    inputs: list[int]  # tensor ids, -1 for an absent optional operand
    outputs: list[int]
    params: tuple[str, dict[str, Any]] | None
    name: str
    source: str | None
    kind: str  # the logical op, for reports
    backend: str = "portable"
    macs: int = 0


@dataclass
class PGraph:
    tensors: list[PTensor] = field(default_factory=list)
    ops: list[POp] = field(default_factory=list)
    inputs: list[int] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)
    buffers: list[int] = field(default_factory=list)  # bytes per activation buffer
    # Tensors kept from one execution to the next (plan/state.py): a persistent arena.
    state: list[int] = field(default_factory=list)
