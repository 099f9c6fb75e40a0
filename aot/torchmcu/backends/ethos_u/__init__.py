"""The Ethos-U backend, ahead-of-time half: which ops of an int8 program graph
run on the board's NPU, their TOSA 1.0 form, Vela's command streams for
them, and the report of what ran where.

    result = compile_partitions(pg, board, samples=[[x0], [x1]])
    result.partitions   # DelegatePartition per NPU call: ops, I/O tensors, blob, scratch sizes, Vela's estimates
    result.cpu_ops      # op index -> why it stays on the CPU
    result.schedule     # ("op", i) / ("npu", k) in execution order
    report(result)      # the "ethos_u" section of report.json

Per partition: the ops are lowered to TOSA (tosa_lower), checked by running
the TOSA graph in tosa_reference_model against the project's reference on
`samples` (numerics; any difference sends the op that causes it back to the
CPU), and compiled by Vela for the board's accelerator, system config and
memory mode (vela). A Vela or TOSA failure names the op and the reason and
that op falls back to the CPU; the rest is partitioned again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

import numpy as np

from ...boards import Board, load_board
from ...errors import TorchMCUError
from ...ir import PGraph
from . import numerics, partition, tosa_lower, vela
from .blob import Blob

__all__ = ["DelegatePartition", "EthosUError", "EthosUResult", "available", "compile_partitions", "format_report",
           "report", "target_for"]


# The runtime's limits on one op (firmware/core/kernel.h kMaxInputs, kMaxOutputs):
# an ETHOS_U call takes the blob, the scratch and the fast scratch besides the
# partition's inputs.
MAX_CALL_INPUTS = 8 - 3
MAX_CALL_OUTPUTS = 2


class EthosUError(TorchMCUError):
    """The board has no NPU, or the Ethos-U tools are missing."""


def available() -> bool:
    """Whether Vela and tosa-tools are installed."""
    try:
        import tosa_reference_model  # noqa: F401
        import tosa_serializer  # noqa: F401
    except ImportError:
        return False
    return vela.available()


def target_for(board: Board | str) -> vela.Target:
    b = board if isinstance(board, Board) else load_board(board)
    if b.npu is None:
        raise EthosUError(f"board {b.name} has no NPU (no [npu] table in its description)")
    return vela.Target(b.npu.accelerator, b.npu.system_config, b.npu.memory_mode)


@dataclass
class DelegatePartition:
    index: int
    ops: list[int]  # op indices of the program graph, program order
    inputs: list[int]  # tensor ids, in the blob's input order
    outputs: list[int]  # tensor ids, in the blob's output order
    blob: bytes  # see blob.py: header, command stream, read-only data
    scratch_bytes: int  # NPU-reachable RAM for the partition's intermediates
    fast_scratch_bytes: int
    estimates: dict[str, Any]  # Vela's performance report (vela._estimates)
    tosa: bytes  # the TOSA flatbuffer Vela compiled
    tosa_ops: dict[str, int] = field(default_factory=dict)
    numerics: dict[str, Any] | None = None  # the bit-exactness check, when samples were given


@dataclass
class EthosUResult:
    target: vela.Target
    partitions: list[DelegatePartition]
    cpu_ops: dict[int, str]  # op index -> reason
    schedule: list[tuple[str, int]]
    op_names: list[str]
    op_codes: list[str]


# -- the checks behind a fallback --------------------------------------------------------------

def _single(pg: PGraph, i: int) -> tosa_lower.TosaGraph:
    return tosa_lower.lower(pg, [i], list(pg.ops[i].outputs[:1]))


def _vela_culprits(pg: PGraph, ops: list[int], target: vela.Target, message: str) -> dict[int, str]:
    culprits = {}
    for i in ops:
        try:
            vela.compile_tosa(_single(pg, i).data, target)
        except vela.VelaError as e:
            culprits[i] = f"Vela: {e}"
    return culprits or {i: f"Vela refused the partition: {message}" for i in ops}


def _check(pg: PGraph, group: partition.Group, graph: tosa_lower.TosaGraph,
           values: list[numerics.GraphValues]) -> tuple[dict[int, str], dict[str, Any] | None]:
    """Every op of the partition on its own, then the partition's graph, in
    tosa_reference_model against the reference on each sample. The first
    difference (or refusal) sends its op back to the CPU."""
    if not values:
        return {}, None
    elements = 0
    checks = [(i, _single(pg, i)) for i in group.ops] + [(None, graph)]
    for i, g in checks:
        for s, v in enumerate(values):
            want = [v.get(t) for t in g.outputs]
            try:
                bad = numerics.compare(numerics.run_tosa(g.data, [v.get(t) for t in g.inputs]), want)
            except numerics.TosaRunError as e:
                return {group.ops[0] if i is None else i: f"tosa_reference_model refused it: {e}"}, None
            if bad is not None:
                if i is None:  # every op alone matched: the glue between them did not
                    return {op: f"the partition's TOSA graph differs from the torchmcu reference: {bad}"
                            for op in group.ops}, None
                return {i: f"TOSA differs from the torchmcu reference on sample {s}: {bad}"}, None
            elements += sum(w.size for w in want)
    return {}, {"samples": len(values), "ops_checked": len(group.ops), "elements_compared": elements,
                "bit_exact": True, "checked_by": "tosa_reference_model"}


# -- the driver ----------------------------------------------------------------------------------

def compile_partitions(pg: PGraph, board: Board | str | vela.Target,
                       samples: Sequence[Sequence[np.ndarray]] | None = None) -> EthosUResult:
    """Partition `pg` (layout's program graph, before planning) for the
    board's NPU and compile every partition. `samples`: model inputs (one list
    per sample, shaped as the graph's inputs) on which each partition's TOSA
    graph must equal the project's reference bit for bit; without them the
    numerics are not checked here."""
    if not available():
        raise EthosUError("the Ethos-U backend needs the ethos-u-vela and tosa-tools packages "
                          "(pip install ethos-u-vela tosa-tools)")
    target = board if isinstance(board, vela.Target) else target_for(board)
    values = [numerics.GraphValues(pg, list(s)) for s in samples or []]
    cpu: dict[int, str] = {}
    for i in range(len(pg.ops)):
        reason = tosa_lower.check_op(pg, i)
        if reason is not None:
            cpu[i] = reason
    while True:
        groups = partition.group_ops(pg, set(range(len(pg.ops))) - set(cpu))
        parts: list[DelegatePartition] = []
        fallen: dict[int, str] = {}
        for k, g in enumerate(groups):
            if len(g.inputs) > MAX_CALL_INPUTS or len(g.outputs) > MAX_CALL_OUTPUTS:
                fallen = {g.ops[-1]: f"its partition (ops {g.ops[0]}..{g.ops[-1]}) would take {len(g.inputs)} inputs "
                                     f"and give {len(g.outputs)} outputs; one delegate call takes at most "
                                     f"{MAX_CALL_INPUTS} and {MAX_CALL_OUTPUTS}"}
                break
            try:
                graph = tosa_lower.lower(pg, g.ops, g.outputs)
            except tosa_lower.LoweringError as e:  # a combination the single-op check did not see
                fallen = {e.op_index if e.op_index >= 0 else g.ops[0]: e.reason}
                break
            fallen, checked = _check(pg, g, graph, values)
            if fallen:
                break
            io_regions = len(graph.inputs) + len(graph.outputs) <= vela.MAX_REGIONS - 3
            try:
                compiled = vela.compile_tosa(graph.data, target, separate_io=io_regions)
            except vela.VelaError as e:
                fallen = _vela_culprits(pg, g.ops, target, str(e))
                break
            blob = Blob.from_compiled(compiled, target.arch, target.macs, io_regions)
            parts.append(DelegatePartition(k, g.ops, graph.inputs, graph.outputs, blob.pack(), compiled.scratch_bytes,
                                           compiled.fast_scratch_bytes, compiled.estimates, graph.data,
                                           graph.tosa_ops, checked))
        if not fallen:
            break
        cpu.update(fallen)
    return EthosUResult(target, parts, dict(sorted(cpu.items())), partition.schedule(pg, groups),
                        [op.name for op in pg.ops], [op.code for op in pg.ops])


# -- reports -------------------------------------------------------------------------------------

def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def report(result: EthosUResult) -> dict[str, Any]:
    """The Ethos-U section of report.json: where each op ran (and why not on
    the NPU), per partition Vela's estimates and the numerics check, and the
    totals over partitions."""
    where = {i: k for k, p in enumerate(result.partitions) for i in p.ops}
    ops = [{"index": i, "name": result.op_names[i], "code": result.op_codes[i],
            "where": "npu" if i in where else "cpu", "partition": where.get(i),
            "reason": result.cpu_ops.get(i)} for i in range(len(result.op_names))]
    parts = []
    for p in result.partitions:
        b = Blob.unpack(p.blob)
        parts.append({"index": p.index, "ops": p.ops, "inputs": p.inputs, "outputs": p.outputs,
                      "blob_bytes": len(p.blob), "command_stream_bytes": len(b.command_stream),
                      "read_only_bytes": len(b.read_only), "scratch_bytes": p.scratch_bytes,
                      "fast_scratch_bytes": p.fast_scratch_bytes, "io_regions": b.io_regions,
                      "tosa_ops": p.tosa_ops, "estimates": p.estimates, "numerics": p.numerics})
    est = [p.estimates for p in result.partitions]
    memories: dict[str, dict[str, int]] = {}
    for e in est:
        for name, m in e["memories"].items():
            acc = memories.setdefault(name, {"peak_bytes": 0, "read_bytes": 0, "written_bytes": 0})
            acc["peak_bytes"] = max(acc["peak_bytes"], m["peak_bytes"])
            acc["read_bytes"] += m["read_bytes"]
            acc["written_bytes"] += m["written_bytes"]
    t = result.target
    return {
        "accelerator": t.accelerator, "system_config": t.system_config, "memory_mode": t.memory_mode,
        "tools": {"ethos-u-vela": _version("ethos-u-vela"), "tosa-tools": _version("tosa-tools"),
                  "path": "TOSA 1.0 flatbuffer compiled by Vela (Regor), raw output"},
        "ops": ops, "npu_ops": len(where), "cpu_ops": len(ops) - len(where),
        "schedule": [f"{kind}:{n}" for kind, n in result.schedule],
        "partitions": parts,
        "totals": {"npu_cycles": sum(e["npu_cycles"] for e in est), "total_cycles": sum(e["total_cycles"] for e in est),
                   "macs": sum(e["macs"] for e in est),
                   "inference_seconds": sum(e["inference_seconds"] or 0.0 for e in est),
                   "blob_bytes": sum(len(p.blob) for p in result.partitions),
                   "scratch_bytes": max((p.scratch_bytes for p in result.partitions), default=0),
                   "memories": memories},
    }


def format_report(r: dict[str, Any]) -> str:
    """report()'s dict as text (for report.txt and closing notes)."""
    tools = f"Vela {r['tools']['ethos-u-vela']}, tosa-tools {r['tools']['tosa-tools']}"
    lines = [f"Ethos-U: {r['accelerator']}, system {r['system_config']}, memory mode {r['memory_mode']} ({tools})",
             f"  ops on the NPU: {r['npu_ops']}, on the CPU: {r['cpu_ops']}"]
    for op in r["ops"]:
        if op["where"] == "cpu":
            lines.append(f"    cpu  #{op['index']:<3} {op['name']} ({op['code']}): {op['reason']}")
    for p in r["partitions"]:
        e = p["estimates"]
        lines.append(f"  partition {p['index']}: ops {p['ops'][0]}..{p['ops'][-1]} ({len(p['ops'])} ops), "
                     f"{e['total_cycles']:,} cycles ({e['npu_cycles']:,} NPU), {e['macs']:,} MACs, "
                     f"MAC utilisation {e['mac_utilisation']:.1%}, blob {p['blob_bytes']:,} B, "
                     f"scratch {p['scratch_bytes']:,} B")
        for name, m in e["memories"].items():
            lines.append(f"    {name}: peak {m['peak_bytes']:,} B, read {m['read_bytes']:,} B, "
                         f"written {m['written_bytes']:,} B")
        if p["numerics"]:
            n = p["numerics"]
            lines.append(f"    TOSA reference == torchmcu reference: every op's output and the partition's, "
                         f"{n['samples']} sample(s), {n['elements_compared']:,} elements compared")
    t = r["totals"]
    lines.append(f"  total: {t['total_cycles']:,} cycles = {t['inference_seconds'] * 1e3:.3f} ms at the NPU clock, "
                 f"{t['blob_bytes']:,} B of blobs")
    return "\n".join(lines) + "\n"
