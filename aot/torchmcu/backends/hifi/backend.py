"""The HiFi backend behind torchmcu.backends' interface: on an Xtensa HiFi 4
board, the int8 ops nnlib computes exactly run on its kernels; the firmware
is built with Cadence's toolchain (build.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...boards import Board
from ...errors import BuildError
from ...ir import PGraph
from ..base import Backend, BuildBackend, BuildParts, CompileBackend, CompileContext
from .partition import BACKEND as NAME
from .partition import CLAIMED_CODES, HifiPlan, apply, decide, format_report, report


class HifiCompileHalf(CompileBackend):
    name = NAME
    priority = 20
    report_key = "hifi"

    def applies(self, board: Board) -> bool:
        return board.core.arch == "xtensa"

    def op_codes(self) -> set[str]:
        return set(CLAIMED_CODES)

    def supports(self, pg: PGraph, index: int) -> str | None:
        got = dict(decide(pg)).get(index, f"nnlib offers nothing for {pg.ops[index].code} here")
        return got if isinstance(got, str) else None

    def partition(self, pg: PGraph, ctx: CompileContext) -> list[tuple[int, Any]]:
        return decide(pg)

    def lower(self, pg: PGraph, partitioning: list[tuple[int, Any]], ctx: CompileContext) -> HifiPlan:
        ctx.state[self.name] = apply(pg, partitioning)
        return ctx.state[self.name]

    def report(self, partitioning: Any, ctx: CompileContext) -> dict[str, Any]:
        return report(ctx.state[self.name], ctx.board)

    def format_report(self, section: dict[str, Any]) -> str:
        return format_report(section)


class HifiBuildHalf(BuildBackend):
    name = NAME
    kernel_set = "hifi"
    kernel_dir = "delegates/hifi"

    def build_parts(self, board: Board, out: Path, codes: list[str]) -> BuildParts:
        raise BuildError("the hifi kernels build for Xtensa boards only (torchmcu build on a HiFi board)")

    def builds_firmware(self, board: Board) -> bool:
        return board.core.arch == "xtensa"

    def build_firmware(self, out: Path, board: Board, opt: str) -> Path:
        from .build import build_firmware

        return build_firmware(out, board, opt)

    def describe_image(self, image: Path) -> str:
        from .build import BUILD_DIR

        return f"{image}: built for Xtensa (commands: {image.parent / BUILD_DIR / 'build.sh'})"


BACKEND = Backend(HifiCompileHalf(), HifiBuildHalf())
