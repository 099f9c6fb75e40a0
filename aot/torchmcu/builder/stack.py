"""The worst-case stack of a linked firmware, computed ahead of time.

Frames: GCC's -fstack-usage (.su: each function's frame in bytes, static,
dynamic or bounded) for every function torchmcu compiled (the application,
the runtime, the kernels, the board support); the .ci files GCC writes with
-fcallgraph-info=su beside them give each .su line its assembler name, so
frames are matched to the linked symbols exactly (C++ names included). The
functions nobody compiled here (libc, libm, libgcc, assembly) get their frame
from their disassembly: every push, vpush and sp decrement they contain,
summed (more than any one path takes).

Calls: the linked image's disassembly (arm-none-eabi-objdump -d): bl/blx to a
function, and b to another function (a tail call, counted as a call: more
than it takes). An indirect call (blx/bx through a register) may reach any
function whose address the image holds: every word of its loaded sections
(literal pools, tables such as the kernel table, vtables, init arrays) that
is a function's address with the Thumb bit set, except the vector table's
own entries, which only the hardware calls, and the kernel table's entries
(each op's check and run), which only the runtime core calls: a kernel
never calls another op's kernel through the table (its fallback is the
portable kernel's own Kernel, which stays a possible target).

Roots: the reset handler (the main thread: startup, main, everything main
calls) and each exception handler of the vector table; an exception stacks
its frame (8 words, 26 with the FP context, plus 4 bytes of alignment) on
the interrupted stack. The worst case is the main thread's deepest path plus
the deepest handler (handlers of one priority do not nest).

The model's own need (`model_bytes`, what `torchmcu build` writes into
NAME_stack.h as TMCU_NAME_STACK_BYTES): the deepest path under the model's
C API calls (tmcu_NAME_init, _invoke, _reset) when the image links them, else
under the runtime functions they call (Program::load, Method::load,
Method::execute; the line-protocol app calls those) plus the largest frame of
the C API's own functions (from their .su), with the deepest exception on
top: what a thread that calls the model needs beneath its own frames.

Recursion makes the depth unbounded, as does a dynamic frame: then the
result says which function, and the stack cannot be sized from it. A cycle
that passes through an indirect call (a kernel reached through the table
calling, through another pointer, something that may reach it) is
assumed not to recur: the path counts each function once, and the result
lists the cycle.
"""

from __future__ import annotations

import re
import struct
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import BuildError
from ..toolchain import CROSS, require

FRAME_BASIC = 32 + 4  # r0-r3, r12, lr, pc, xpsr; 4 bytes of realignment
FRAME_FP = 104 + 4  # with s0-s15, fpscr and a reserved word (lazy stacking reserves the space)
# The margin `torchmcu build` adds to the computed worst case when it sizes
# the stack: what the analysis cannot see (an ISR of the application's own at
# another priority, a library's assembly whose frame was estimated), at least
# MARGIN_MIN bytes or MARGIN_RATIO of the figure, rounded up to 8 bytes.
MARGIN_MIN = 256
MARGIN_RATIO = 0.25


def stack_with_margin(computed: int) -> int:
    reserved = computed + max(MARGIN_MIN, int(computed * MARGIN_RATIO))
    return (reserved + 7) // 8 * 8


# ---------------------------------------------------------------------------------------------
# The ELF: sections, symbols and loaded words (ELF32 little-endian, as every Cortex-M image)


@dataclass
class Elf:
    sections: dict[str, tuple[int, int, int, int]]  # name -> (address, size, file offset, flags)
    functions: dict[int, list[str]]  # address (Thumb bit clear) -> names
    sizes: dict[int, int]  # function address -> size
    symbols: dict[str, tuple[int, int]]  # every named symbol -> (value, size)
    data: bytes
    nobits: set[str] = field(default_factory=set)  # sections without contents in the file (SHT_NOBITS)


def read_elf(path: Path) -> Elf:
    data = path.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 1 or data[5] != 1:
        raise BuildError(f"{path}: not a 32-bit little-endian ELF")
    shoff, = struct.unpack_from("<I", data, 0x20)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x2E)
    heads = [struct.unpack_from("<IIIIIIIIII", data, shoff + i * shentsize) for i in range(shnum)]
    strtab = heads[shstrndx]

    def name_at(table: tuple, off: int) -> str:
        start = table[4] + off
        return data[start:data.index(b"\0", start)].decode()

    sections: dict[str, tuple[int, int, int, int]] = {}
    nobits: set[str] = set()
    symtab = None
    for h in heads:
        name = name_at(strtab, h[0])
        sections[name] = (h[3], h[5], h[4], h[2])
        if h[1] == 8:  # SHT_NOBITS: its file offset holds other sections' bytes
            nobits.add(name)
        if h[1] == 2:  # SHT_SYMTAB
            symtab = h
    functions: dict[int, list[str]] = {}
    sizes: dict[int, int] = {}
    symbols: dict[str, tuple[int, int]] = {}
    if symtab is not None:
        names = heads[symtab[6]]
        for i in range(symtab[5] // 16):
            st_name, value, size, info, _, shndx = struct.unpack_from("<IIIBBH", data, symtab[4] + i * 16)
            if not st_name:
                continue
            name = name_at(names, st_name)
            symbols[name] = (value, size)
            if info & 0xF == 2 and shndx != 0:  # STT_FUNC, defined
                addr = value & ~1
                functions.setdefault(addr, []).append(name)
                sizes[addr] = max(sizes.get(addr, 0), size)
    return Elf(sections, functions, sizes, symbols, data, nobits)


def _loaded_words(elf: Elf, skip: tuple[int, int] | None) -> np.ndarray:
    """Every aligned word of the loaded sections (SHF_ALLOC, with contents),
    but those at addresses in `skip`, in order; not the sections without
    contents (.stack, .bss, the arenas: SHT_NOBITS), whose file offset holds
    other bytes (the symbol table's function addresses). An array: the program's
    constants are loaded words too, tens of MB for a float CNN, which a loop
    word by word took most of a minute to read."""
    parts = []
    for name, (addr, size, off, flags) in elf.sections.items():
        if not flags & 2 or not size or name in (".stack", ".bss") or name in elf.nobits or off + size > len(elf.data):
            continue
        start = -addr % 4  # literal pools and tables are word aligned
        n = max(0, (size - start) // 4)
        words = np.frombuffer(elf.data, "<u4", count=n, offset=off + start)
        if skip:  # the words at addresses addr + start + 4 i in [skip[0], skip[1])
            lo, hi = (min(n, max(0, -(-(bound - addr - start) // 4))) for bound in skip)
            words = np.concatenate([words[:lo], words[hi:]]) if hi > lo else words
        parts.append(words)
    return np.concatenate(parts) if parts else np.zeros(0, np.uint32)


def taken_addresses(elf: Elf, skip: tuple[int, int] | None) -> set[int]:
    """The functions whose address (Thumb bit set) a loaded word holds."""
    words = _loaded_words(elf, skip)
    odd = words[(words & 1) == 1] & np.uint32(0xFFFFFFFE)
    return set(odd[np.isin(odd, np.array(sorted(elf.functions), np.uint32))].tolist())


# ---------------------------------------------------------------------------------------------
# Frames: .su (with .ci for the names), else the disassembly


@dataclass
class Frame:
    bytes: int
    kind: str  # "static" | "dynamic" | "bounded" | "estimated" (from the disassembly)
    where: str = ""


_CI_NODE = re.compile(r'node: \{ title: "([^"]+)" label: "([^"\\]*)\\n([^"\\]*)\\n(\d+) bytes \(([^)]*)\)"')


def read_frames(su_files: list[Path]) -> dict[str, Frame]:
    """Assembler name -> frame, from each .su and the .ci beside it."""
    frames: dict[str, Frame] = {}
    for su in su_files:
        ci = su.with_suffix(".ci")
        by_place: dict[str, str] = {}
        if ci.is_file():
            for m in _CI_NODE.finditer(ci.read_text(errors="replace")):
                title, label, place = m.group(1), m.group(2), m.group(3)
                by_place[f"{place}:{label}"] = title.rpartition(":")[2] if ":" in title else title
        for line in su.read_text(errors="replace").splitlines():
            head, _, rest = line.partition("\t")
            if not rest:
                continue
            size, _, kind = rest.partition("\t")
            # head: file:line:col:printable name
            m = re.match(r"^(.*?:\d+:\d+):(.*)$", head)
            if not m:
                continue
            name = by_place.get(f"{m.group(1)}:{m.group(2)}")
            if name is None:  # no .ci: a C function's printable name is its symbol
                name = m.group(2) if re.fullmatch(r"[A-Za-z_]\w*", m.group(2)) else None
            if name is None:
                continue
            kinds = set(kind.split(","))
            frame = Frame(int(size), "dynamic" if "dynamic" in kinds and "bounded" not in kinds
                          else ("bounded" if "bounded" in kinds else "static"), m.group(1))
            old = frames.get(name)
            if old is None or frame.bytes > old.bytes:  # local functions of one name in several files: the largest
                frames[name] = frame
    return frames


_REGS = re.compile(r"\{([^}]*)\}")


def _reg_count(text: str) -> int:
    n = 0
    for part in text.split(","):
        part = part.strip()
        if "-" in part:
            a, b = part.split("-")
            n += int(re.sub(r"\D", "", b)) - int(re.sub(r"\D", "", a)) + 1
        elif part:
            n += 1
    return n


def _sp_decrement(mnemonic: str, operands: str) -> int:
    """Bytes one instruction takes from the stack (0 for most)."""
    if mnemonic.startswith("push") or (mnemonic.startswith("stmdb") and operands.startswith("sp!")):
        m = _REGS.search(operands)
        return 4 * _reg_count(m.group(1)) if m else 0
    if mnemonic.startswith("vpush") or (mnemonic.startswith("vstmdb") and operands.startswith("sp!")):
        m = _REGS.search(operands)
        if not m:
            return 0
        return (8 if "d" in m.group(1) else 4) * _reg_count(m.group(1))
    if mnemonic.startswith("sub") and re.match(r"^sp,\s*(sp,\s*)?#", operands):
        return int(operands.rpartition("#")[2].split()[0], 0)
    m = re.match(r"^\w+,\s*(?:\w+,\s*)?\[sp,\s*#-(\d+)\]!", operands)
    if mnemonic.startswith("str") and m:
        return int(m.group(1))
    return 0


# ---------------------------------------------------------------------------------------------
# The call graph


@dataclass
class Function:
    name: str
    calls: set[int] = field(default_factory=set)  # callee addresses
    indirect: bool = False
    pushed: int = 0  # sp decrements of its disassembly


_INSN = re.compile(r"^\s*([0-9a-f]+):\s+(\S+)\s*(.*)$")
_TARGET = re.compile(r"^([0-9a-f]+)\s+<([^>+]+)(\+0x[0-9a-f]+)?>")
_HEADER = re.compile(r"^([0-9a-f]+) <([^>]+)>:$")


def call_graph(elf_path: Path, elf: Elf) -> dict[int, Function]:
    out = subprocess.run([require(CROSS + "objdump"), "-d", "--no-show-raw-insn", str(elf_path)],
                         capture_output=True, text=True, check=True).stdout
    funcs: dict[int, Function] = {}
    current: Function | None = None
    start = 0
    for line in out.splitlines():
        h = _HEADER.match(line)
        if h:
            start = int(h.group(1), 16)
            current = funcs.setdefault(start, Function(h.group(2))) if start in elf.functions else None
            continue
        if current is None:
            continue
        m = _INSN.match(line)
        if not m:
            continue
        mnemonic, operands = m.group(2), m.group(3).split(";")[0].strip()
        current.pushed += _sp_decrement(mnemonic, operands)
        base = mnemonic.split(".")[0]
        if base in ("bl", "blx", "b") or re.fullmatch(r"b(eq|ne|cs|hs|cc|lo|mi|pl|vs|vc|hi|ls|ge|lt|gt|le)", base):
            t = _TARGET.match(operands)
            if t:
                addr = int(t.group(1), 16) & ~1
                # A branch inside the function is control flow; one to another function a call.
                if addr in elf.functions and addr != start and (base != "b" or not (
                        start <= addr < start + elf.sizes.get(start, 0))):
                    current.calls.add(addr)
                elif base in ("bl", "blx") and addr in elf.functions and addr == start:
                    current.calls.add(addr)  # direct recursion
            elif base == "blx":  # blx rN
                current.indirect = True
        elif base == "bx" and not operands.startswith("lr"):
            current.indirect = True  # an indirect tail call
    return funcs


# ---------------------------------------------------------------------------------------------
# The worst case


@dataclass
class StackResult:
    computed: int | None  # bytes; None when unbounded
    main: int  # the main thread's deepest path
    handler: int  # the deepest exception (its frame included)
    path: list[tuple[str, int, str]]  # the main thread's deepest path: (function, frame, how known)
    handler_path: list[tuple[str, int, str]]
    unbounded: list[str] = field(default_factory=list)  # why not bounded
    assumed: list[list[str]] = field(default_factory=list)  # cycles through indirect calls, taken as not recurring
    estimated: list[str] = field(default_factory=list)  # functions on the paths whose frame came from disassembly
    functions: int = 0
    su_functions: int = 0
    model: int | None = None  # the model's calls: their deepest path + the deepest exception; None when unknown
    model_main: int = 0  # the model's calls' deepest path alone
    model_path: list[tuple[str, int, str]] = field(default_factory=list)
    model_why: str = ""  # how the model's figure was found, or why there is none

    def as_dict(self) -> dict[str, Any]:
        return {"computed_bytes": self.computed, "main_bytes": self.main, "handler_bytes": self.handler,
                "model_bytes": self.model, "model_main_bytes": self.model_main,
                "model_path": [{"function": f, "frame": b, "from": k} for f, b, k in self.model_path],
                "model_from": self.model_why,
                "path": [{"function": f, "frame": b, "from": k} for f, b, k in self.path],
                "handler_path": [{"function": f, "frame": b, "from": k} for f, b, k in self.handler_path],
                "unbounded": self.unbounded, "assumed_not_recursive": self.assumed,
                "estimated": self.estimated, "functions": self.functions, "su_functions": self.su_functions,
                "margin": f"max({MARGIN_MIN} B, {int(MARGIN_RATIO * 100)} %) rounded up to 8 B"}


_MAP_TEXT = re.compile(r"^ \.text\.(\S+)(?:\s+0x([0-9a-f]+)\s+0x[0-9a-f]+\s+(\S.*))?$")
_MAP_CONT = re.compile(r"^\s+0x([0-9a-f]+)\s+0x[0-9a-f]+\s+(\S.*)$")


def core_functions(map_path: Path | None) -> set[int]:
    """Addresses of the functions the runtime core's objects (firmware/core/)
    define, from the linker map (-ffunction-sections: one .text.<name> each)."""
    if map_path is None or not map_path.is_file():
        return set()
    out: set[int] = set()
    pending = False
    for line in map_path.read_text().splitlines():
        m = _MAP_TEXT.match(line)
        if m:
            pending = m.group(2) is None
            if not pending and "/firmware/core/" in m.group(3):
                out.add(int(m.group(2), 16))
            continue
        if pending:
            c = _MAP_CONT.match(line)
            if c and "/firmware/core/" in c.group(2):
                out.add(int(c.group(1), 16))
            pending = False
    return out


def _words_of(elf: Elf, addr: int, size: int) -> list[int]:
    for _, (base, length, off, flags) in elf.sections.items():
        if flags & 2 and base <= addr and addr + size <= base + length and off + length <= len(elf.data):
            return list(struct.unpack_from(f"<{size // 4}I", elf.data, off + addr - base))
    return []


def kernel_table(elf: Elf) -> dict[int, set[int]]:
    """The kernel table's entries: op code value -> the functions of its
    Kernel object (check, run)."""
    table = next((v for n, v in elf.symbols.items() if n.endswith("kKernelTableE")), None)
    if table is None:
        return {}
    objects = {v: sz for v, sz in elf.symbols.values() if sz}
    entries: dict[int, set[int]] = {}
    for value, ptr in enumerate(_words_of(elf, table[0], table[1])):
        if ptr in objects:
            size = objects[ptr] - objects[ptr] % 4
            entries[value] = {w & ~1 for w in _words_of(elf, ptr, size) if w & 1} & set(elf.functions)
    return entries


def kernel_table_entries(elf: Elf) -> set[int]:
    """The functions of the Kernel objects the kernel table lists."""
    return set().union(*kernel_table(elf).values())


# The runtime functions the C API's calls lead to (Program::load, Method::load, Method::execute).
_RUNTIME_ENTRY = re.compile(r"^_ZNK?8torchmcu(7Program4load|6Method4load|6Method7execute)E")
API_CALLS = ("init", "invoke", "reset")


def worst_case(elf_path: Path, su_files: list[Path], has_fp: bool, map_path: Path | None = None,
               symbol: str | None = None) -> StackResult:
    """The image's worst case; with `symbol`, the model's C API calls' too (module docstring)."""
    elf = read_elf(elf_path)
    frames = read_frames(su_files)
    funcs = call_graph(elf_path, elf)
    vt = elf.symbols.get("tmcu_vector_table")
    if vt is None:
        raise BuildError(f"{elf_path}: no tmcu_vector_table symbol: not a firmware torchmcu's startup links")
    vt_addr, vt_size = vt
    table = elf.data  # the vector table's entries, read from the loaded image
    entries: list[int] = []
    for name, (addr, size, off, flags) in elf.sections.items():
        if flags & 2 and addr <= vt_addr < addr + size and off + size <= len(table):
            words = struct.unpack_from(f"<{vt_size // 4}I", table, off + vt_addr - addr)
            entries = [w & ~1 for w in words[1:] if w]
            break
    if not entries:
        raise BuildError(f"{elf_path}: the vector table is empty")
    reset, handlers = entries[0], sorted(set(entries[1:]) - {entries[0]})
    taken = taken_addresses(elf, (vt_addr, vt_addr + vt_size))
    core = core_functions(map_path)
    # Without the map the core is unknown: every function may then call the table's entries.
    table_only = kernel_table_entries(elf) if core else set()
    taken_outside_core = sorted(taken - table_only)

    def frame(addr: int) -> tuple[int, str]:
        for name in elf.functions[addr]:
            f = frames.get(name)
            if f is not None:
                return f.bytes, f.kind
        fn = funcs.get(addr)
        return (fn.pushed if fn else 0), "estimated"

    unbounded: list[str] = []
    assumed: list[list[str]] = []
    memo: dict[int, tuple[int, list[int]]] = {}
    on_path: list[int] = []
    via_indirect: list[bool] = []

    def name(a: int) -> str:  # of an address's aliases, the one compiled here (tmcu_default_handler, not NMI_Handler)
        return next((n for n in elf.functions[a] if n in frames), elf.functions[a][0])

    def depth(addr: int) -> tuple[int, list[int]]:
        if addr in memo:
            return memo[addr]
        if addr in on_path:
            k = on_path.index(addr)
            cycle = [name(a) for a in on_path[k:]] + [name(addr)]
            if any(via_indirect[k:]):  # the edges on_path[k] -> ... -> on_path[-1] -> addr
                assumed.append(cycle)
            else:
                unbounded.append("recursion: " + " -> ".join(cycle))
            return 0, []
        own, kind = frame(addr)
        if kind == "dynamic":
            unbounded.append(f"{name(addr)} has a dynamic frame (alloca or a variable-length array)")
        fn = funcs.get(addr)
        best, best_path = 0, []
        if fn is not None:
            callees = [(c, False) for c in sorted(fn.calls)]
            if fn.indirect:
                callees += [(c, True) for c in (sorted(taken) if addr in core else taken_outside_core)]
            on_path.append(addr)
            for c, indirect in callees:
                via_indirect.append(indirect)
                d, p = depth(c)
                via_indirect.pop()
                if d > best:
                    best, best_path = d, [c, *p]
            on_path.pop()
        memo[addr] = (own + best, best_path)
        return memo[addr]

    # The model's calls first: an unbounded path the application adds elsewhere (its own recursion)
    # does not make theirs unknown.
    model_main, model_root, model_rest, model_why = 0, None, [], ""
    model_unbounded: list[str] = []
    if symbol is not None:
        api = [a for a, names in sorted(elf.functions.items()) if any(
            n in {f"tmcu_{symbol}_{c}" for c in API_CALLS} for n in names)]
        wrapper = 0
        if api:
            roots, model_why = api, "the C API's calls (tmcu_%s_init/invoke/reset) in the image" % symbol
        else:
            roots = [a for a, names in sorted(elf.functions.items()) if any(_RUNTIME_ENTRY.match(n) for n in names)]
            wrapper = max((frames[n].bytes for n in (f"tmcu_{symbol}_{c}" for c in API_CALLS) if n in frames),
                          default=0)
            model_why = (f"the runtime's Program::load, Method::load and Method::execute in the image, plus "
                         f"{wrapper} B for the C API's own frame (tmcu_{symbol}_*.su)")
        before = len(unbounded)
        for r in roots:
            d, p = depth(r)
            if model_root is None or d > model_main:
                model_main, model_root, model_rest = d, r, p
        model_unbounded = unbounded[before:]
        model_main += wrapper
        if not roots:
            model_why = "the image calls none of the model's entry points"

    main, main_path = depth(reset)
    exc = FRAME_FP if has_fp else FRAME_BASIC
    handler, handler_path = 0, []
    for h in handlers:
        d, p = depth(h)
        if d + exc > handler:
            handler, handler_path = d + exc, [h, *p]

    def described(path: list[int]) -> list[tuple[str, int, str]]:
        return [(name(a), *frame(a)) for a in path]

    main_desc = described([reset, *main_path])
    handler_desc = described(handler_path)
    model_desc = described([model_root, *model_rest]) if model_root is not None else []
    estimated = sorted({f for f, _, k in main_desc + handler_desc + model_desc if k == "estimated"})
    handlers_unbounded = any("recursion" in u and any(name(a) in u for a in handler_path) for u in unbounded)
    model = None
    if model_root is not None and not model_unbounded and not handlers_unbounded:
        model = model_main + handler
    elif model_unbounded:
        model_why = "not bounded: " + "; ".join(sorted(set(model_unbounded)))
    return StackResult(None if unbounded else main + handler, main, handler, main_desc, handler_desc,
                       sorted(set(unbounded)), assumed, estimated, len(funcs),
                       sum(1 for a in funcs if any(n in frames for n in elf.functions[a])),
                       model, model_main, model_desc, model_why)


def format_stack(r: dict[str, Any], reserved: int | None = None, measured: int | None = None) -> str:
    """One line: computed (main + deepest handler), reserved, measured when known."""
    if r["computed_bytes"] is None:
        text = f"stack: not bounded ({'; '.join(r['unbounded'])})"
    else:
        text = (f"stack: {r['computed_bytes']:,} B computed worst case ({r['main_bytes']:,} B main thread + "
                f"{r['handler_bytes']:,} B deepest exception)")
    if reserved is not None:
        text += f", {reserved:,} B reserved"
    if measured is not None:
        text += f", {measured:,} B measured (high-water mark)"
    return text
