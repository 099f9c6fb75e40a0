"""Antmicro's Renode as a torchmcu simulator, for the Cortex-M parts it models
that QEMU does not (boards with a [renode] table: stm32f407vg, stm32l552ze).

    renode --disable-xwt --plain --port PORT run.resc

How the runner drives Renode, and why through its monitor rather than
`renode-test` and Robot keywords: the monitor is part of every Renode
install (the .deb, the portable tarball, the Docker image), while Robot runs
need its Python test requirements on top; and the run needs only four things
a monitor gives directly: load (the script), read the UART (a file backend,
flushed per byte), one property at the end (`cpu ExecutedInstructions`) and
`quit`. The script is sim/renode/torchmcu.resc.in filled for the board
(its platform description sim/renode/<part>.repl), the ELF and the io blob.

The firmware ends with a "tmcu: exit status=N" line on boards with a
[renode] table (firmware/boards/platform.cc: Renode has no semihosting on
Cortex-M to take an exit status). The runner waits for that line, or for
Renode to end, or for the time limit; then asks the monitor, over its
telnet port, how many instructions the core executed, and quits.

Figures: the ticks the firmware reports are its SysTick (or DWT) counts in
Renode's virtual time, where the core runs `mips` instructions per
microsecond; Renode advances timers per block of instructions, so a tick
figure is not an exact instruction count the way QEMU's -icount makes it.
The runner reports them as ticks, and the run's total instructions as
Renode counts them (`instructions` in its stats).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from string import Template
from typing import Any

from ..boards import Board, load_board
from ..sources import SIM_DIR
from .base import SimResult, SimulatorNotFound, check_io_blob

__all__ = ["RENODE_ENV", "RenodeRun", "RenodeRunner", "find_renode", "parse_monitor_number", "script"]

RENODE_ENV = "TORCHMCU_RENODE"  # the renode executable, when it is not `renode` on PATH
PLATFORMS = SIM_DIR / "renode"
_EXIT = re.compile(r"^tmcu: exit status=(\d+)", re.MULTILINE)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_PROMPT = re.compile(r"^\([^)]*\)\s*$")


def find_renode() -> Path | None:
    exe = os.environ.get(RENODE_ENV) or "renode"
    found = shutil.which(exe)
    return Path(found) if found else None


def platform_file(board: Board) -> Path:
    """The board's .repl: a name in sim/renode/, or a path (a board file of one's own)."""
    assert board.renode is not None
    p = Path(board.renode.platform)
    if p.is_absolute():
        return p
    if board.source is not None and (board.source.parent / p).is_file():
        return (board.source.parent / p).resolve()
    return PLATFORMS / p


def script(board: Board, elf: str | Path, io_blob: str | Path | None, uart_file: str | Path) -> str:
    """The .resc of one run: sim/renode/torchmcu.resc.in filled for `board`."""
    if board.renode is None:
        raise SimulatorNotFound(f"board {board.name} has no [renode] table: Renode does not run it here")
    code = board.memory(board.code_memory)
    load_io = f"sysbus LoadBinary @{io_blob} 0x{board.io_base:08x}" if io_blob else "# no io blob"
    return Template((PLATFORMS / "torchmcu.resc.in").read_text()).substitute(
        platform=platform_file(board), uart=board.renode.uart, uart_file=uart_file, elf=elf, load_io=load_io,
        vtor=f"0x{code.base:08x}", mips=board.renode.mips)


def command(executable: str | Path, resc: str | Path, port: int) -> list[str]:
    """Headless (no GUI windows), plain output (no colours), the monitor on a telnet port."""
    return [str(executable), "--disable-xwt", "--plain", "--port", str(port), str(resc)]


def parse_monitor_number(reply: str) -> int | None:
    """The number a monitor query answered: the last line of digits, once
    the telnet negotiation, colours, the echo and the prompts are taken out."""
    text = _ANSI.sub("", reply.replace("\r", ""))
    text = "".join(ch for ch in text if ch == "\n" or 32 <= ord(ch) < 127)
    numbers = [ln.strip() for ln in text.split("\n") if re.fullmatch(r"\s*(0x[0-9A-Fa-f]+|\d+)\s*", ln)]
    if not numbers:
        return None
    n = numbers[-1]
    return int(n, 16) if n.startswith("0x") else int(n)


@dataclass
class RenodeRun(SimResult):
    stats: dict[str, Any] = field(default_factory=dict)  # instructions: the run's total, as Renode counts
    npu: dict[int, dict[str, float]] = field(default_factory=dict)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _monitor(port: int, commands: list[str], timeout_s: float = 10.0) -> list[str]:
    """Sends each command to the monitor and returns what came back after
    each (until the next prompt or a pause)."""
    replies: list[str] = []
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            conn = socket.create_connection(("127.0.0.1", port), timeout=1.0)
            break
        except OSError:
            if time.monotonic() > deadline:
                return replies
            time.sleep(0.1)
    with conn:
        _read_until_quiet(conn, deadline)  # the banner and the first prompt
        for cmd in commands:
            conn.sendall(cmd.encode() + b"\n")
            replies.append(_read_until_quiet(conn, deadline, stop_on_prompt=cmd != "quit"))
    return replies


def _read_until_quiet(conn: socket.socket, deadline: float, stop_on_prompt: bool = True) -> str:
    data = b""
    conn.settimeout(0.5)
    while time.monotonic() < deadline:
        try:
            chunk = conn.recv(4096)
        except TimeoutError:
            if data:
                break
            continue
        except OSError:
            break
        if not chunk:
            break
        data += chunk
        text = _ANSI.sub("", data.decode("utf-8", "replace")).replace("\r", "")
        if stop_on_prompt and text.rstrip().endswith(")") and _PROMPT.match(text.rstrip().split("\n")[-1]):
            break
    return data.decode("utf-8", "replace")


def result_from_output(cmd: list[str], uart: str, stderr: str, returncode: int | None, timed_out: bool,
                       instructions: int | None) -> RenodeRun:
    """A RenodeRun from the UART's text: the firmware's exit line is its exit
    status; without it (Renode ended first, or the time limit), Renode's own."""
    found = _EXIT.findall(uart)
    code = int(found[-1]) if found else (returncode if returncode is not None else -9)
    return RenodeRun(stdout=uart, exit_code=code, timed_out=timed_out and not found, command=cmd, stderr=stderr,
                     stats={"instructions": instructions})


class RenodeRunner:
    """torchmcu.sim's Runner interface over Renode."""

    name = "renode"
    image = "firmware.elf"
    counts_instructions = False  # its ticks are virtual-time ticks; the run's total comes from the monitor

    def available(self, board: Board | str | None = None) -> bool:
        if find_renode() is None:
            return False
        return board is None or (board if isinstance(board, Board) else load_board(board)).renode is not None

    def run(self, board: Board | str, elf_path: str | Path, io_blob: bytes | None = None,
            timeout_s: float = 60) -> RenodeRun:
        b = board if isinstance(board, Board) else load_board(board)
        if b.renode is None:
            raise SimulatorNotFound(f"board {b.name} has no [renode] table: Renode does not run it here "
                                    "(boards with one: stm32f407vg, stm32l552ze)")
        exe = find_renode()
        if exe is None:
            raise SimulatorNotFound(f"renode not found on PATH (or ${RENODE_ENV}); install Renode "
                                    "(https://renode.io, e.g. its portable Linux tarball) and put it on PATH")
        elf = Path(elf_path).resolve()
        if not elf.is_file():
            raise FileNotFoundError(f"firmware image {elf} does not exist")
        check_io_blob(b, io_blob)
        with tempfile.TemporaryDirectory(prefix="tmcu-renode-") as tmp:
            blob = None
            if io_blob:
                blob = Path(tmp) / "io.bin"
                blob.write_bytes(io_blob)
            uart = Path(tmp) / "uart.txt"
            resc = Path(tmp) / "run.resc"
            resc.write_text(script(b, elf, blob, uart))
            port = _free_port()
            cmd = command(exe, resc, port)
            return _drive(cmd, Path(tmp), uart, port, timeout_s)


def _drive(cmd: list[str], cwd: Path, uart: Path, port: int, timeout_s: float) -> RenodeRun:
    """Runs Renode until the firmware's exit line, Renode's end or the time
    limit; then the instruction count and quit over the monitor."""
    log = (cwd / "renode.log").open("w+b")
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=cwd)
    deadline = time.monotonic() + timeout_s
    timed_out = False
    text = ""
    try:
        while True:
            text = uart.read_text("utf-8", "replace") if uart.is_file() else ""
            if _EXIT.search(text) or proc.poll() is not None:
                break
            if time.monotonic() > deadline:
                timed_out = True
                break
            time.sleep(0.05)
        instructions = None
        if proc.poll() is None:
            replies = _monitor(port, ["pause", "cpu ExecutedInstructions", "quit"])
            instructions = parse_monitor_number(replies[1]) if len(replies) > 1 else None
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        log.seek(0)
        stderr = log.read().decode("utf-8", "replace")
        log.close()
    text = uart.read_text("utf-8", "replace") if uart.is_file() else text
    return result_from_output(cmd, text, stderr, proc.returncode, timed_out, instructions)
