"""Lowering: an ExportedProgram to the program graph, as one straight list of
passes.

    convert (ATen -> logical graph, by op family)
    -> fusion.PASSES (fold batch norm, fuse activations, fold q/dq into integer ops)
    -> int8 I/O (optional)
    -> layout (logical graph -> program graph, NHWC where ops want it)

The op families live in passes/lowering/, the shared data types in
graph.py (logical) and torchmcu.ir (program).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from . import fusion
from .state import integer_state
from .convert import to_graph
from .graph import Graph
from .layout import AVG_POOL_ROUNDINGS, IO_LAYOUTS, Scratch, io_perm, to_program_graph
from .lowering import ALL, conv
from .lowering.recurrent import fold_recurrent

__all__ = ["AVG_POOL_ROUNDINGS", "IO_LAYOUTS", "PASSES", "Scratch", "io_perm", "lower", "to_program_graph"]

PASSES: list[Callable[[Graph], None]] = [
    conv.fold_batch_norm_transposed,  # as fold_batch_norm, for transposed convolutions
    fusion.fold_batch_norm,   # first: exposes conv -> relu pairs to fusion
    fusion.fuse_activations,  # before fold_qdq: a fused clamp becomes the integer kernel's range
    fold_recurrent,           # before fold_qdq: a recurrent group's q/dq pairs at its edges then cancel
    fusion.fold_qdq,
    conv.fold_pad,            # after fold_qdq: an int8 pad shares its input's quantization
]


def lower(ep: torch.export.ExportedProgram, io: str = "float", state: list[tuple[int, int]] | None = None) -> Graph:
    """The logical graph of `ep` after the passes. io: "float" (quantize and
    dequantize inside the program) or "int8" (int8 inputs and outputs).
    state: (input, output) index pairs of streaming state (plan/state.py),
    kept in their integer form where both edges are quantized alike."""
    g = to_graph(ep, ALL.rules)
    for p in PASSES:
        p(g)
    if io == "int8":
        fusion.int8_io(g)
    if state:
        integer_state(g, state)
    return g

