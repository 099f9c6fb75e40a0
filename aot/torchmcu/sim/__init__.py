"""Running firmware: simulators (and a board over a serial port) behind one
interface, and the run of a compiled model's build directory.

- base.py: the Runner interface, SimResult, running a command with a time limit.
- qemu.py, host.py, fvp.py, renode.py, xtrun.py, serial.py: the runners. Their
  platform and configuration files are in the repository's sim/ folder.
- runner.py: a build directory run on any of them, its outputs read back
  from the firmware's line protocol, and the check against the reference.

A new simulator is one more module here with a class that has the Runner
attributes and `run`, added to RUNNERS.
"""

from __future__ import annotations

from pathlib import Path

from ..boards import Board
from .base import EXIT_CODES, IoBlobTooLarge, Runner, SimResult, SimulatorNotFound
from .fvp import FvpRunner
from .host import HostRunner
from .qemu import QemuRunner
from .renode import RenodeRunner
from .xtrun import XtRunner

__all__ = ["EXIT_CODES", "IoBlobTooLarge", "QemuRunner", "RUNNERS", "Runner", "SimResult", "SimulatorNotFound",
           "get_runner", "qemu_available", "run_qemu"]

RUNNERS: dict[str, Runner] = {r.name: r for r in (QemuRunner(), HostRunner(), FvpRunner(), RenodeRunner(),
                                                  XtRunner())}


def get_runner(name: str = "qemu") -> Runner:
    try:
        return RUNNERS[name]
    except KeyError:
        raise ValueError(f"unknown simulator {name!r}; available: {', '.join(sorted(RUNNERS))}") from None


def qemu_available() -> bool:
    return RUNNERS["qemu"].available()


def run_qemu(board: Board | str, elf_path: str | Path, io_blob: bytes | None = None,
             timeout_s: float = 60) -> SimResult:
    """Run ``elf_path`` on ``board`` in QEMU; see :class:`QemuRunner`."""
    return RUNNERS["qemu"].run(board, elf_path, io_blob=io_blob, timeout_s=timeout_s)
