"""Instruction timings per core (cores/<cpu>.toml, data with the manual's
section cited for each row) and the price of a translation block.

A block is a straight run of instructions QEMU executes as one (it ends at a
branch). Its cycles are fixed but for its last instruction: a conditional
branch costs the table's cycles not taken and `refill` more taken, decided at
run time by the address of the block that ran next (trace.py). The rules the
manuals state between neighbours are applied inside a block: load/store
pipelining, the address-generation stall, IT folding, a result's latency
(load-use), dual issue (M55) and MVE beats (M55: each 128-bit instruction
holds its pipe for two beats; the next instruction overlaps its second beat
unless it needs the same pipe).
"""

from __future__ import annotations

import tomllib
from collections import Counter
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from .isa import Insn

CORES_DIR = Path(__file__).resolve().parent / "cores"

_MEMORY = ("load", "store", "load_literal", "fp_load", "fp_store")
_PIPELINABLE = ("load", "store", "load_literal", "fp_load", "fp_store")
_DATA_PROCESSING = ("alu", "mul", "mac", "mull", "mlal")
_DUAL_SECOND = ("add", "sub", "mov", "uxtb", "uxth", "sxtb", "sxth", "nop", "it", "b")


class UnknownCore(KeyError):
    pass


@dataclass(frozen=True)
class Row:
    cycles: int
    cite: str
    per_reg: int = 0
    latency: int = 0  # result latency, when more than the issue cycles
    refill: int = 0  # extra cycles when it changes the flow (taken branch, load to PC)
    literal: bool = False  # reads the code memory (a PC-relative literal)
    pipe: bool = False  # an MVE instruction: beats in its pipe


@dataclass(frozen=True)
class CoreTiming:
    cpu: str
    manual: str
    refill: int
    rows: dict[str, Row]
    load_pipelining: bool
    agu_stall: int
    it_folding: bool
    dual_issue: bool
    mve_beats: int
    source: Path

    def row(self, cls: str) -> Row:
        return self.rows.get(cls) or self.rows["other"]


def available_cores() -> list[str]:
    return sorted(p.stem for p in CORES_DIR.glob("*.toml"))


def _raw(cpu: str) -> dict:
    path = CORES_DIR / f"{cpu}.toml"
    if not path.is_file():
        raise UnknownCore(cpu)
    with path.open("rb") as f:
        raw = tomllib.load(f)
    parent = raw.get("inherit")
    if parent:
        base = _raw(parent)
        classes = {**base.get("class", {}), **raw.get("class", {})}
        rules = {**base.get("rules", {}), **raw.get("rules", {})}
        raw = {**base, **raw, "class": classes, "rules": rules}
    return raw


@cache
def core_timing(cpu: str) -> CoreTiming:
    """The timing table of `cpu` (a GCC -mcpu name: cortex-m4, ...); UnknownCore when there is none."""
    raw = _raw(cpu)
    refill = int(raw["refill"])
    rows = {}
    for cls, r in raw["class"].items():
        ref = r.get("refill", 0)
        rows[cls] = Row(int(r["cycles"]), str(r["cite"]), int(r.get("per_reg", 0)), int(r.get("latency", 0)),
                        refill if ref is True else int(ref), bool(r.get("literal", False)), bool(r.get("pipe", False)))
    rules = raw.get("rules", {})
    return CoreTiming(cpu, str(raw["manual"]), refill, rows, bool(rules.get("load_pipelining")),
                      int(rules.get("agu_stall", 0)), bool(rules.get("it_folding")), bool(rules.get("dual_issue")),
                      int(rules.get("mve_beats", 0)), CORES_DIR / f"{cpu}.toml")


@dataclass
class Block:
    """One translation block priced: `cycles` with its last instruction not
    taken (or always taken, for an unconditional one); `taken` more when a
    conditional last instruction is taken; `drain`: MVE beats still in their
    pipe at the end, paid when the next block's first MVE instruction needs
    the same pipe."""
    start: int
    end: int  # one past its last byte
    insns: int
    cycles: int
    conditional: bool
    taken: int
    fallthrough: int
    literals: int  # PC-relative loads (they read the code memory)
    classes: Counter = field(default_factory=Counter)
    drain: int = 0
    tail_pipe: str = ""
    first_pipe: str = ""
    wait: int = 0  # wait states of the board's memories (trace.py sets them)
    mark: bool = False  # it starts at a mark (trace.py)
    executions: int = 0  # times run (trace.py)
    self_loop: bool = False  # its last instruction may branch to its own start


def price_block(insns: list[Insn], core: CoreTiming) -> Block:
    t = 0  # issue clock
    pipes: dict[str, int] = {}
    prev: Insn | None = None
    prev_row: Row | None = None
    prev_cost = 0
    paired = False
    literals = 0
    classes: Counter = Counter()
    first_pipe = ""
    taken = 0
    conditional = False
    last = insns[-1]
    for k, ins in enumerate(insns):
        row = core.row(ins.cls)
        classes[ins.cls if ins.cls in core.rows else "other"] += 1
        c = row.cycles + row.per_reg * ins.regs
        literals += row.literal
        if prev is not None and prev_row is not None:
            if (core.load_pipelining and ins.cls in _PIPELINABLE and prev.cls in _PIPELINABLE
                    and not (prev.cls in ("load", "load_literal", "fp_load") and ins.address_regs & prev.writes)):
                c = 1
            if core.agu_stall and ins.cls in _MEMORY and prev.cls in _DATA_PROCESSING and ins.address_regs & prev.writes:
                c += core.agu_stall
            if prev_row.latency > prev_cost and (ins.reads | ins.address_regs) & prev.writes:
                c += prev_row.latency - prev_cost
        if ins.cls == "it" and core.it_folding and prev is not None and prev.size == 2 and prev.cls not in (
                "branch", "cbz", "it"):
            c = 0
        if (core.dual_issue and not paired and prev is not None and prev.size == 2 and ins.size == 2
                and ins.mnemonic in _DUAL_SECOND and not prev.pipe and not ins.pipe and not (ins.reads & prev.writes)
                and prev.cls not in ("branch", "cbz", "table_branch", "ldm_pc", "load_pc", "alu_pc")):
            c = 0
            paired = True
        else:
            paired = False
        if row.pipe and core.mve_beats:
            start = max(t, pipes.get(ins.pipe, 0))
            pipes[ins.pipe] = start + core.mve_beats
            first_pipe = first_pipe or ins.pipe
            c = start - t + c
        elif core.mve_beats and ins.cls in _MEMORY:  # scalar loads and stores share the load/store pipe
            start = max(t, pipes.get("ls", 0))
            c += start - t
        if k == len(insns) - 1 and row.refill:
            if ins.conditional and ins.cls in ("branch", "cbz", "loop_end"):
                conditional, taken = True, row.refill
            else:
                c += row.refill
        elif k == len(insns) - 1 and ins.cls == "loop_end":
            conditional = True
        t += c
        prev, prev_row, prev_cost = ins, row, c
    pending = [(end, p) for p, end in pipes.items() if end > t]
    drain, tail = (max(pending)[0] - t, max(pending)[1]) if pending else (0, "")
    block = Block(insns[0].address, last.address + last.size, len(insns), t, conditional, taken,
                  last.address + last.size, literals, classes, drain, tail, first_pipe)
    block.self_loop = last.target == insns[0].address or last.cls in ("loop_end", "ldm_pc", "load_pc", "alu_pc") or (
        last.cls == "branch" and last.target is None)
    return block
