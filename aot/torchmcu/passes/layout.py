"""Layout: the logical graph to the program graph (torchmcu.ir).

Every logical value gets a physical tensor and a permutation `perm` such
that physical dim j holds logical dim perm[j]. Convolutions and pools want
NHWC (perm (0, 2, 3, 1)); linear, reshape and the model's outputs want
PyTorch's order. A permute or transpose in the model changes only `perm`
and moves no data; a real PERMUTE op is emitted only where an op needs a
different order, and not at all when the two orders differ only in dims of
size 1 (the bytes are then identical: reshape, flatten after a global pool,
NCHW input with one channel).

What each logical node becomes is its family's emitter's business
(passes/lowering/); this module holds the tensors, the permutations and
the helpers every family uses: activation quantization ranges, biases.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import CompileError
from ..ir import NP_DTYPES, PGraph, POp, PTensor
from .graph import Graph, Node
from .lowering import ALL
from .lowering.family import checking_table, check_emitted
from .lowering.helpers import identity, same_bytes

# (op code, input dims, weight dims, output dims, params) -> bytes of scratch
# RAM the op's kernels may ask for (the backends' needs; 0 for none).
Scratch = Callable[[str, tuple[int, ...], tuple[int, ...] | None, tuple[int, ...], dict[str, Any]], int]


IO_LAYOUTS = ("nchw", "nhwc")


def io_perm(rank: int, io_layout: str = "nchw") -> tuple[int, ...]:
    """The physical order of a model input or output of `rank` dims: PyTorch's
    ("nchw"), or channels last ("nhwc": dim 1 moves to the end, for ranks of
    3 and more), which is the order convolutions and pools run in, so such an
    input needs no PERMUTE before them."""
    if io_layout == "nhwc" and rank >= 3:
        return (0, *range(2, rank), 1)
    return identity(rank)


# How integer average pools (and global means) round: as PyTorch's q/dq model
# (the real mean half to even: QuantPool2dParams.round_half_even), or as
# TFLite's AveragePool (the raw sum half away from zero: what a .tflite
# export and CMSIS-NN's arm_avgpool_* compute).
AVG_POOL_ROUNDINGS = ("pytorch", "tflite")


class Layout:
    def __init__(self, g: Graph, scratch: Scratch | None = None, io_layout: str = "nchw",
                 avg_pool_rounding: str = "pytorch") -> None:
        self.g = g
        self.io_layout = io_layout
        self.avg_pool_rounding = avg_pool_rounding
        self.scratch = scratch or (lambda code, x, w, y, params: 0)
        self.p = PGraph()
        self.val: dict[int, tuple[int, tuple[int, ...]]] = {}  # value -> (tensor, perm)
        self.cache: dict[tuple[int, tuple[int, ...]], int] = {}

    def activation(self, name: str, dims: tuple[int, ...], like: int | None = None) -> int:
        """A new buffer; `like` (a logical value) gives its dtype and quantization."""
        t = PTensor(name, tuple(int(d) for d in dims), buffer=len(self.p.buffers))
        if like is not None and like in self.g.qparams:
            t.dtype = "I16" if like in self.g.int16 else "I8"
            t.scale, t.zero_point = self.g.qparams[like]
        elif like is not None and like in self.g.dtypes:  # a bool (U8) or integer (I32) value
            t.dtype = self.g.dtypes[like]
        self.p.buffers.append(t.nbytes)
        self.p.tensors.append(t)
        return len(self.p.tensors) - 1

    def alias(self, tid: int, dims: tuple[int, ...], name: str | None = None) -> int:
        src = self.p.tensors[tid]
        if tuple(dims) == src.dims:
            return tid
        const = None if src.const is None else src.const.reshape(dims)
        self.p.tensors.append(PTensor(name or src.name, tuple(dims), src.dtype, src.buffer, const,
                                      src.scale, src.zero_point, offset=src.offset))
        return len(self.p.tensors) - 1

    def constant(self, name: str, data: np.ndarray, dtype: str = "F32") -> int:
        data = np.ascontiguousarray(data, dtype=NP_DTYPES[dtype])
        self.p.tensors.append(PTensor(name, tuple(data.shape) or (1,), dtype, const=data.reshape(data.shape or (1,))))
        return len(self.p.tensors) - 1

    def get(self, v: int, want: tuple[int, ...], node: Node) -> int:
        """Value v as a tensor whose physical order is `want`."""
        tid, perm = self.val[v]
        if perm == want:
            return tid
        shape = self.g.shapes[v]
        dims = tuple(shape[d] for d in want)
        if same_bytes(shape, perm, want):
            return self.alias(tid, dims)
        key = (v, want)
        if key not in self.cache:
            out = self.activation(f"{node.name}_in_{v}", dims, like=v)
            phys = [perm.index(d) for d in want]
            self.emit("PERMUTE", [tid], [out], ("PermuteParams", {"perm": phys}), node, "permute")
            self.cache[key] = out
        return self.cache[key]

    def const_operand(self, data: np.ndarray, rank: int, order: tuple[int, ...], name: str) -> int:
        """A broadcast constant at the output's rank, laid out in `order`."""
        data = np.asarray(data, dtype=np.float32)
        data = data.reshape((1,) * (rank - data.ndim) + data.shape)
        return self.constant(name, np.transpose(data, order))

    def emit(self, code: str, ins: list[int], outs: list[int], params: tuple[str, dict] | None,
             node: Node, kind: str, macs: int = 0) -> None:
        self.p.ops.append(POp(code, ins, outs, params, node.name, node.source, kind, macs=macs))

    def fail(self, node: Node, message: str) -> CompileError:
        shapes = [self.g.shapes[i] if isinstance(i, int) else getattr(i, "shape", None) for i in node.inputs]
        return CompileError(message, op=node.op, shapes=shapes, source=node.source)

    def run(self) -> PGraph:
        g = self.g
        for vid, name in zip(g.inputs, g.input_names):
            shape = g.shapes[vid]
            perm = io_perm(len(shape), self.io_layout)
            tid = self.activation(name, tuple(shape[d] for d in perm) or (1,), like=vid)
            self.p.inputs.append(tid)
            self.val[vid] = (tid, perm)
        check = checking_table()
        for n in g.nodes:
            table = ALL.emitters16 if n.attrs.get("bits") == 16 else ALL.emitters  # a16w8: the int16 forms
            first = len(self.p.ops)
            table[n.op](self, n)
            if check:
                check_emitted(n, [op.code for op in self.p.ops[first:]])
        self.outputs()
        return self.p

    def outputs(self) -> None:
        taken = {self.p.tensors[t].buffer for t in self.p.inputs}
        for k, o in enumerate(self.g.outputs):
            node = Node("output", [], {}, -1, f"output_{k}")
            if isinstance(o, int):
                tid = self.get(o, io_perm(len(self.g.shapes[o]), self.io_layout), node)
                t = self.p.tensors[tid]
                if t.buffer in taken:  # an output that is an input, or another output
                    out = self.activation(f"output_{k}", t.dims, like=o)
                    self.emit("COPY", [tid], [out], None, node, "copy")
                    tid = out
            else:
                value = np.asarray(o)
                src = self.constant(f"output_{k}_value", np.transpose(value, io_perm(value.ndim, self.io_layout)))
                tid = self.activation(f"output_{k}", self.p.tensors[src].dims)
                self.emit("COPY", [src], [tid], None, node, "copy")
            taken.add(self.p.tensors[tid].buffer)
            self.p.outputs.append(tid)


def to_program_graph(g: Graph, scratch: Scratch | None = None, io_layout: str = "nchw",
                     avg_pool_rounding: str = "pytorch") -> PGraph:
    return Layout(g, scratch, io_layout, avg_pool_rounding).run()
