"""The fuzz findings of tests/fuzz_regressions (version 1 programs, which the
runtime now refuses by their version) converted to the current format (their
description decoded, the version set, the executable section derived by
serialize.to_pte; names that were not UTF-8 decoded with replacement), and
replayed on the host runner (AddressSanitizer + UBSan) with one sample. The
stored files are version 2; each is brought to the current version when it
runs (the tree decoded, the version set, the executable section derived
again): none has an op whose arguments changed layout since.

Each must run without a sanitizer finding. Those whose fault is in the
program's structure or parameters are refused when the method loads, as
before. One is not: linear_s8-bias-overflow's fault is a bias *value*, and
values are data the load no longer reads; its kernel sees the value out of
range and outputs zeros (tests/test_runtime_features.py checks that on a
program of its own); here it must run cleanly.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from torchmcu.program import schema, serialize
from torchmcu.sim.runner import io_blob

FINDINGS = sorted((Path(__file__).parent / "fuzz_regressions" / "v2").glob("*.pte"))
RUNS_CLEANLY = {"linear_s8-bias-overflow"}


def one_sample(pte: bytes) -> list[np.ndarray]:
    """Plausible values for each model input: an int8 ramp, or floats in [-2, 2]."""
    out = []
    for t in schema.decode(pte, derived=True)["exec"]["inputs"]:
        dims = t["dims"][:t["rank"]]
        if t["dtype"] == "I8":
            out.append((np.arange(t["nbytes"]) * 37 + 11).astype(np.uint8).view(np.int8).reshape(dims))
        else:
            out.append(np.linspace(-2, 2, t["nbytes"] // 4, dtype=np.float32).reshape(dims))
    return out


def current_version(pte: bytes) -> bytes:
    """A stored program at the version the runtime reads now."""
    tree = schema.decode(pte)
    segment = pte[tree["constant_offset"]:]
    tree = {k: v for k, v in tree.items() if k not in ("exec", "constant_offset")}
    return serialize.to_pte(dict(tree, version=serialize.PROGRAM_VERSION), segment)


@pytest.mark.parametrize("program", FINDINGS, ids=[p.stem for p in FINDINGS])
def test_converted_finding_runs_clean(program: Path, host_runner: Path, tmp_path: Path) -> None:
    pte = current_version(program.read_bytes())
    (tmp_path / program.name).write_bytes(pte)
    io = tmp_path / "io.bin"
    io.write_bytes(io_blob([one_sample(pte)]))
    proc = subprocess.run([str(host_runner), str(tmp_path / program.name), str(io)], capture_output=True, text=True,
                          timeout=60, check=False)
    assert "AddressSanitizer" not in proc.stderr and "runtime error" not in proc.stderr, proc.stderr[-2000:]
    if program.stem in RUNS_CLEANLY:
        assert proc.returncode == 0 and "tmcu: done status=0 samples=1" in proc.stdout, proc.stdout[-500:]
    else:
        assert 0x20 <= proc.returncode <= 0x24, (proc.returncode, proc.stdout[-500:])
        assert f"tmcu: load status={proc.returncode} " in proc.stdout


def test_there_are_converted_findings() -> None:
    assert len(FINDINGS) == len(list((Path(__file__).parent / "fuzz_regressions").glob("*.pte")))
