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

from . import backends
from .backends import Backend, CompileContext
from .boards import BOARDS_DIR, Board, load_board
from .builder.kernel_table import kernel_table_source
from .errors import CompileError
from .frontend.capture import capture
from .ir import PGraph
from .passes import lower, to_program_graph
from .plan import Plan, PlanOptions, RegionSpec, copy_hot_weights, make_state, plan
from .program import serialize
from .sources import FIRMWARE


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


def arena_regions(board: Board, budgets: dict[str, int] | None = None) -> list[RegionSpec]:
    """The board's memories that may hold arenas, fastest first, each with
    the bytes an arena may take there: its size, less the stack and a
    reserve in the data memory, capped by the user's budget."""
    budgets = dict(budgets or {})
    able = sorted((m for m in board.memories if "arena" in m.holds), key=lambda m: (m.speed, m.base))
    unknown = [k for k in budgets if k not in {m.name for m in able}]
    if unknown:
        raise CompileError(f"budget for {', '.join(unknown)}: board {board.name} has no such memory for "
                           f"activations; memories that can hold them: {', '.join(m.name for m in able)}")
    regions = []
    for m in able:
        room = m.size - (board.stack_size + DATA_RESERVE if m.name == board.data_memory else 0)
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


def _tensor_meta(t: Any, name: str, ptensor: Any) -> dict[str, Any]:
    meta = {"name": name, "shape": list(t.shape), "dtype": "float32"}
    if ptensor.dtype == "I8":
        meta.update(dtype="int8", scale=ptensor.scale, zero_point=ptensor.zero_point)
    return meta


QUANT_SCHEMES = ("float32", "int8", "int4", "a16w8")  # int4: W4A8; a16w8: int16 activations (lower_s16.py)
# Ops that carry data between dtypes or move bytes: not a float fallback.
_NOT_FALLBACK = {"PERMUTE", "CONCAT", "COPY", "PAD", "QUANTIZE_S8", "DEQUANTIZE_S8", "QUANTIZE_S16", "REQUANTIZE",
                 "DEQUANTIZE_S16"}


def compile(model: torch.nn.Module, example_inputs: tuple[Any, ...], board: str | Board,
            out_dir: str | Path, quant: str = "float32", calibration: Any = None,
            progress: bool = True, io: str = "float", budgets: dict[str, int] | None = None,
            pins: dict[str, str] | None = None, inplace: bool = True, copy_hot_weights: bool = False,
            tile: bool = False, symbol: str = serialize.DEFAULT_SYMBOL,
            precision: dict[str, str] | int | None = None, backend_names: list[str] | None = None,
            state: int | list[tuple[int, int]] | None = None) -> Compiled:
    """Compile `model` for `board` into `out_dir` (created).

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
    that RAM is faster than the memory the program is in. tile splits the
    first layers into row bands so that their large outputs never exist
    whole (bit-exact; it recomputes the rows the bands share). symbol names
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
    execution; its inputs and outputs are the others.
    """
    try:
        serialize.check_symbol(symbol)
    except ValueError as e:
        raise CompileError(str(e)) from None
    board = board if isinstance(board, Board) else load_board(board)
    if quant not in QUANT_SCHEMES:
        raise CompileError(f"unknown quantization scheme {quant!r}; choose one of {', '.join(QUANT_SCHEMES)}")
    if precision and quant == "float32":
        raise CompileError("precision overrides need a quantized scheme (quant='int8', 'int4' or 'a16w8')")
    if io not in ("float", "int8") or (io == "int8" and quant not in ("int8", "int4")):
        raise CompileError(f"io={io!r}: inputs and outputs are 'float', or 'int8' for an int8 program")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if not isinstance(example_inputs, (tuple, list)):
        example_inputs = (example_inputs,)  # one input; capture() checks it is a tensor
    example_inputs = tuple(example_inputs)
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
    ep = capture(model, example_inputs)
    pairs = state_pairs(state, len(example_inputs), len(ep.graph_signature.user_outputs))
    graph = lower(ep, io, pairs)
    active = backends.select(board, backend_names)
    pg = to_program_graph(graph, scratch=lambda *op: max(b.scratch_bytes(*op) for b in active))
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
    regions = arena_regions(board, budgets)
    mem = plan(pg, regions, PlanOptions(budgets=dict(budgets or {}), pins=dict(pins or {}), inplace=inplace,
                                        tile=tile, operand_memories=reach))
    for b in active:
        b.check_plan(pg, mem)
    arenas = [serialize.ArenaSpec(r.name, r.arena_bytes, r.persistent) for r in mem.regions]
    prog, segment = serialize.program_dict(pg, mem, arenas)
    pte = serialize.to_pte(prog, segment)
    # What the device links (tool-only fields dropped): a delegate's calls keep a copy of their partitions' ops
    # for tools. Its blobs are read in place: the program must lie where the delegate reaches.
    device_bytes = len(serialize.device_image(pte)) if reach else len(pte)
    program_reach = tuple(m.name for m in board.memories if all(m.name in r for r in reach.values())) if reach else None
    program_memory = choose_program_memory(board, device_bytes, quant, reach=program_reach)
    hot_note = None
    if copy_hot_weights:
        speed = board.memory(program_memory).speed
        if not any(r.speed < speed for r in mem.regions):
            hot_note = (f"nothing copied: the program's memory {program_memory} is as fast as the RAM "
                        f"the plan uses ({', '.join(r.name for r in mem.regions)})")
        elif copy_hot_weights_into(pg, mem, speed):
            arenas = [serialize.ArenaSpec(r.name, r.arena_bytes, r.persistent) for r in mem.regions]
            prog, segment = serialize.program_dict(pg, mem, arenas)
            pte = serialize.to_pte(prog, segment)
    (out / "model.pte").write_bytes(pte)
    h, c = serialize.model_pte_sources(pte, symbol)
    (out / "model_pte.h").write_text(h)
    (out / "model_pte.c").write_text(c)
    h, c = serialize.model_arena_sources(arenas, symbol)
    (out / "model_arenas.h").write_text(h)
    (out / "model_arenas.c").write_text(c)
    codes = sorted({op.code for op in pg.ops})
    (out / "kernel_table.cc").write_text(kernel_table_source(codes))
    (out / "kernels.txt").write_text("".join(f"{c}\n" for c in codes))
    torch.export.save(ep, str(out / "model.pt2"))

    with torch.no_grad():
        ref = ep.module()(*example_inputs)
    refs = torch.utils._pytree.tree_leaves(ref)  # outputs in the program's order (nested tuples flattened)
    meta = {
        # A board of the repository by name; one described in the user's own file by its path.
        "board": board.name if board.source is None or board.source.parent == BOARDS_DIR else str(board.source),
        "program_memory": program_memory,
        "arenas": [{"name": a.name, "section": serialize.arena_section(a), "size": a.size,
                    **({"persistent": True} if a.persistent else {})} for a in arenas],
        "inputs": [_tensor_meta(x, pg.tensors[t].name, pg.tensors[t])
                   for x, t in zip(without(example_inputs, [i for i, _ in pairs]), pg.inputs)],
        "outputs": [_tensor_meta(r, f"output_{k}", pg.tensors[t])
                    for k, (r, t) in enumerate(zip(without(refs, [o for _, o in pairs]), pg.outputs))],
        "float_tolerance": FLOAT_TOLERANCE,
        "quant": quant,
        "symbol": symbol,
    }
    if pairs:  # what `run --check` carries from one sample to the next in PyTorch
        meta["state"] = [{"input": i, "output": o, "shape": list(example_inputs[i].shape)} for i, o in pairs]
    (out / "model.json").write_text(json.dumps(meta, indent=2) + "\n")
    np.savez(out / "example_inputs.npz", *[x.detach().numpy() for x in example_inputs])

    report = make_report(board, pg, mem, pte, len(segment), program_memory)
    if chosen is not None:
        report["precision"] = {"chosen": chosen.precision, "budget": chosen.budget, "bytes": chosen.bytes,
                               "sqnr_db": chosen.sqnr_db, "estimate_db": chosen.estimate_db,
                               "layers": chosen.layers, "steps": chosen.steps, "text": chosen.describe()}
    for b, section in sections.items():
        if b.delegate_code in reach:  # its blobs went with the program
            section.update(program_device_bytes=device_bytes, program_memory=program_memory)
        report[b.report_key or b.name] = section
    report["backends"] = [b.name for b in active]
    (out / "memory_plan.json").write_text(json.dumps(memory_plan(pg, mem), indent=2) + "\n")
    picture = memory_picture(pg, mem, out / "memory_plan.png")
    report["memory"]["picture"] = picture
    if hot_note:
        report["memory"]["hot_weights_note"] = hot_note
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / "report.txt").write_text(format_report(report) + (f"\n{chosen.describe()}\n" if chosen else ""))
    return Compiled(out, board, pg, mem, pte, report)


# Float programs are checked against PyTorch within |a - b| <= atol + rtol * |b|,
# atol scaled by the output's magnitude: the kernels sum in a different order
# than PyTorch's, and expf/tanhf differ from PyTorch's by an ulp or two.
FLOAT_TOLERANCE = {"rtol": 1e-5, "atol_scale": 1e-5}


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


def memory_plan(pg: PGraph, mem: Plan) -> dict[str, Any]:
    regions = []
    for k, reg in enumerate(mem.regions):
        buffers = []
        for b in sorted(reg.buffers):
            first, last = mem.lifetimes[b]
            names = [t.name for t in pg.tensors if t.buffer == b]
            buffers.append({"buffer": b, "tensors": names, "bytes": pg.buffers[b], "offset": mem.offsets[b],
                            "first_op": first, "last_op": last})
        hot = [{"tensor": pg.tensors[h.tensor].name, "bytes": h.nbytes, "offset": h.offset,
                "reads_per_byte": round(h.reads_per_byte, 2)} for h in mem.hot if h.region == k]
        regions.append({"arena": k, "name": reg.name, "arena_bytes": reg.arena_bytes,
                        "lower_bound_bytes": reg.lower_bound_bytes, "capacity_bytes": reg.capacity,
                        "buffers": buffers, "hot_weights": hot})
    return {"arena_bytes": mem.arena_bytes, "lower_bound_bytes": mem.lower_bound_bytes,
            "classic_lower_bound_bytes": mem.classic_lower_bound_bytes, "aliasing": mem.aliasing,
            "regions": regions}


def copy_hot_weights_into(pg: PGraph, mem: Plan, program_speed: int) -> bool:
    """Plan --copy-hot-weights; True when some weights were placed."""
    return bool(copy_hot_weights(pg, mem, program_speed))


_STATE_CACHE: dict[tuple[str, ...], int | None] = {}


def runtime_state_bytes(board: Board) -> int | None:
    """sizeof(torchmcu::Method) on the board's core: the only RAM the
    runtime keeps besides the planned arenas. Measured by compiling it with
    the board's flags (None when arm-none-eabi-g++ is not installed)."""
    import hashlib
    import re
    import shutil
    import subprocess
    import tempfile

    gxx = shutil.which("arm-none-eabi-g++")
    if gxx is None or board.core.arch != "cortex-m":  # Xtensa: its compiler is Cadence's, not here
        return None
    firmware = FIRMWARE
    digest = hashlib.sha256()
    for h in sorted((firmware / "core").glob("*.h")):
        digest.update(h.read_bytes())
    key = (digest.hexdigest(), *board.cflags)
    if key not in _STATE_CACHE:
        src = ('#include "core/method.h"\n'
               'extern "C" { extern const unsigned tmcu_state_bytes; '
               'const unsigned tmcu_state_bytes = sizeof(torchmcu::Method); }\n')
        with tempfile.TemporaryDirectory() as d:
            (Path(d) / "state.cc").write_text(src)
            r = subprocess.run([gxx, *board.cflags, "-std=c++17", "-fno-rtti", "-fno-exceptions", "-O1",
                                f"-I{firmware}", "-S", "-o", "-", str(Path(d) / "state.cc")],
                               capture_output=True, text=True, check=False)
        m = re.search(r"tmcu_state_bytes:\s*\.word\s+(\d+)", r.stdout)
        _STATE_CACHE[key] = int(m.group(1)) if r.returncode == 0 and m else None
    return _STATE_CACHE[key]


def memory_picture(pg: PGraph, mem: Plan, path: Path) -> str | None:
    """A PNG of buffers over time, one panel per region. Needs matplotlib;
    TORCHMCU_PLOT=0 skips it (the tests do, for speed)."""
    import os

    if os.environ.get("TORCHMCU_PLOT", "1") == "0":
        return None
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Rectangle
    except ImportError:
        return None
    n = max(len(mem.regions), 1)
    fig, axes = plt.subplots(n, 1, figsize=(10, 3.2 * n), squeeze=False)
    cmap = plt.get_cmap("tab20")
    steps = len(pg.ops)
    for k, reg in enumerate(mem.regions):
        ax = axes[k][0]
        for j, b in enumerate(sorted(reg.buffers)):
            first, last = mem.lifetimes[b]
            size = pg.buffers[b]
            ax.add_patch(Rectangle((first - 0.45, mem.offsets[b]), last - first + 0.9, size,
                                   facecolor=cmap(j % 20), edgecolor="black", linewidth=0.4))
            if size >= 0.08 * max(reg.arena_bytes, 1):
                name = next((t.name for t in pg.tensors if t.buffer == b), str(b))
                ax.text((first + last) / 2, mem.offsets[b] + size / 2, name[:18], ha="center", va="center",
                        fontsize=6)
        for h in mem.hot:
            if h.region == k:
                ax.add_patch(Rectangle((-1.45, h.offset), steps + 1.9, h.nbytes, facecolor="lightgrey",
                                       edgecolor="grey", hatch="//", linewidth=0.4))
        ax.axhline(reg.lower_bound_bytes, color="red", linestyle="--", linewidth=0.8,
                   label=f"lower bound {reg.lower_bound_bytes:,} B")
        ax.set_xlim(-1.5, steps + 0.5)
        ax.set_ylim(0, max(reg.arena_bytes, 16) * 1.05)
        ax.set_xlabel("op index (-1: inputs written; last: outputs read)")
        ax.set_ylabel("offset (bytes)")
        ax.set_title(f"{reg.name}: {reg.arena_bytes:,} B planned, lower bound {reg.lower_bound_bytes:,} B")
        ax.legend(loc="upper right", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name


def weight_flash(pg: PGraph) -> dict[str, Any]:
    """Bytes of the conv/linear weights as stored (int4 packed two per byte)
    and what the same weights take at int8 (one byte each) and float32."""
    stored = elements = 0
    for op in pg.ops:
        if op.code in WEIGHTED_CODES:
            t = pg.tensors[op.inputs[1]]
            stored += t.nbytes
            elements += int(np.prod(t.dims, dtype=np.int64))
    return {"bytes": stored, "int8_bytes": elements, "float32_bytes": 4 * elements,
            "int4_layers": sum(op.code.endswith("_S4") for op in pg.ops)}


WEIGHTED_CODES = {f"{op}_{t}" for op in ("CONV2D", "DEPTHWISE_CONV2D", "LINEAR") for t in ("F32", "S8", "S4", "S16")}


def meta_quant(pg: PGraph) -> str:
    if any(op.code.endswith("_S16") for op in pg.ops):  # int16 beside int8/int4 layers: mixed precision
        return "mixed" if any(op.code.endswith(("_S8", "_S4")) for op in pg.ops) else "a16w8"
    if any(op.code.endswith("_S4") for op in pg.ops):
        return "int4"
    return "int8" if any(op.code.endswith("_S8") or op.code == "ETHOS_U" for op in pg.ops) else "float32"


def make_report(board: Board, pg: PGraph, mem: Plan, pte: bytes, constant_bytes: int,
                program_memory: str | None = None) -> dict[str, Any]:
    ops = [{"index": i, "name": op.name, "kind": op.kind, "code": op.code, "backend": op.backend,
            "macs": op.macs, "source": op.source} for i, op in enumerate(pg.ops)]
    coverage: dict[str, int] = {}
    for op in pg.ops:
        coverage[op.backend] = coverage.get(op.backend, 0) + 1
    regions = []
    for reg in (r for r in mem.regions if not r.persistent):
        planned = reg.arena_bytes - reg.hot_bytes
        regions.append({"name": reg.name, "planned_bytes": planned, "lower_bound_bytes": reg.lower_bound_bytes,
                        "ratio": round(planned / reg.lower_bound_bytes, 4) if reg.lower_bound_bytes else 1.0,
                        "capacity_bytes": reg.capacity, "hot_weight_bytes": reg.hot_bytes,
                        "arena_bytes": reg.arena_bytes})
    activations = sum(r["planned_bytes"] for r in regions)
    return {
        "board": board.name,
        "board_arch": board.core.arch,
        "quant": meta_quant(pg),
        "ops": ops,
        "coverage": coverage,
        "macs": sum(op.macs for op in pg.ops),
        "memory": {
            "regions": regions,
            "activation_bytes": activations,
            "lower_bound_bytes": mem.lower_bound_bytes,
            "classic_lower_bound_bytes": mem.classic_lower_bound_bytes,
            "ratio_to_classic": round(activations / mem.classic_lower_bound_bytes, 4)
            if mem.classic_lower_bound_bytes else 1.0,
            "aliasing": mem.aliasing,
            "persistent_bytes": runtime_state_bytes(board),
            "state": model_state(pg, mem),
            "hot_weights": [{"tensor": pg.tensors[h.tensor].name, "region": mem.regions[h.region].name,
                             "bytes": h.nbytes, "reads_per_byte": round(h.reads_per_byte, 2)} for h in mem.hot],
        },
        "flash": {"program_bytes": len(pte), "constant_bytes": constant_bytes,
                  "flatbuffer_bytes": len(pte) - constant_bytes, "program_memory": program_memory,
                  "weights": weight_flash(pg)},
        "kernels": sorted({op.code for op in pg.ops}),
    }


def model_state(pg: PGraph, mem: Plan) -> dict[str, Any] | None:
    """A streaming model's state (plan/state.py): its bytes, memory and tensors."""
    region = next((r for r in mem.regions if r.persistent), None)
    if region is None:
        return None
    return {"bytes": region.arena_bytes, "memory": region.name,
            "tensors": [{"name": pg.tensors[t].name, "bytes": pg.tensors[t].nbytes, "dtype": pg.tensors[t].dtype}
                        for t in pg.state]}


def format_report(r: dict[str, Any]) -> str:
    lines = [f"torchmcu report for board {r['board']}", ""]
    lines.append(f"{'#':>3}  {'op':<24} {'kind':<12} {'backend':<9} {'MACs':>10}  source")
    for op in r["ops"]:
        lines.append(f"{op['index']:>3}  {op['name'][:24]:<24} {op['kind']:<12} {op['backend']:<9} "
                     f"{op['macs']:>10}  {op['source'] or ''}")
    lines += ["", f"MACs per inference: {r['macs']:,}", "", "RAM (activations):"]
    m = r["memory"]
    for reg in m["regions"]:
        hot = f" + {reg['hot_weight_bytes']:,} B hot weights" if reg["hot_weight_bytes"] else ""
        lines.append(f"  {reg['name']}: {reg['planned_bytes']:,} B planned{hot}, lower bound "
                     f"{reg['lower_bound_bytes']:,} B (ratio {reg['ratio']:.2f}), "
                     f"{reg['capacity_bytes']:,} B available")
    done = ", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in m["aliasing"].items() if v)
    lines.append(f"  before aliasing and tiling the lower bound was {m['classic_lower_bound_bytes']:,} B"
                 + (f" ({done})" if done else ""))
    state = m["persistent_bytes"]
    why = ("arm-none-eabi-g++ not found" if r.get("board_arch", "cortex-m") == "cortex-m"
           else f"no {r['board_arch']} compiler here")
    lines.append(f"  runtime state: {state} B per model" if state is not None
                 else f"  runtime state: not measured ({why})")
    if m.get("state"):
        s = m["state"]
        lines.append(f"  model state: {s['bytes']:,} B in {s['memory']}, kept across executions (reset when the "
                     f"method loads): " + ", ".join(f"{t['name']} {t['bytes']} B {t['dtype']}" for t in s["tensors"]))
    if m.get("hot_weights_note"):
        lines.append(f"  --copy-hot-weights: {m['hot_weights_note']}")
    for h in m["hot_weights"]:
        lines.append(f"  copied at load to {h['region']}: {h['tensor']} ({h['bytes']:,} B, "
                     f"{h['reads_per_byte']} reads per byte)")
    if m.get("picture"):
        lines.append(f"  picture: {m['picture']}")
    f = r["flash"]
    lines += ["", f"Flash (program): {f['program_bytes']:,} B = {f['flatbuffer_bytes']:,} B program "
              f"+ {f['constant_bytes']:,} B constants"]
    wf = f.get("weights")
    if wf and wf["int8_bytes"]:
        lines.append(f"  weights: {wf['bytes']:,} B as stored ({wf['int4_layers']} int4 layers); "
                     f"{wf['int8_bytes']:,} B at int8, {wf['float32_bytes']:,} B at float32")
    for name in r.get("backends", []):
        b = backends.get(name)
        if r.get(b.report_key or b.name):
            lines += ["", b.format_report(r[b.report_key or b.name]).rstrip("\n")]
    lines.append("")
    return "\n".join(lines)
