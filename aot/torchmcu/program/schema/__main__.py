"""Write the runtime's C++ accessors for the program schema.

    python -m torchmcu.program.schema [OUT]   (default: firmware/core/program_generated.h)

The header is committed; tests/test_schema.py fails when it is stale.

Fields marked `tmcu_tool` get no accessor and no verification: the runtime
cannot read what it does not verify. Tables reachable only through such
fields are left out altogether. Structs become plain C++ structs with
static_asserts on their layout; vectors of structs are read in place.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

from ...sources import REPO
from . import SCHEMA_PATH, Field, Schema, Struct, load

DEFAULT_OUT = REPO / "firmware" / "core" / "program_generated.h"

CPP_SCALARS = {
    "bool": "bool", "byte": "int8_t", "ubyte": "uint8_t", "short": "int16_t", "ushort": "uint16_t",
    "int": "int32_t", "uint": "uint32_t", "long": "int64_t", "ulong": "uint64_t",
    "float": "float", "double": "double",
}


def _literal(value: object, cpp_type: str) -> str:
    if cpp_type in ("float", "double"):
        assert isinstance(value, float)
        if math.isinf(value):
            return ("-" if value < 0 else "") + f"std::numeric_limits<{cpp_type}>::infinity()"
        return repr(value) + ("f" if cpp_type == "float" else "")
    if cpp_type == "bool":
        return "true" if value else "false"
    return str(value)


def _accessor(schema: Schema, f: Field) -> list[str]:
    vo = 4 + 2 * f.slot
    kind = schema.kind(f.type)
    if f.is_vector:
        if kind == "struct":
            return [f"  fb::StructVector<{f.type}> {f.name}() const {{ return fb::StructVector<{f.type}>(deref({vo})); }}"]
        if kind == "table":
            return [f"  fb::TableVector<{f.type}> {f.name}() const {{ return fb::TableVector<{f.type}>(deref({vo})); }}"]
        elem = f.type if kind == "enum" else CPP_SCALARS[schema.scalar_of(f.type)]
        return [f"  fb::Vector<{elem}> {f.name}() const {{ return vector<{elem}>({vo}); }}"]
    if kind == "string":
        return [f"  fb::String {f.name}() const {{ return string({vo}); }}"]
    if kind == "table":
        return [f"  {f.type} {f.name}() const {{ return table<{f.type}>({vo}); }}"]
    if kind == "union":
        lines = [
            f"  {f.type} {f.name}_type() const {{ return static_cast<{f.type}>(scalar<uint8_t>({vo}, 0)); }}",
        ]
        for member in schema.unions[f.type].members:
            lines.append(
                f"  {member} {f.name}_as_{member}() const {{ return {f.name}_type() == {f.type}::{member} "
                f"? table<{member}>({vo + 2}) : {member}(); }}"
            )
        return lines
    scalar = CPP_SCALARS[schema.scalar_of(f.type)]
    if kind == "enum":
        return [f"  {f.type} {f.name}() const {{ return static_cast<{f.type}>(scalar<{scalar}>({vo}, {f.default})); }}"]
    if scalar == "bool":
        return [f"  bool {f.name}() const {{ return scalar<uint8_t>({vo}, {int(f.default)}) != 0; }}"]
    return [f"  {scalar} {f.name}() const {{ return scalar<{scalar}>({vo}, {_literal(f.default, scalar)}); }}"]


def _verify(schema: Schema, f: Field) -> list[str]:
    """Lines checking field f through `f_` (a Verifier::Fields of the table)."""
    vo = 4 + 2 * f.slot
    kind = schema.kind(f.type)
    if f.is_vector:
        if kind == "struct":
            return [f"    if (!f_.struct_vector<{f.type}>({vo})) return false;"]
        if kind == "table":
            return [f"    if (!f_.table_vector<{f.type}>({vo})) return false;"]
        return [f"    if (!f_.vector<{CPP_SCALARS[schema.scalar_of(f.type)]}>({vo})) return false;"]
    if kind == "string":
        return [f"    if (!f_.string({vo})) return false;"]
    if kind == "table":
        return [f"    if (!f_.table<{f.type}>({vo})) return false;"]
    if kind == "union":
        lines = [
            f"    if (!f_.scalar<uint8_t>({vo})) return false;",
            f"    switch ({f.name}_type()) {{",
            f"      case {f.type}::NONE: break;",
        ]
        for member in schema.unions[f.type].members:
            lines.append(f"      case {f.type}::{member}: if (!f_.table<{member}>({vo + 2})) return false; break;")
        lines += ["      default: return false;", "    }"]
        return lines
    return [f"    if (!f_.scalar<{CPP_SCALARS[schema.scalar_of(f.type)]}>({vo})) return false;"]


def _runtime_fields(t) -> list[Field]:
    return [f for f in t.fields if "tmcu_tool" not in f.attributes]


def _reachable_tables(schema: Schema) -> list[str]:
    """Tables the runtime can reach from the root through non-tool fields, in
    schema order."""
    seen: set[str] = set()
    todo = [schema.root]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for f in _runtime_fields(schema.tables[name]):
            kind = schema.kind(f.type)
            if kind == "table":
                todo.append(f.type)
            elif kind == "union":
                todo += schema.unions[f.type].members
    return [t for t in schema.tables if t in seen]


def _struct(schema: Schema, st: Struct) -> list[str]:
    out = [f"struct {st.name} {{"]
    for f in st.fields:
        kind = schema.kind(f.type)
        ctype = f.type if kind in ("enum", "struct") else CPP_SCALARS[f.type]
        out.append(f"  {ctype} {f.name}{f'[{f.array_len}]' if f.array_len else ''};")
    layout = f"sizeof({st.name}) == {st.size} && alignof({st.name}) == {st.align}"
    out += ["};", f"static_assert({layout}, \"{st.name}: flatbuffers layout\");"]
    out += [f"static_assert(offsetof({st.name}, {f.name}) == {f.offset}, \"{st.name}.{f.name}\");" for f in st.fields]
    return out + [""]


def generate(schema: Schema) -> str:
    ns = schema.namespace.split(".")
    out = [
        f"// Generated by `python -m torchmcu.program.schema` from aot/torchmcu/program/schema/{SCHEMA_PATH.name}.",
        "// Do not edit: change the schema and run the generator again.",
        "#ifndef TORCHMCU_CORE_PROGRAM_GENERATED_H_",
        "#define TORCHMCU_CORE_PROGRAM_GENERATED_H_",
        "",
        "#include <cstddef>",
        "#include <cstdint>",
        "#include <limits>",
        "",
        '#include "core/flatbuffer.h"',
        "",
        *[f"namespace {n} {{" for n in ns],
        "",
        f'constexpr char kFileIdentifier[] = "{schema.identifier}";',
        "",
    ]
    for e in schema.enums.values():
        out.append(f"enum class {e.name} : {CPP_SCALARS[e.base]} {{")
        out += [f"  {k} = {v}," for k, v in e.values.items()]
        out += ["};", f"constexpr uint32_t kNum{e.name} = {max(e.values.values()) + 1};", ""]
    for u in schema.unions.values():
        out.append(f"enum class {u.name} : uint8_t {{")
        out.append("  NONE = 0,")
        out += [f"  {m} = {i + 1}," for i, m in enumerate(u.members)]
        out += ["};", ""]
    for st in schema.structs.values():
        out += _struct(schema, st)
    tables = [schema.tables[n] for n in _reachable_tables(schema)]
    out += [f"class {t.name};" for t in tables] + [""]
    for t in tables:
        out += [f"class {t.name} : public fb::Table {{", " public:", "  using fb::Table::Table;"]
        for f in _runtime_fields(t):
            out += _accessor(schema, f)
        out += ["  bool verify(fb::Verifier& v) const {", "    const fb::Verifier::Fields f_(v, *this);"]
        for f in _runtime_fields(t):
            out += _verify(schema, f)
        out += ["    return true;", "  }", "};", ""]
    out += [f"}}  // namespace {n}" for n in reversed(ns)]
    out += ["", "#endif  // TORCHMCU_CORE_PROGRAM_GENERATED_H_", ""]
    return "\n".join(out)


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else DEFAULT_OUT
    out.write_text(generate(load()))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
