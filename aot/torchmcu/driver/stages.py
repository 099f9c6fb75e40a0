"""The compile driver as a named list of stages over one Context.

    resolve      the board; the model and inputs of an ExportedProgram  (before the output directory is touched)
    prepare      the example inputs checked; the model in eval mode
    quantize     PT2E quantization (the layers' precisions chosen first for a flash budget)
    capture      torch.export; a streaming model's (input, output) state pairs
    lower        ATen -> the logical graph
    layout       the backends chosen; the program graph with their kernels' scratch; the state arena's tensors
    backends     each backend in priority order: partition, lower, its section of the report
    plan         (region, offset) for every buffer where the delegates reach; the backends check it
    serialize    model.pte; the memory the program lies in
    hot_weights  the most-read weights copied at load into faster RAM left free (serialized again)
    io           the model's inputs and outputs as the C API describes them
    report       report.json's content and the memory picture

Each stage says what it needs of the Context and what it adds (`run`
checks that every need was given or added before); `compiled` then makes
the final record, Compiled, that the artifact writers (torchmcu.compiler)
read. No stage names a backend or an op family.
"""

from __future__ import annotations

import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from .. import backends
from ..backends import CompileBackend, CompileContext
from ..boards import Board, load_board
from ..errors import CompileError
from ..frontend import ranges, reparam
from ..frontend.capture import capture, check_inputs, from_exported, to_eval
from ..ir import PGraph
from ..passes import io_perm, lower, to_program_graph
from ..plan import Plan, PlanOptions, copy_hot_weights, make_state, plan
from ..program import serialize
from ..program.c_api import IoTensor
from ..report import edge_ops, make_report, meta_quant, placement, render_memory_picture
from .memory import arena_regions, choose_program_memory
from .options import CompileOptions

# The stacklevel at which a stage's own warnings.warn names compile()'s caller, as a user expects (the
# stage 1, run 2, compile 3, its caller 4); one more from a function the stage calls.
CALLER = 4


@dataclass
class Context:
    """One compile: what the caller gave, then what each stage adds."""

    model: Any
    example_inputs: Any
    board: Any  # a name or a Board; a Board from `resolve` on
    options: CompileOptions
    user_model: Any = None  # the model as given: its submodules name the nodes in errors
    precision: dict[str, str] | None = None  # the per-layer precisions in effect
    chosen: Any = None  # frontend.precision.PrecisionPlan, when options.precision is a budget
    reparam: Any = None  # frontend.reparam.Folded: the branches folded, when any
    exported: Any = None  # torch.export.ExportedProgram
    pairs: list[tuple[int, int]] = field(default_factory=list)  # the state's (input, output) pairs
    graph: Any = None  # the logical graph
    active: list[CompileBackend] = field(default_factory=list)  # in priority order, portable last
    pg: PGraph | None = None
    sections: dict[CompileBackend, dict[str, Any]] = field(default_factory=dict)  # their report sections
    reach: dict[str, tuple[str, ...]] = field(default_factory=dict)  # delegate op code -> memories it reaches
    mem: Plan | None = None
    arenas: list[serialize.ArenaSpec] = field(default_factory=list)
    pte: bytes = b""
    constant_bytes: int = 0  # the program's constant segment
    program_memory: str = ""
    hot_note: str | None = None  # why no weight was copied
    inputs: list[IoTensor] = field(default_factory=list)
    outputs: list[IoTensor] = field(default_factory=list)
    device_bytes: int = 0  # the program as linked (model_pte.c)
    report: dict[str, Any] = field(default_factory=dict)
    picture: bytes | None = None  # memory_plan.png
    done: set[str] = field(default_factory=lambda: {"model", "example_inputs", "board", "options"})


@dataclass(frozen=True)
class Stage:
    name: str
    run: Callable[[Context], None]
    needs: tuple[str, ...]
    adds: tuple[str, ...]


STAGES: list[Stage] = []


def stage(name: str, needs: str, adds: str) -> Callable[[Callable[[Context], None]], Callable[[Context], None]]:
    """Register the function as the next stage: `needs` and `adds`, the Context fields it reads and sets."""
    def register(fn: Callable[[Context], None]) -> Callable[[Context], None]:
        STAGES.append(Stage(name, fn, tuple(needs.split()), tuple(adds.split())))
        return fn
    return register


def run(ctx: Context, stages: list[Stage]) -> Context:
    """The stages in order over `ctx`, each once what it needs was given or added (else a driver bug)."""
    for s in stages:
        missing = [n for n in s.needs if n not in ctx.done]
        if missing:
            raise RuntimeError(f"compile stage {s.name} needs {', '.join(missing)}, which no stage before it adds")
        s.run(ctx)
        ctx.done.update(s.adds)
    return ctx


def stage_list(first: str | None = None, last: str | None = None) -> list[Stage]:
    """STAGES from `first` to `last` (both included)."""
    names = [s.name for s in STAGES]
    return STAGES[names.index(first) if first else 0:names.index(last) + 1 if last else len(STAGES)]


# -- the stages, in order -------------------------------------------------------------------------

@stage("resolve", needs="model example_inputs board", adds="model example_inputs board")
def _resolve(ctx: Context) -> None:
    if isinstance(ctx.model, torch.export.ExportedProgram):
        ctx.model, saved = from_exported(ctx.model)
        ctx.example_inputs = saved if ctx.example_inputs is None else ctx.example_inputs
    ctx.board = ctx.board if isinstance(ctx.board, Board) else load_board(ctx.board)


@stage("prepare", needs="model example_inputs", adds="user_model model example_inputs")
def _prepare(ctx: Context) -> None:
    example_inputs = ctx.example_inputs
    if not isinstance(example_inputs, (tuple, list)):
        example_inputs = (example_inputs,)  # one input
    example_inputs = tuple(example_inputs)
    check_inputs(example_inputs)  # before quantization: the same error at every precision
    ctx.user_model = ctx.model
    ctx.model = to_eval(ctx.model, stacklevel=CALLER + 1)
    if len({id(x) for x in example_inputs}) < len(example_inputs):  # one tensor twice (h and c = zeros): export
        # would make them one input
        example_inputs = tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in example_inputs)
    ctx.example_inputs = example_inputs


@stage("quantize", needs="model example_inputs options", adds="model precision chosen")
def _quantize(ctx: Context) -> None:
    o = ctx.options
    precision = o.precision
    if not o.quantized:
        return
    from ..frontend.quantize import is_quantized, quantize

    if isinstance(precision, int) and not isinstance(precision, bool) and not is_quantized(ctx.model):
        from ..frontend.precision import choose_precision

        ctx.chosen = choose_precision(ctx.model, ctx.example_inputs, o.calibration, precision)
        precision = {k: v for k, v in ctx.chosen.precision.items() if v != "int8"}
    ctx.precision = precision
    if not is_quantized(ctx.model):  # else: quantized by the user (QAT), taken as it is
        ctx.model = quantize(ctx.model, ctx.example_inputs, o.calibration, progress=o.progress,
                             weights="int8" if o.quant == "a16w8" else o.quant,
                             activations="int16" if o.quant == "a16w8" else "int8", precision=precision,
                             recurrent_weights=o.recurrent_weights, reparam=o.reparam)
    found = ranges.range_warnings(ctx.model)
    if o.strict and found:
        raise CompileError(f"{len(found)} calibration warning(s), an error with --strict; the first: {found[0]}")


@stage("capture", needs="model example_inputs user_model options", adds="exported pairs reparam")
def _capture(ctx: Context) -> None:
    ctx.exported = capture(ctx.model, ctx.example_inputs, modules=ctx.user_model, reparam=ctx.options.reparam)
    # Folded here (float32), or before quantization (the q/dq graph carries what was).
    ctx.reparam = reparam.folded(ctx.exported) or reparam.folded(ctx.model)
    ctx.pairs = state_pairs(ctx.options.state, len(ctx.example_inputs),
                            len(ctx.exported.graph_signature.user_outputs))


@stage("lower", needs="exported pairs options", adds="graph")
def _lower(ctx: Context) -> None:
    ctx.graph = lower(ctx.exported, ctx.options.io, ctx.pairs)


@stage("layout", needs="graph board pairs options", adds="active pg")
def _layout(ctx: Context) -> None:
    o = ctx.options
    active = backends.select(ctx.board, o.backend_names)
    pg = to_program_graph(ctx.graph, scratch=lambda *op: max(b.scratch_bytes(*op) for b in active),
                          io_layout=o.io_layout, avg_pool_rounding=o.avg_pool_rounding)
    make_state(pg, ctx.pairs)
    if o.quantized:
        _warn_fallbacks(pg)
    ctx.active, ctx.pg = active, pg


@stage("backends", needs="active pg board example_inputs options", adds="pg sections")
def _backends(ctx: Context) -> None:
    bctx = CompileContext(ctx.board, ctx.example_inputs, ctx.options.calibration, stacklevel=CALLER + 1)
    for b in ctx.active:  # in priority order: a delegate takes its partitions before the kernel libraries
        partitioning = b.partition(ctx.pg, bctx)
        if partitioning is not None:
            b.lower(ctx.pg, partitioning, bctx)
        section = b.report(partitioning, bctx)
        if section is not None:
            ctx.sections[b] = section
    _check_kernels(ctx.pg, ctx.active)


@stage("plan", needs="active pg board options", adds="reach mem")
def _plan(ctx: Context) -> None:
    o, pg = ctx.options, ctx.pg
    present = {op.code for op in pg.ops}
    # Where a delegate's calls must find their operands (an NPU reaches some memories only).
    ctx.reach = {b.delegate_code: m for b in ctx.active if b.delegate_code in present
                 and (m := b.operand_memories(ctx.board)) is not None}
    regions = arena_regions(ctx.board, o.budgets, o.stack)
    ctx.mem = plan(pg, regions, PlanOptions(budgets=dict(o.budgets or {}), pins=dict(o.pins or {}), inplace=o.inplace,
                                            tile=o.tile, max_recompute=o.tile_recompute, operand_memories=ctx.reach))
    for b in ctx.active:
        b.check_plan(pg, ctx.mem)


def _serialize_program(ctx: Context) -> None:
    ctx.arenas = [serialize.ArenaSpec(r.name, r.arena_bytes, r.persistent) for r in ctx.mem.regions]
    prog, segment = serialize.program_dict(ctx.pg, ctx.mem, ctx.arenas)
    ctx.pte = serialize.to_pte(prog, segment, crc=ctx.options.crc)
    ctx.constant_bytes = len(segment)


@stage("serialize", needs="pg mem reach board options", adds="arenas pte constant_bytes program_memory")
def _serialize(ctx: Context) -> None:
    _serialize_program(ctx)
    # What the device links (tool-only fields dropped): a delegate's calls keep a copy of their partitions' ops
    # for tools. Its blobs are read in place: the program must lie where the delegate reaches.
    device_bytes = len(serialize.device_image(ctx.pte))
    board, reach = ctx.board, ctx.reach
    program_reach = (tuple(m.name for m in board.memories if all(m.name in r for r in reach.values()))
                     if reach else None)
    ctx.program_memory = choose_program_memory(board, device_bytes, meta_quant(ctx.pg), reach=program_reach)


@stage("hot_weights", needs="pg mem program_memory options", adds="arenas pte constant_bytes hot_note")
def _hot_weights(ctx: Context) -> None:
    if not ctx.options.copy_hot_weights:
        return
    mem = ctx.mem
    speed = ctx.board.memory(ctx.program_memory).speed
    if not any(r.speed < speed for r in mem.regions):
        ctx.hot_note = (f"nothing copied: the program's memory {ctx.program_memory} is as fast as the RAM "
                        f"the plan uses ({', '.join(r.name for r in mem.regions)})")
    elif copy_hot_weights(ctx.pg, mem, speed):
        _serialize_program(ctx)


@stage("io", needs="pg pte exported example_inputs pairs options", adds="inputs outputs device_bytes")
def _io(ctx: Context) -> None:
    pg, layout, pairs = ctx.pg, ctx.options.io_layout, ctx.pairs
    ctx.inputs = [_io_tensor(tuple(x.shape), pg.tensors[t].name, pg.tensors[t], layout)
                  for x, t in zip(without(ctx.example_inputs, [i for i, _ in pairs]), pg.inputs)]
    ctx.device_bytes = len(serialize.device_image(ctx.pte))  # again: hot weights may have changed the program
    with torch.no_grad():
        ref = ctx.exported.module()(*ctx.example_inputs)
    refs = torch.utils._pytree.tree_leaves(ref)  # outputs in the program's order (nested tuples flattened)
    ctx.outputs = [_io_tensor(tuple(r.shape), f"output_{k}", pg.tensors[t], layout)
                   for k, (r, t) in enumerate(zip(without(refs, [o for _, o in pairs]), pg.outputs))]


@stage("report", needs="board pg mem pte constant_bytes program_memory device_bytes inputs outputs sections reach "
                        "active chosen hot_note model options reparam", adds="report picture")
def _report(ctx: Context) -> None:
    o, board, pg, mem = ctx.options, ctx.board, ctx.pg, ctx.mem
    report = make_report(board, pg, mem, ctx.pte, ctx.constant_bytes, ctx.program_memory, ctx.device_bytes)
    if o.crc:  # each image its own: model_pte.c's lacks the tables only tools read
        report["flash"]["crc32"] = {"device": serialize.program_crc(serialize.device_image(ctx.pte)),
                                    "pte": serialize.program_crc(ctx.pte)}
    report["io"] = {"layout": o.io_layout, "inputs": [t.as_meta() for t in ctx.inputs],
                    "outputs": [t.as_meta() for t in ctx.outputs], "edge_ops": edge_ops(pg)}
    report["placement"] = placement(board, ctx.program_memory, ctx.device_bytes, mem, o.stack, o.quant)
    if o.progress:
        for note in report["placement"]["notes"]:
            print(f"torchmcu: note: {note}", file=sys.stderr, flush=True)
    chosen = ctx.chosen
    if chosen is not None:
        report["precision"] = {"chosen": chosen.precision, "budget": chosen.budget, "bytes": chosen.bytes,
                               "sqnr_db": chosen.sqnr_db, "estimate_db": chosen.estimate_db,
                               "layers": chosen.layers, "steps": chosen.steps, "text": chosen.describe()}
    for b, section in ctx.sections.items():
        if b.delegate_code in ctx.reach:  # its blobs went with the program
            section.update(program_device_bytes=ctx.device_bytes, program_memory=ctx.program_memory)
        report[b.report_key or b.name] = section
    report["backends"] = [b.name for b in ctx.active]
    if ctx.reparam is not None:
        report["reparam"] = ctx.reparam.as_dict()
    report["warnings"] = ranges.range_warnings(ctx.model)
    ctx.picture = render_memory_picture(pg, mem)
    report["memory"]["picture"] = MEMORY_PICTURE if ctx.picture is not None else None
    if ctx.hot_note:
        report["memory"]["hot_weights_note"] = ctx.hot_note
    ctx.report = report


MEMORY_PICTURE = "memory_plan.png"


# -- the stages' helpers --------------------------------------------------------------------------

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


_IO_DTYPES = {"F32": "float32", "I8": "int8", "I16": "int16", "I32": "int32"}


def _io_tensor(shape: tuple[int, ...], name: str, ptensor: Any, io_layout: str) -> IoTensor:
    """A model input or output: PyTorch's shape, and how the program holds it."""
    dtype = _IO_DTYPES.get(ptensor.dtype)
    if dtype is None:
        raise CompileError(f"model input/output {name} would be {ptensor.dtype}, which the C API does not describe")
    quantized = dtype != "float32"
    return IoTensor(name, tuple(int(d) for d in shape), io_perm(len(shape), io_layout), dtype,
                    float(ptensor.scale) if quantized else 0.0, int(ptensor.zero_point) if quantized else 0)


# Ops that carry data between dtypes or move bytes: not a float fallback.
_NOT_FALLBACK = {"PERMUTE", "CONCAT", "COPY", "PAD", "RESIZE_NEAREST", "SLICE", "QUANTIZE_S8", "DEQUANTIZE_S8",
                 "QUANTIZE_S16", "REQUANTIZE", "DEQUANTIZE_S16"}


def _warn_fallbacks(pg: PGraph) -> None:
    for op in pg.ops:
        if op.code not in _NOT_FALLBACK and not op.code.endswith(("_S8", "_S4", "_S16")):
            where = f" at {op.source}" if op.source else ""
            warnings.warn(f"torchmcu: {op.kind} ({op.name}) has no int8 kernel here; it runs in float32{where}",
                          stacklevel=CALLER + 1)
            op.backend = "portable (float fallback)"


def _check_kernels(pg: PGraph, chosen: list[CompileBackend]) -> None:
    """Every op runs on a backend of the build: refused here, not at load."""
    for i, op in enumerate(pg.ops):
        if op.backend.startswith("portable") and all(b.supports(pg, i) is not None for b in chosen):
            raise CompileError(f"no kernel runs {op.code} ({op.kind}) in this runtime", op=op.name,
                               source=op.source)
