"""The compile driver: nn.Module -> a build directory.

    capture -> lower (graph passes) -> layout -> plan -> serialize

Writes into OUT: model.pte, model_pte.{c,h}, model_arenas.{c,h},
kernel_table.cc, kernels.txt (selective build), memory_plan.json,
report.json + report.txt, model.json (what `build` and `run` need), and
the exported program (model.pt2) that `run --check` takes as the reference.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from . import serialize
from .boards import Board, load_board
from .capture import capture
from .errors import CompileError
from .layout import PGraph, to_program_graph
from .lower import lower
from .plan import Plan, plan


@dataclass
class Compiled:
    out_dir: Path
    board: Board
    graph: PGraph
    plan: Plan
    pte: bytes
    report: dict[str, Any]


def choose_arena_memory(board: Board, size: int) -> str:
    """The fastest memory that may hold arenas and has room for `size`
    (beside the stack, when it shares the memory)."""
    candidates = sorted((m for m in board.memories if "arena" in m.holds), key=lambda m: m.speed)
    for m in candidates:
        room = m.size - (board.stack_size if m.name == board.data_memory else 0)
        if size <= room:
            return m.name
    best = max((m.size for m in candidates), default=0)
    raise CompileError(
        f"the model needs {size} bytes of activations in one arena, but the largest memory of "
        f"board {board.name} that can hold arenas has {best} bytes (short by {size - best})")


# Room left in the code memory for the runtime, kernels and startup when a
# program shares it.
CODE_RESERVE = 128 * 1024


def choose_program_memory(board: Board, size: int, quant: str = "float32") -> str:
    """The code memory when the program fits beside the code, else the
    fastest memory that may hold read-only data and has room."""
    code = board.memory(board.code_memory)
    if size + CODE_RESERVE <= code.size:
        return code.name
    others = sorted((m for m in board.memories if "rodata" in m.holds and m is not code), key=lambda m: m.speed)
    for m in others:
        if size <= m.size:
            return m.name
    hint = " (int8 quantization makes weights 4x smaller: --quant int8)" if quant == "float32" else ""
    raise CompileError(f"the program is {size:,} bytes but no memory of board {board.name} that can hold "
                       f"programs has room: {', '.join(f'{m.name} {m.size:,} B' for m in [code, *others])}{hint}")


def _tensor_meta(t: Any, name: str, ptensor: Any) -> dict[str, Any]:
    meta = {"name": name, "shape": list(t.shape), "dtype": "float32"}
    if ptensor.dtype == "I8":
        meta.update(dtype="int8", scale=ptensor.scale, zero_point=ptensor.zero_point)
    return meta


QUANT_SCHEMES = ("float32", "int8")
# Ops that carry data between dtypes or move bytes: not a float fallback.
_NOT_FALLBACK = {"PERMUTE", "CONCAT", "COPY", "PAD", "QUANTIZE_S8", "DEQUANTIZE_S8"}


def compile(model: torch.nn.Module, example_inputs: tuple[Any, ...], board: str | Board,
            out_dir: str | Path, quant: str = "float32", calibration: Any = None,
            progress: bool = True, io: str = "float") -> Compiled:
    """Compile `model` for `board` into `out_dir` (created).

    quant: "float32", or "int8" (post-training quantization calibrated on
    `calibration`: an iterable of samples or a mapping of arrays with samples
    along axis 0; the example inputs when None). Inputs and outputs stay
    float32 (the program quantizes and dequantizes at its edges) unless
    io="int8": then the program takes and gives int8 at the scales of its
    first and last ops (model.json records them), saving the float buffers.
    """
    board = board if isinstance(board, Board) else load_board(board)
    if quant not in QUANT_SCHEMES:
        raise CompileError(f"unknown quantization scheme {quant!r}; choose one of {', '.join(QUANT_SCHEMES)}")
    if io not in ("float", "int8") or (io == "int8" and quant != "int8"):
        raise CompileError(f"io={io!r}: inputs and outputs are 'float', or 'int8' for an int8 program")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if not isinstance(example_inputs, (tuple, list)):
        example_inputs = (example_inputs,)  # one input; capture() checks it is a tensor
    example_inputs = tuple(example_inputs)

    if quant == "int8":
        from .quantize import is_quantized, quantize

        if not is_quantized(model):  # else: quantized by the user (QAT), taken as it is
            model = quantize(model, example_inputs, calibration, progress=progress)
    ep = capture(model, example_inputs)
    graph = lower(ep, io)
    pg = to_program_graph(graph)
    if quant == "int8":
        _warn_fallbacks(pg)
    mem = plan(pg)
    arena = serialize.ArenaSpec(choose_arena_memory(board, mem.arena_bytes), mem.arena_bytes)
    prog, segment = serialize.program_dict(pg, mem, arena)
    pte = serialize.to_pte(prog, segment)
    program_memory = choose_program_memory(board, len(pte), quant)
    (out / "model.pte").write_bytes(pte)
    h, c = serialize.model_pte_sources(pte)
    (out / "model_pte.h").write_text(h)
    (out / "model_pte.c").write_text(c)
    h, c = serialize.model_arena_sources([arena])
    (out / "model_arenas.h").write_text(h)
    (out / "model_arenas.c").write_text(c)
    codes = sorted({op.code for op in pg.ops})
    (out / "kernel_table.cc").write_text(serialize.kernel_table_source(codes))
    (out / "kernels.txt").write_text("".join(f"{c}\n" for c in codes))
    torch.export.save(ep, str(out / "model.pt2"))

    with torch.no_grad():
        ref = ep.module()(*example_inputs)
    refs = ref if isinstance(ref, (tuple, list)) else (ref,)
    meta = {
        "board": board.name,
        "program_memory": program_memory,
        "arenas": [{"name": arena.name, "section": serialize.arena_section(arena), "size": arena.size}],
        "inputs": [_tensor_meta(x, pg.tensors[t].name, pg.tensors[t]) for x, t in zip(example_inputs, pg.inputs)],
        "outputs": [_tensor_meta(r, f"output_{k}", pg.tensors[t]) for k, (r, t) in enumerate(zip(refs, pg.outputs))],
        "float_tolerance": FLOAT_TOLERANCE,
        "quant": quant,
    }
    (out / "model.json").write_text(json.dumps(meta, indent=2) + "\n")
    np.savez(out / "example_inputs.npz", *[x.detach().numpy() for x in example_inputs])

    report = make_report(board, pg, mem, arena, pte, len(segment))
    (out / "memory_plan.json").write_text(json.dumps(memory_plan(pg, mem, arena), indent=2) + "\n")
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / "report.txt").write_text(format_report(report))
    return Compiled(out, board, pg, mem, pte, report)


# Float programs are checked against PyTorch within |a - b| <= atol + rtol * |b|,
# atol scaled by the output's magnitude: the kernels sum in a different order
# than PyTorch's, and expf/tanhf differ from PyTorch's by an ulp or two.
FLOAT_TOLERANCE = {"rtol": 1e-5, "atol_scale": 1e-5}


def _warn_fallbacks(pg: PGraph) -> None:
    import warnings

    for op in pg.ops:
        if op.code not in _NOT_FALLBACK and not op.code.endswith("_S8"):
            where = f" at {op.source}" if op.source else ""
            warnings.warn(f"torchmcu: {op.kind} ({op.name}) has no int8 kernel here; it runs in float32{where}",
                          stacklevel=3)
            op.backend = "portable (float fallback)"


def memory_plan(pg: PGraph, mem: Plan, arena: serialize.ArenaSpec) -> dict[str, Any]:
    buffers = []
    for b, (first, last) in sorted(mem.lifetimes.items()):
        names = [t.name for t in pg.tensors if t.buffer == b]
        buffers.append({"buffer": b, "tensors": names, "bytes": pg.buffers[b], "offset": mem.offsets[b],
                        "first_op": first, "last_op": last})
    return {"arena": arena.name, "arena_bytes": mem.arena_bytes, "lower_bound_bytes": mem.lower_bound_bytes,
            "buffers": buffers}


def meta_quant(pg: PGraph) -> str:
    return "int8" if any(op.code.endswith("_S8") for op in pg.ops) else "float32"


def make_report(board: Board, pg: PGraph, mem: Plan, arena: serialize.ArenaSpec, pte: bytes,
                constant_bytes: int) -> dict[str, Any]:
    ops = [{"index": i, "name": op.name, "kind": op.kind, "code": op.code, "backend": op.backend,
            "macs": op.macs, "source": op.source} for i, op in enumerate(pg.ops)]
    coverage: dict[str, int] = {}
    for op in pg.ops:
        coverage[op.backend] = coverage.get(op.backend, 0) + 1
    ratio = mem.arena_bytes / mem.lower_bound_bytes if mem.lower_bound_bytes else 1.0
    return {
        "board": board.name,
        "quant": meta_quant(pg),
        "ops": ops,
        "coverage": coverage,
        "macs": sum(op.macs for op in pg.ops),
        "memory": {
            "regions": [{"name": arena.name, "planned_bytes": mem.arena_bytes,
                         "lower_bound_bytes": mem.lower_bound_bytes, "ratio": round(ratio, 4)}],
        },
        "flash": {"program_bytes": len(pte), "constant_bytes": constant_bytes,
                  "flatbuffer_bytes": len(pte) - constant_bytes},
        "kernels": sorted({op.code for op in pg.ops}),
    }


def format_report(r: dict[str, Any]) -> str:
    lines = [f"torchmcu report for board {r['board']}", ""]
    lines.append(f"{'#':>3}  {'op':<24} {'kind':<12} {'backend':<9} {'MACs':>10}  source")
    for op in r["ops"]:
        lines.append(f"{op['index']:>3}  {op['name'][:24]:<24} {op['kind']:<12} {op['backend']:<9} "
                     f"{op['macs']:>10}  {op['source'] or ''}")
    lines += ["", f"MACs per inference: {r['macs']:,}", "", "RAM (activations):"]
    for reg in r["memory"]["regions"]:
        lines.append(f"  {reg['name']}: {reg['planned_bytes']:,} B planned, lower bound "
                     f"{reg['lower_bound_bytes']:,} B (ratio {reg['ratio']:.2f})")
    f = r["flash"]
    lines += ["", f"Flash (program): {f['program_bytes']:,} B = {f['flatbuffer_bytes']:,} B program "
              f"+ {f['constant_bytes']:,} B constants", ""]
    return "\n".join(lines)
