"""The table of supported ops, generated from the code: `python -m
torchmcu.ops_table` prints it (docs/ops.md holds a copy that
tests/test_ops_table.py checks is current; `--write` rewrites it).

For each ATen op a lowering family has a rule for (passes/lowering/):
- the logical ops its rule emits (read from the rule's source, following
  the family's own helpers it calls);
- per precision, whether an integer kernel runs it: float32 where the
  logical op has an emitter; int8 / a16w8 where the family declares an
  int8 / int16 kernel for it (F.int8 / F.int16, some instances only:
  "some") and an emitter of its q form; int4 (W4A8) where that emitter
  makes an _S4 op (weights in int4), "int8" where the op runs at int8 in a
  W4A8 program;
- and, per program op code, which backends have a kernel for it:
  portable and cmsis-nn from their kernels.h, ethos-u from the ops its
  TOSA lowering handles, hifi from the ops nnlib can claim.
The ops capture decomposes (frontend/capture.DECOMPOSITIONS) are listed
with what they become.
"""

from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path
from typing import Any

from .backends import all_backends
from .frontend.capture import DECOMPOSITIONS
from .passes.lowering import ALL, FAMILIES
from .program import schema

DOC = Path(__file__).resolve().parents[2] / "docs" / "ops.md"
PRECISIONS = ("float32", "int8", "int4", "a16w8")
BACKENDS = ("portable", "cmsis-nn", "ethos-u", "hifi")


def _codes() -> list[str]:
    return list(schema.load().enums["OpCode"].values)


def _strings(fn: Any, module: Any, pattern: str, seen: set[Any] | None = None) -> set[str]:
    """The string literals matching `pattern` in fn's source and in the
    source of the functions of its module it calls."""
    seen = seen if seen is not None else set()
    if fn in seen:
        return set()
    seen.add(fn)
    try:
        src = inspect.getsource(fn)
    except (OSError, TypeError):
        return set()
    found = set(re.findall(pattern, src))
    for name in re.findall(r"\b(_?\w+)\(", src):
        other = getattr(module, name, None)
        if inspect.isfunction(other) and other.__module__ == module.__name__:
            found |= _strings(other, module, pattern, seen)
    return found


def _emitted_codes(logical: str) -> set[str]:
    """The program op codes the emitter of a logical op (or its q / int16
    form) can make: string literals, and the f-strings built from the
    logical op's name (f"{n.op.upper()}_F32")."""
    codes = set(_codes())
    out: set[str] = set()
    for table in (ALL.emitters, ALL.emitters16):
        fn = table.get(logical)
        if fn is None:
            continue
        module = sys.modules[fn.__module__]
        src_strings = _strings(fn, module, r'"([A-Z0-9_]+)"')
        out |= src_strings & codes
        try:
            src = inspect.getsource(fn)
        except OSError:
            src = ""
        for strip, suffix in re.findall(r'f"\{n\.op(\[1:\])?\.upper\(\)\}(_[A-Z0-9]+)"', src):
            name = logical[1:] if strip else logical
            if f"{name.upper()}{suffix}" in codes:
                out.add(f"{name.upper()}{suffix}")
    if any(c.endswith("_S8") for c in out):  # the int16 forms rename the int8 code (S8 -> S16)
        out |= {c[:-2] + "S16" for c in out if c.endswith("_S8") and c[:-2] + "S16" in codes
                and ALL.emitters16.get(logical) is not None}
    return out


def _logical_ops(rule: Any) -> set[str]:
    """The logical ops a rule can emit: the op names quoted in its source
    (and in its family's helpers it calls), or bound in its closure (rules
    made by a factory, `_unary("sigmoid")`)."""
    module = sys.modules[rule.__module__]
    names = _strings(rule, module, r'"(\w+)"')
    names |= {v for v in inspect.getclosurevars(rule).nonlocals.values() if isinstance(v, str)}
    return {n for n in names if n in ALL.emitters}


def _backend_codes() -> dict[str, set[str]]:
    """Each backend's program op codes (Backend.op_codes)."""
    return {b.name: b.op_codes() for b in reversed(all_backends().values())}


def rows() -> list[dict[str, Any]]:
    """One row per ATen op with a rule, by family."""
    out = []
    for fam in FAMILIES:
        for target, rule in sorted(fam.rules.items(), key=lambda kv: str(kv[0])):
            logical = sorted(_logical_ops(rule))
            prec: dict[str, str] = {}
            codes: set[str] = set()
            for op in logical:
                codes |= _emitted_codes(op) | _emitted_codes("q" + op)
            has = {p: [] for p in PRECISIONS}
            for op in logical:
                has["float32"].append(op in ALL.emitters)
                has["int8"].append(op in ALL.int8_ops and "q" + op in ALL.emitters)
                has["a16w8"].append(op in ALL.int16_ops and "q" + op in ALL.emitters16)
            for p in ("float32", "int8", "a16w8"):
                prec[p] = "yes" if has[p] and all(has[p]) else ("some" if any(has[p]) else "-")
            if any(c.endswith("_S8") and c[:-2] + "S4" in _codes() for c in codes) and prec["int8"] != "-":
                prec["int4"] = "yes"  # the int8 emitter's weights at int4 (the _S4 form of its op)
                codes |= {c[:-2] + "S4" for c in codes if c.endswith("_S8") and c[:-2] + "S4" in _codes()}
            else:
                prec["int4"] = "int8" if prec["int8"] != "-" else "-"
            if not logical:  # the identity, a constant, or a tuple of other rules' values
                prec = {p: "yes" for p in PRECISIONS}
            out.append({"aten": str(target), "family": fam.name, "logical": logical, "codes": sorted(codes), **prec})
    return out


def code_rows() -> list[dict[str, Any]]:
    """One row per program op code: which backends have a kernel for it."""
    backends = _backend_codes()
    return [{"code": c, **{b: "yes" if c in backends[b] else "-" for b in BACKENDS}}
            for c in _codes() if any(c in backends[b] for b in BACKENDS)]


def markdown() -> str:
    lines = [
        "# Supported operators",
        "",
        "Generated by `python -m torchmcu.ops_table` from the lowering families, the kernel",
        "folders' kernels.h and the backends (do not edit by hand; tests/test_ops_table.py",
        "checks that this file is current). Precision: `yes` every instance has an integer",
        "kernel, `some` only some instances (the rest run in float32 between dequantize and",
        "quantize, with a warning), `-` float32 only. int4 is W4A8: `yes` the op's weights are",
        "int4, `int8` the op runs at int8 in a W4A8 program. The second table says which",
        "backend runs each program op.",
        "",
        "An op not listed here is refused at compile time, naming it, its operand shapes",
        "and the user's source line (for an op inside torchvision or torch.nn, the module",
        "path and class and the user's line that leads there), e.g.:",
        "",
        "```",
        "$ torchmcu compile model.py:make --board mps3-an547 -o out",
        "torchmcu: error: unsupported operator: no torchmcu backend lowers it",
        "  op: aten.cumsum.default",
        "  shapes: (1, 8)",
        "  at: \"model.py\", line 8, in forward: return torch.cumsum(y, dim=1)",
        "```",
        "",
        "and inside a library module (here torchvision's MobileNetV3 before hardsigmoid had a kernel):",
        "",
        "```",
        "torchmcu: error: unsupported operator: no torchmcu backend lowers it",
        "  op: aten.hardsigmoid.default",
        "  shapes: (1, 16, 1, 1)",
        "  at: features.1.block.1.scale_activation (torch.nn.Hardsigmoid)",
        "```",
        "",
        "(with `from \"model.py\", line N, in forward: ...` after the module when the model is the",
        "user's own module calling into the library).",
        "",
        "| ATen op | family | logical ops | float32 | int8 | int4 | a16w8 |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows():
        lines.append(f"| `{r['aten']}` | {r['family']} | {', '.join(r['logical']) or '(none)'} | {r['float32']} | "
                     f"{r['int8']} | {r['int4']} | {r['a16w8']} |")
    lines += ["", "## Program ops by backend", "",
              "Where each program op can run: portable and cmsis-nn from their kernels.h (cmsis-nn: with",
              "`--kernels cmsis-nn`, or a board that lists it), ethos-u where its TOSA lowering handles the",
              "op (in an NPU partition, checked per instance), hifi where nnlib may claim it.", "",
              "| program op | " + " | ".join(BACKENDS) + " |", "|---|" + "---|" * len(BACKENDS)]
    for r in code_rows():
        lines.append(f"| {r['code']} | " + " | ".join(r[b] for b in BACKENDS) + " |")
    lines += ["", "## Decomposed at capture", "",
              "capture runs `run_decompositions` with one curated table (frontend/capture.py): these ops",
              "become the ops above (in-place ops such as `relu_` and `add_` become their functional",
              "forms; dropout in eval disappears).", ""]
    for target in sorted(DECOMPOSITIONS, key=str):
        lines.append(f"- `{target}`")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    text = markdown()
    if "--write" in argv:
        DOC.write_text(text)
        print(f"wrote {DOC}")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
