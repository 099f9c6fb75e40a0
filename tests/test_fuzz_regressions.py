"""Programs the fuzzer once crashed the runtime with, replayed on the host
runner (AddressSanitizer + UBSan): each must now be refused at load with a
program error, never crash. Named after what they broke."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from torchmcu.sim.runner import io_blob

FINDINGS = sorted((Path(__file__).parent / "fuzz_regressions").glob("*.pte"))


@pytest.mark.parametrize("program", FINDINGS, ids=[p.stem for p in FINDINGS])
def test_fuzz_finding_is_refused(program: Path, host_runner: Path, tmp_path: Path) -> None:
    io = tmp_path / "io.bin"
    # Whatever inputs the program has, give it one sample of plausible bytes;
    # the load must fail before any sample runs.
    io.write_bytes(io_blob([]))
    proc = subprocess.run([str(host_runner), str(program), str(io)], capture_output=True, text=True, timeout=60)
    assert "AddressSanitizer" not in proc.stderr and "runtime error" not in proc.stderr, proc.stderr[-2000:]
    assert 0x20 <= proc.returncode <= 0x24, (proc.returncode, proc.stdout[-500:])
    assert "tmcu: load status=" in proc.stdout


def test_there_are_findings() -> None:
    assert len(FINDINGS) >= 8
