"""The portable backend behind torchmcu.backends' interface."""


from __future__ import annotations

from ...boards import Board
from ...ir import PGraph
from ...program.kernel_table import declared_kernels
from ..base import Backend, BuildBackend, CompileBackend

NAME = "portable"
KERNEL_DIR = "kernels/portable"


class PortableCompileHalf(CompileBackend):
    name = NAME
    priority = 100

    def applies(self, board: Board) -> bool:
        return True

    def op_codes(self) -> set[str]:
        return set(declared_kernels(KERNEL_DIR))

    def supports(self, pg: PGraph, index: int) -> str | None:
        code = pg.ops[index].code
        return None if code in declared_kernels(KERNEL_DIR) else f"no portable kernel for {code}"


class PortableBuildHalf(BuildBackend):
    name = NAME
    kernel_set = "portable"
    kernel_dir = KERNEL_DIR


BACKEND = Backend(PortableCompileHalf(), PortableBuildHalf())
