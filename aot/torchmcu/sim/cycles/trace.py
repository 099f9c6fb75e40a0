"""Every executed instruction of a QEMU run, from QEMU's own logs.

`-d in_asm,exec,nochain` makes QEMU print each translation block's
instructions once, when it translates it (in_asm: address, bytes, capstone's
text), and a line for every execution of a block (exec: "Trace 0: <host
pointer> [.../<guest pc>/...]"); nochain sends every block back through the
main loop, so no execution goes unlogged. The log goes to a FIFO read while
QEMU runs, so nothing of it lands on disk.

A block's instructions are bound to the host pointer of the first execution
that follows its translation. Under -icount a block that touches a device is
cut short ("cpu_io_recompile: rewound execution of TB to <pc>") and run again
from <pc>: the instructions from <pc> on are taken back from the execution
that was cut.

Marks: the guest addresses of functions (the profiler's op_begin/op_end,
Method::execute, tmcu_platform_ticks) whose blocks, when they start, record
(cycles, instructions, wait-state cycles) so far: trace segments between marks
give per-op and per-inference figures.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from .isa import decode
from .model import Block, CoreTiming, price_block

_IN_ASM = re.compile(r"^0x([0-9a-f]+):\s+((?:[0-9a-f]{4} ?){1,2})\s+(\S+)\s*(.*)$")
_REWOUND = re.compile(r"rewound execution of TB to ([0-9a-f]+)")


@dataclass
class Memory:
    """Where a block's bytes (or a literal) come from, as the board declares it."""
    base: int
    end: int
    wait_states: int
    line_bytes: int  # the width of one access: each new line of code costs wait_states


@dataclass
class Trace:
    cycles: int = 0  # at zero wait states
    wait: int = 0  # the wait states' cycles on top
    instructions: int = 0
    classes: Counter = field(default_factory=Counter)  # executed instructions by timing class
    marks: list[tuple[int, int, int, int]] = field(default_factory=list)  # (address, cycles, instructions, wait)
    blocks: int = 0  # blocks executed
    translations: int = 0
    retried: int = 0  # logged executions taken back: the block exited before running (icount budget)


def block_wait(b: Block, memories: list[Memory]) -> int:
    """Wait-state cycles of one execution of `b`: each access line of code it spans in a
    memory with wait states costs them (no prefetch, no cache, no ART: an upper
    bound on the fetch side), and each literal load from it too."""
    for m in memories:
        if m.base <= b.start < m.end and m.wait_states:
            lines = (b.end - 1) // m.line_bytes - b.start // m.line_bytes + 1
            return (lines + b.literals) * m.wait_states
    return 0


class TraceParser:
    """Reads a QEMU log line by line and accumulates a Trace."""

    def __init__(self, core: CoreTiming, memories: list[Memory], marks: set[int] | None = None,
                 code: dict[int, tuple[int, str, str]] | None = None):
        """`code`: the ELF's instructions (isa.disassemble); a block's
        instructions are read there from its first address to its last byte
        (QEMU's in_asm gives the extent), else from in_asm's text."""
        self.code = code or {}
        self.core = core
        self.memories = memories
        self.marks = marks or set()
        self.trace = Trace()
        self.by_ptr: dict[str, Block] = {}
        self.insns_by_ptr: dict[str, list] = {}
        self.all_blocks: list[Block] = []
        self.pending: list | None = None
        self.prev: Block | None = None
        self.prev_ptr: str | None = None

    def feed(self, lines) -> None:
        t = self.trace
        by_ptr, marks, mark_list = self.by_ptr, self.marks, self.trace.marks
        prev = self.prev
        prev_ptr = self.prev_ptr
        cycles, wait, instructions = t.cycles, t.wait, t.instructions
        pending = self.pending
        for line in lines:
            if line[:1] == "T":  # "Trace 0: <host pointer> [<cs_base>/<pc>/<flags>/<cflags>] <symbol>"
                ptr = line.split(" ", 3)[2]
                if pending is not None:
                    pc = int(line[line.index("[") + 10:line.index("[") + 18], 16)
                    if pending and pending[0].address == pc:
                        pending = self._from_code(pending)
                        nb = price_block(pending, self.core)
                        nb.wait = block_wait(nb, self.memories)
                        nb.mark = pc in marks
                        by_ptr[ptr] = nb
                        self.all_blocks.append(nb)
                        self.insns_by_ptr[ptr] = pending
                        t.translations += 1
                    pending = None
                b = by_ptr.get(ptr)
                if b is None:
                    continue
                if prev is not None and b.start == prev.start and (ptr != prev_ptr or not prev.self_loop):
                    # The same start again, not by the block's own branch: the last line was no execution.
                    # Under -icount a block whose instruction budget ran out exits before its first
                    # instruction (QEMU refills the budget, at most 0xffff at a time, and runs it again,
                    # or a shorter block for what is left): take that line back.
                    cycles -= prev.cycles
                    wait -= prev.wait
                    instructions -= prev.insns
                    prev.executions -= 1
                    if prev.mark and mark_list:
                        mark_list.pop()
                    t.retried += 1
                elif prev is not None:
                    if prev.conditional and b.start != prev.fallthrough:
                        cycles += prev.taken
                    if prev.drain and b.first_pipe == prev.tail_pipe:
                        cycles += prev.drain
                if b.mark:
                    mark_list.append((b.start, cycles, instructions, wait))
                cycles += b.cycles
                wait += b.wait
                instructions += b.insns
                b.executions += 1
                prev = b
                prev_ptr = ptr
            elif line.startswith("0x"):
                m = _IN_ASM.match(line)
                if m and pending is not None:
                    raw = m.group(2).split()
                    pending.append(decode(int(m.group(1), 16), 2 * len(raw), m.group(3), m.group(4)))
            elif line.startswith("IN:"):
                pending = []
            elif line.startswith("cpu_io_recompile"):
                m = _REWOUND.search(line)
                if m and prev is not None and prev_ptr is not None:
                    # take back the instructions from the rewind point on (priced as a block of their own)
                    cut = int(m.group(1), 16)
                    tail = [x for x in self.insns_by_ptr[prev_ptr] if x.address >= cut]
                    if tail:
                        tb = price_block(tail, self.core)
                        cycles -= tb.cycles
                        instructions -= tb.insns
                        wait -= block_wait(tb, self.memories)
                        for cls, n in tb.classes.items():
                            t.classes[cls] -= n
                    prev = None
        self.prev, self.pending, self.prev_ptr = prev, pending, prev_ptr
        t.cycles, t.wait, t.instructions = cycles, wait, instructions

    def _from_code(self, logged: list) -> list:
        """The block's instructions as the ELF's disassembly has them, over
        the bytes QEMU translated; in_asm's own where the ELF has none."""
        if not self.code:
            return logged
        start, end = logged[0].address, logged[-1].address + logged[-1].size
        by_addr = {x.address: x for x in logged}
        out = []
        a = start
        while a < end:
            got = self.code.get(a)
            if got is None:
                x = by_addr.get(a)
                if x is None:
                    return logged
                out.append(x)
                a += x.size
                continue
            out.append(decode(a, got[0], got[1], got[2]))
            a += got[0]
        return out

    def blocks_seen(self) -> list[Block]:
        return self.all_blocks

    def finish(self) -> Trace:
        t = self.trace
        # A host pointer reused by a later translation keeps only the last block: count the blocks seen.
        seen = {id(b): b for b in self.blocks_seen()}
        for b in seen.values():
            for cls, k in b.classes.items():
                t.classes[cls] += k * b.executions
        t.blocks = sum(b.executions for b in seen.values())
        t.classes = Counter({k: v for k, v in t.classes.items() if v})
        return t


def traced_command(cmd: list[str], log_path: str | Path) -> list[str]:
    """A QEMU command line that also logs every executed block to `log_path`."""
    return [*cmd, "-d", "in_asm,exec,nochain", "-D", str(log_path)]


def run_traced(cmd: list[str], parser: TraceParser, timeout_s: float, cwd: str | Path | None = None,
               ) -> tuple[str, str, int, bool]:
    """Runs QEMU command `cmd` (without -d) with its log on a FIFO that `parser`
    reads as it comes. Returns (stdout, stderr, exit status, timed out)."""
    with tempfile.TemporaryDirectory(prefix="tmcu-trace-") as tmp:
        fifo = Path(tmp) / "qemu.log"
        os.mkfifo(fifo)
        proc = subprocess.Popen(traced_command(cmd, fifo), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, cwd=cwd or tmp)
        outs: dict[str, bytes] = {}

        def drain(name: str, stream) -> None:
            outs[name] = stream.read()
        readers = [threading.Thread(target=drain, args=(n, s), daemon=True)
                   for n, s in (("out", proc.stdout), ("err", proc.stderr))]
        for r in readers:
            r.start()
        timer = threading.Timer(timeout_s, proc.kill)
        timer.start()
        try:
            # Opening the FIFO blocks until QEMU opens it for writing; should QEMU die before
            # it does, a writer of our own unblocks it.
            done = threading.Event()

            def unblock() -> None:
                proc.wait()
                while not done.is_set():
                    try:
                        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
                        return
                    except OSError:  # no reader yet (ENXIO): the main thread is about to open it
                        done.wait(0.05)
            threading.Thread(target=unblock, daemon=True).start()
            try:
                with open(fifo, encoding="utf-8", errors="replace", buffering=1 << 20) as log:
                    parser.feed(log)
            finally:
                done.set()
            proc.wait()
        finally:
            timed_out = not timer.is_alive() and proc.returncode is not None and proc.returncode < 0
            timer.cancel()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            for r in readers:
                r.join()
    return (outs.get("out", b"").decode("utf-8", "replace"), outs.get("err", b"").decode("utf-8", "replace"),
            proc.returncode, timed_out)
