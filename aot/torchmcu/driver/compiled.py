"""A compile's final record: everything the artifact writers read."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..boards import Board
from ..ir import PGraph
from ..plan import Plan
from ..program import serialize
from ..program.c_api import IoTensor
from .options import CompileOptions
from .stages import Context


@dataclass
class Compiled:
    out_dir: Path  # the final directory (not the temporary one the files are written into)
    board: Board
    graph: PGraph  # the program graph, planned
    plan: Plan
    pte: bytes  # model.pte
    report: dict[str, Any]  # report.json
    options: CompileOptions = field(default_factory=CompileOptions)
    arenas: list[serialize.ArenaSpec] = field(default_factory=list)
    program_memory: str = ""
    device_bytes: int = 0  # the program as linked (model_pte.c's array)
    inputs: list[IoTensor] = field(default_factory=list)  # as the C API and model.json describe them
    outputs: list[IoTensor] = field(default_factory=list)
    pairs: list[tuple[int, int]] = field(default_factory=list)  # a streaming model's state (input, output)
    example_inputs: tuple[Any, ...] = ()
    exported: Any = None  # the ExportedProgram (model.pt2)
    model: Any = None  # the (quantized) model (its float program: ranges.float_program_bytes)
    picture: bytes | None = None  # memory_plan.png

    @classmethod
    def of(cls, ctx: Context, out_dir: Path) -> Compiled:
        return cls(out_dir, ctx.board, ctx.pg, ctx.mem, ctx.pte, ctx.report, ctx.options, ctx.arenas,
                   ctx.program_memory, ctx.device_bytes, ctx.inputs, ctx.outputs, ctx.pairs, ctx.example_inputs,
                   ctx.exported, ctx.model, ctx.picture)
