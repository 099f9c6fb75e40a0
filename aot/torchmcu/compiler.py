"""The compile driver: nn.Module -> a build directory.

    compile() = the stages (torchmcu.driver.stages: resolve, prepare, quantize,
    capture, lower, layout, backends, plan, serialize, hot_weights, io, report)
    over one context record, then the writers over the final record (Compiled)

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
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from .boards import BOARDS_DIR, Board
from .builder.kernel_table import kernel_table_source
from .driver import Compiled, CompileOptions, Context, arena_regions, choose_arena_memory, choose_program_memory
from .driver import run, stage_list
from .frontend import ranges
from .outdir import replacing
from .program import serialize
from .program.c_api import api_sources
from .report import format_report, memory_plan, meta_quant

__all__ = ["FLOAT_TOLERANCE", "CompileOptions", "Compiled", "arena_regions", "choose_arena_memory",
           "choose_program_memory", "compile"]


def compile(model: torch.nn.Module, example_inputs: tuple[Any, ...], board: str | Board,  # noqa: A001
            out_dir: str | Path, options: CompileOptions | None = None, **kwargs: Any) -> Compiled:
    """Compile `model` for `board` into `out_dir`: written into a temporary
    sibling directory that then replaces `out_dir` whole (whatever an earlier
    compile or build left there is gone; on an error or Ctrl-C `out_dir`
    stays as it was). A second compile into `out_dir` while one runs is
    refused; so is a non-empty `out_dir` that torchmcu did not write.

    model: an nn.Module, or a torch.export.ExportedProgram (example_inputs
    None: the ones it was exported with).

    The options are keyword arguments (quant="int8", ...) or a
    CompileOptions (options=...; keyword arguments then change it; see
    torchmcu.driver.options):

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
    reparam (on by default): parallel branches over one input summed (conv +
    batch norm, batch norm alone, the identity: RepVGG, MobileOne, RepGhost
    as trained) fold into one convolution before quantization
    (frontend/reparam.py); report.json "reparam" says how many.
    """
    opts = CompileOptions.of(options, **kwargs)  # every option checked
    ctx = run(Context(model, example_inputs, board, opts), stage_list(last="resolve"))
    # Written whole into a temporary sibling that then replaces out_dir: a failed or interrupted compile leaves
    # the previous directory as it was, and a new one keeps nothing of it (no firmware.elf of another program).
    with replacing(out_dir) as out:
        run(ctx, stage_list(first="prepare"))
        # The final path, not the temporary one the files are written into (no file names it).
        compiled = Compiled.of(ctx, Path(out_dir))
        for write in WRITERS:
            write(compiled, out)
    return compiled


# -- the writers: each reads the final record only ------------------------------------------------

def write_program(c: Compiled, out: Path) -> None:
    """model.pte, and the C arrays of the program (model_pte.c/.h) and of its arenas (model_arenas.c/.h)."""
    (out / "model.pte").write_bytes(c.pte)
    _log_program(c.pte, c.out_dir)
    h, src = serialize.model_pte_sources(c.pte, c.options.symbol)
    (out / "model_pte.h").write_text(h)
    (out / "model_pte.c").write_text(src)
    h, src = serialize.model_arena_sources(c.arenas, c.options.symbol)
    (out / "model_arenas.h").write_text(h)
    (out / "model_arenas.c").write_text(src)


def write_c_api(c: Compiled, out: Path) -> None:
    """The model's C API: NAME.h and NAME.cc."""
    o = c.options
    h, src = api_sources(o.symbol, c.inputs, c.outputs, {"board": c.board.name, "quant": meta_quant(c.graph),
                                                         "io_layout": o.io_layout,
                                                         "arena_bytes": sum(a.size for a in c.arenas),
                                                         "program_bytes": c.device_bytes})
    (out / f"{o.symbol}.h").write_text(h)
    (out / f"{o.symbol}.cc").write_text(src)


def write_kernel_table(c: Compiled, out: Path) -> None:
    """kernel_table.cc (the portable kernels') and kernels.txt: the program's op codes (selective build)."""
    codes = sorted({op.code for op in c.graph.ops})
    (out / "kernel_table.cc").write_text(kernel_table_source(codes))
    (out / "kernels.txt").write_text("".join(f"{code}\n" for code in codes))


def write_model(c: Compiled, out: Path) -> None:
    """model.pt2 (and the float model's program), model.json and example_inputs.npz: what build and run read."""
    torch.export.save(c.exported, str(out / "model.pt2"))
    float_program = ranges.float_program_bytes(c.model)
    if float_program is not None:  # the float model, for `run --check` (torchmcu.numerics)
        (out / ranges.FLOAT_PROGRAM).write_bytes(float_program)
    (out / "model.json").write_text(json.dumps(model_meta(c), indent=2) + "\n")
    np.savez(out / "example_inputs.npz", *[x.detach().numpy() for x in c.example_inputs])


def model_meta(c: Compiled) -> dict[str, Any]:
    """model.json."""
    o, board = c.options, c.board
    meta = {
        # A board of the repository by name; one described in the user's own file by its path.
        "board": board.name if board.source is None or board.source.parent == BOARDS_DIR else str(board.source),
        "program_memory": c.program_memory,
        "arenas": [{"name": a.name, "section": serialize.arena_section(a), "size": a.size,
                    **({"persistent": True} if a.persistent else {})} for a in c.arenas],
        "inputs": [t.as_meta() for t in c.inputs],
        "outputs": [t.as_meta() for t in c.outputs],
        "io_layout": o.io_layout,
        "float_tolerance": FLOAT_TOLERANCE,
        "quant": o.quant,
        "symbol": o.symbol,
        **({"stack": o.stack} if o.stack is not None else {}),
    }
    if c.pairs:  # what `run --check` carries from one sample to the next in PyTorch
        meta["state"] = [{"input": i, "output": out, "shape": list(c.example_inputs[i].shape)} for i, out in c.pairs]
    return meta


def write_report(c: Compiled, out: Path) -> None:
    """memory_plan.json and .png; report.json and report.txt."""
    (out / "memory_plan.json").write_text(json.dumps(memory_plan(c.graph, c.plan), indent=2) + "\n")
    if c.picture is not None:
        (out / c.report["memory"]["picture"]).write_bytes(c.picture)
    (out / "report.json").write_text(json.dumps(c.report, indent=2) + "\n")
    chosen = c.report.get("precision")
    (out / "report.txt").write_text(format_report(c.report) + (f"\n{chosen['text']}\n" if chosen else ""))


WRITERS: list[Callable[[Compiled, Path], None]] = [write_program, write_c_api, write_kernel_table, write_model,
                                                   write_report]


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

