"""Where the flash goes: every byte the ELF loads (text + data in `size -B`'s
terms), attributed through the linker map to the input file it came from."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..errors import BuildError
from ..toolchain import CROSS, require


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
    if "/firmware/app/" in name:
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


def size_breakdown(elf: Path, map_path: Path) -> dict:
    """The loaded bytes of `elf` by part (SIZE_PARTS) and by input file, from
    the linker map: each input section counts for its file; the padding
    before the next one (alignment fill), for the same file. The parts sum
    to text + data exactly (checked)."""
    sections = _loaded_sections(elf)
    lines = map_path.read_text().split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("Linker script and memory map"))
    by_file: dict[str, int] = {}
    current: str | None = None  # the output section being read, when it is loaded
    items: list[tuple[int, int, str]] = []  # (address, size, file) in the current output section

    def close() -> None:
        if current is None:
            return
        base, size = sections[current]
        items.sort()
        end = base + size
        for k, (addr, n, f) in enumerate(items):
            nxt = items[k + 1][0] if k + 1 < len(items) else end
            by_file[f] = by_file.get(f, 0) + max(n, nxt - addr)  # its bytes and the gap after them
        if items and items[0][0] > base:  # bytes before the first input: the first file's alignment
            by_file[items[0][2]] = by_file.get(items[0][2], 0) + items[0][0] - base

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
    parts = {p: 0 for p in SIZE_PARTS}
    for f, n in by_file.items():
        parts[size_part(f)] += n
    size = elf_size(elf)
    total = sum(s for _, s in sections.values())
    if sum(parts.values()) != total or total != size.text + size.data:
        raise BuildError(f"size breakdown of {elf}: parts sum to {sum(parts.values())} B, loaded sections to "
                         f"{total} B, text + data is {size.text + size.data} B")
    files = {f: n for f, n in sorted(by_file.items(), key=lambda e: -e[1])}
    return {"elf": str(elf), "text": size.text, "data": size.data, "bss": size.bss, "flash": size.text + size.data,
            "parts": parts, "files": files}


def format_size(b: dict) -> str:
    parts = ", ".join(f"{name.replace('_', '/')} {n:,} B" for name, n in b["parts"].items())
    return f"flash {b['flash']:,} B = {parts}"
