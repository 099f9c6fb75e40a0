"""The compile driver: nn.Module -> a build directory.

    capture -> lower (graph passes) -> layout -> plan -> serialize

Writes into OUT: model.pte, model_pte.{c,h}, model_arenas.{c,h}, the
model's C API (NAME.h, NAME.cc: torchmcu.program.c_api), kernel_table.cc,
kernels.txt (selective build), memory_plan.json, report.json + report.txt
(torchmcu.report), model.json (what `build` and `run` need), and the
exported program (model.pt2) that `run --check` takes as the reference.
OUT is replaced whole, under a lock (torchmcu.outdir.replacing).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from . import backends
from .backends import Backend, CompileContext
from .boards import BOARDS_DIR, Board, load_board
from .builder.kernel_table import kernel_table_source
from .errors import CompileError
from .frontend import ranges
from .frontend.capture import capture, check_inputs, from_exported, to_eval
from .ir import PGraph
from .outdir import replacing
from .passes import IO_LAYOUTS, io_perm, lower, to_program_graph
from .plan import Plan, PlanOptions, RegionSpec, copy_hot_weights, make_state, plan
from .program import serialize
from .program.c_api import IoTensor, api_sources, check_api_symbol
from .report import edge_ops, format_report, make_report, memory_picture, memory_plan, meta_quant, placement

__all__ = ["FLOAT_TOLERANCE", "Compiled", "arena_regions", "choose_arena_memory", "choose_program_memory", "compile"]


@dataclass
class Compiled:
    out_dir: Path
    board: Board
    graph: PGraph
    plan: Plan
    pte: bytes
    report: dict[str, Any]


# Bytes kept free in the data memory beside the stack for the runtime's and the
# application's own .data and .bss.
DATA_RESERVE = 4096


def arena_regions(board: Board, budgets: dict[str, int] | None = None, stack: int | None = None) -> list[RegionSpec]:
    """The board's memories that may hold arenas, fastest first, each with
    the bytes an arena may take there: its size, less the stack and a
    reserve in the data memory, capped by the user's budget. `stack`: the
    stack the firmware will have (--stack); default the board's stack_size,
    the most `torchmcu build` gives it (it sizes the stack from the
    computed worst case, usually far less)."""
    budgets = dict(budgets or {})
    stack = board.stack_size if stack is None else stack
    able = sorted((m for m in board.memories if "arena" in m.holds), key=lambda m: (m.speed, m.base))
    unknown = [k for k in budgets if k not in {m.name for m in able}]
    if unknown:
        raise CompileError(f"budget for {', '.join(unknown)}: board {board.name} has no such memory for "
                           f"activations; memories that can hold them: {', '.join(m.name for m in able)}")
    regions = []
    for m in able:
        room = m.size - (stack + DATA_RESERVE if m.name == board.data_memory else 0)
        if m.name in budgets:
            if budgets[m.name] < 0:
                raise CompileError(f"budget for {m.name} must be >= 0, got {budgets[m.name]}")
            room = min(room, budgets[m.name])
        if room > 0:
            regions.append(RegionSpec(m.name, m.speed, room))
    return regions


def state_pairs(state: Any, num_inputs: int, num_outputs: int) -> list[tuple[int, int]]:
    """compile(state=...) as (input, output) index pairs."""
    if state is None or state is False:
        return []
    if isinstance(state, int):
        if not 0 <= state <= min(num_inputs, num_outputs):
            raise CompileError(f"state={state}: the model has {num_inputs} inputs and {num_outputs} outputs")
        return [(num_inputs - state + k, num_outputs - state + k) for k in range(state)]
    try:
        pairs = [(int(i), int(o)) for i, o in state]
    except (TypeError, ValueError):
        raise CompileError(f"state={state!r}: a count, or (input, output) index pairs") from None
    for i, o in pairs:
        if not (0 <= i < num_inputs and 0 <= o < num_outputs):
            raise CompileError(f"state pair ({i}, {o}): the model has {num_inputs} inputs and {num_outputs} outputs")
    if len({i for i, _ in pairs}) != len(pairs) or len({o for _, o in pairs}) != len(pairs):
        raise CompileError(f"state={state!r}: each input and output may carry one state")
    if len(pairs) >= num_inputs:
        raise CompileError("every input is state: the model needs an input that is not")
    return pairs


def without(items: Any, indices: list[int]) -> list[Any]:
    return [x for k, x in enumerate(items) if k not in set(indices)]


def choose_arena_memory(board: Board, size: int) -> str:
    """The fastest memory that may hold `size` bytes of arena."""
    for r in arena_regions(board):
        if size <= r.capacity:
            return r.name
    raise CompileError(f"no memory of board {board.name} has room for an arena of {size:,} bytes")


# Room left in the code memory for the runtime, kernels and startup when a
# program shares it.
CODE_RESERVE = 128 * 1024


def choose_program_memory(board: Board, size: int, quant: str = "float32",
                          reach: tuple[str, ...] | None = None) -> str:
    """The code memory when the program fits beside the code, else the
    fastest memory that may hold read-only data and has room. `reach`: the
    memories an accelerator reading the program in place can reach (the
    NPU's, for a program with Ethos-U command streams and weights)."""
    code = board.memory(board.code_memory)
    if size + CODE_RESERVE <= code.size and (reach is None or code.name in reach):
        return code.name
    others = sorted((m for m in board.memories if "rodata" in m.holds and m is not code
                     and (reach is None or m.name in reach)), key=lambda m: m.speed)
    if reach is not None and not others and code.name not in reach:
        raise CompileError(f"no memory of board {board.name} that can hold programs is reachable by its NPU "
                           f"({', '.join(reach)}): give one of them \"rodata\" in its holds")
    for m in others:
        if size <= m.size:
            return m.name
    hint = " (int8 quantization makes weights 4x smaller: --quant int8)" if quant == "float32" else ""
    raise CompileError(f"the program is {size:,} bytes but no memory of board {board.name} that can hold "
                       f"programs has room: {', '.join(f'{m.name} {m.size:,} B' for m in [code, *others])}{hint}")


_IO_DTYPES = {"F32": "float32", "I8": "int8", "I16": "int16", "I32": "int32"}


def _io_tensor(shape: tuple[int, ...], name: str, ptensor: Any, io_layout: str) -> IoTensor:
    """A model input or output: PyTorch's shape, and how the program holds it."""
    dtype = _IO_DTYPES.get(ptensor.dtype)
    if dtype is None:
        raise CompileError(f"model input/output {name} would be {ptensor.dtype}, which the C API does not describe")
    quantized = dtype != "float32"
    return IoTensor(name, tuple(int(d) for d in shape), io_perm(len(shape), io_layout), dtype,
                    float(ptensor.scale) if quantized else 0.0, int(ptensor.zero_point) if quantized else 0)


QUANT_SCHEMES = ("float32", "int8", "int4", "a16w8")  # int4: W4A8; a16w8: int16 activations (lower_s16.py)
# Ops that carry data between dtypes or move bytes: not a float fallback.
_NOT_FALLBACK = {"PERMUTE", "CONCAT", "COPY", "PAD", "RESIZE_NEAREST", "SLICE", "QUANTIZE_S8", "DEQUANTIZE_S8", "QUANTIZE_S16", "REQUANTIZE",
                 "DEQUANTIZE_S16"}


def compile(model: torch.nn.Module, example_inputs: tuple[Any, ...], board: str | Board,
            out_dir: str | Path, quant: str = "float32", calibration: Any = None,
            progress: bool = True, io: str = "float", budgets: dict[str, int] | None = None,
            pins: dict[str, str] | None = None, inplace: bool = True, copy_hot_weights: bool = False,
            tile: bool = True, tile_recompute: float = 0.05, symbol: str = serialize.DEFAULT_SYMBOL,
            precision: dict[str, str] | int | None = None, backend_names: list[str] | None = None,
            io_layout: str = "nchw", stack: int | None = None,
            state: int | list[tuple[int, int]] | None = None, strict: bool = False,
            crc: bool = False) -> Compiled:
    """Compile `model` for `board` into `out_dir`: written into a temporary
    sibling directory that then replaces `out_dir` whole (whatever an earlier
    compile or build left there is gone; on an error or Ctrl-C `out_dir`
    stays as it was). A second compile into `out_dir` while one runs is
    refused; so is a non-empty `out_dir` that torchmcu did not write.

    model: an nn.Module, or a torch.export.ExportedProgram (example_inputs
    None: the ones it was exported with).

    io_layout: "nchw" (default: inputs and outputs as PyTorch has them) or
    "nhwc": inputs and outputs of 3 and more dims channels last, the order the
    convolutions run in, so that no PERMUTE runs at the edges; with io="int8"
    no QUANTIZE/DEQUANTIZE either. NAME.h and model.json say what was chosen.
    stack: the stack the firmware will have, for the room arenas may take in
    the data memory (default the board's stack_size; `torchmcu build` sizes
    the real stack from its computed worst case).

    quant: "float32", or "int8" (post-training quantization calibrated on
    `calibration`: an iterable of samples or a mapping of arrays with samples
    along axis 0; the example inputs when None). Inputs and outputs stay
    float32 (the program quantizes and dequantizes at its edges) unless
    io="int8": then the program takes and gives int8 at the scales of its
    first and last ops (model.json records them), saving the float buffers.

    Memory: activations go to the board's fastest memories first and spill
    to slower ones. budgets caps a memory ({"dtcm": 16384}; 0 keeps it
    out); pins puts a tensor's or an op's buffers in a memory
    ({"conv1": "sram"}). inplace lets concat inputs live in their output's
    slices and element-wise ops overwrite a dying input. copy_hot_weights
    copies the most-read weights at load into RAM the plan left free, when
    that RAM is faster than the memory the program is in. tile (on by
    default) is patch-based inference: where that lowers the peak RAM, a run
    of early layers executes band by band of rows, so that their large
    outputs never exist whole (bit-exact; the rows the bands share are
    computed again: at most tile_recompute more MACs for the whole model,
    0.05 = 5 %). symbol names
    the generated C arrays (tmcu_<symbol>_pte, tmcu_<symbol>_arenas), so that
    several models link into one firmware. precision overrides the scheme per
    layer ({"conv1": "int16", "fc": "int4"}: module path or node name to
    int4, int8 or int16; see quantize.py), with int8, int4 or a16w8; an int
    instead is a flash budget in bytes for the weights and biases, and
    precision.choose_precision picks each layer's (report.json "precision"
    says what it chose and why). backend_names: the backends that may take
    ops (torchmcu.backends), instead of the board's; the portable kernels run
    the rest. state: a streaming model's state (plan/state.py), as (input,
    output) index pairs of the model's inputs and (flattened) outputs, or N
    for its last N inputs and outputs in order (`forward(x, h, c) -> (y, h,
    c)`: 2): the program keeps it in a persistent arena and updates it each
    execution; its inputs and outputs are the others. strict: calibration
    warnings (degenerate or absurd ranges: frontend/ranges.py) are an error.
    crc: the program carries a CRC32 of all its bytes, which the runtime
    checks when it loads it and refuses a mismatch (ChecksumMismatch): a
    corrupted or half-flashed program is caught (program.fbs Program.crc32).
    """
    try:
        check_api_symbol(symbol)
    except ValueError as e:
        raise CompileError(str(e)) from None
    if not 0 <= tile_recompute <= 10:
        raise CompileError(f"tile_recompute={tile_recompute!r}: a fraction of MACs between 0 and 10 (0.05 = 5 %)")
    if io_layout not in IO_LAYOUTS:
        raise CompileError(f"io_layout={io_layout!r}: choose one of {', '.join(IO_LAYOUTS)}")
    if stack is not None and (stack <= 0 or stack % 8):
        raise CompileError(f"stack={stack}: a positive number of bytes, a multiple of 8")
    if isinstance(model, torch.export.ExportedProgram):
        model, saved = from_exported(model)
        example_inputs = saved if example_inputs is None else example_inputs
    board = board if isinstance(board, Board) else load_board(board)
    if quant not in QUANT_SCHEMES:
        raise CompileError(f"unknown quantization scheme {quant!r}; choose one of {', '.join(QUANT_SCHEMES)}")
    if precision and quant == "float32":
        raise CompileError("precision overrides need a quantized scheme (quant='int8', 'int4' or 'a16w8')")
    if io not in ("float", "int8") or (io == "int8" and quant not in ("int8", "int4")):
        raise CompileError(f"io={io!r}: inputs and outputs are 'float', or 'int8' for an int8 program")
    # Written whole into a temporary sibling that then replaces out_dir: a failed or interrupted compile leaves
    # the previous directory as it was, and a new one keeps nothing of it (no firmware.elf of another program).
    with replacing(out_dir) as out:
        if not isinstance(example_inputs, (tuple, list)):
            example_inputs = (example_inputs,)  # one input
        example_inputs = tuple(example_inputs)
        check_inputs(example_inputs)  # before quantization: the same error at every precision
        user_model = model  # its submodules name the nodes in errors
        model = to_eval(model)
        if len({id(x) for x in example_inputs}) < len(example_inputs):  # one tensor twice (h and c = zeros):
            example_inputs = tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in example_inputs)  # export
            # would make them one input

        chosen = None  # precision.PrecisionPlan, when precision is a budget
        if quant in ("int8", "int4", "a16w8"):
            from .frontend.quantize import is_quantized, quantize

            if isinstance(precision, int) and not isinstance(precision, bool) and not is_quantized(model):
                from .frontend.precision import choose_precision

                chosen = choose_precision(model, example_inputs, calibration, precision)
                precision = {k: v for k, v in chosen.precision.items() if v != "int8"}
            if not is_quantized(model):  # else: quantized by the user (QAT), taken as it is
                model = quantize(model, example_inputs, calibration, progress=progress,
                                 weights="int8" if quant == "a16w8" else quant,
                                 activations="int16" if quant == "a16w8" else "int8", precision=precision)
            found = ranges.range_warnings(model)
            if strict and found:
                raise CompileError(f"{len(found)} calibration warning(s), an error with --strict; the first: "
                                   f"{found[0]}")
        ep = capture(model, example_inputs, modules=user_model)
        pairs = state_pairs(state, len(example_inputs), len(ep.graph_signature.user_outputs))
        graph = lower(ep, io, pairs)
        active = backends.select(board, backend_names)
        pg = to_program_graph(graph, scratch=lambda *op: max(b.scratch_bytes(*op) for b in active), io_layout=io_layout)
        make_state(pg, pairs)
        if quant in ("int8", "int4", "a16w8"):
            _warn_fallbacks(pg)
        ctx = CompileContext(board, example_inputs, calibration)
        sections = {}
        for b in active:  # in priority order: a delegate takes its partitions before the kernel libraries
            partitioning = b.partition(pg, ctx)
            if partitioning is not None:
                b.lower(pg, partitioning, ctx)
            section = b.report(partitioning, ctx)
            if section is not None:
                sections[b] = section
        _check_kernels(pg, active)
        present = {op.code for op in pg.ops}
        # Where a delegate's calls must find their operands (an NPU reaches some memories only).
        reach = {b.delegate_code: m for b in active if b.delegate_code in present
                 and (m := b.operand_memories(board)) is not None}
        regions = arena_regions(board, budgets, stack)
        mem = plan(pg, regions, PlanOptions(budgets=dict(budgets or {}), pins=dict(pins or {}), inplace=inplace,
                                            tile=tile, max_recompute=tile_recompute,
                                            operand_memories=reach))
        for b in active:
            b.check_plan(pg, mem)
        arenas = [serialize.ArenaSpec(r.name, r.arena_bytes, r.persistent) for r in mem.regions]
        prog, segment = serialize.program_dict(pg, mem, arenas)
        pte = serialize.to_pte(prog, segment, crc=crc)
        # What the device links (tool-only fields dropped): a delegate's calls keep a copy of their partitions' ops
        # for tools. Its blobs are read in place: the program must lie where the delegate reaches.
        device_bytes = len(serialize.device_image(pte))
        program_reach = (tuple(m.name for m in board.memories if all(m.name in r for r in reach.values()))
                         if reach else None)
        program_memory = choose_program_memory(board, device_bytes, meta_quant(pg), reach=program_reach)
        hot_note = None
        if copy_hot_weights:
            speed = board.memory(program_memory).speed
            if not any(r.speed < speed for r in mem.regions):
                hot_note = (f"nothing copied: the program's memory {program_memory} is as fast as the RAM "
                            f"the plan uses ({', '.join(r.name for r in mem.regions)})")
            elif copy_hot_weights_into(pg, mem, speed):
                arenas = [serialize.ArenaSpec(r.name, r.arena_bytes, r.persistent) for r in mem.regions]
                prog, segment = serialize.program_dict(pg, mem, arenas)
                pte = serialize.to_pte(prog, segment, crc=crc)
        (out / "model.pte").write_bytes(pte)
        _log_program(pte, out_dir)
        h, c = serialize.model_pte_sources(pte, symbol)
        (out / "model_pte.h").write_text(h)
        (out / "model_pte.c").write_text(c)
        h, c = serialize.model_arena_sources(arenas, symbol)
        (out / "model_arenas.h").write_text(h)
        (out / "model_arenas.c").write_text(c)
        inputs = [_io_tensor(tuple(x.shape), pg.tensors[t].name, pg.tensors[t], io_layout)
                  for x, t in zip(without(example_inputs, [i for i, _ in pairs]), pg.inputs)]
        device_bytes = len(serialize.device_image(pte))  # again: hot weights may have changed the program
        with torch.no_grad():
            ref = ep.module()(*example_inputs)
        refs = torch.utils._pytree.tree_leaves(ref)  # outputs in the program's order (nested tuples flattened)
        outputs = [_io_tensor(tuple(r.shape), f"output_{k}", pg.tensors[t], io_layout)
                   for k, (r, t) in enumerate(zip(without(refs, [o for _, o in pairs]), pg.outputs))]
        h, c = api_sources(symbol, inputs, outputs, {"board": board.name, "quant": meta_quant(pg),
                                                     "io_layout": io_layout, "arena_bytes": sum(a.size for a in arenas),
                                                     "program_bytes": device_bytes})
        (out / f"{symbol}.h").write_text(h)
        (out / f"{symbol}.cc").write_text(c)
        codes = sorted({op.code for op in pg.ops})
        (out / "kernel_table.cc").write_text(kernel_table_source(codes))
        (out / "kernels.txt").write_text("".join(f"{c}\n" for c in codes))
        torch.export.save(ep, str(out / "model.pt2"))
        float_program = ranges.float_program_bytes(model)
        if float_program is not None:  # the float model, for `run --check` (torchmcu.numerics)
            (out / ranges.FLOAT_PROGRAM).write_bytes(float_program)

        meta = {
            # A board of the repository by name; one described in the user's own file by its path.
            "board": board.name if board.source is None or board.source.parent == BOARDS_DIR else str(board.source),
            "program_memory": program_memory,
            "arenas": [{"name": a.name, "section": serialize.arena_section(a), "size": a.size,
                        **({"persistent": True} if a.persistent else {})} for a in arenas],
            "inputs": [t.as_meta() for t in inputs],
            "outputs": [t.as_meta() for t in outputs],
            "io_layout": io_layout,
            "float_tolerance": FLOAT_TOLERANCE,
            "quant": quant,
            "symbol": symbol,
            **({"stack": stack} if stack is not None else {}),
        }
        if pairs:  # what `run --check` carries from one sample to the next in PyTorch
            meta["state"] = [{"input": i, "output": o, "shape": list(example_inputs[i].shape)} for i, o in pairs]
        (out / "model.json").write_text(json.dumps(meta, indent=2) + "\n")
        np.savez(out / "example_inputs.npz", *[x.detach().numpy() for x in example_inputs])

        report = make_report(board, pg, mem, pte, len(segment), program_memory, device_bytes)
        if crc:  # each image its own: model_pte.c's lacks the tables only tools read
            report["flash"]["crc32"] = {"device": serialize.program_crc(serialize.device_image(pte)),
                                        "pte": serialize.program_crc(pte)}
        report["io"] = {"layout": io_layout, "inputs": meta["inputs"], "outputs": meta["outputs"],
                        "edge_ops": edge_ops(pg)}
        report["placement"] = placement(board, program_memory, device_bytes, mem, stack)
        if progress:
            for note in report["placement"]["notes"]:
                print(f"torchmcu: note: {note}", file=sys.stderr, flush=True)
        if chosen is not None:
            report["precision"] = {"chosen": chosen.precision, "budget": chosen.budget, "bytes": chosen.bytes,
                                   "sqnr_db": chosen.sqnr_db, "estimate_db": chosen.estimate_db,
                                   "layers": chosen.layers, "steps": chosen.steps, "text": chosen.describe()}
        for b, section in sections.items():
            if b.delegate_code in reach:  # its blobs went with the program
                section.update(program_device_bytes=device_bytes, program_memory=program_memory)
            report[b.report_key or b.name] = section
        report["backends"] = [b.name for b in active]
        report["warnings"] = ranges.range_warnings(model)
        (out / "memory_plan.json").write_text(json.dumps(memory_plan(pg, mem), indent=2) + "\n")
        picture = memory_picture(pg, mem, out / "memory_plan.png")
        report["memory"]["picture"] = picture
        if hot_note:
            report["memory"]["hot_weights_note"] = hot_note
        (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
        (out / "report.txt").write_text(format_report(report) + (f"\n{chosen.describe()}\n" if chosen else ""))
    # The final path, not the temporary one the files were written into (no file names it).
    return Compiled(Path(out_dir), board, pg, mem, pte, report)


# Float programs are checked against the exported program run in float64 (b),
# within |a - b| <= atol + rtol * |b| + pytorch_factor * max |pt32 - b|, atol
# scaled by the output's magnitude (sim/runner.py expected and compare). The
# first two terms are the floor: expf/tanhf differ from PyTorch's by an ulp
# or two. The last scales with the computation: pt32 is PyTorch's own float32
# result for the same sample, so max |pt32 - b| measures how much float32
# rounding this model's depth, widths and magnitudes produce. The firmware
# rounds as much, in another order (its sums run sequentially in a few
# partial sums where PyTorch's are blocked and vectorized, whose error grows
# more slowly with the length): a factor of 4 covers that (measured: mnasnet
# 0.5's firmware is 2.6e-4 from PyTorch, PyTorch 1.3e-4 from float64), while a
# wrong result is off by the outputs' own magnitude, far above.
FLOAT_TOLERANCE = {"rtol": 1e-5, "atol_scale": 1e-5, "pytorch_factor": 4.0}


def _warn_fallbacks(pg: PGraph) -> None:
    import warnings

    for op in pg.ops:
        if op.code not in _NOT_FALLBACK and not op.code.endswith(("_S8", "_S4", "_S16")):
            where = f" at {op.source}" if op.source else ""
            warnings.warn(f"torchmcu: {op.kind} ({op.name}) has no int8 kernel here; it runs in float32{where}",
                          stacklevel=3)
            op.backend = "portable (float fallback)"


def _check_kernels(pg: PGraph, chosen: list[Backend]) -> None:
    """Every op runs on a backend of the build: refused here, not at load."""
    for i, op in enumerate(pg.ops):
        if op.backend.startswith("portable") and all(b.supports(pg, i) is not None for b in chosen):
            raise CompileError(f"no kernel runs {op.code} ({op.kind}) in this runtime", op=op.name,
                               source=op.source)


def _log_program(pte: bytes, out_dir: str | Path) -> None:
    """With TORCHMCU_PROGRAM_LOG=FILE, append the program's SHA-256 with the
    pytest test (or the command) that compiled it: two runs of the suite,
    before and after a refactoring, show which programs changed
    (tools/program_hashes.py compares two logs)."""
    import hashlib
    import os

    log = os.environ.get("TORCHMCU_PROGRAM_LOG")
    if not log:
        return
    who = os.environ.get("PYTEST_CURRENT_TEST", " ".join(sys.argv)).rsplit(" (", 1)[0]
    line = json.dumps({"test": who, "out": Path(out_dir).name, "sha256": hashlib.sha256(pte).hexdigest()})
    with open(log, "a") as f:
        f.write(line + "\n")


def copy_hot_weights_into(pg: PGraph, mem: Plan, program_speed: int) -> bool:
    """Plan --copy-hot-weights; True when some weights were placed."""
    return bool(copy_hot_weights(pg, mem, program_speed))

