"""QEMU (qemu-system-arm) as a torchmcu simulator: the Cortex-M boards of
boards/*.toml name their machine (mps3-an547, mps2-an386, ...)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from ..boards import Board, BoardError, load_board
from .base import SimResult, SimulatorNotFound, check_io_blob, run_with_blob


class QemuRunner:
    """qemu-system-arm with one instruction = 1 ns of guest time.

    ``-icount shift=0`` makes guest time a pure function of the instruction
    count, so SysTick readings are deterministic instruction counts;
    ``align=off,sleep=off`` keep host timing out of it. The UART is on
    stdio and semihosting prints there too, through the same chardev, so
    stdout holds everything in order.
    """

    name = "qemu"
    image = "firmware.elf"
    counts_instructions = True

    def __init__(self, executable: str | None = None):
        self.executable = executable or os.environ.get("TORCHMCU_QEMU", "qemu-system-arm")

    def available(self) -> bool:
        return shutil.which(self.executable) is not None

    def command(self, board: Board, elf_path: str | Path, io_blob_path: str | Path | None = None) -> list[str]:
        _check_qemu_board(board)
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
        _check_qemu_board(board)
        check_io_blob(board, io_blob)
        cmd, out, err, code, timed_out = run_with_blob(
            "tmcu-sim-", io_blob, lambda blob: self.command(board, elf_path, blob), timeout_s)
        return SimResult(stdout=out, exit_code=code, timed_out=timed_out, command=cmd, stderr=err)

    def run_traced(self, board: Board, elf_path: str | Path, io_blob: bytes | None, parser,
                   timeout_s: float = 60) -> SimResult:
        """run() with QEMU logging every executed block to `parser` (a
        torchmcu.sim.cycles.TraceParser): the cycle model's input."""
        from .cycles import run_traced

        elf_path = Path(elf_path).resolve()
        if not elf_path.is_file():
            raise FileNotFoundError(f"firmware image {elf_path} does not exist")
        _check_qemu_board(board)
        check_io_blob(board, io_blob)
        with tempfile.TemporaryDirectory(prefix="tmcu-sim-") as tmp:
            blob_path = None
            if io_blob:
                blob_path = Path(tmp) / "io.bin"
                blob_path.write_bytes(io_blob)
            cmd = self.command(board, elf_path, blob_path)
            out, err, code, timed_out = run_traced(cmd, parser, timeout_s, cwd=tmp)
        return SimResult(stdout=out, exit_code=code, timed_out=timed_out, command=cmd, stderr=err)


def _check_qemu_board(board: Board) -> None:
    if not board.qemu_machine:
        if board.renode is not None:
            raise BoardError(f"board {board.name}: QEMU does not model this part; Renode does: "
                             "`torchmcu run DIR --sim renode`")
        raise BoardError(f"board {board.name} has no [qemu] table: QEMU does not run it (its firmware "
                         "builds; run it on the part itself)")
