"""The host runner as a simulator: the same runtime and kernels built for
this machine with AddressSanitizer and UBSan (torchmcu.builder.host), run
on the program file. No instruction counts: its ticks are not an
instruction clock."""

from __future__ import annotations

from pathlib import Path

from ..boards import Board
from ..builder.host import build_host_runner
from .base import SimResult, run_with_blob


class HostRunner:
    name = "host"
    image = "model.pte"
    counts_instructions = False

    def available(self) -> bool:
        return True

    def run(self, board: Board | str, program: str | Path, io_blob: bytes | None = None,
            timeout_s: float = 60) -> SimResult:
        exe = build_host_runner()
        program = Path(program).resolve()  # the runner runs in a temporary directory
        if not program.is_file():
            raise FileNotFoundError(f"program {program} does not exist")
        cmd, out, err, code, timed_out = run_with_blob(
            "tmcu-host-", io_blob, lambda blob: [str(exe), str(program), str(blob)], timeout_s)
        if err.strip():  # sanitizer reports: kept with the output, as a failed run shows them
            out += "\n" + err
        return SimResult(stdout=out, exit_code=code, timed_out=timed_out, command=cmd, stderr=err)
