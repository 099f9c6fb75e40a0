"""The Ethos-U backend behind torchmcu.backends' interface: on a board with an
NPU, the int8 ops Vela and the TOSA reference agree on run as ETHOS_U calls
(one per partition); the rest stays on the CPU."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...boards import Board
from ...ir import PGraph
from ..base import Backend, BuildBackend, BuildParts, CompileBackend, CompileContext
from . import available, compile_partitions, report
from .delegate import BACKEND as NAME
from .delegate import CODE, check_npu_operands, delegate, format_npu_report
from .tosa_lower import HANDLERS, check_op

SAMPLES = 4  # inputs the numerics check runs: the example inputs and the first calibration samples


@dataclass
class Partitioning:
    result: Any = None  # EthosUResult; None when skipped
    skipped: str | None = None  # why every op stays on the CPU
    calls: list[dict[str, Any]] = field(default_factory=list)  # filled by lower


def numerics_samples(pg: PGraph, example_inputs: tuple[Any, ...], calibration: Any = None) -> list[list[np.ndarray]]:
    """The samples on which each partition's TOSA graph must equal the
    reference bit for bit: the example inputs and the first calibration
    samples, shaped (and, for int8 inputs, quantized) as the graph's inputs."""
    from ... import reference as ref
    from ...frontend.quantize import calibration_samples

    samples = [tuple(example_inputs)]
    if calibration is not None:
        samples += calibration_samples(calibration, tuple(example_inputs))[:SAMPLES - 1]
    out = []
    for s in samples:
        arrays = []
        for x, tid in zip(s, pg.inputs):
            t = pg.tensors[tid]
            a = np.asarray(x.detach().numpy() if hasattr(x, "detach") else x, np.float32)
            if t.dtype == "I8":
                a = ref.quantize(a, t.scale, t.zero_point)
            arrays.append(a.reshape(t.dims))
        out.append(arrays)
    return out


class EthosUCompileHalf(CompileBackend):
    name = NAME
    priority = 10
    delegate_code = CODE
    report_key = "ethos_u"

    def applies(self, board: Board) -> bool:
        return board.npu is not None

    def op_codes(self) -> set[str]:
        return set(HANDLERS)

    def supports(self, pg: PGraph, index: int) -> str | None:
        return check_op(pg, index)

    def partition(self, pg: PGraph, ctx: CompileContext) -> Partitioning:
        """Partition `pg`, compile the partitions and check their numerics on
        a few samples. Without Vela and tosa-tools the program runs on the
        CPU, with a warning and the reason in the report."""
        board = ctx.board
        assert board.npu is not None
        if not available():
            reason = ("the Ethos-U backend needs the ethos-u-vela and tosa-tools packages "
                      "(pip install ethos-u-vela tosa-tools); every op runs on the CPU")
            warnings.warn(f"torchmcu: board {board.name} has an NPU but {reason}", stacklevel=ctx.stacklevel)
            return Partitioning(skipped=reason)
        return Partitioning(compile_partitions(pg, board, numerics_samples(pg, ctx.example_inputs, ctx.calibration)))

    def lower(self, pg: PGraph, partitioning: Partitioning, ctx: CompileContext) -> None:
        """The ETHOS_U calls in place of their partitions' ops."""
        if partitioning.result is None:
            return
        calls = delegate(pg, partitioning.result)
        partitioning.calls = [{"partition": int(c.params[1]["partition"]),
                               "op": next(i for i, op in enumerate(pg.ops) if op is c), "name": c.name}
                              for c in calls if c.params is not None]

    def report(self, partitioning: Partitioning, ctx: CompileContext) -> dict[str, Any]:
        if partitioning.result is None:
            assert ctx.board.npu is not None
            return {"accelerator": ctx.board.npu.accelerator, "skipped": partitioning.skipped, "calls": []}
        section = report(partitioning.result)
        section["graph"] = "ops and partitions index the program graph before delegation; calls, the program's ops"
        section["calls"] = partitioning.calls
        return section

    def format_report(self, section: dict[str, Any]) -> str:
        return format_npu_report(section)

    def operand_memories(self, board: Board) -> tuple[str, ...] | None:
        return board.npu.memories if board.npu else None

    def check_plan(self, pg: PGraph, plan: Any) -> None:
        check_npu_operands(pg, plan)


class EthosUBuildHalf(BuildBackend):
    name = NAME
    delegate_code = CODE
    kernel_dir = "delegates/ethos_u"

    def build_parts(self, board: Board, out: Path, codes: list[str]) -> BuildParts:
        from .build import EthosUBuild

        return EthosUBuild(board).parts()


BACKEND = Backend(EthosUCompileHalf(), EthosUBuildHalf())
