"""The user's path through the command line: compile, build, run, inspect."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, needs_arm_gcc, needs_qemu

TORCHMCU = [sys.executable, "-m", "torchmcu.cli"]


def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([*TORCHMCU, *args], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"})
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("digits")
    cli("compile", "examples/digits.py:make", "--board", "mps3-an547", "-o", str(out))
    return out


def test_compile_writes_every_artefact(compiled: Path) -> None:
    for name in ["model.pte", "model_pte.c", "model_pte.h", "model_arenas.c", "model_arenas.h",
                 "kernel_table.cc", "kernels.txt", "memory_plan.json", "report.json", "report.txt"]:
        assert (compiled / name).is_file(), name
    report = json.loads((compiled / "report.json").read_text())
    assert [(op["name"], op["backend"]) for op in report["ops"]] == [
        ("linear", "portable"), ("linear_1", "portable"), ("linear_2", "portable")]
    assert all("name" in op and "backend" in op for op in report["ops"])
    c_array = (compiled / "model_pte.c").read_text()
    assert '.rodata.tmcu_program' in c_array and "aligned(16)" in c_array


def test_inspect_prints_ops_tensors_and_memory(compiled: Path) -> None:
    out = cli("inspect", str(compiled / "model.pte"), "--values").stdout
    assert "arenas:" in out and "linear_weight" in out
    assert out.count("LINEAR_F32") == 3
    assert "const +0" in out  # constants live in the constant segment


@needs_qemu
@needs_arm_gcc
def test_build_and_run_json_check(compiled: Path, tmp_path: Path) -> None:
    build = cli("build", str(compiled)).stdout
    assert "firmware.elf" in build and "text" in build
    sys.path.insert(0, str(REPO / "examples"))
    import digits

    x, _ = digits.test_set()
    np.save(tmp_path / "x.npy", x[:1])
    proc = cli("run", str(compiled), "--sim", "qemu", "--input", str(tmp_path / "x.npy"), "--json", "--check")
    result = json.loads(proc.stdout)
    assert result["exit_code"] == 0
    assert np.asarray(result["outputs"][0]).shape == (1, 10)  # as PyTorch gives it
    assert result["instructions"] > 0
    assert [op["name"] for op in result["ops"]] == ["linear", "linear_1", "linear_2"]
    assert all(op["instructions"] > 0 for op in result["ops"])
    assert result["check"]["passed"] is True
    profiled = cli("run", str(compiled), "--sim", "qemu", "--profile").stdout
    assert "instructions per inference" in profiled
    profile = json.loads((compiled / "profile.json").read_text())
    counts = [op["instructions"] for op in profile["ops"]]
    assert counts == sorted(counts, reverse=True) and len(counts) == 3


def test_check_fails_naming_the_element(compiled: Path, tmp_path: Path) -> None:
    """A program whose weights were changed after compiling no longer matches
    PyTorch: --check exits non-zero and names the first differing element."""
    import shutil

    from torchmcu.program import schema

    bad = tmp_path / "bad"
    shutil.copytree(compiled, bad)
    pte = bytearray((bad / "model.pte").read_bytes())
    prog = schema.decode(bytes(pte))
    bias = next(t for t in prog["tensors"] if t["name"] == "linear_2_bias")
    at = prog["constant_offset"] + bias["offset"] + 4 * 3  # the bias of class 3
    pte[at:at + 4] = np.float32(1e3).tobytes()
    (bad / "model.pte").write_bytes(bytes(pte))
    proc = cli("run", str(bad), "--sim", "host", "--check", check=False)
    assert proc.returncode == 1
    assert "output 0 differs at sample 0, element [0, 3]" in proc.stderr


def test_unknown_board_is_a_clear_error(tmp_path: Path) -> None:
    proc = cli("compile", "examples/digits.py:make", "--board", "no-such-board", "-o", str(tmp_path), check=False)
    assert proc.returncode == 2
    assert "no-such-board" in proc.stderr and "mps3-an547" in proc.stderr
    assert "Traceback" not in proc.stderr
