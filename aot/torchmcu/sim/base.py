"""What every simulator runner shares: the result of a run, the interface a
runner implements, and running a command over an io blob in a fresh
temporary directory with a time limit."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from ..boards import Board

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
    # What the runner runs of a build directory (firmware.elf, or model.pte for the host runner).
    image: str
    # Its ticks are exact instruction counts (QEMU under -icount), so figures convert with the
    # board's instructions_per_tick; otherwise they are the target's own counter and stay ticks.
    counts_instructions: bool

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


def check_io_blob(board: Board, io_blob: bytes | None) -> None:
    if io_blob is not None and len(io_blob) > board.io_size:
        raise IoBlobTooLarge(
            f"io blob is {len(io_blob)} bytes but board {board.name!r} has an io window of "
            f"{board.io_size} bytes at 0x{board.io_base:08x}")
