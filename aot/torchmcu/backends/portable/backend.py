"""The portable backend behind torchmcu.backends' interface."""


from __future__ import annotations

from typing import Any

from ...boards import Board
from ...ir import PGraph
from ...program.kernel_table import declared_kernels
from ..base import Backend, BuildBackend, CompileBackend
from .scratch import scratch_bytes

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

    def scratch_bytes(self, code: str, x: tuple[int, ...], w: tuple[int, ...] | None, y: tuple[int, ...],
                      params: dict[str, Any]) -> int:
        """The fast paths' buffers (backends/portable/scratch.py), in the arena."""
        return scratch_bytes(code, x, w, y, params)


class PortableBuildHalf(BuildBackend):
    name = NAME
    kernel_set = "portable"
    kernel_dir = KERNEL_DIR


BACKEND = Backend(PortableCompileHalf(), PortableBuildHalf())
