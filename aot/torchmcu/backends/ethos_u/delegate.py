"""The NPU partitions into the program graph: each partition's ops become
one ETHOS_U op (backend "ethos-u"), placed where the schedule runs the call.

    delegate(pg, result)   # pg.ops: the CPU ops and one ETHOS_U op per partition

An ETHOS_U op's operands (program.fbs; firmware/delegates/ethos_u/ checks
them against the blob's header when the program loads):

    inputs   0  the blob (blob.py): a U8 constant, read in place by the NPU
                (the constant segment aligns every constant to 16 bytes)
             1  scratch: a U8 activation buffer of the blob's scratch bytes,
                planned like any kernel scratch (live during the call only);
                -1 when the blob needs none
             2  fast scratch: the same for the fast scratch; -1 when none
             3+ the partition's inputs, in the blob's order
    outputs     the partition's outputs, in the blob's order

Its params (EthosUParams) carry the partition number and, for tools only,
the partition as the CPU runs it: its ops, over tensors of their own
(constants in a byte string, activations in one scratch arena, each buffer
of the program graph at an offset of its own), so that the reference
interpreter (torchmcu.program.interpret) executes the call with the project's
reference kernels and `run --check` holds the NPU to them bit for bit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import CompileError
from ...ir import PGraph, POp, PTensor
from ...plan import Plan
from ...program.serialize import WIRE_DTYPES
from .blob import Blob

if TYPE_CHECKING:
    from . import EthosUResult

CODE = "ETHOS_U"
BACKEND = "ethos-u"
FIRST_IO = 3  # operands before the partition's inputs: blob, scratch, fast scratch
ALIGN = 16


def _align(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def _quant(t: PTensor) -> dict[str, Any]:
    return {"scale": float(t.scale), "zero_point": int(t.zero_point)} if t.scale else {}


def partition_graph(pg: PGraph, ops: list[int], inputs: list[int], outputs: list[int]) -> dict[str, Any]:
    """EthosUParams' tool-only fields: the ops `ops` of `pg` (before
    planning) over tensors of their own. Every activation buffer they touch
    gets its own 16-byte aligned offset in one arena, so aliases (a reshape
    of a conv's output, a slice) read what their producer wrote, as in the
    program graph; constants are stored once each."""
    local: dict[int, int] = {}
    tensors: list[dict[str, Any]] = []
    constants = bytearray()
    const_at: dict[int, int] = {}  # id(array base) -> offset: aliases share bytes
    buffer_at: dict[int, int] = {}
    arena = 0

    def tensor(tid: int) -> int:
        nonlocal arena
        if tid < 0:
            return tid
        if tid in local:
            return local[tid]
        t = pg.tensors[tid]
        entry: dict[str, Any] = {"name": t.name, "dtype": t.dtype, "dims": [int(d) for d in t.dims],
                                 "nbytes": t.nbytes, **_quant(t)}
        if t.const is not None:
            base = t.const.base if t.const.base is not None else t.const
            if id(base) not in const_at:
                const_at[id(base)] = len(constants)
                constants.extend(np.ascontiguousarray(t.const).astype(WIRE_DTYPES[t.dtype], copy=False).tobytes())
                constants.extend(bytes(_align(len(constants)) - len(constants)))
            entry.update(region="CONSTANT", offset=const_at[id(base)])
        else:
            assert t.buffer is not None
            if t.buffer not in buffer_at:
                buffer_at[t.buffer] = arena
                arena = _align(arena + pg.buffers[t.buffer])
            entry.update(region="ARENA", arena=0, offset=buffer_at[t.buffer] + t.offset)
        local[tid] = len(tensors)
        tensors.append(entry)
        return local[tid]

    sub_ops = []
    for i in ops:
        op = pg.ops[i]
        sub_ops.append({"code": op.code, "inputs": [tensor(t) for t in op.inputs],
                        "outputs": [tensor(t) for t in op.outputs], "params": op.params, "name": op.name})
    return {"arena_bytes": arena, "tensors": tensors, "ops": sub_ops, "constants": bytes(constants),
            "inputs": [tensor(t) for t in inputs], "outputs": [tensor(t) for t in outputs]}


def _buffer(pg: PGraph, name: str, nbytes: int) -> int:
    """A new U8 activation tensor with a buffer of its own; -1 for none."""
    if nbytes <= 0:
        return -1
    pg.tensors.append(PTensor(name, (nbytes,), "U8", buffer=len(pg.buffers)))
    pg.buffers.append(nbytes)
    return len(pg.tensors) - 1


def delegate(pg: PGraph, result: EthosUResult) -> list[POp]:
    """Replace each partition of `result` (compiled from `pg`, before
    planning) by its ETHOS_U op, the program's ops in the schedule's order.
    Returns the ETHOS_U ops. The partitions' inner tensors stay in pg but no
    op names them any more: the planner's compaction drops them."""
    calls: dict[int, POp] = {}
    for p in result.partitions:
        name = f"ethos_u_{p.index}"
        pg.tensors.append(PTensor(f"{name}_blob", (len(p.blob),), "U8", const=np.frombuffer(p.blob, np.uint8)))
        blob = len(pg.tensors) - 1
        scratch = _buffer(pg, f"{name}_scratch", p.scratch_bytes)
        fast = _buffer(pg, f"{name}_fast_scratch", p.fast_scratch_bytes)
        params = {"partition": p.index, **partition_graph(pg, p.ops, p.inputs, p.outputs)}
        first = pg.ops[p.ops[0]]
        calls[p.index] = POp(CODE, [blob, scratch, fast, *p.inputs], list(p.outputs), ("EthosUParams", params), name,
                             first.source, "ethos_u", BACKEND, sum(pg.ops[i].macs for i in p.ops))
    pg.ops[:] = [pg.ops[n] if kind == "op" else calls[n] for kind, n in result.schedule]
    return [calls[k] for k in sorted(calls)]


def check_npu_operands(pg: PGraph, mem: Plan) -> None:
    """The NPU takes base pointers on 16-byte boundaries: every arena operand
    of an ETHOS_U call the blob addresses directly (its scratch, and its
    inputs and outputs when they have regions of their own) must start on one."""
    for op in pg.ops:
        if op.code != CODE:
            continue
        b = Blob.unpack(bytes(np.asarray(pg.tensors[op.inputs[0]].const, np.uint8)))
        direct = op.inputs[1:FIRST_IO] + (op.inputs[FIRST_IO:] + op.outputs if b.io_regions else [])
        for tid in direct:
            t = pg.tensors[tid] if tid >= 0 else None
            if t is None or t.buffer is None:
                continue
            at = mem.offsets[t.buffer] + t.offset
            if at % ALIGN:
                raise CompileError(f"{op.name}: the NPU reads {t.name} at arena offset {at}, not on a 16-byte "
                                   "boundary (a slice of a concatenation?); compile with --no-inplace")


def format_npu_report(section: dict[str, Any]) -> str:
    """report.json's "ethos_u" section as text (report.txt)."""
    from . import format_report

    if section.get("skipped"):
        return f"Ethos-U ({section['accelerator']}): not used: {section['skipped']}\n"
    calls = ", ".join(f"partition {c['partition']} = op #{c['op']} {c['name']}" for c in section["calls"])
    text = format_report(section) + (f"  calls: {calls}\n" if calls else "")
    if section.get("calls") and section.get("program_device_bytes"):
        text += (f"  program as the device links it: {section['program_device_bytes']:,} B in "
                 f"{section['program_memory']} (model.pte also keeps the partitions' ops for tools)\n")
    return text
