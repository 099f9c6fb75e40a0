"""A cycle model: a QEMU run's executed instructions, each priced by its
core's manual, and the milliseconds that makes at the board's clock.

QEMU's -icount figures count instructions, not cycles. Here QEMU logs every
block it executes (trace.py); each block is priced once from the core's
timing table (cores/<cpu>.toml: one row per class of instruction, the
manual's section cited for each; model.py) and the run's cycles summed in
order, a conditional branch taken or not as the next block's address says.
Two figures: cycles at zero wait states, and cycles with the wait states of
the memories the board file declares (code fetched from flash, literal
loads). Not modelled: caches, ST's ART accelerator and flash prefetch, bus
contention, data reads of the code memory other than literals, operand-
dependent timings (divides: the table's stated assumption). docs/cycles.md
has the method and its accuracy.

The per-op split uses the profiler's own calls (op_begin/op_end of
firmware/app/app.cc): their blocks mark the trace, as SysTick marks the
instruction counts of `run --profile`.
"""

from __future__ import annotations

import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...boards import Board
from .model import CoreTiming, UnknownCore, available_cores, core_timing
from .trace import Memory, Trace, TraceParser, run_traced

__all__ = ["CycleEstimate", "CoreTiming", "Memory", "Trace", "TraceParser", "UnknownCore", "available_cores",
           "board_memories", "core_timing", "estimate", "has_model", "marks_of", "run_traced", "tracer"]

# The functions whose blocks mark the trace, by a part of their (mangled) symbol name.
MARKS = {"op_begin": "8Profiler8op_begin", "op_end": "8Profiler6op_end", "execute": "6Method7execute",
         "ticks": "tmcu_platform_ticks"}


def has_model(board: Board) -> bool:
    try:
        core_timing(board.cpu)
    except UnknownCore:
        return False
    return board.core.arch == "cortex-m"


def board_memories(board: Board) -> list[Memory]:
    return [Memory(m.base, m.end, m.wait_states, m.line_bytes) for m in board.memories]


def elf_symbols(elf: str | Path) -> dict[str, int]:
    """Function symbols of `elf` (mangled) -> address, Thumb bit cleared."""
    from ...toolchain import CROSS, require

    out = subprocess.run([require(CROSS + "nm"), str(elf)], capture_output=True, text=True, check=True).stdout
    syms: dict[str, int] = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "tTwW":
            syms[parts[2]] = int(parts[0], 16) & ~1
    return syms


def marks_of(elf: str | Path) -> dict[str, int]:
    """The marks' addresses in `elf` (those it has)."""
    syms = elf_symbols(elf)
    found = {}
    for name, part in MARKS.items():
        hits = [a for s, a in syms.items() if (s == part if name == "ticks" else part in s)]
        if hits:
            found[name] = hits[0]
    return found


def tracer(board: Board, elf: str | Path) -> TraceParser:
    """A parser for a run of `elf` on `board`, marking the profiler's calls."""
    from .isa import disassemble

    return TraceParser(core_timing(board.cpu), board_memories(board), set(marks_of(elf).values()),
                       disassemble(str(elf), board.cpu))


@dataclass
class CycleEstimate:
    """A run's cycles as the model prices them. `*_wait` figures add the board's
    wait states to the zero-wait-state ones."""
    cpu: str
    clock_hz: int
    manual: str
    inference_cycles: int | None  # one inference (the first not profiled), zero wait states
    inference_wait: int | None  # the wait states' cycles on top of it
    inference_instructions: int | None  # the same segment's instructions (the log's count)
    op_cycles: list[float] = field(default_factory=list)  # per op: its kernel's cycles, the profiler's own taken out
    op_wait: list[float] = field(default_factory=list)
    classes: Counter = field(default_factory=Counter)  # the whole run's instructions by timing class
    run_cycles: int = 0
    run_instructions: int = 0
    memories: list[dict[str, Any]] = field(default_factory=list)  # the board's memories with wait states

    def ms(self, cycles: float | None) -> float | None:
        return None if cycles is None else cycles * 1e3 / self.clock_hz

    @property
    def inference_cycles_with_wait(self) -> int | None:
        return None if self.inference_cycles is None else self.inference_cycles + (self.inference_wait or 0)

    def latency_line(self) -> str | None:
        if self.inference_cycles is None:
            return None
        mhz = f"{self.clock_hz / 1e6:g} MHz"
        zero, wait = self.ms(self.inference_cycles), self.ms(self.inference_cycles_with_wait)
        line = f"≈ {zero:.3g} ms at {mhz} (estimate: {self.inference_cycles:,} cycles at zero wait states"
        if self.inference_wait:
            line += f"; ≈ {wait:.3g} ms, {self.inference_cycles_with_wait:,} cycles with the board's wait states"
        return line + f"; {self.cpu} timing model, docs/cycles.md)"

    def to_json(self) -> dict[str, Any]:
        return {"cpu": self.cpu, "clock_hz": self.clock_hz, "model": self.manual,
                "inference_cycles": self.inference_cycles,
                "inference_cycles_with_wait_states": self.inference_cycles_with_wait,
                "inference_ms": self.ms(self.inference_cycles),
                "inference_ms_with_wait_states": self.ms(self.inference_cycles_with_wait),
                "inference_instructions_traced": self.inference_instructions,
                "run_cycles": self.run_cycles, "run_instructions": self.run_instructions,
                "instructions_by_class": dict(self.classes.most_common()),
                "memories": self.memories,
                "note": "estimates from the cores' manual timings over QEMU's executed instructions; "
                        "not modelled: caches, ART/prefetch, bus contention (docs/cycles.md)"}


def estimate(board: Board, elf: str | Path, trace: Trace, n_ops: int = 0, repeat: int = 1) -> CycleEstimate:
    """The figures of a traced run of the app (firmware/app/app.cc): per op from
    the profiled executes (op_begin -> op_end, less the calibration pairs' mean),
    one inference from the first execute with no profiler calls."""
    timing = core_timing(board.cpu)
    addr = marks_of(elf)
    name = {a: n for n, a in addr.items()}
    marks = [(name.get(a, "?"), c, i, w) for a, c, i, w in trace.marks]
    pairs: list[tuple[int, int]] = []
    begin = None
    for n, c, _, w in marks:
        if n == "op_begin":
            begin = (c, w)
        elif n == "op_end" and begin is not None:
            pairs.append((c - begin[0], w - begin[1]))
            begin = None
    op_cycles: list[float] = []
    op_wait: list[float] = []
    if n_ops and len(pairs) >= repeat * n_ops:
        calib = pairs[:len(pairs) - repeat * n_ops]
        cc = sum(p[0] for p in calib) / len(calib) if calib else 0.0
        cw = sum(p[1] for p in calib) / len(calib) if calib else 0.0
        ops = pairs[len(calib):]
        for i in range(n_ops):
            runs = [ops[r * n_ops + i] for r in range(repeat)]
            op_cycles.append(sum(p[0] for p in runs) / repeat - cc)
            op_wait.append(sum(p[1] for p in runs) / repeat - cw)
    inference = None
    for k, (n, c, i, w) in enumerate(marks):
        if n != "execute":
            continue
        for n2, c2, i2, w2 in marks[k + 1:]:
            if n2 == "op_begin":
                break
            if n2 == "ticks":
                inference = (c2 - c, w2 - w, i2 - i)
                break
        if inference is not None:
            break
    return CycleEstimate(
        timing.cpu, board.clock_hz, timing.manual,
        inference[0] if inference else None, inference[1] if inference else None,
        inference[2] if inference else None, op_cycles, op_wait, trace.classes, trace.cycles, trace.instructions,
        [{"name": m.name, "wait_states": m.wait_states, "line_bytes": m.line_bytes} for m in board.memories
         if m.wait_states])


# -- `torchmcu run`'s use of the estimate (kept here: cli.py stays short) ----------------------------------------

def annotate_ops(ops: list[dict[str, Any]], est: CycleEstimate | None) -> CycleEstimate | None:
    """Adds each op's cycles (zero wait states, and with the board's) to `ops` (program order); returns `est`."""
    if est is not None:
        for i, op in enumerate(ops[:len(est.op_cycles)]):
            op["cycles"] = round(est.op_cycles[i])
            op["cycles_with_wait_states"] = round(est.op_cycles[i] + est.op_wait[i])
    return est


def cycle_columns(op: dict[str, Any] | None, est: CycleEstimate | None) -> str:
    """The profile table's cycle columns: the header for op None; nothing without an estimate."""
    if est is None:
        return ""
    if op is None:
        return f" {'cycles':>12} {'+wait states':>12}"
    return f" {op.get('cycles', 0):>12,} {op.get('cycles_with_wait_states', 0):>12,}"


def write_profile_png(out_dir: str | Path, ops: list[dict[str, Any]], board: str, est: CycleEstimate | None) -> None:
    """DIR/profile.png: instructions and cycles per op (chart.py)."""
    from .chart import render_profile

    png = render_profile(ops, f"{board}: per op" + (f"; {est.latency_line()}" if est and est.latency_line() else ""))
    if png is not None:
        (Path(out_dir) / "profile.png").write_bytes(png)


LATENCY_MARK = "Latency (torchmcu run, estimate):"


def record_latency(out_dir: str | Path, est: CycleEstimate | None) -> None:
    """The compile report's latency: report.json "latency" and a last section of
    report.txt, as `torchmcu build` adds its linked sizes (a new build drops them:
    they are the old image's)."""
    import json

    if est is None or est.inference_cycles is None:
        return
    out = Path(out_dir)
    rj, rt = out / "report.json", out / "report.txt"
    if rj.is_file():
        report = json.loads(rj.read_text())
        report["latency"] = {k: v for k, v in est.to_json().items() if k != "instructions_by_class"}
        rj.write_text(json.dumps(report, indent=2) + "\n")
    if rt.is_file():
        text = rt.read_text().split("\n" + LATENCY_MARK)[0].rstrip("\n") + "\n"
        rt.write_text(text + "\n" + LATENCY_MARK + "\n  " + (est.latency_line() or "") + "\n")
