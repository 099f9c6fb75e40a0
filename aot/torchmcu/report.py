"""The compile report: what each op runs on, the RAM plan against its lower
bound, where every part of the model went (which memory, and whether it is
slow or off-chip), flash; report.json, report.txt and memory_plan.json/.png."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from . import backends
from .boards import Board
from .ir import PGraph
from .plan import Plan
from .sources import FIRMWARE


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


def render_memory_picture(pg: PGraph, mem: Plan) -> bytes | None:
    """A PNG of buffers over time, one panel per region. Needs matplotlib;
    TORCHMCU_PLOT=0 skips it (the tests do, for speed)."""
    import io
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
    png = io.BytesIO()
    fig.savefig(png, dpi=110, format="png")
    plt.close(fig)
    return png.getvalue()


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
                program_memory: str | None = None, device_bytes: int | None = None) -> dict[str, Any]:
    """device_bytes: the program as linked (model_pte.c's array: the device
    image, without the tables only tools read); model.pte is larger."""
    device_bytes = len(pte) if device_bytes is None else device_bytes
    ops = [{"index": i, "name": op.name, "kind": op.kind, "code": op.code, "backend": op.backend,
            "macs": op.macs, "source": op.source} for i, op in enumerate(pg.ops)]
    coverage: dict[str, int] = {}
    for op in pg.ops:
        coverage[op.backend] = coverage.get(op.backend, 0) + 1
    regions = []
    for reg in (r for r in mem.regions if not r.persistent):  # the state: "state" below
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
        # The model's MACs; patch-based inference executes more (the rows its bands share).
        "macs": mem.model_macs or sum(op.macs for op in pg.ops),
        "macs_executed": sum(op.macs for op in pg.ops),
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
        "flash": {"program_bytes": device_bytes, "constant_bytes": constant_bytes,
                  "flatbuffer_bytes": device_bytes - constant_bytes, "pte_bytes": len(pte),
                  "program_memory": program_memory, "weights": weight_flash(pg)},
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
    lines += ["", f"MACs per inference: {r['macs']:,}"]
    executed = r.get("macs_executed", r["macs"])
    if executed != r["macs"]:
        lines[-1] += (f" ({executed:,} executed: patch-based inference computes the rows its bands share again, "
                      f"+{100 * (executed - r['macs']) / r['macs']:.1f} %)")
    if r.get("reparam"):
        f = r["reparam"]
        lines.append(f"Re-parameterized: {f['branches']} parallel branches summed into {f['convs']} convolutions "
                     f"({f['adds_removed']} adds removed; --no-reparam keeps them)")
    lines += ["", "RAM (activations):"]
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
    lines += ["", f"Flash (program, as linked: model_pte.c): {f['program_bytes']:,} B = {f['flatbuffer_bytes']:,} B "
              f"program + {f['constant_bytes']:,} B constants"
              + (f" (model.pte: {f['pte_bytes']:,} B with the tables only tools read)"
                 if f.get("pte_bytes", f["program_bytes"]) != f["program_bytes"] else "")]
    if f.get("crc32"):
        c = f["crc32"]
        lines.append(f"  program CRC32: 0x{c['device']:08x} (model_pte.c), 0x{c['pte']:08x} (model.pte), "
                     "checked at load")
    wf = f.get("weights")
    if wf and wf["int8_bytes"]:
        lines.append(f"  weights: {wf['bytes']:,} B as stored ({wf['int4_layers']} int4 layers); "
                     f"{wf['int8_bytes']:,} B at int8, {wf['float32_bytes']:,} B at float32")
    if r.get("io"):
        lines += ["", *format_io(r["io"])]
    if r.get("placement"):
        lines += ["", *format_placement(r["placement"]),
                  "  (the linked image's flash, total RAM and stack: `torchmcu build` adds them at the end)"]
    for name in r.get("backends", []):
        b = backends.get(name)
        if r.get(b.report_key or b.name):
            lines += ["", b.format_report(r[b.report_key or b.name]).rstrip("\n")]
    lines.append("")
    return "\n".join(lines)


def summary_lines(r: dict[str, Any]) -> list[str]:
    """What `torchmcu compile` prints by default (the whole report with
    --verbose): what was compiled, its ops and MACs, the RAM each memory's
    arena takes, the program's flash and memory, the inputs and outputs."""
    ops = r.get("ops", [])
    coverage = ", ".join(f"{n} {k}" for k, n in sorted(r.get("coverage", {}).items()))
    lines = [f"compiled for {r['board']} ({r['quant']}): {len(ops)} ops ({coverage}), "
             f"{r.get('macs', 0):,} MACs per inference"]
    m = r.get("memory", {})
    regions = "; ".join(f"{g['name']}: {g['planned_bytes']:,} B planned" for g in m.get("regions", []))
    lines.append(f"RAM: activations {m.get('activation_bytes', 0):,} B ({regions})"
                 + (f"; model state {m['state_bytes']:,} B" if m.get("state_bytes") else ""))
    f = r.get("flash", {})
    lines.append(f"flash: program {f.get('program_bytes', 0):,} B in {f.get('program_memory', '?')} "
                 "(the linked image's flash, RAM and stack: `torchmcu build`)")
    io = r.get("io")
    if io:
        lines.append("; ".join(f"{kind} {k} {t['name']}: {t['dtype']} {t['layout']} {t['dims']}"
                               for kind in ("input", "output") for k, t in enumerate(io[kind + "s"])))
    return lines


# ---------------------------------------------------------------------------------------------
# The edges: what runs only to convert the inputs and outputs


EDGE_CODES = {"PERMUTE", "QUANTIZE_S8", "DEQUANTIZE_S8", "QUANTIZE_S16", "DEQUANTIZE_S16"}


def edge_ops(pg: PGraph) -> list[dict[str, Any]]:
    """The ops that only convert a model input or output: a PERMUTE or a
    (de)quantize reading an input, or writing an output, directly or through
    another such op. They are what --io int8 and --io-layout nhwc remove."""
    ins = {pg.tensors[t].buffer for t in pg.inputs}
    outs = {pg.tensors[t].buffer for t in pg.outputs}
    found: list[dict[str, Any]] = []
    reached = set(ins)
    for i, op in enumerate(pg.ops):  # forwards from the inputs
        if op.code in EDGE_CODES and all(pg.tensors[t].buffer in reached for t in op.inputs[:1]):
            reached |= {pg.tensors[t].buffer for t in op.outputs}
            found.append({"index": i, "name": op.name, "code": op.code, "edge": "input",
                          "bytes": sum(pg.tensors[t].nbytes for t in op.outputs)})
    reached = set(outs)
    for i in range(len(pg.ops) - 1, -1, -1):  # backwards from the outputs
        op = pg.ops[i]
        if op.code in EDGE_CODES and all(pg.tensors[t].buffer in reached for t in op.outputs):
            reached |= {pg.tensors[t].buffer for t in op.inputs[:1]}
            if not any(e["index"] == i for e in found):
                found.append({"index": i, "name": op.name, "code": op.code, "edge": "output",
                              "bytes": sum(pg.tensors[t].nbytes for t in op.inputs[:1])})
    return sorted(found, key=lambda e: e["index"])


def format_io(io: dict[str, Any]) -> list[str]:
    lines = [f"Inputs and outputs (--io-layout {io['layout']}; the C API: NAME.h):"]
    for kind in ("inputs", "outputs"):
        for k, t in enumerate(io[kind]):
            q = f", scale {t['scale']:.6g}, zero point {t['zero_point']}" if "scale" in t else ""
            lines.append(f"  {kind[:-1]} {k} {t['name']}: {t['dtype']} {t['layout']} {t['dims']} ({t['bytes']:,} B{q})")
    edges = io.get("edge_ops", [])
    if edges:
        what = ", ".join(f"#{e['index']} {e['code']}" for e in edges)
        fixes = (["--io-layout nhwc"] if any(e["code"] == "PERMUTE" for e in edges) else []) + (
            ["--io int8 (an int8 model)"] if any("QUANTIZE" in e["code"] for e in edges) else [])
        lines.append(f"  at the edges: {what}: they only convert the inputs/outputs"
                     + (f"; {' and '.join(fixes)} take(s) them away" if fixes else ""))
    else:
        lines.append("  at the edges: nothing (no permute or (de)quantize runs only to convert the inputs/outputs)")
    return lines


# ---------------------------------------------------------------------------------------------
# Where each part of the model went


def memory_kind(board: Board, name: str) -> str:
    """'on-chip', or 'off-chip' for a memory the board file marks external."""
    return "off-chip" if board.memory(name).external else "on-chip"


def _smaller_weights(quant: str) -> str:
    """What makes the weights smaller, from the model's quantization."""
    if quant == "float32":
        return "quantize (--quant int8: weights 4x smaller; --quant int4: 8x)"
    if quant in ("int8", "a16w8"):
        return "int4 weights (--quant int4, or --precision LAYER=int4 for the largest layers: half of int8)"
    return "fewer or smaller layers (the weights are int4 already)"


def placement(board: Board, program_memory: str, program_bytes: int, mem: Plan,
              stack: int | None = None, quant: str = "float32") -> dict[str, Any]:
    """Every part of the model and the memory it went to, and notes where
    that is slower than it might be: a program outside the code memory (read
    in place from there at every inference), an arena in a memory slower
    than the fastest that holds arenas, anything in off-chip memory."""
    parts = [{"part": "program", "bytes": program_bytes, "memory": program_memory}]
    parts += [{"part": f"arena {r.name}", "bytes": r.arena_bytes, "memory": r.name} for r in mem.regions]
    parts.append({"part": "stack, .data, .bss", "bytes": None, "memory": board.data_memory})
    for p in parts:
        m = board.memory(p["memory"])
        p.update(speed=m.speed, kind=memory_kind(board, m.name))
    fastest_arena = min((m.speed for m in board.memories if "arena" in m.holds), default=0)
    notes = []
    code = board.memory(board.code_memory)
    if program_memory != code.name:
        m = board.memory(program_memory)
        notes.append(f"the program ({program_bytes:,} B) does not fit beside the code in {code.name} "
                     f"({code.size:,} B) and goes to {m.name}, {memory_kind(board, m.name)} "
                     f"(speed rank {m.speed}, {code.name} is {code.speed}): every weight is read from there; "
                     f"to keep it in {code.name}: {_smaller_weights(quant)}; or let the convolutions' "
                     "weights be copied at load into fast RAM the plan leaves free (--copy-hot-weights)")
    for r in mem.regions:
        m = board.memory(r.name)
        if m.external or m.speed > fastest_arena:
            where = "off-chip memory" if m.external else f"a slower memory (speed rank {m.speed})"
            notes.append(f"{r.arena_bytes:,} B of activations go to {m.name}, {where}: the faster memories "
                         f"are full or capped (--budget); to keep them on-chip: raise or drop a --budget you "
                         f"set, let patch-based inference recompute more (--tile-recompute 0.25)"
                         + (", quantize (--quant int8: 4x smaller)" if quant == "float32" else ""))
    return {"parts": parts, "notes": notes, "stack_reserved_at_compile": board.stack_size if stack is None else stack}


def format_placement(p: dict[str, Any]) -> list[str]:
    lines = ["Where each part went:"]
    for part in p["parts"]:
        size = f"{part['bytes']:,} B" if part["bytes"] is not None else "by the build"
        lines.append(f"  {part['part']:<20} {size:>12}  -> {part['memory']} ({part['kind']}, speed rank {part['speed']})")
    lines += [f"  note: {n}" for n in p["notes"]]
    return lines
