"""The portable backend behind torchmcu.backends' interface."""


from __future__ import annotations

from ...boards import Board
from ...ir import PGraph
from ...program.kernel_table import declared_kernels
from ..base import Backend


class Portable(Backend):
    name = "portable"
    priority = 100
    kernel_set = "portable"
    kernel_dir = "kernels/portable"

    def applies(self, board: Board) -> bool:
        return True

    def op_codes(self) -> set[str]:
        return set(declared_kernels(self.kernel_dir))

    def supports(self, pg: PGraph, index: int) -> str | None:
        code = pg.ops[index].code
        return None if code in declared_kernels(self.kernel_dir) else f"no portable kernel for {code}"


BACKEND = Portable()
