"""The logical graph: what capture's ExportedProgram becomes before any
layout decision. It keeps PyTorch's semantics (NCHW, logical shapes): each
node is one of a small set of ops with plain attributes, each operand an
activation (an int id, wrapped in Act) or a constant (a NumPy array, or a
QConst for quantized weights). The passes in fusion.py rewrite it; layout.py
turns it into the program graph (torchmcu.ir).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Union

import numpy as np
import torch


@dataclass
class QConst:
    """A quantized constant (weights after PT2E's convert): integer data with
    per-tensor or per-channel (along `axis`) scale and zero point."""

    data: np.ndarray
    scale: np.ndarray
    zero_point: np.ndarray
    axis: int | None
    bits: int = 8  # 4: int4 values (-8..7) in int8 storage, packed when laid out

    def dequantized(self) -> np.ndarray:
        shape = [1] * self.data.ndim
        if self.axis is not None:
            shape[self.axis] = -1
        s = self.scale.reshape(shape) if self.axis is not None else self.scale
        z = self.zero_point.reshape(shape) if self.axis is not None else self.zero_point
        return ((self.data.astype(np.float32) - z) * s).astype(np.float32)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.data.shape


Operand = Union[int, np.ndarray, QConst]  # activation id, or a constant


INF = math.inf


def _quantized_decomposed() -> Any:
    import torch.ao.quantization.fx._decomposed  # noqa: F401  registers the q/dq ops PT2E emits

    return torch.ops.quantized_decomposed


QD = _quantized_decomposed()


@dataclass
class Node:
    op: str  # conv2d linear batch_norm clamp sigmoid tanh hardswish add mul maximum minimum
    #          max_pool2d avg_pool2d mean softmax reshape permute cat pad bmm
    inputs: list[Operand]
    attrs: dict[str, Any]
    out: int
    name: str
    source: str | None = None


@dataclass
class Graph:
    shapes: dict[int, tuple[int, ...]] = field(default_factory=dict)  # activation id -> logical shape
    nodes: list[Node] = field(default_factory=list)
    inputs: list[int] = field(default_factory=list)
    outputs: list[Operand] = field(default_factory=list)
    input_names: list[str] = field(default_factory=list)
    qparams: dict[int, tuple[float, int]] = field(default_factory=dict)  # int8 values: (scale, zero point)
    int16: set[int] = field(default_factory=set)  # the quantized values that are int16 (a16w8), not int8
    dtypes: dict[int, str] = field(default_factory=dict)  # values that are not float nor quantized: "U8" (bool), "I32"

    def new_value(self, shape: tuple[int, ...]) -> int:
        vid = Act(len(self.shapes))
        self.shapes[vid] = tuple(int(s) for s in shape)
        return vid

    def users(self, vid: int) -> list[Node]:
        return [n for n in self.nodes if any(isinstance(i, int) and i == vid for i in n.inputs)]

    def is_output(self, vid: int) -> bool:
        return any(isinstance(o, int) and o == vid for o in self.outputs)


def pair(v: Any) -> tuple[int, int]:
    if isinstance(v, (list, tuple)):
        return (int(v[0]), int(v[0])) if len(v) == 1 else (int(v[0]), int(v[1]))
    return int(v), int(v)


def dim(d: int, rank: int) -> int:
    return d + rank if d < 0 else d


def const(x: Any) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().to(torch.float32).numpy().copy() if x.is_floating_point() else x.detach().numpy().copy()
    return np.asarray(x, dtype=np.float32)


def is_activation(x: Any) -> bool:
    # Scalars in ATen args are ints too: activation ids are wrapped in Act.
    return isinstance(x, Act)


class Act(int):
    """An activation id: an int that the converter can tell from a scalar argument."""


def replace_uses(g: Graph, old: int, new: int) -> None:
    for n in g.nodes:
        n.inputs = [new if isinstance(i, int) and i == old else i for i in n.inputs]
    g.outputs = [new if isinstance(o, int) and o == old else o for o in g.outputs]


def drop_dead(g: Graph) -> None:
    while True:
        used = {i for n in g.nodes for i in n.inputs if isinstance(i, int)}
        used |= {o for o in g.outputs if isinstance(o, int)}
        # A node with several outputs (an LSTM's y and c) lists the others in attrs["outs"].
        keep = [n for n in g.nodes if n.out in used or any(o in used for o in n.attrs.get("outs", ()))]
        if len(keep) == len(g.nodes):
            return
        g.nodes = keep
