"""Boards as a user meets them: `torchmcu boards` shows each core and its
memories, a board file of one's own (examples/boards/stm32f446re.toml, a part
QEMU does not model) compiles and builds with its RAM and stack accounted
for, "does not fit" errors suggest int8 only to a model that is not int8,
and a part that lands in a slow or off-chip memory is said so."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import REPO, needs_arm_gcc
from torch import nn
from torchmcu.boards import BoardError, list_boards, load_board
from torchmcu.compiler import compile
from torchmcu.errors import CompileError

STM32 = REPO / "examples" / "boards" / "stm32f446re.toml"


def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "torchmcu", *args], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PYTHONWARNINGS": "ignore", "TORCHMCU_PLOT": "0"})
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def test_boards_lists_core_extensions_and_memories() -> None:
    out = cli("boards").stdout
    for name in list_boards(arch=None):
        board = load_board(name)
        block = out.split(f"{name}: ", 1)[1].split("\n\n", 1)[0]
        for m in board.memories:
            assert re.search(rf"memory\s+{m.name}\s+0x{m.base:08x}\s", block), (name, m.name)
        assert "core" in block
    an547 = out.split("mps3-an547: ", 1)[1].split("\n\n", 1)[0]
    assert "Cortex-M55" in an547 and "MVE int+float" in an547 and "DSP" in an547
    assert re.search(r"memory\s+ddr\s+0x60000000\s+.*off-chip", an547)
    assert re.search(r"memory\s+dtcm\s+0x20000000\s+512 KiB", an547)
    own = cli("boards", str(STM32)).stdout
    assert "Cortex-M4, 180 MHz; FPU (fpv4-sp-d16, hard float ABI), DSP" in own
    assert re.search(r"memory\s+flash\s+0x08000000\s+512 KiB", own) and re.search(r"memory\s+sram\s+0x20000000\s+128 KiB",
                                                                                own)
    assert "QEMU does not run it" in own


@needs_arm_gcc
def test_own_board_file_compiles_and_builds(tmp_path: Path) -> None:
    out = tmp_path / "f446"
    cli("compile", "examples/digits.py:make", "--board", str(STM32), "-o", str(out), "--quant", "int8")
    meta = json.loads((out / "model.json").read_text())
    assert meta["board"] == str(STM32) and meta["arenas"][0]["name"] == "sram"
    printed = cli("build", str(out)).stdout
    record = json.loads((out / "size.json").read_text())
    assert f"RAM {record['ram']['total']:,} B = arenas" in printed
    assert record["ram"]["total"] < 8 * 1024  # no fixed 64 KiB stack: the digits MLP in a few KiB
    assert record["stack"]["computed_bytes"] is not None
    ram = [s for s in record["ram"]["sections"].values()]
    assert all(0x20000000 <= s["address"] < 0x20020000 for s in ram)  # every RAM byte in the part's SRAM
    proc = cli("run", str(out), "--sim", "qemu", check=False)
    assert proc.returncode == 2 and "no [qemu] table" in proc.stderr and "Traceback" not in proc.stderr


def test_board_file_needs_external_as_bool(tmp_path: Path) -> None:
    text = STM32.read_text().replace('holds = ["data", "bss", "stack", "arena"]',
                                     'holds = ["data", "bss", "stack", "arena"]\nexternal = "yes"')
    bad = tmp_path / "bad.toml"
    bad.write_text(text)
    with pytest.raises(BoardError, match="external"):
        load_board(bad)


def _big_linear(n_in: int, n_out: int) -> tuple[nn.Module, tuple[torch.Tensor]]:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(n_in, n_out)).eval(), (torch.randn(1, n_in),)


def test_program_too_large_suggests_int8_only_to_float(tmp_path: Path) -> None:
    model, x = _big_linear(512, 300)  # 614 KB of float weights; the part has 512 KiB of flash
    with pytest.raises(CompileError, match=r"--quant int8"):
        compile(model, x, str(STM32), tmp_path / "f", progress=False)
    model, x = _big_linear(1024, 700)  # 717 KB at int8: quantizing is no answer
    with pytest.raises(CompileError) as e:
        compile(model, x, str(STM32), tmp_path / "q", quant="int8", progress=False)
    assert "does not fit" in str(e.value) or "no memory" in str(e.value)
    assert "--quant int8" not in str(e.value)


class Wide(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x)).mean((2, 3))


def test_arenas_too_large_suggest_int8_only_to_float(tmp_path: Path) -> None:
    torch.manual_seed(0)
    x = torch.randn(1, 3, 96, 96)  # float: 110 KiB in, 576 KiB out of the conv
    with pytest.raises(CompileError, match=r"does not fit.*quantize \(--quant int8\)"):
        compile(Wide().eval(), (x,), str(STM32), tmp_path / "f", progress=False)
    x = torch.randn(1, 3, 128, 128)  # int8: 256 KiB out of the conv, more than the part's RAM
    calib = {"x": np.random.RandomState(0).randn(2, 1, 3, 128, 128).astype(np.float32)}
    with pytest.raises(CompileError, match="does not fit") as e:
        compile(Wide().eval(), (x,), str(STM32), tmp_path / "q", quant="int8", io="int8", calibration=calib,
                progress=False)
    assert "--quant int8" not in str(e.value)


def test_program_in_off_chip_memory_is_said(tmp_path: Path, capsys) -> None:
    model, x = _big_linear(512, 300)  # 614 KB: beyond the M55's ITCM beside the code, so to its DDR
    c = compile(model, x, "mps3-an547", tmp_path, progress=True)
    err = capsys.readouterr().err
    assert re.search(r"torchmcu: note: the program \([\d,]+ B\) does not fit beside the code in itcm .* goes to "
                     r"ddr, off-chip", err), err
    parts = {p["part"]: p for p in c.report["placement"]["parts"]}
    assert parts["program"]["memory"] == "ddr" and parts["program"]["kind"] == "off-chip"
    text = (tmp_path / "report.txt").read_text()
    assert "Where each part went:" in text and re.search(r"program\s+[\d,]+ B\s+-> ddr \(off-chip", text)
    small, xs = _big_linear(8, 4)
    c = compile(small, xs, "mps3-an547", tmp_path / "small", progress=True)
    assert c.report["placement"]["notes"] == [] and "note:" not in capsys.readouterr().err


def test_mlperf_tiny_reference_boards_clock_wait_states_and_stand_in(tmp_path: Path) -> None:
    """NUCLEO-L4R5ZI and NUCLEO-U575ZI-Q: the parts' clocks, flash wait states at those clocks
    (RM0432: 5 at 120 MHz, range 1 boost; RM0456: 4 at 160 MHz, range 1) and memory sizes, run on
    QEMU's mps2 stand-ins, whose own clock converts SysTick readings to instructions."""
    for name, cpu, mhz, machine, qemu_mhz, ws, line, flash, sram in (
            ("nucleo-l4r5zi", "cortex-m4", 120, "mps2-an386", 25, 5, 8, 2 << 20, 640 << 10),
            ("nucleo-u575zi-q", "cortex-m33", 160, "mps2-an505", 20, 4, 16, 2 << 20, (768 + 16) << 10)):
        b = load_board(name)
        assert (b.cpu, b.clock_hz, b.qemu_machine, b.qemu_clock_hz) == (cpu, mhz * 10**6, machine, qemu_mhz * 10**6)
        assert b.qemu_stand_in and b.instructions_per_tick == 1000 // qemu_mhz
        code = b.memory(b.code_memory)
        assert (code.wait_states, code.line_bytes, code.size) == (ws, line, flash)
        assert sum(m.size for m in b.memories if m.kind == "ram") == sram
        assert all(m.wait_states == 0 for m in b.memories if m.kind == "ram")
        block = cli("boards").stdout.split(f"{name}: ", 1)[1].split("\n\n", 1)[0]
        assert f"{ws} wait states ({line}-byte reads)" in block and "a stand-in" in block
    bad = (REPO / "boards" / "nucleo-l4r5zi.toml").read_text().replace("line_bytes = 8", "line_bytes = 3")
    (tmp_path / "bad.toml").write_text(bad)
    with pytest.raises(BoardError, match="line_bytes"):
        load_board(tmp_path / "bad.toml")
    assert load_board("mps2-an386").qemu_clock_hz == 0 and not load_board("mps2-an386").qemu_stand_in
