"""Cadence's Xtensa instruction set simulator (xt-run) as a torchmcu simulator.

For boards with an Xtensa core (boards/hifi4-generic.toml, imxrt600-hifi4):
the firmware torchmcu.backends.hifi.build makes, run as

    xt-run --xtensa-core=<core> [--xtensa-system=<registry>] --mem_model <elf> <io blob>

--mem_model has the ISS model the memory system's timing (caches, local
memories, stalls) rather than one cycle per access. The ISS's C library
reaches host files and the console through simulator calls, so the io blob
is passed as the program's argument (firmware/delegates/hifi/main_xtensa.cc
reads it) and the firmware's line protocol (firmware/app/app.h) comes on
stdout. Ticks in that protocol are the core's CCOUNT: cycles, exact in the
ISS, so op and sample figures need no conversion. The firmware's own status
line ("tmcu: done status=N") is the run's exit code when present.

The tools come from XTENSA_TOOLCHAIN_PATH and XTENSA_CORE (torchmcu.backends.hifi.build).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..boards import Board, load_board
from ..errors import BuildError
from .base import IoBlobTooLarge, SimResult, SimulatorNotFound, run_with_blob

__all__ = ["XtRun", "XtRunner", "command", "parse_cycles", "result_from_output"]

_LINE = re.compile(r"^tmcu: (\w+)(.*)$")


def command(tools: Any, elf: str | Path, io_blob: str | Path | None = None) -> list[str]:
    """The xt-run command line (tools: torchmcu.backends.hifi.build.XtensaTools)."""
    cmd = [str(tools.run), *tools.core_flags, "--mem_model", str(elf)]
    if io_blob is not None:
        cmd.append(str(io_blob))
    return cmd


def parse_cycles(text: str) -> dict[str, Any]:
    """The firmware's figures in cycles: load, each profiled op (summed over
    passes, then averaged), each sample, and the final status."""
    out: dict[str, Any] = {"load_cycles": None, "op_cycles": {}, "sample_cycles": [], "status": None,
                           "samples": None, "calib_cycles": None}
    op_sums: dict[int, int] = {}
    op_counts: dict[int, int] = {}
    for line in text.splitlines():
        m = _LINE.match(line.strip())
        if not m:
            continue
        kind, rest = m.group(1), m.group(2).split()
        fields = dict(f.split("=", 1) for f in rest if "=" in f)
        runs = max(1, int(fields.get("runs", 1)))
        if kind == "load":
            out["load_cycles"] = int(fields["ticks"]) / runs
        elif kind == "calib":
            out["calib_cycles"] = int(fields["ticks"]) / runs
        elif kind == "op":
            i = int(rest[0])
            op_sums[i] = op_sums.get(i, 0) + int(fields["ticks"])
            op_counts[i] = op_counts.get(i, 0) + 1
        elif kind == "sample":
            out["sample_cycles"].append(int(fields["ticks"]))
        elif kind == "done":
            out["status"] = int(fields["status"])
            out["samples"] = int(fields.get("samples", 0))
    out["op_cycles"] = {i: op_sums[i] / op_counts[i] for i in sorted(op_sums)}
    return out


@dataclass
class XtRun(SimResult):
    cycles: dict[str, Any] = field(default_factory=dict)


def result_from_output(cmd: list[str], stdout: str, stderr: str, returncode: int, timed_out: bool) -> XtRun:
    cycles = parse_cycles(stdout)
    code = cycles["status"] if cycles["status"] is not None and not timed_out else returncode
    return XtRun(stdout=stdout, exit_code=code, timed_out=timed_out, command=cmd, stderr=stderr, cycles=cycles)


class XtRunner:
    """torchmcu.sim's Runner interface over xt-run."""

    name = "xt-run"
    image = "firmware-xtensa.elf"
    counts_instructions = False  # ticks are CCOUNT cycles, exact in the ISS

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self.env = env

    def _tools(self, board: Board | None) -> Any:
        from ..backends.hifi.build import xtensa_tools

        return xtensa_tools(board, self.env)

    def available(self, board: Board | str | None = None) -> bool:
        b = load_board(board) if isinstance(board, str) else board
        try:
            return self._tools(b).run.is_file()
        except BuildError:
            return False

    def run(self, board: Board | str, elf_path: str | Path, io_blob: bytes | None = None,
            timeout_s: float = 60) -> XtRun:
        b = board if isinstance(board, Board) else load_board(board)
        if b.core.arch != "xtensa":
            raise SimulatorNotFound(f"board {b.name} is not an Xtensa core: xt-run cannot run it")
        try:
            tools = self._tools(b)
        except BuildError as e:
            raise SimulatorNotFound(str(e)) from None
        if not tools.run.is_file():
            raise SimulatorNotFound(f"{tools.run} not found: install Cadence's Xtensa tools and set "
                                    "XTENSA_TOOLCHAIN_PATH to their XtensaTools directory")
        elf = Path(elf_path).resolve()  # the simulator runs in a temporary directory
        if not elf.is_file():
            raise FileNotFoundError(f"firmware image {elf} does not exist")
        if io_blob is not None and len(io_blob) > b.io_size:
            raise IoBlobTooLarge(f"io blob is {len(io_blob)} bytes but board {b.name!r} reads at most "
                                 f"{b.io_size} bytes")
        cmd, out, err, code, timed_out = run_with_blob(
            "tmcu-xtrun-", io_blob, lambda blob: command(tools, elf, blob), max(1, math.ceil(timeout_s)),
            env={**os.environ, **(self.env or {})})
        return result_from_output(cmd, out, err, code, timed_out)
