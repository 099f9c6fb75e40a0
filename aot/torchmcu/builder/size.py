"""Where the flash goes: every byte the ELF loads (text + data in `size -B`'s
terms), attributed through the linker map to the input file it came from."""

from __future__ import annotations

import bisect
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..errors import BuildError
from ..program import schema
from ..toolchain import CROSS, require
from .stack import call_graph, kernel_table, read_elf


@dataclass
class FirmwareSize:
    text: int
    data: int
    bss: int

    def as_dict(self) -> dict[str, int]:
        return {"text": self.text, "data": self.data, "bss": self.bss}


def elf_size(elf: Path) -> FirmwareSize:
    out = subprocess.run([require(CROSS + "size"), "-B", str(elf)], capture_output=True, text=True,
                         check=True).stdout.splitlines()[1].split()
    return FirmwareSize(int(out[0]), int(out[1]), int(out[2]))


# ---------------------------------------------------------------------------------------------
# Where the flash goes: every byte the ELF loads (text + data in `size -B`'s
# terms), attributed through the linker map to the input file it came from.

SIZE_PARTS = ("startup_libc", "runtime", "kernels", "model", "app")


def size_part(path: str) -> str:
    """The part an input file of the link belongs to."""
    name = path.replace("\\", "/")
    base = name.rsplit("/", 1)[-1]
    if base in ("model_pte.o", "model_arenas.o"):
        return "model"  # the program array and the arena table
    if "/firmware/core/" in name:
        return "runtime"
    if "/firmware/kernels/" in name or base.startswith("kernel_table") or "libcmsis-nn.a" in base:
        return "kernels"
    if "/firmware/delegates/" in name or "/third_party/" in name:
        return "kernels"  # delegates and their vendors' drivers
    if "/firmware/app/" in name or "/fw/obj/app/" in name:  # the line-protocol app, or the user's (build --app)
        return "app"
    return "startup_libc"  # board startup and platform, libc, libgcc, libm, linker stubs


def _loaded_sections(elf: Path) -> dict[str, tuple[int, int]]:
    """Sections the image loads (allocated, not NOBITS): name -> (address, size)."""
    out = subprocess.run([require(CROSS + "readelf"), "-S", "-W", str(elf)], capture_output=True, text=True,
                         check=True).stdout
    sections = {}
    for m in re.finditer(r"^\s*\[\s*\d+\]\s+(\S+)\s+(\S+)\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)\s+[0-9a-f]+\s+(\S*)",
                         out, re.MULTILINE):
        name, kind, addr, size, flags = m.groups()
        if "A" in flags and kind != "NOBITS" and int(size, 16):
            sections[name] = (int(addr, 16), int(size, 16))
    return sections


_OUT_SECTION = re.compile(r"^(\.\S+)(?:\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)(?:\s+load address 0x[0-9a-f]+)?)?\s*$")
_IN_SECTION = re.compile(r"^ (\S+)(?:\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+(\S.*))?$")
_IN_CONT = re.compile(r"^\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+(\S.*)$")
_FILL = re.compile(r"^ \*fill\*\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)")


def _attribute(map_path: Path, sections: dict[str, tuple[int, int]],
               inputs: list[tuple[int, int, str]] | None = None) -> dict[str, dict[str, int]]:
    """Per output section of `sections` (name -> (address, size)), the bytes of
    each input file, from the linker map: each input section counts for its
    file; the padding before the next one (alignment fill), for the same file.
    `inputs`, when given, receives every input section as (address, size, file)."""
    lines = map_path.read_text().split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("Linker script and memory map"))
    result: dict[str, dict[str, int]] = {}
    current: str | None = None  # the output section being read, when it is wanted
    items: list[tuple[int, int, str]] = []  # (address, size, file) in the current output section

    def close() -> None:
        if current is None:
            return
        by_file = result.setdefault(current, {})
        base, size = sections[current]
        items.sort()
        if inputs is not None:
            inputs.extend(items)
        end = base + size
        for k, (addr, n, f) in enumerate(items):
            nxt = items[k + 1][0] if k + 1 < len(items) else end
            by_file[f] = by_file.get(f, 0) + max(n, nxt - addr)  # its bytes and the gap after them
        if items and items[0][0] > base:  # bytes before the first input: the first file's alignment
            by_file[items[0][2]] = by_file.get(items[0][2], 0) + items[0][0] - base
        if not items and size:  # a section with no input section (the stack: `. += size`)
            by_file["(linker script)"] = by_file.get("(linker script)", 0) + size

    pending: str | None = None  # an input section name whose numbers are on the next line
    for line in lines[start + 1:]:
        out = _OUT_SECTION.match(line)
        if out and not line.startswith(" "):
            close()
            current, items, pending = (out.group(1) if out.group(1) in sections else None), [], None
            continue
        if current is None:
            continue
        fill = _FILL.match(line)
        if fill:
            continue  # attributed with the gaps above
        if pending is not None:
            cont = _IN_CONT.match(line)
            pending = None
            if cont and int(cont.group(2), 16):
                items.append((int(cont.group(1), 16), int(cont.group(2), 16), cont.group(3).strip()))
            continue
        inp = _IN_SECTION.match(line)
        if inp and not inp.group(1).startswith("*") and not inp.group(1).startswith("0x"):
            if inp.group(2) is None:
                pending = inp.group(1)
            elif int(inp.group(3), 16):
                items.append((int(inp.group(2), 16), int(inp.group(3), 16), inp.group(4).strip()))
    close()
    return result


def size_breakdown(elf: Path, map_path: Path, api_files: tuple[str, ...] = ()) -> dict:
    """The loaded bytes of `elf` by part (SIZE_PARTS) and by input file, from
    the linker map. The parts sum to text + data exactly (checked).
    `api_files`: object names of the model's generated C API (NAME.o), which
    count for the runtime."""
    sections = _loaded_sections(elf)
    by_file: dict[str, int] = {}
    for files in _attribute(map_path, sections).values():
        for f, n in files.items():
            by_file[f] = by_file.get(f, 0) + n
    parts = {p: 0 for p in SIZE_PARTS}
    for f, n in by_file.items():
        parts[_part(f, api_files)] += n
    size = elf_size(elf)
    total = sum(s for _, s in sections.values())
    if sum(parts.values()) != total or total != size.text + size.data:
        raise BuildError(f"size breakdown of {elf}: parts sum to {sum(parts.values())} B, loaded sections to "
                         f"{total} B, text + data is {size.text + size.data} B")
    files = {f: n for f, n in sorted(by_file.items(), key=lambda e: -e[1])}
    return {"elf": str(elf), "text": size.text, "data": size.data, "bss": size.bss, "flash": size.text + size.data,
            "parts": parts, "files": files}


# ---------------------------------------------------------------------------------------------
# The kernels' code by program op: each function of the kernels' part reached
# by direct calls from the check and run functions of an op's Kernel object
# (the kernel table's entry for its op code) counts for that op, or for
# "shared" when several ops reach it; by tier, from its name and file: the
# fast paths (namespace torchmcu::portable::fast, kernels/fast/), CMSIS-NN
# (its library and kernels/cmsis_nn/), delegates, the portable kernels.

TIERS = ("portable", "fast", "cmsis_nn", "delegate")


def _tier(name: str, path: str) -> str:
    path = path.replace("\\", "/")
    if "cmsis" in path:
        return "cmsis_nn"
    if "/firmware/delegates/" in path or "/third_party/" in path:
        return "delegate"
    if "8portable4fast" in name:  # torchmcu::portable::fast:: in the mangled name
        return "fast"
    return "portable"


def kernel_code(elf_path: Path, map_path: Path, api_files: tuple[str, ...] = ()) -> dict:
    """The kernels' part of the image by program op code and tier:
    {"ops": {code: {tier: bytes}}, "shared": {tier: bytes}, "other": bytes
    (the kernel table, the Kernel objects, constants, alignment: the rest of
    the part), "total": the part's bytes}. Sums to the part exactly."""
    elf = read_elf(elf_path)
    inputs: list[tuple[int, int, str]] = []
    files = _attribute(map_path, _loaded_sections(elf_path), inputs)
    total = sum(n for by_file in files.values() for f, n in by_file.items() if _part(f, api_files) == "kernels")
    starts = sorted(inputs)
    addrs = [a for a, _, _ in starts]

    def file_of(addr: int) -> str:
        i = bisect.bisect_right(addrs, addr) - 1
        return starts[i][2] if i >= 0 and addr < starts[i][0] + starts[i][1] else ""

    graph = call_graph(elf_path, elf)
    names = {v: n for n, v in schema.load().enums["OpCode"].values.items()}
    reach: dict[int, set[str]] = {}
    for value, entry in kernel_table(elf).items():
        if value not in names:
            continue
        todo = list(entry)
        seen: set[int] = set()
        while todo:
            f = todo.pop()
            if f in seen or f not in elf.functions:
                continue
            seen.add(f)
            reach.setdefault(f, set()).add(names[value])
            todo.extend(graph[f].calls if f in graph else ())
    ops: dict[str, dict[str, int]] = {}
    shared = dict.fromkeys(TIERS, 0)
    counted = 0
    for f, by in reach.items():
        path = file_of(f)
        if _part(path, api_files) != "kernels":
            continue  # the runtime's, libc's, libgcc's
        n = elf.sizes.get(f, 0)
        tier = _tier(elf.functions[f][0], path)
        into = ops.setdefault(next(iter(by)), dict.fromkeys(TIERS, 0)) if len(by) == 1 else shared
        into[tier] += n
        counted += n
    return {"ops": dict(sorted(ops.items(), key=lambda e: -sum(e[1].values()))), "shared": shared,
            "other": total - counted, "total": total}


def format_kernel_code(k: dict, runtime: int) -> str:
    def tiers(t: dict[str, int]) -> str:
        inner = ", ".join(f"{name.replace('_', '-')} {n:,}" for name, n in t.items() if n and name != "portable")
        return f"{sum(t.values()):,} B" + (f" ({inner})" if inner else "")

    ops = ", ".join(f"{code} {tiers(t)}" for code, t in k["ops"].items())
    return (f"kernel code {k['total']:,} B = {ops}{', ' if ops else ''}shared {tiers(k['shared'])}, "
            f"tables and data {k['other']:,} B; runtime core {runtime:,} B")


def _part(path: str, api_files: tuple[str, ...]) -> str:
    base = path.replace("\\", "/").rsplit("/", 1)[-1]
    return "runtime" if base in api_files else size_part(path)


# RAM: every byte of the ELF's data + bss (`size -B`), by what it is.
RAM_PARTS = ("arenas", "state", "runtime", "stack", "app_data")


def _ram_sections(elf: Path) -> dict[str, tuple[int, int, bool]]:
    """Sections `size -B` counts as data or bss: allocated and writable, or
    allocated without contents. name -> (address, size, has contents)."""
    out = subprocess.run([require(CROSS + "readelf"), "-S", "-W", str(elf)], capture_output=True, text=True,
                         check=True).stdout
    found = {}
    for m in re.finditer(r"^\s*\[\s*\d+\]\s+(\S+)\s+(\S+)\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)\s+[0-9a-f]+\s+(\S*)",
                         out, re.MULTILINE):
        name, kind, addr, size, flags = m.groups()
        if "A" in flags and ("W" in flags or kind == "NOBITS") and int(size, 16):
            found[name] = (int(addr, 16), int(size, 16), kind != "NOBITS")
    return found


def ram_breakdown(elf: Path, map_path: Path, arena_sections: set[str], api_files: tuple[str, ...] = (),
                  state_bytes: int = 0) -> dict:
    """The ELF's data + bss by part: the planned arenas, persistent state
    (a section named *state*: a recurrent model's; and `state_bytes` of the
    arena sections, where a persistent arena shares its memory's section
    with the activations), the runtime (the model's Method, the runtime's
    and kernels' own data), the stack, and the application's data (the app,
    startup, libc). Sums to data + bss (checked)."""
    sections = _ram_sections(elf)
    parts = {p: 0 for p in RAM_PARTS}
    memories: dict[str, dict[str, int]] = {}  # section -> bytes, for the report of where each went
    plain = {}
    for name, (addr, size, _) in sections.items():
        key = name.lstrip(".")
        if name == ".stack":
            parts["stack"] += size
        elif key in arena_sections:
            parts["arenas"] += size
        elif "state" in key:
            parts["state"] += size
        else:
            plain[name] = (addr, size)
        memories[name] = {"address": addr, "bytes": size}
    moved = min(state_bytes, parts["arenas"])
    parts["arenas"] -= moved
    parts["state"] += moved
    for files in _attribute(map_path, plain).values():
        for f, n in files.items():
            part = _part(f, api_files)
            parts["runtime" if part in ("runtime", "kernels", "model") else "app_data"] += n
    size = elf_size(elf)
    if sum(parts.values()) != size.data + size.bss:
        raise BuildError(f"RAM breakdown of {elf}: parts sum to {sum(parts.values())} B, data + bss is "
                         f"{size.data + size.bss} B")
    return {"total": size.data + size.bss, "parts": parts, "sections": memories}


def format_size(b: dict) -> str:
    parts = ", ".join(f"{name.replace('_', '/')} {n:,} B" for name, n in b["parts"].items())
    return f"flash {b['flash']:,} B = {parts}"


def format_ram(r: dict) -> str:
    p = r["parts"]
    return (f"RAM {r['total']:,} B = arenas {p['arenas']:,} B + persistent state {p['state']:,} B + runtime "
            f"{p['runtime']:,} B + stack {p['stack']:,} B + app data {p['app_data']:,} B")
