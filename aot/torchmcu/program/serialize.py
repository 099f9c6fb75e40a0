"""Serialization: the planned program graph to `model.pte` and the C sources
that put it in flash, its arenas in RAM and its kernels in the build."""

from __future__ import annotations

import re
import struct
import zlib
from dataclasses import dataclass

import numpy as np

from .. import reference
from ..ir import PGraph
from ..plan import Plan
from ..plan.state import initial_bytes
from . import schema

PROGRAM_VERSION = 4  # firmware/core/program.h kProgramVersion
SEGMENT_ALIGN = 16
WIRE_DTYPES = {"F32": "<f4", "I8": "i1", "I16": "<i2", "I32": "<i4", "U8": "u1", "I64": "<i8"}  # I4: reference.pack_int4


@dataclass(frozen=True)
class ArenaSpec:
    name: str  # the board memory it lives in
    size: int
    persistent: bool = False  # the model's state (plan/state.py)


def _pad(n: int) -> int:
    return (n + SEGMENT_ALIGN - 1) // SEGMENT_ALIGN * SEGMENT_ALIGN


def program_dict(p: PGraph, mem: Plan, arenas: list[ArenaSpec] | ArenaSpec) -> tuple[dict, bytes]:
    """The schema tree of the program and its constant segment. Activation
    tensors live at their buffer's (region, offset) plus their own offset in
    it; weights copied to RAM at load (mem.hot) live in their arena."""
    arenas = [arenas] if isinstance(arenas, ArenaSpec) else list(arenas)
    hot = {h.tensor: h for h in mem.hot}
    segment = bytearray()
    const_offsets: dict[tuple[int, int, int], int] = {}  # (id(base), start, bytes) -> offset: aliases share
    tensors = []
    copies = []
    for index, t in enumerate(p.tensors):
        entry = {"name": t.name, "dtype": t.dtype, "dims": list(t.dims), "nbytes": t.nbytes}
        if t.scale:
            entry.update(scale=float(t.scale), zero_point=int(t.zero_point))
        if t.channel_scales:
            entry.update(channel_scales=list(t.channel_scales), channel_axis=t.channel_axis)
        if t.const is not None:
            base = t.const.base if t.const.base is not None else t.const
            # A view (a reshape) shares its base's bytes; slices of one base (a
            # chunked parameter) are different bytes of it.
            start = t.const.__array_interface__["data"][0] - (
                base.__array_interface__["data"][0] if isinstance(base, np.ndarray) else 0)
            key = (id(base), start, t.const.nbytes)
            if key not in const_offsets:
                const_offsets[key] = len(segment)
                if t.dtype == "I4":  # int4 values held unpacked in t.const
                    segment += reference.pack_int4(t.const)
                else:
                    segment += np.ascontiguousarray(t.const).astype(WIRE_DTYPES[t.dtype], copy=False).tobytes()
                segment += bytes(_pad(len(segment)) - len(segment))
            entry.update(region="CONSTANT", offset=const_offsets[key])
            if index in hot:  # read from RAM, where Method::load copies it
                h = hot[index]
                copies.append({"src": const_offsets[key], "dst": h.offset, "nbytes": t.nbytes, "arena": h.region})
                entry.update(region="ARENA", arena=h.region, offset=h.offset)
        else:
            assert t.buffer is not None
            entry.update(region="ARENA", arena=mem.region_of.get(t.buffer, 0),
                         offset=mem.offsets[t.buffer] + t.offset)
        tensors.append(entry)
    for t in p.state:  # a streaming model's state starts at zero when the method loads
        at = len(segment)
        segment += initial_bytes(p, t)
        segment += bytes(_pad(len(segment)) - len(segment))
        copies.append({"src": at, "dst": tensors[t]["offset"], "nbytes": p.tensors[t].nbytes,
                       "arena": tensors[t]["arena"]})
    ops = [
        {"code": op.code, "inputs": op.inputs, "outputs": op.outputs, "params": op.params, "name": op.name}
        for op in p.ops
    ]
    prog = {
        "version": PROGRAM_VERSION, "tensors": tensors, "ops": ops, "inputs": p.inputs,
        "outputs": p.outputs,
        "arenas": [{"name": a.name, "size": a.size, **({"persistent": True} if a.persistent else {})} for a in arenas],
        "constant_offset": 0, "constant_size": len(segment),
    }
    if copies:
        prog["init_copies"] = copies
    return prog, bytes(segment)


# Program.crc32 (program.fbs) while the buffer is built: any value but the default 0, which the
# builder would leave out, and with it the field's room.
_CRC_PLACEHOLDER = 0xFFFFFFFF
_CRC_SLOT = 24  # the field's vtable offset (firmware/core/program.cc kCrcSlot)


def crc_field(pte: bytes) -> int | None:
    """Where Program.crc32 lies in the program, or None when it has none."""
    root = struct.unpack_from("<I", pte, 0)[0]
    vt = root - struct.unpack_from("<i", pte, root)[0]
    vsize = struct.unpack_from("<H", pte, vt)[0]
    off = struct.unpack_from("<H", pte, vt + _CRC_SLOT)[0] if vsize >= _CRC_SLOT + 2 else 0
    return root + off if off else None


def program_crc(pte: bytes) -> int | None:
    """The CRC32 the program carries (compile --crc), or None."""
    at = crc_field(pte)
    return None if at is None else struct.unpack_from("<I", pte, at)[0]


def seal(pte: bytes) -> bytes:
    """The program with its Program.crc32 set: zlib's CRC-32 of all its bytes,
    the field's own 4 counted as zero (what Program::load recomputes)."""
    at = crc_field(pte)
    assert at is not None, "the program has no crc32 field"
    zeroed = pte[:at] + bytes(4) + pte[at + 4:]
    return zeroed[:at] + struct.pack("<I", zlib.crc32(zeroed)) + zeroed[at + 4:]


def to_pte(prog: dict, segment: bytes, crc: bool = False) -> bytes:
    """The flatbuffer, padded to 16 bytes, then the constant segment. The
    segment's offset is written into the flatbuffer itself, so the buffer is
    built twice; a scalar's value does not change the flatbuffer's size.
    The executable section the runtime runs (Program.exec) is derived here
    from the rest of the tree, every time (schema/records.py). With `crc`,
    or when the tree already has a crc32 (one decoded from a program with
    one), the program carries its CRC32 (seal), recomputed here."""
    from .schema.records import derive

    crc = crc or bool(prog.get("crc32"))
    prog = dict(prog, constant_offset=0xFFFFFFF0, exec=derive(prog), crc32=_CRC_PLACEHOLDER if crc else 0)
    size = _pad(len(schema.encode(prog)))
    fb = schema.encode(dict(prog, constant_offset=size))
    assert _pad(len(fb)) == size
    pte = fb + bytes(size - len(fb)) + segment
    return seal(pte) if crc else pte


def device_image(pte: bytes) -> bytes:
    """The program as the device needs it: the same constant segment and
    executable section, without the fields only tools read (tensor and op
    tables, names: schema attribute tmcu_tool), which the runtime neither
    reads nor verifies. model.pte keeps them for tools and the host."""
    s = schema.load()

    def strip(obj: dict, table: str) -> dict:
        out = {}
        for f in s.tables[table].fields:
            value = obj.get(f.name)
            if "tmcu_tool" in f.attributes or value is None:
                continue
            if s.kind(f.type) == "table":
                value = [strip(v, f.type) for v in value] if f.is_vector else strip(value, f.type)
            out[f.name] = value
        return out

    tree = strip(schema.decode(pte, derived=True), s.root)
    crc = crc_field(pte) is not None  # its own CRC: other bytes than model.pte's
    tree["crc32"] = _CRC_PLACEHOLDER if crc else 0
    segment = pte[tree["constant_offset"]:tree["constant_offset"] + tree["constant_size"]]
    size = _pad(len(schema.encode(dict(tree, constant_offset=0xFFFFFFF0))))
    fb = schema.encode(dict(tree, constant_offset=size))
    assert _pad(len(fb)) == size
    image = fb + bytes(size - len(fb)) + segment
    return seal(image) if crc else image


def c_identifier(text: str) -> str:
    return re.sub(r"\W", "_", text)


DEFAULT_SYMBOL = "model"


def check_symbol(symbol: str) -> str:
    """A model's C name (compile --symbol): letters, digits and _, not first a digit."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", symbol or ""):
        raise ValueError(f"model symbol {symbol!r} is not a C identifier (letters, digits, _; not first a digit)")
    return symbol


# The program's bytes as C string-literal text: printable characters as themselves, the rest (and
# the three that would end or change the literal: backslash, quote, and ? that starts trigraphs)
# as three-digit octal escapes, which never take in the character after them. GCC parses a long
# literal an order of magnitude faster, and in far less memory, than an initializer list of
# as many numbers (a 4 MB program: 0.6 s against 11 s), and the text is 3 characters a byte, not 5.
_LITERAL_SAFE = [0x20 <= b < 0x7F and chr(b) not in '\\"?' for b in range(256)]
_LITERAL_TEXT = np.array([[b, 0, 0, 0] if _LITERAL_SAFE[b] else list(b"\\%03o" % b) for b in range(256)], np.uint8)
_LITERAL_LEN = np.array([1 if safe else 4 for safe in _LITERAL_SAFE], np.uint8)
_LITERAL_KEEP = np.arange(4)[None, :] < _LITERAL_LEN[:, None]  # which of a byte's 4 text bytes are its text
LITERAL_ROW = 64  # program bytes per source line


def c_string_rows(data: bytes, row: int = LITERAL_ROW) -> list[str]:
    """`data` as a list of adjacent C string literals, `row` bytes each
    (the last shorter): their concatenation holds exactly `data`."""
    if not data:
        return ['""']
    raw = np.frombuffer(data, np.uint8)
    text = _LITERAL_TEXT[raw][_LITERAL_KEEP[raw]].tobytes().decode("ascii")
    ends = np.cumsum(np.add.reduceat(_LITERAL_LEN[raw], np.arange(0, len(raw), row), dtype=np.int64)).tolist()
    return [f'"{text[a:b]}"' for a, b in zip([0, *ends], ends)]


def model_pte_sources(pte: bytes, symbol: str = DEFAULT_SYMBOL) -> tuple[str, str]:
    """model_pte.h / model_pte.c: the program as a const array in flash,
    16-byte aligned, in its own section (.rodata.tmcu_program): its device
    image (see device_image). Named tmcu_<symbol>_pte, so several models
    link into one firmware. The array is initialized from a string literal
    exactly as long as the program (C lets a character array's terminating
    NUL fall when it has no room; the attribute nonstring says so to GCC 15's
    -Wunterminated-string-initialization). Compiled as C++, which wants room
    for the NUL, the array is one byte longer; the program's size stays
    TMCU_<SYMBOL>_PTE_SIZE and tmcu_<symbol>_pte_size."""
    pte = device_image(pte)
    sym, up = check_symbol(symbol), symbol.upper()
    header = (
        "/* Generated by torchmcu: the compiled program, read in place. */\n"
        f"#ifndef TORCHMCU_{up}_PTE_H_\n#define TORCHMCU_{up}_PTE_H_\n\n"
        "#include <stddef.h>\n#include <stdint.h>\n\n"
        "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n"
        f"#define TMCU_{up}_PTE_SIZE {len(pte)}u\n"
        f"extern const uint8_t tmcu_{sym}_pte[];\n"
        f"extern const size_t tmcu_{sym}_pte_size;\n\n"
        "#ifdef __cplusplus\n}\n#endif\n\n#endif\n"
    )
    rows = c_string_rows(pte)
    body = (
        "/* Generated by torchmcu. As C++ the array keeps the string's NUL: one byte more. */\n"
        "#include \"model_pte.h\"\n\n"
        f"#ifdef __cplusplus\n#define TMCU_{up}_PTE_NUL 1\n#else\n#define TMCU_{up}_PTE_NUL 0\n#endif\n"
        "#if defined(__has_attribute)\n#if __has_attribute(nonstring)\n#define TMCU_NONSTRING __attribute__((nonstring))\n"
        "#endif\n#endif\n#ifndef TMCU_NONSTRING\n#define TMCU_NONSTRING\n#endif\n\n"
        "__attribute__((section(\".rodata.tmcu_program\"), aligned(16))) TMCU_NONSTRING\n"
        f"const uint8_t tmcu_{sym}_pte[{len(pte)} + TMCU_{up}_PTE_NUL] =\n" + "\n".join(rows) + ";\n"
        f"const size_t tmcu_{sym}_pte_size = {len(pte)}u;\n"
    )
    return header, body


def arena_section(arena: ArenaSpec) -> str:
    """The linker section of an arena's memory (a persistent arena's own
    input section, .bss.<this>.state, lands in the same output section)."""
    return f"tmcu_arena_{c_identifier(arena.name)}"


def _arena_variable(arena: ArenaSpec) -> str:
    return c_identifier(arena.name) + ("_state" if arena.persistent else "")


def model_arena_sources(arenas: list[ArenaSpec], symbol: str = DEFAULT_SYMBOL) -> tuple[str, str]:
    """model_arenas.h / .c: one statically allocated buffer per planned arena,
    in a section the generated linker script places in its memory. The
    table is tmcu_<symbol>_arenas; the size macros TMCU_ARENA_<MEM>_SIZE
    (TMCU_<SYMBOL>_ARENA_<MEM>_SIZE for a symbol other than "model")."""
    sym, up = check_symbol(symbol), symbol.upper()
    prefix = "TMCU_ARENA_" if symbol == DEFAULT_SYMBOL else f"TMCU_{up}_ARENA_"
    header = (
        "/* Generated by torchmcu: the planned RAM arenas. */\n"
        f"#ifndef TORCHMCU_{up}_ARENAS_H_\n#define TORCHMCU_{up}_ARENAS_H_\n\n"
        "#include \"torchmcu/torchmcu.h\"\n\n"
        "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n"
        f"#define TMCU_{up}_NUM_ARENAS {len(arenas)}u\n"
        + "".join(f"#define {prefix}{_arena_variable(a).upper()}_SIZE {a.size}u\n" for a in arenas)
        + f"extern const tmcu_arena tmcu_{sym}_arenas[{len(arenas) or ''}];\n\n"
        "#ifdef __cplusplus\n}\n#endif\n\n#endif\n"
    )
    decls = "".join(
        f"__attribute__((section(\".bss.{arena_section(a)}{'.state' if a.persistent else ''}\"), aligned(16)))\n"
        f"static uint8_t arena_{_arena_variable(a)}[{max(a.size, 16)}];\n"
        for a in arenas
    )
    table = ",\n".join(f"  {{arena_{_arena_variable(a)}, {a.size}u}}" for a in arenas)
    body = (
        "/* Generated by torchmcu. */\n#include \"model_arenas.h\"\n\n" + decls
        + f"\nconst tmcu_arena tmcu_{sym}_arenas[] = {{\n{table}\n}};\n"
    )
    return header, body
