"""Run firmware images in a simulator and collect UART output and exit code.

QEMU (here), Arm's Corstone FVPs (torchmcu.fvp, for boards with an NPU) and
Cadence's Xtensa ISS (torchmcu.xtsim, for HiFi boards) are registered in
:data:`RUNNERS`; another simulator (Renode) would be a further
:class:`Runner` with the same ``run`` signature.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from .boards import Board, load_board

__all__ = [
    "EXIT_CODES",
    "IoBlobTooLarge",
    "QemuRunner",
    "RUNNERS",
    "Runner",
    "SimResult",
    "SimulatorNotFound",
    "get_runner",
    "qemu_available",
    "run_qemu",
]

# Exit codes produced by firmware/boards itself (see firmware/boards/platform.h).
EXIT_CODES = {
    250: "HardFault",
    251: "unexpected exception",
    252: "abort or failed assert",
}


class SimulatorNotFound(RuntimeError):
    """The simulator executable is not installed."""


class IoBlobTooLarge(ValueError):
    """The io blob does not fit the board's io window."""


@dataclass
class SimResult:
    stdout: str  # UART output merged with semihosting console output
    exit_code: int  # firmware exit code; the killing signal (negative) on timeout
    timed_out: bool
    command: list[str]
    stderr: str = ""  # QEMU's own diagnostics, kept out of the firmware's output

    @property
    def exit_reason(self) -> str | None:
        """What a board-side exit code means, if it is one of EXIT_CODES.

        QEMU itself aborts when the core locks up (a fault while taking the
        HardFault, e.g. a stack overflow on Armv7-M); that reads "lockup".
        """
        if self.exit_code < 0 and "Lockup" in self.stderr:
            return "lockup"
        return EXIT_CODES.get(self.exit_code)


@runtime_checkable
class Runner(Protocol):
    """A simulator able to run a firmware ELF for a board."""

    name: str

    def available(self) -> bool: ...

    def run(
        self,
        board: Board | str,
        elf_path: str | Path,
        io_blob: bytes | None = None,
        timeout_s: float = 60,
    ) -> SimResult: ...


def run_with_blob(prefix: str, io_blob: bytes | None, command: Callable[[Path | None], list[str]],
                  timeout_s: float, env: dict[str, str] | None = None) -> tuple[list[str], str, str, int, bool]:
    """Runs a simulator in a fresh temporary directory (its working
    directory): a non-empty io blob is written there as io.bin first (an
    empty blob is no blob: QEMU's loader rejects empty files), the command
    gets its path (or None), no stdin, and `timeout_s` seconds before it is
    killed. Returns (command, stdout, stderr, exit status, timed out)."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        blob_path = None
        if io_blob:
            blob_path = Path(tmp) / "io.bin"
            blob_path.write_bytes(io_blob)
        cmd = command(blob_path)
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                cwd=tmp, env=env)
        timed_out = False
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            proc.kill()
            out, err = proc.communicate()
    return cmd, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), proc.returncode, timed_out


def _check_io_blob(board: Board, io_blob: bytes | None) -> None:
    if io_blob is not None and len(io_blob) > board.io_size:
        raise IoBlobTooLarge(
            f"io blob is {len(io_blob)} bytes but board {board.name!r} has an io window of "
            f"{board.io_size} bytes at 0x{board.io_base:08x}")


class QemuRunner:
    """qemu-system-arm with one instruction = 1 ns of guest time.

    ``-icount shift=0`` makes guest time a pure function of the instruction
    count, so SysTick readings are deterministic instruction counts;
    ``align=off,sleep=off`` keep host timing out of it. The UART is on
    stdio and semihosting prints there too, through the same chardev, so
    stdout holds everything in order.
    """

    name = "qemu"

    def __init__(self, executable: str | None = None):
        self.executable = executable or os.environ.get("TORCHMCU_QEMU", "qemu-system-arm")

    def available(self) -> bool:
        return shutil.which(self.executable) is not None

    def command(self, board: Board, elf_path: str | Path, io_blob_path: str | Path | None = None) -> list[str]:
        exe = shutil.which(self.executable)
        if exe is None:
            raise SimulatorNotFound(
                f"{self.executable} not found on PATH; install QEMU (Debian/Ubuntu: "
                f"apt-get install qemu-system-arm) or set TORCHMCU_QEMU")
        cmd = [
            exe,
            "-M", board.qemu_machine,
            "-icount", "shift=0,align=off,sleep=off",
            "-display", "none",
            "-monitor", "none",
            # The UART and semihosting share one stdio chardev; mux=on lets
            # two front ends attach to it (without it QEMU refuses: "in use").
            "-chardev", "stdio,id=serial0,mux=on,signal=off",
            "-serial", "chardev:serial0",
            "-semihosting-config", "enable=on,target=native,chardev=serial0",
            "-kernel", str(elf_path),
        ]
        if io_blob_path is not None:
            # force-raw: never let QEMU sniff the blob as an ELF, uImage or
            # Intel HEX file. No cpu-num: with it QEMU would also set the PC.
            cmd += ["-device", f"loader,file={io_blob_path},addr=0x{board.io_base:08x},force-raw=on"]
        return cmd

    def run(
        self,
        board: Board | str,
        elf_path: str | Path,
        io_blob: bytes | None = None,
        timeout_s: float = 60,
    ) -> SimResult:
        board = load_board(board) if not isinstance(board, Board) else board
        elf_path = Path(elf_path).resolve()  # the simulator runs in a temporary directory
        if not elf_path.is_file():
            raise FileNotFoundError(f"firmware image {elf_path} does not exist")
        _check_io_blob(board, io_blob)
        cmd, out, err, code, timed_out = run_with_blob(
            "tmcu-sim-", io_blob, lambda blob: self.command(board, elf_path, blob), timeout_s)
        return SimResult(stdout=out, exit_code=code, timed_out=timed_out, command=cmd, stderr=err)


RUNNERS: dict[str, Runner] = {"qemu": QemuRunner()}
from . import fvp as _fvp  # noqa: F401  registers RUNNERS["fvp"] (fvp.py imports this module)
from . import xtsim as _xtsim  # noqa: F401  registers RUNNERS["xt-run"] (Xtensa ISS)


def get_runner(name: str = "qemu") -> Runner:
    try:
        return RUNNERS[name]
    except KeyError:
        raise ValueError(f"unknown simulator {name!r}; available: {', '.join(sorted(RUNNERS))}") from None


def qemu_available() -> bool:
    return RUNNERS["qemu"].available()


def run_qemu(
    board: Board | str,
    elf_path: str | Path,
    io_blob: bytes | None = None,
    timeout_s: float = 60,
) -> SimResult:
    """Run ``elf_path`` on ``board`` in QEMU; see :class:`QemuRunner`."""
    return RUNNERS["qemu"].run(board, elf_path, io_blob=io_blob, timeout_s=timeout_s)
