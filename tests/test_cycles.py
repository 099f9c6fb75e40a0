"""The cycle model (torchmcu.sim.cycles) against the cores' manuals.

Microbenchmarks: small assembly sequences built with arm-none-eabi-gcc, run in
QEMU with its log on, priced by the model. Each expected figure is the
manual's arithmetic written out (the table rows cite the sections): the model
must give exactly that. A sequence is a function `bench` called once; its
figure runs from bench's first block to the block after its return, so it
includes the closing BX LR (1 + P, P = 2 taken as the refill: the manuals'
1..3, cores/*.toml).

Then a model as users run it: compile, build and `run --profile` on the
NUCLEO-L4R5ZI board file (its M4 on QEMU's mps2-an386 stand-in): the ms line,
cycles per op in profile.json, profile.png, and the traced instructions of
one inference equal to QEMU's own -icount count (so no block went unlogged).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, needs_arm_gcc, needs_qemu
from torchmcu.boards import load_board
from torchmcu.sim import get_runner
from torchmcu.sim.cycles import TraceParser, available_cores, board_memories, core_timing
from torchmcu.sim.cycles.isa import decode, disassemble
from torchmcu.sim.cycles.model import price_block

BX_LR = 1 + 2  # the closing return: a taken branch, 1 + P


def _build(tmp: Path, board_name: str, body: str, data: str = "") -> tuple[Path, dict[str, int]]:
    board = load_board(board_name)
    code = board.memory(board.code_memory).base
    ram = board.memory(board.data_memory).base
    mve = board.core.mve != "none"
    src = f"""
  .syntax unified
  .thumb
  .section .vectors,"a"
  .word {ram + 0x8000:#x}
  .word reset + 1
  .text
  .thumb_func
reset:
  ldr r0, =0xe000ed88          @ CPACR: CP10/CP11 full access (FPU, MVE)
  ldr r1, [r0]
  orr r1, r1, #(0xf << 20)
  str r1, [r0]
  dsb
  isb
  ldr r1, =buf
  movs r0, #7
  movs r6, #3
  bl bench
  .thumb_func
after:
  movs r0, #0x18               @ semihosting SYS_EXIT, ADP_Stopped_ApplicationExit
  ldr r1, =0x20026
  bkpt 0xab
  b .
  .ltorg
  .balign 8
  .thumb_func
bench:
{body}
  bx lr
  .ltorg
  .data
  .balign 16
buf:
  .word buf, 0, 0, 0, 0, 0, 0, 0
{data}
"""
    (tmp / "b.S").write_text(src)
    (tmp / "b.ld").write_text(f"ENTRY(reset)\nSECTIONS {{\n .text {code:#x} : {{ KEEP(*(.vectors)) *(.text*) }}\n"
                              f" .data {ram:#x} : {{ *(.data*) }}\n}}\n")
    elf = tmp / "b.elf"
    subprocess.run(["arm-none-eabi-gcc", f"-mcpu={board.cpu}", "-mthumb", "-mfloat-abi=hard" if board.core.has_fpu or mve
                    else "-mfloat-abi=soft", "-nostdlib", "-T", str(tmp / "b.ld"), "-o", str(elf), str(tmp / "b.S")],
                   check=True, capture_output=True, text=True)
    nm = subprocess.run(["arm-none-eabi-nm", str(elf)], capture_output=True, text=True, check=True).stdout
    syms = {p[2]: int(p[0], 16) & ~1 for p in (line.split() for line in nm.splitlines()) if len(p) == 3}
    return elf, syms


def measure(tmp: Path, board_name: str, body: str, data: str = "") -> tuple[int, int, int]:
    """(cycles at zero wait states, wait-state cycles, instructions) of bench, its return included."""
    board = load_board(board_name)
    elf, syms = _build(tmp, board_name, body, data)
    parser = TraceParser(core_timing(board.cpu), board_memories(board), {syms["bench"], syms["after"]},
                         disassemble(str(elf), board.cpu))
    res = get_runner("qemu").run_traced(board, elf, None, parser, timeout_s=30)
    assert res.exit_code == 0, res.stdout + res.stderr
    marks = parser.finish().marks
    start = next(m for m in marks if m[0] == syms["bench"])
    end = next(m for m in marks if m[0] == syms["after"])
    return end[1] - start[1], end[3] - start[3], end[2] - start[2]


def rept(n: int, text: str) -> str:
    return "\n".join(f"  {line}" for _ in range(n) for line in text.strip().splitlines())


# -- Cortex-M4 (mps2-an386) ------------------------------------------------------------------------------------
# Cortex-M4 TRM (ARM DDI 0439B) 3.3.1 Table 3-1 and 3.3.2, the rows of cores/cortex-m4.toml.

M4_CASES = {
    # 3.3.2: neighbouring loads pipeline: the first 2 cycles, each next one 1.
    "independent loads": (rept(1, "ldr r2, [r1, #4]\nldr r3, [r1, #8]\nldr r4, [r1, #12]\nldr r5, [r1, #16]\n"
                                  "ldr r2, [r1, #20]\nldr r3, [r1, #24]\nldr r4, [r1, #28]\nldr r5, [r1, #4]"),
                          2 + 7 * 1),
    # A load whose address is the previous load's result cannot pipeline: 2 each (buf holds its own address).
    "dependent loads": (rept(8, "ldr r1, [r1]"), 8 * 2),
    # Table 3-1: B taken 1 + P; each branch ends a block.
    "taken branches": ("\n".join(f"  b.n 1f\n1:" for _ in range(4)), 4 * (1 + 2)),
    # Conditional branches over a NOP: CMP 1, then 1 + P taken (the NOP skipped) ...
    "conditional taken": ("\n".join("  cmp r0, r0\n  beq.n 1f\n  nop\n1:" for _ in range(4)), 4 * (1 + 1 + 2)),
    # ... and 1 not taken (then the NOP, 1).
    "conditional not taken": ("\n".join("  cmp r0, r0\n  bne.n 1f\n  nop\n1:" for _ in range(4)), 4 * (1 + 1 + 1)),
    # Table 3-1: SMLAD 1 (single-cycle MAC), the accumulator chained.
    "smlad chain": (rept(8, "smlad r0, r2, r3, r0"), 8 * 1),
    # Table 3-1: UDIV 2..12 by the operands (early termination): the model's stated assumption is 12.
    "udiv": ("  udiv r2, r6, r0", 12),
    # Table 3-1: LDM 1 + N, N = 6; STM 1 + N, N = 4.
    "ldm stm": ("  ldm r1, {r2-r7}\n  stm r1, {r2-r5}", (1 + 6) + (1 + 4)),
    # Table 3-1: PUSH 1 + N, POP 1 + N (N = 3, no PC).
    "push pop": ("  push {r4, r5, r6}\n  pop {r4, r5, r6}", (1 + 3) + (1 + 3)),
    # 3.3.2: an address from the preceding data-processing result stalls one more cycle.
    "address generation stall": ("  adds r2, r1, #4\n  ldr r3, [r2]", 1 + (2 + 1)),
}


@needs_qemu
@needs_arm_gcc
@pytest.mark.parametrize("case", list(M4_CASES))
def test_m4_microbenchmarks_match_the_manual(tmp_path, case) -> None:
    body, manual = M4_CASES[case]
    cycles, _, _ = measure(tmp_path, "mps2-an386", body)
    assert cycles == manual + BX_LR, f"{case}: model {cycles - BX_LR}, manual {manual}"


@needs_qemu
@needs_arm_gcc
def test_m33_takes_the_m4_rows(tmp_path) -> None:
    """The M33 has no published timing table: its rows are the M4's (cores/cortex-m33.toml)."""
    body, manual = M4_CASES["independent loads"]
    assert measure(tmp_path, "mps2-an505", body)[0] == manual + BX_LR
    body, manual = M4_CASES["conditional taken"]
    assert measure(tmp_path, "mps2-an505", body)[0] == manual + BX_LR


@needs_qemu
@needs_arm_gcc
def test_m3_multiplies_from_its_own_table(tmp_path) -> None:
    """Cortex-M3 TRM Table 3-1: MLA 2 (the M4's is 1), UMULL 3 to 5 (the model: 4); the rest the M4's."""
    assert measure(tmp_path, "mps2-an385", rept(4, "mla r2, r3, r4, r2"))[0] == 4 * 2 + BX_LR
    assert measure(tmp_path, "mps2-an385", rept(2, "umull r2, r3, r4, r5"))[0] == 2 * 4 + BX_LR
    body, manual = M4_CASES["dependent loads"]
    assert measure(tmp_path, "mps2-an385", body)[0] == manual + BX_LR


def test_a_core_without_a_table_gets_no_estimate() -> None:
    """The Cortex-M7 has no public instruction timings: no model, `run` prints instructions only."""
    from torchmcu.sim.cycles import has_model

    assert not has_model(load_board("mps2-an500"))
    assert all(has_model(load_board(b)) for b in ("mps2-an385", "mps2-an386", "mps2-an505", "mps3-an547",
                                                   "nucleo-l4r5zi", "nucleo-u575zi-q"))


# -- Cortex-M55 (mps3-an547) -----------------------------------------------------------------------------------
# The M55 SOG: an MVE instruction takes two beats in its pipe; the next instruction issues in the
# second beat unless it needs the same pipe.

@needs_qemu
@needs_arm_gcc
def test_m55_mve_beats_and_overlap(tmp_path) -> None:
    n = 4
    # VMLADAVA after VMLADAVA: the same (multiply) pipe: 2 cycles each; the return overlaps the last beat.
    chain, _, _ = measure(tmp_path, "mps3-an547", rept(n, "vmladava.s8 r0, q0, q1"))
    assert chain == 2 * n - 1 + BX_LR
    # With a scalar ADD between them, the ADD issues in each VMLADAVA's second beat: still 2 cycles a pair.
    mixed, _, _ = measure(tmp_path, "mps3-an547", rept(n, "vmladava.s8 r0, q0, q1\nadds r5, #1"))
    assert mixed == 2 * n + BX_LR
    # A load (load/store pipe) and a VMLADAVA (multiply pipe) overlap: one cycle each.
    overlap, _, _ = measure(tmp_path, "mps3-an547", rept(n, "vldrb.s8 q0, [r1]\nvmladava.s8 r0, q0, q1"))
    assert overlap == 2 * n + BX_LR
    # Two loads in a row share the load/store pipe: 2 cycles each.
    loads, _, _ = measure(tmp_path, "mps3-an547", rept(n, "vldrb.s8 q0, [r1]"))
    assert loads == 2 * n - 1 + BX_LR


# -- Wait states (NUCLEO-L4R5ZI: flash at 5 wait states, 64-bit reads) ---------------------------------------------

@needs_qemu
@needs_arm_gcc
def test_flash_wait_states_per_line_fetched(tmp_path) -> None:
    """8 NOPs and BX LR: 18 bytes from an 8-byte aligned start, three 64-bit flash lines at 5
    wait states each; a literal load from flash adds 5 more."""
    board = load_board("nucleo-l4r5zi")
    flash = board.memory("flash")
    assert (flash.wait_states, flash.line_bytes) == (5, 8)
    cycles, wait, insns = measure(tmp_path, "nucleo-l4r5zi", rept(8, "nop"))
    assert (cycles, insns) == (8 + BX_LR, 9)
    assert wait == 3 * 5
    cycles, wait, _ = measure(tmp_path, "nucleo-l4r5zi", "  ldr r2, =0x12345678\n" + rept(7, "nop"))
    assert cycles == 2 + 7 + BX_LR
    assert wait == 3 * 5 + 5


# -- The tables and the decoder, no simulator -------------------------------------------------------------------

def test_every_core_table_cites_every_row() -> None:
    assert {"cortex-m3", "cortex-m4", "cortex-m33", "cortex-m55"} <= set(available_cores())
    for cpu in available_cores():
        t = core_timing(cpu)
        assert t.manual and "other" in t.rows
        for cls, row in t.rows.items():
            assert row.cite.strip(), f"{cpu} {cls}: no citation"


def test_decoder_classes() -> None:
    cases = {("ldr.w", "r2, [r1, #4]"): "load", ("ldr", "r1, [pc, #0x1c]"): "load_literal",
             ("pop", "{r4, r5, pc}"): "ldm_pc", ("bne", "#0x18"): "branch", ("smlad", "r0, r2, r3, r0"): "mac",
             ("udiv", "r2, r6, r0"): "div", ("vldrb.s8", "q0, [r1]"): "mve_load",
             ("vmladava.s8", "r0, q0, q1"): "mve_reduce", ("vldr", "s0, [r1]"): "fp_load",
             ("vfma.f32", "s0, s1, s2"): "fp_mac", ("ldrd", "r2, r3, [r1]"): "load_dual", ("itt", "ne"): "it",
             ("movne", "r0, #1"): "alu", ("strb.w", "r0, [r1], #1"): "store", ("cbz", "r0, #0x40"): "cbz",
             ("vmov", "r0, r1, d0"): "fp_mov2", ("vmov", "s0, r1"): "fp_alu", ("addw", "r0, sp, #1024"): "alu"}
    for (mn, ops), cls in cases.items():
        assert decode(0, 4, mn, ops).cls == cls, (mn, ops)
    bne = decode(0x22, 2, "bne", "#0x18")
    assert bne.conditional and bne.target == 0x18
    # objdump's syntax (the ELF's disassembly, what the model reads): targets, comments, MVE aliases
    assert decode(0x22, 2, "bne.n", "18 <bench>").target == 0x18
    assert decode(0x54, 4, "le", "lr, 50 <bench+0x18>").cls == "loop_end"
    lit = decode(8, 2, "ldr", "r1, [pc, #28]	@ (28 <bench+0x10>)")
    assert lit.cls == "load_literal" and lit.writes == {"r1"}
    assert decode(0x38, 4, "vmlava.s8", "r0, q0, q1").cls == "mve_reduce"
    assert decode(0, 4, "ldr.w", "r1, [r1]").writes == {"r1"}  # a load into its own base: a dependent load


def test_block_pricing_conditional_branch() -> None:
    m4 = core_timing("cortex-m4")
    b = price_block([decode(0, 2, "subs", "r0, #1"), decode(2, 2, "bne", "#0x0")], m4)
    assert (b.cycles, b.conditional, b.taken, b.fallthrough) == (2, True, 2, 4)


# -- As users run it ---------------------------------------------------------------------------------------------

MODEL = '''
import torch
from torch import nn


def net():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1, groups=8), nn.ReLU(),
                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4))
    return m.eval(), (torch.randn(1, 3, 12, 12),)
'''


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "torchmcu.cli", *args], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PYTHONWARNINGS": "ignore", "TORCHMCU_PLOT": "1"}, check=False)


@needs_qemu
@needs_arm_gcc
def test_run_profile_gives_ms_and_cycles_per_op(tmp_path) -> None:
    (tmp_path / "m.py").write_text(MODEL)
    np.save(tmp_path / "cal.npy", np.random.default_rng(0).standard_normal((8, 1, 3, 12, 12)).astype(np.float32))
    np.save(tmp_path / "x.npy", np.random.default_rng(1).standard_normal((1, 3, 12, 12)).astype(np.float32))
    out = tmp_path / "out"
    for args in (["compile", f"{tmp_path / 'm.py'}:net", "--board", "nucleo-l4r5zi", "-o", str(out), "--quant", "int8",
                  "--calibration", str(tmp_path / "cal.npy")],
                 ["build", str(out)]):
        proc = cli(*args)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = cli("run", str(out), "--input", str(tmp_path / "x.npy"), "--check", "--profile")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ms at 120 MHz (estimate:" in proc.stdout and "with the board's wait states" in proc.stdout
    profile = json.loads((out / "profile.json").read_text())
    cyc = profile["cycles"]
    assert cyc["cpu"] == "cortex-m4" and cyc["clock_hz"] == 120_000_000
    assert cyc["inference_cycles_with_wait_states"] > cyc["inference_cycles"] > cyc["inference_instructions_traced"]
    # The log saw every instruction: one inference's traced count is QEMU's -icount count (the SysTick
    # reading: to 40 instructions, one tick of the stand-in's 25 MHz clock under shift=0).
    assert abs(cyc["inference_instructions_traced"] - profile["instructions"]) <= 200
    ops = profile["ops"]
    assert all(op["cycles"] > 0 and op["cycles_with_wait_states"] >= op["cycles"] for op in ops)
    assert sum(op["cycles"] for op in ops) < cyc["inference_cycles"]
    assert (out / "profile.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert cyc["inference_ms"] == pytest.approx(cyc["inference_cycles"] / 120e3)
    # The compile report gains the latency (a rebuild drops it: it is the old image's).
    assert json.loads((out / "report.json").read_text())["latency"]["inference_cycles"] == cyc["inference_cycles"]
    text = (out / "report.txt").read_text()
    assert text.count("Latency (torchmcu run, estimate):") == 1 and "ms at 120 MHz" in text.split("Latency")[-1]
