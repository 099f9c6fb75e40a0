"""The program schema: program.fbs and the kernel arguments it includes
(kernel_args.fbs), read here, serving three uses.

- `encode` writes a program (a tree of dicts and lists) as a flatbuffer;
- `decode` reads one back into the same tree (for `inspect` and tests);
- `python -m torchmcu.program.schema` writes the C++ accessors the runtime uses.

Only the subset of the flatbuffers language the schema uses is parsed:
enums, tables of scalars/strings/vectors/tables/unions/structs, unions,
structs of scalars, enums and fixed-size arrays of them, and two field
attributes of the project's own:

- `tmcu_tool`: a field for tools only. The runtime neither reads nor
  verifies it, so no C++ accessor is generated for it.
- `tmcu_derived`: a field `serialize.to_pte` computes from the others.
  `decode` leaves it out (pass `derived=True` to see it), so a decoded tree
  edited and written again can never carry a stale copy.
"""

from __future__ import annotations

import math
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import flatbuffers

SCHEMA_PATH = Path(__file__).with_name("program.fbs")

# scalar type -> (struct format, size)
SCALARS: dict[str, tuple[str, int]] = {
    "bool": ("?", 1), "byte": ("b", 1), "ubyte": ("B", 1), "short": ("h", 2),
    "ushort": ("H", 2), "int": ("i", 4), "uint": ("I", 4), "long": ("q", 8),
    "ulong": ("Q", 8), "float": ("f", 4), "double": ("d", 8),
}


@dataclass(frozen=True)
class Field:
    name: str
    type: str  # scalar, "string", enum/table/union/struct name; vectors and arrays: element type
    is_vector: bool
    default: Any
    slot: int  # vtable slot; a union takes two: its type at slot, value at slot + 1
    attributes: frozenset[str] = frozenset()
    array_len: int = 0  # struct fields only: a fixed-size array of this many elements
    offset: int = 0  # struct fields only: byte offset in the struct


@dataclass
class Enum:
    name: str
    base: str
    values: dict[str, int]


@dataclass
class Table:
    name: str
    fields: list[Field] = field(default_factory=list)


@dataclass
class Struct:
    """A fixed-layout record: fields in declaration order, each aligned to its
    own size, the whole padded to its largest alignment (flatbuffers' rule,
    which is also C++'s for the same member types)."""
    name: str
    fields: list[Field]
    size: int
    align: int


@dataclass
class Union:
    name: str
    members: list[str]  # type index i + 1 (0 is NONE)


@dataclass
class Schema:
    namespace: str
    identifier: str
    root: str
    enums: dict[str, Enum]
    tables: dict[str, Table]
    unions: dict[str, Union]
    structs: dict[str, Struct] = field(default_factory=dict)

    def kind(self, type_name: str) -> str:
        if type_name in SCALARS:
            return "scalar"
        if type_name == "string":
            return "string"
        if type_name in self.enums:
            return "enum"
        if type_name in self.tables:
            return "table"
        if type_name in self.unions:
            return "union"
        if type_name in self.structs:
            return "struct"
        raise KeyError(f"unknown type {type_name!r} in schema")

    def scalar_of(self, type_name: str) -> str:
        """The scalar type stored for a scalar or enum field."""
        return self.enums[type_name].base if type_name in self.enums else type_name


def _parse_default(text: str | None, type_name: str, enums: dict[str, Enum]) -> Any:
    if type_name in enums:
        e = enums[type_name]
        return e.values[text] if text else 0
    if type_name == "bool":
        return text == "true"
    if type_name in ("float", "double"):
        if text is None:
            return 0.0
        return {"inf": math.inf, "-inf": -math.inf, "+inf": math.inf}.get(text, None) or float(text)
    if type_name in SCALARS:
        return int(text, 0) if text else 0
    return None


_FIELD = re.compile(
    r"(\w+)\s*:\s*(?:\[\s*(\w+)\s*(?::\s*(\d+))?\s*\]|(\w+))"  # name: type, [type] or [type:N]
    r"\s*(?:=\s*([-+\w.]+))?"  # = default
    r"\s*(?:\(([^)]*)\))?"  # (attributes)
)


def _fields(body: str, owner: str, enums: dict[str, Enum], unions: dict[str, Union]) -> list[Field]:
    fields, slot = [], 0
    for decl in filter(None, (d.strip() for d in body.split(";"))):
        fm = _FIELD.fullmatch(decl)
        if not fm:
            raise ValueError(f"cannot parse field {decl!r} in {owner}")
        name, elem, count, type_name, default, attrs = fm.groups()
        attributes = frozenset(a.split(":")[0].strip() for a in (attrs or "").split(",") if a.strip())
        if elem and count:  # a fixed-size array (structs only)
            fields.append(Field(name, elem, False, None, slot, attributes, int(count)))
        elif elem:
            fields.append(Field(name, elem, True, None, slot, attributes))
        else:
            fields.append(Field(name, type_name, False, _parse_default(default, type_name, enums), slot, attributes))
        slot += 2 if (type_name or elem) in unions else 1
    return fields


def _layout(name: str, fields: list[Field], enums: dict[str, Enum], structs: dict[str, Struct]) -> Struct:
    placed, offset, align = [], 0, 1
    for f in fields:
        if f.is_vector:
            raise ValueError(f"struct {name}: field {f.name} is a vector (structs hold fixed-size data only)")
        if f.type in structs:
            size, a = structs[f.type].size, structs[f.type].align
        else:
            scalar = enums[f.type].base if f.type in enums else f.type
            if scalar not in SCALARS:
                raise ValueError(f"struct {name}: field {f.name} has type {f.type!r}, not a scalar, enum or struct")
            size = a = SCALARS[scalar][1]
        offset = (offset + a - 1) // a * a
        placed.append(Field(f.name, f.type, False, f.default, f.slot, f.attributes, f.array_len, offset))
        offset += size * max(f.array_len, 1)
        align = max(align, a)
    return Struct(name, placed, (offset + align - 1) // align * align, align)


def parse(text: str) -> Schema:
    text = re.sub(r"//[^\n]*", "", text)
    namespace = re.search(r"namespace\s+([\w.]+)\s*;", text).group(1)  # type: ignore[union-attr]
    identifier = re.search(r'file_identifier\s+"(\w{4})"\s*;', text).group(1)  # type: ignore[union-attr]
    root = re.search(r"root_type\s+(\w+)\s*;", text).group(1)  # type: ignore[union-attr]
    enums: dict[str, Enum] = {}
    for m in re.finditer(r"enum\s+(\w+)\s*:\s*(\w+)\s*\{([^}]*)\}", text):
        values, nxt = {}, 0
        for item in filter(None, (s.strip() for s in m.group(3).split(","))):
            name, _, val = (p.strip() for p in item.partition("="))
            nxt = int(val, 0) if val else nxt
            values[name] = nxt
            nxt += 1
        enums[m.group(1)] = Enum(m.group(1), m.group(2), values)
    unions = {
        m.group(1): Union(m.group(1), [s.strip() for s in m.group(2).split(",") if s.strip()])
        for m in re.finditer(r"union\s+(\w+)\s*\{([^}]*)\}", text)
    }
    tables: dict[str, Table] = {}
    structs: dict[str, Struct] = {}
    for m in re.finditer(r"\b(table|struct)\s+(\w+)\s*\{([^}]*)\}", text):
        kind, name, body = m.groups()
        fields = _fields(body, f"{kind} {name}", enums, unions)
        if kind == "table":
            tables[name] = Table(name, fields)
        else:
            structs[name] = _layout(name, fields, enums, structs)
    return Schema(namespace, identifier, root, enums, tables, unions, structs)


_SCHEMA: Schema | None = None


def schema_text(path: Path = SCHEMA_PATH) -> str:
    """The schema with its `include "x.fbs";` files (beside it) read in:
    each included file's declarations follow the including file's, its
    namespace line dropped (flatc's includes share the namespace)."""
    text = path.read_text()
    tail = []
    for name in re.findall(r'^include "([^"]+)";\s*$', text, flags=re.M):
        tail.append(re.sub(r"^namespace [\w.]+;\s*$", "", schema_text(path.with_name(name)), flags=re.M))
    return re.sub(r'^include "[^"]+";\s*$', "", text, flags=re.M) + "\n" + "\n".join(tail)


def load() -> Schema:
    global _SCHEMA
    if _SCHEMA is None:
        _SCHEMA = parse(schema_text())
    return _SCHEMA


# --------------------------------------------------------------------------------------------
# Encoding


def _enum_value(schema: Schema, type_name: str, value: Any) -> int:
    return schema.enums[type_name].values[value] if isinstance(value, str) else int(value)


def _prepend_scalar_slot(b: flatbuffers.Builder, scalar: str, slot: int, value: Any, default: Any) -> None:
    prepend = {
        "bool": b.PrependBoolSlot, "byte": b.PrependInt8Slot, "ubyte": b.PrependUint8Slot,
        "short": b.PrependInt16Slot, "ushort": b.PrependUint16Slot, "int": b.PrependInt32Slot,
        "uint": b.PrependUint32Slot, "long": b.PrependInt64Slot, "ulong": b.PrependUint64Slot,
        "float": b.PrependFloat32Slot, "double": b.PrependFloat64Slot,
    }[scalar]
    prepend(slot, value, default)


def _scalar_fmt(schema: Schema, type_name: str) -> str:
    return SCALARS[schema.scalar_of(type_name)][0]


def pack_struct(name: str, value: dict[str, Any], schema: Schema | None = None) -> bytes:
    """A struct's bytes (little-endian, padding zero). Enums by name or value;
    arrays as lists of exactly their length; every field must be given."""
    schema = schema or load()
    st = schema.structs[name]
    unknown = set(value) - {f.name for f in st.fields}
    if unknown:
        raise KeyError(f"struct {name} has no field(s) {sorted(unknown)}")
    out = bytearray(st.size)
    for f in st.fields:
        v = value[f.name]
        if f.type in schema.structs:
            items = v if f.array_len else [v]
            size = schema.structs[f.type].size
            for i, item in enumerate(items):
                out[f.offset + i * size:f.offset + (i + 1) * size] = pack_struct(f.type, item, schema)
            continue
        items = list(v) if f.array_len else [v]
        if f.array_len and len(items) != f.array_len:
            raise ValueError(f"{name}.{f.name} holds {f.array_len} values, got {len(items)}")
        if f.type in schema.enums:
            items = [_enum_value(schema, f.type, x) for x in items]
        fmt = _scalar_fmt(schema, f.type)
        struct.pack_into(f"<{len(items)}{fmt}", out, f.offset, *items)
    return bytes(out)


def unpack_struct(name: str, buf: bytes, pos: int = 0, schema: Schema | None = None) -> dict[str, Any]:
    """The fields of the struct at buf[pos:] (enums by name where known)."""
    schema = schema or load()
    out: dict[str, Any] = {}
    for f in schema.structs[name].fields:
        items: list[Any]
        if f.type in schema.structs:
            size = schema.structs[f.type].size
            items = [unpack_struct(f.type, buf, pos + f.offset + i * size, schema) for i in range(max(f.array_len, 1))]
        else:
            fmt = _scalar_fmt(schema, f.type)
            items = list(struct.unpack_from(f"<{max(f.array_len, 1)}{fmt}", buf, pos + f.offset))
            if f.type in schema.enums:
                names: dict[int, str] = {v: k for k, v in schema.enums[f.type].values.items()}
                items = [names.get(x, x) for x in items]
        out[f.name] = items if f.array_len else items[0]
    return out


def _encode_vector(b: flatbuffers.Builder, schema: Schema, elem: str, values: list[Any]) -> int:
    kind = schema.kind(elem)
    if kind == "struct":
        st = schema.structs[elem]
        data = b"".join(pack_struct(elem, v, schema) for v in values)
        b.StartVector(st.size, len(values), st.align)
        b.head = b.head - len(data)  # the space StartVector prepared
        b.Bytes[b.head:b.head + len(data)] = data
        return b.EndVector()
    if kind in ("table", "string"):
        offsets = [_encode_table(b, schema, elem, v) if kind == "table" else b.CreateString(v) for v in values]
        b.StartVector(4, len(offsets), 4)
        for off in reversed(offsets):
            b.PrependUOffsetTRelative(off)
        return b.EndVector()
    scalar = schema.scalar_of(elem)
    size = SCALARS[scalar][1]
    prepend = {
        "bool": b.PrependBool, "byte": b.PrependInt8, "ubyte": b.PrependUint8, "short": b.PrependInt16,
        "ushort": b.PrependUint16, "int": b.PrependInt32, "uint": b.PrependUint32, "long": b.PrependInt64,
        "ulong": b.PrependUint64, "float": b.PrependFloat32, "double": b.PrependFloat64,
    }[scalar]
    b.StartVector(size, len(values), size)
    for v in reversed(values):
        prepend(_enum_value(schema, elem, v) if kind == "enum" else v)
    return b.EndVector()


def _encode_table(b: flatbuffers.Builder, schema: Schema, name: str, obj: dict[str, Any]) -> int:
    table = schema.tables[name]
    unknown = set(obj) - {f.name for f in table.fields}
    if unknown:
        raise KeyError(f"{name} has no field(s) {sorted(unknown)}")
    # Children first: a flatbuffer is built back to front.
    children: dict[str, int] = {}
    for f in table.fields:
        value = obj.get(f.name)
        if value is None or (f.is_vector and len(value) == 0):
            continue  # an absent vector reads as empty: decode(encode(x)) round-trips
        kind = schema.kind(f.type)
        if f.is_vector:
            children[f.name] = _encode_vector(b, schema, f.type, list(value))
        elif kind == "string":
            children[f.name] = b.CreateString(value)
        elif kind == "table":
            children[f.name] = _encode_table(b, schema, f.type, value)
        elif kind == "union":
            member, body = value
            children[f.name] = _encode_table(b, schema, member, body)
        elif kind == "struct":
            raise NotImplementedError(f"{name}.{f.name}: structs are supported in vectors only")
    last = table.fields[-1]
    b.StartObject(last.slot + (2 if schema.kind(last.type) == "union" else 1))
    for f in table.fields:
        value = obj.get(f.name)
        if value is None or (f.is_vector and f.name not in children):
            continue
        kind = schema.kind(f.type)
        if f.name in children:
            if kind == "union":
                members = schema.unions[f.type].members
                b.PrependUint8Slot(f.slot, members.index(value[0]) + 1, 0)
                b.PrependUOffsetTRelativeSlot(f.slot + 1, children[f.name], 0)
            else:
                b.PrependUOffsetTRelativeSlot(f.slot, children[f.name], 0)
        else:
            v = _enum_value(schema, f.type, value) if kind == "enum" else value
            _prepend_scalar_slot(b, schema.scalar_of(f.type), f.slot, v, f.default)
    return b.EndObject()


def encode(obj: dict[str, Any], schema: Schema | None = None) -> bytes:
    """Serialize a root table given as nested dicts: vectors as lists, enums by
    name or value, unions as (member table name, dict)."""
    schema = schema or load()
    b = flatbuffers.Builder(1024)
    root = _encode_table(b, schema, schema.root, obj)
    b.Finish(root, file_identifier=schema.identifier.encode())
    return bytes(b.Output())


# --------------------------------------------------------------------------------------------
# Decoding (host side: trusts nothing it does not need, but is not the device's verifier)


def _u32(buf: bytes, pos: int) -> int:
    return struct.unpack_from("<I", buf, pos)[0]


def _decode_table(buf: bytes, schema: Schema, name: str, pos: int, derived: bool = False) -> dict[str, Any]:
    vt = pos - struct.unpack_from("<i", buf, pos)[0]
    vsize = struct.unpack_from("<H", buf, vt)[0]

    def field_pos(slot: int) -> int | None:
        vo = 4 + 2 * slot
        off = struct.unpack_from("<H", buf, vt + vo)[0] if vo < vsize else 0
        return pos + off if off else None

    out: dict[str, Any] = {}
    for f in table_fields(schema, name):
        if "tmcu_derived" in f.attributes and not derived:
            continue
        kind = schema.kind(f.type)
        if kind == "union":
            tpos, vpos = field_pos(f.slot), field_pos(f.slot + 1)
            if tpos is None or vpos is None:
                out[f.name] = None
                continue
            member = schema.unions[f.type].members[buf[tpos] - 1]
            out[f.name] = (member, _decode_table(buf, schema, member, vpos + _u32(buf, vpos)))
            continue
        p = field_pos(f.slot)
        if f.is_vector:
            out[f.name] = [] if p is None else _decode_vector(buf, schema, f.type, p + _u32(buf, p))
        elif kind == "string":
            out[f.name] = None if p is None else _decode_string(buf, p + _u32(buf, p))
        elif kind == "table":
            out[f.name] = None if p is None else _decode_table(buf, schema, f.type, p + _u32(buf, p))
        else:
            fmt = SCALARS[schema.scalar_of(f.type)][0]
            value = f.default if p is None else struct.unpack_from("<" + fmt, buf, p)[0]
            if kind == "enum":
                names = {v: k for k, v in schema.enums[f.type].values.items()}
                value = names.get(value, value)
            out[f.name] = value
    return out


def _decode_string(buf: bytes, pos: int) -> str:
    n = _u32(buf, pos)
    return buf[pos + 4 : pos + 4 + n].decode()


def _decode_vector(buf: bytes, schema: Schema, elem: str, pos: int) -> list[Any]:
    n = _u32(buf, pos)
    kind = schema.kind(elem)
    if kind == "struct":
        size = schema.structs[elem].size
        return [unpack_struct(elem, buf, pos + 4 + i * size, schema) for i in range(n)]
    if kind == "table":
        return [_decode_table(buf, schema, elem, p + _u32(buf, p)) for p in range(pos + 4, pos + 4 + 4 * n, 4)]
    if kind == "string":
        return [_decode_string(buf, p + _u32(buf, p)) for p in range(pos + 4, pos + 4 + 4 * n, 4)]
    fmt = SCALARS[schema.scalar_of(elem)][0]
    return list(struct.unpack_from(f"<{n}{fmt}", buf, pos + 4))


def table_fields(schema: Schema, name: str) -> list[Field]:
    return schema.tables[name].fields


def decode(buf: bytes, schema: Schema | None = None, derived: bool = False) -> dict[str, Any]:
    """Read a root table back into nested dicts (enums as names). Fields
    marked tmcu_derived are left out unless `derived`."""
    schema = schema or load()
    if buf[4:8] != schema.identifier.encode():
        raise ValueError(f"not a torchmcu program: identifier {buf[4:8]!r}, expected {schema.identifier!r}")
    return _decode_table(buf, schema, schema.root, _u32(buf, 0), derived)
