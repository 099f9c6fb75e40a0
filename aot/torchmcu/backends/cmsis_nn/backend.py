"""The cmsis_nn backend behind torchmcu.backends' interface."""


from __future__ import annotations

from pathlib import Path
from typing import Any

from ...boards import Board
from ...ir import PGraph
from ...program.kernel_table import declared_kernels
from ..base import Backend, BuildBackend, BuildParts, CompileBackend
from .scratch import scratch_bytes

NAME = "cmsis-nn"
KERNEL_DIR = "kernels/cmsis_nn"


class CmsisNNCompileHalf(CompileBackend):
    name = NAME
    priority = 30

    def applies(self, board: Board) -> bool:
        return board.core.arch == "cortex-m"

    def op_codes(self) -> set[str]:
        return set(declared_kernels(KERNEL_DIR))

    def supports(self, pg: PGraph, index: int) -> str | None:
        code = pg.ops[index].code
        return None if code in declared_kernels(KERNEL_DIR) else f"CMSIS-NN has no kernel for {code}"

    def scratch_bytes(self, code: str, x: tuple[int, ...], w: tuple[int, ...] | None, y: tuple[int, ...],
                      params: dict[str, Any]) -> int:
        return scratch_bytes(code, x, w, y, params)


class CmsisNNBuildHalf(BuildBackend):
    name = NAME
    kernel_set = "cmsis-nn"
    kernel_dir = KERNEL_DIR

    def build_parts(self, board: Board, out: Path, codes: list[str]) -> BuildParts:
        from .build import CmsisNNBuild

        return CmsisNNBuild(board, out, codes).parts()


BACKEND = Backend(CmsisNNCompileHalf(), CmsisNNBuildHalf())
