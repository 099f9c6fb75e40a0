"""The op table: the one home of every op's facts, one file per op family
(the families of passes/lowering and reference: conv.py, pool_resize.py,
...; delegates.py for accelerator calls). Plain data that imports nothing
else of the package, so every stage reads it: the schema's argument
records, the interpreter, the planner's in-place rules, the kernel tables
and the docs.

Two kinds of row (row.py):
- `Kernel`: a program op code (CONV2D_S8): its number, argument record,
  in-place inputs, the backends that run it, whether the .tflite export and
  the reference have it, its comment in program.fbs.
- `Op`: a logical op of the lowering (conv2d): the ATen targets whose rules
  emit it and the program ops it becomes at each precision.

Generated from the table (`python -m torchmcu.ops_table --write`; each is
committed and tests/test_ops_table.py fails when one is stale):
- program.fbs's `enum OpCode` (then `python -m torchmcu.program.schema`
  writes firmware/core/program_generated.h from it);
- firmware/kernels/portable/kernels.h and firmware/kernels/cmsis_nn/kernels.h
  (the kernel objects' declarations and their in-place masks);
- docs/ops.md.
Read from it at run time: records.ARGS, interpret.INPLACE,
plan.aliasing.INPLACE_CODES, the kernel folders' codes
(program/kernel_table.py) and the exporter's and reference's coverage
(checked by tests/test_ops_table.py).
"""

from __future__ import annotations

from . import activations, attention_norm, conv, delegates, elementwise, pool_resize, recurrent, reduce, shape_views
from .row import BACKENDS, Kernel, Op

# The families in the order of passes/lowering's FAMILIES, then the delegates.
FAMILIES: dict[str, object] = {
    "conv": conv,
    "pool_resize": pool_resize,
    "elementwise": elementwise,
    "reduce": reduce,
    "shape_views": shape_views,
    "activations": activations,
    "attention_norm": attention_norm,
    "recurrent": recurrent,
    "delegates": delegates,
}


def _merge() -> tuple[dict[str, Kernel], dict[str, str], tuple[Op, ...]]:
    kernels: dict[str, Kernel] = {}
    family: dict[str, str] = {}
    values: dict[int, str] = {}
    ops: list[Op] = []
    for name, module in FAMILIES.items():
        for k in module.KERNELS:  # type: ignore[attr-defined]
            if k.code in kernels or k.value in values:
                raise AssertionError(f"op table: {k.code} = {k.value} declared twice (family {name})")
            bad = set(k.backends) - set(BACKENDS)
            if bad:
                raise AssertionError(f"op table: {k.code}: unknown backends {sorted(bad)}")
            kernels[k.code], family[k.code], values[k.value] = k, name, k.code
        ops.extend(module.OPS)  # type: ignore[attr-defined]
    for op in ops:
        for code in op.f32 + op.i8 + op.i16:
            if code not in kernels:
                raise AssertionError(f"op table: op {op.name} names {code}, which no Kernel row declares")
    return dict(sorted(kernels.items(), key=lambda kv: kv[1].value)), family, tuple(ops)


# Every program op code, in op code order.
KERNELS, FAMILY_OF, OPS = _merge()

# code -> (args struct, the params table its arguments come from, or None): the
# codes that have arguments (program/schema/records.py).
ARGS: dict[str, tuple[str, str | None]] = {c: (k.args, k.params) for c, k in KERNELS.items() if k.args}

# code -> the inputs its output may alias (the runtime's Kernel::inplace).
INPLACE: dict[str, tuple[int, ...]] = {c: k.inplace for c, k in KERNELS.items() if k.inplace}


# ATen target -> the logical ops its rule may emit; logical op -> its Op row(s).
EMITS: dict[str, frozenset[str]] = {t: frozenset(op.name for op in OPS if t in op.aten)
                                    for t in {t for op in OPS for t in op.aten}}
BY_NAME: dict[str, tuple[Op, ...]] = {name: tuple(op for op in OPS if op.name == name)
                                      for name in {op.name for op in OPS}}

# Program ops the layout itself adds around any op: a change of layout, a copy.
LAYOUT_CODES = frozenset({"PERMUTE", "COPY"})


def becomes(logical: str, bits: int | None) -> frozenset[str]:
    """The program ops the table says a logical node becomes: `logical` as
    the graph names it ("conv2d"; "qconv2d" at int8, or int16 with bits 16)."""
    quant = logical.startswith("q") and logical[1:] in BY_NAME
    name = logical[1:] if quant else logical
    out: set[str] = set()
    for op in BY_NAME.get(name, ()):
        if bits == 16:
            out |= set(op.i16)
        elif quant or (not op.f32 and op.i8):  # quantize/dequantize: integer ops named without the q
            out |= set(op.i8)
        else:
            out |= set(op.f32)
    return frozenset(out)


def codes(backend: str) -> list[str]:
    """The op codes a backend runs, in op code order."""
    return [c for c, k in KERNELS.items() if backend in k.backends]


def enum_values() -> dict[str, int]:
    return {c: k.value for c, k in KERNELS.items()}


__all__ = [
    "ARGS",
    "BACKENDS",
    "BY_NAME",
    "EMITS",
    "FAMILIES",
    "FAMILY_OF",
    "INPLACE",
    "KERNELS",
    "LAYOUT_CODES",
    "OPS",
    "Kernel",
    "Op",
    "becomes",
    "codes",
    "enum_values",
]
