"""Arm's Corstone ecosystem FVPs as a torchmcu simulator.

    FVP_Corstone_SSE-300_Ethos-U55, FVP_Corstone_SSE-300_Ethos-U65   (MPS3)
    FVP_Corstone_SSE-310, FVP_Corstone_SSE-310_Ethos-U65              (MPS3)
    FVP_Corstone_SSE-320                                              (MPS4)

The FVP named by a board's [fvp] table is looked for in TORCHMCU_FVP_DIR (the
install directory or any folder below it, e.g. .../models/Linux64_GCC-9.3),
then on PATH. Its parameters (component names differ between the MPS3 and
MPS4 systems) come from the platform files sim/fvp/*.toml; the command adds
the NPU's MAC count from the board's accelerator, the ELF, the io blob
loaded at the board's io window with --data, a --timelimit in host seconds,
and --stat for the simulated time and instruction counts at the end.

Output is the firmware's line protocol (firmware/app/app.h, parsed by
torchmcu.sim.runner.parse_protocol). In a profiled run the app prints, after the
op line of each Ethos-U call, what the delegate measured with the NPU's PMU
(firmware/delegates/ethos_u/ethos_u.cc):

    tmcu: npu <partition> cycles=<n> [<event>=<n> ...] [runs=<r>]

`cycles` is the PMU cycle counter over the call; further fields are the PMU
event counters the delegate configured, by name (sram_rd_beats,
sram_wr_beats, ext_rd_beats: data beats on the NPU's SRAM and external
ports). With runs=r the figures are sums over r calls; parse_npu returns
means.
"""

from __future__ import annotations

import math
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomllib

from ..boards import Board, load_board
from ..sources import SIM_DIR
from .base import IoBlobTooLarge, SimResult, SimulatorNotFound, run_with_blob

__all__ = [
    "FVP_DIR_ENV",
    "MODELS",
    "FvpModel",
    "FvpRun",
    "FvpRunner",
    "find_fvp",
    "fvp_available",
    "parse_npu",
    "parse_stats",
]

FVP_DIR_ENV = "TORCHMCU_FVP_DIR"


@dataclass(frozen=True)
class FvpModel:
    cpu: str  # the CPU instance (--data)
    npu: str | None  # the Ethos-U instance (num_macs)
    params: tuple[str, ...]  # -C parameters before the NPU's
    extra: tuple[str, ...] = ()  # -C parameters after it


def _load_models() -> dict[str, FvpModel]:
    """The FVPs sim/fvp/*.toml describe, by executable name."""
    models: dict[str, FvpModel] = {}
    for path in sorted((SIM_DIR / "fvp").glob("*.toml")):
        for system in tomllib.loads(path.read_text()).values():
            m = FvpModel(system["cpu"], system.get("npu"), tuple(system["params"]), tuple(system.get("extra", ())))
            models.update({name: m for name in system["models"]})
    return models


MODELS: dict[str, FvpModel] = _load_models()


def find_fvp(executable: str) -> Path | None:
    """The FVP executable: in TORCHMCU_FVP_DIR (searched below it), else on PATH."""
    root = os.environ.get(FVP_DIR_ENV)
    if root:
        base = Path(root)
        direct = base / executable
        candidates = [direct] if direct.is_file() else sorted(base.rglob(executable))
        for c in candidates:
            if c.is_file() and os.access(c, os.X_OK):
                return c
    found = shutil.which(executable)
    return Path(found) if found else None


def fvp_available(board: Board | str) -> bool:
    b = board if isinstance(board, Board) else load_board(board)
    return b.fvp_model is not None and find_fvp(b.fvp_model) is not None


def _macs(board: Board) -> int | None:
    if board.npu is None:
        return None
    return int(board.npu.accelerator.rsplit("-", 1)[1])


def command(board: Board, executable: str | Path, elf: str | Path, io_blob: str | Path | None = None,
            timeout_s: float = 60) -> list[str]:
    """The FVP command line for running `elf` on `board`."""
    if board.fvp_model not in MODELS:
        raise ValueError(f"board {board.name}: no known FVP ({board.fvp_model!r}); known: {', '.join(MODELS)}")
    m = MODELS[board.fvp_model]
    params = list(m.params)
    macs = _macs(board)
    if m.npu is not None and macs is not None:
        params.append(f"{m.npu}.num_macs={macs}")
    params += list(m.extra)
    cmd = [str(executable)]
    for p in params:
        cmd += ["-C", p]
    cmd += ["-a", str(elf)]
    if io_blob is not None:
        cmd += ["--data", f"{m.cpu}={io_blob}@0x{board.io_base:08x}"]
    cmd += ["--timelimit", str(max(1, math.ceil(timeout_s))), "--stat"]
    return cmd


# ---------------------------------------------------------------------------------------------
# Output

_NPU_LINE = re.compile(r"^tmcu: npu (\d+)((?: \w+=\d+)*)\s*$")
_STAT_TIME = re.compile(r"^Simulated time\s*:\s*([0-9.]+)\s*s", re.MULTILINE)
_STAT_CPU = re.compile(r"^(\S+)\s*:\s*[0-9.]+\s*MIPS\s*\(\s*(\d+)\s*Inst\)", re.MULTILINE)
_STOPPING = re.compile(r"Simulation is stopping\. Reason: (.*)")
_LIMIT = re.compile(r"time limit|CPU time has been exceeded", re.IGNORECASE)


def parse_npu(text: str) -> dict[int, dict[str, float]]:
    """Per partition, the mean of each PMU figure over the calls printed."""
    sums: dict[int, dict[str, float]] = {}
    for line in text.splitlines():
        m = _NPU_LINE.match(line.strip())
        if not m:
            continue
        fields = dict(f.split("=", 1) for f in m.group(2).split())
        runs = max(1, int(fields.pop("runs", 1)))
        acc = sums.setdefault(int(m.group(1)), {})
        acc["calls"] = acc.get("calls", 0) + runs
        for k, v in fields.items():
            acc[k] = acc.get(k, 0) + int(v)
    return {p: {k: (v if k == "calls" else v / acc["calls"]) for k, v in acc.items()} for p, acc in sums.items()}


def parse_stats(text: str) -> dict[str, Any]:
    """--stat's summary: simulated seconds and instructions per CPU; and why
    the simulation stopped, when the FVP said."""
    out: dict[str, Any] = {"simulated_seconds": None, "instructions": {}, "stop_reason": None}
    t = _STAT_TIME.search(text)
    if t:
        out["simulated_seconds"] = float(t.group(1))
    out["instructions"] = {name: int(n) for name, n in _STAT_CPU.findall(text)}
    s = _STOPPING.search(text)
    if s:
        out["stop_reason"] = s.group(1).strip()
    return out


@dataclass
class FvpRun(SimResult):
    stats: dict[str, Any] = field(default_factory=dict)
    npu: dict[int, dict[str, float]] = field(default_factory=dict)


def result_from_output(cmd: list[str], stdout: str, stderr: str, returncode: int, killed: bool) -> FvpRun:
    """An FvpRun from what the FVP printed. The firmware's own status line
    ("tmcu: done status=N") is its exit code when present: FVPs do not all
    pass a semihosting exit status on as their own."""
    stats = parse_stats(stdout + "\n" + stderr)
    reason = stats["stop_reason"] or ""
    timed_out = killed or bool(_LIMIT.search(reason))
    done = re.findall(r"^tmcu: done status=(\d+)", stdout, re.MULTILINE)
    code = int(done[-1]) if done and not timed_out else returncode
    return FvpRun(stdout=stdout, exit_code=code, timed_out=timed_out, command=cmd, stderr=stderr, stats=stats,
                  npu=parse_npu(stdout))


class FvpRunner:
    """torchmcu.sim's Runner interface over the board's FVP."""

    name = "fvp"
    image = "firmware.elf"
    counts_instructions = False  # an FVP is not an -icount clock: ticks stay ticks

    def available(self, board: Board | str | None = None) -> bool:
        if board is None:
            return any(find_fvp(exe) is not None for exe in MODELS)
        return fvp_available(board)

    def run(self, board: Board | str, elf_path: str | Path, io_blob: bytes | None = None,
            timeout_s: float = 60) -> FvpRun:
        b = board if isinstance(board, Board) else load_board(board)
        if b.fvp_model is None:
            raise SimulatorNotFound(f"board {b.name} names no FVP (no [fvp] table)")
        exe = find_fvp(b.fvp_model)
        if exe is None:
            raise SimulatorNotFound(
                f"{b.fvp_model} not found in ${FVP_DIR_ENV} or on PATH; install Arm's Corstone ecosystem FVP "
                f"and set {FVP_DIR_ENV} to its directory")
        elf = Path(elf_path).resolve()  # the simulator runs in a temporary directory
        if not elf.is_file():
            raise FileNotFoundError(f"firmware image {elf} does not exist")
        if io_blob is not None and len(io_blob) > b.io_size:
            raise IoBlobTooLarge(f"io blob is {len(io_blob)} bytes but board {b.name!r} has an io window of "
                                 f"{b.io_size} bytes at 0x{b.io_base:08x}")
        # --timelimit stops the model; the host-side limit is the backstop.
        cmd, out, err, code, killed = run_with_blob(
            "tmcu-fvp-", io_blob, lambda blob: command(b, exe, elf, blob, timeout_s), timeout_s + 30)
        return result_from_output(cmd, out, err, code, killed)
