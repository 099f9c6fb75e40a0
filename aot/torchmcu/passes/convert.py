"""Conversion: an ExportedProgram to the logical graph (graph.py).

The converter walks the FX graph in order. Parameters and buffers become
constants; an op whose operands are all constants is evaluated now
(constant folding, which also turns PT2E's dequantize of an integer weight
into a QConst); every other op is handed to the rule its op family
registered for its ATen target (passes/lowering/), which emits logical
nodes. An op no family has a rule for is refused, naming the op, its
operand shapes and the user's source line.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ..errors import CompileError
from ..frontend.capture import user_frame
from .lowering.family import checking_table, check_rule
from .graph import QD, Graph, Node, Operand, QConst, const, is_activation


# Integer and bool model inputs: int32 in the program (the C API's type; bool as 0 / 1).
INTEGER_INPUTS = (torch.int64, torch.int32, torch.bool)


# Logical ops that move their input's bytes: their output has its dtype.
MOVES_BYTES = frozenset({"reshape", "slice", "permute", "cat", "pad"})


class Converter:
    """Walks the FX graph; what each op becomes is its family's rule's business."""

    def __init__(self, ep: torch.export.ExportedProgram, rules: dict[Any, Callable[..., Any]]) -> None:
        self.ep = ep
        self.rules = rules
        self.g = Graph()
        self.env: dict[torch.fx.Node, Any] = {}
        self.node: torch.fx.Node | None = None
    def fail(self, message: str) -> CompileError:
        n = self.node
        assert n is not None
        shapes = [tuple(a.meta["val"].shape) for a in n.all_input_nodes if hasattr(a.meta.get("val"), "shape")]
        return CompileError(message, op=str(n.target), shapes=shapes, source=user_frame(n))
    def out_shape(self) -> tuple[int, ...]:
        assert self.node is not None
        val = self.node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            raise self.fail("expected a single tensor result")
        return tuple(int(s) for s in val.shape)
    def emit(self, op: str, inputs: list[Operand], attrs: dict[str, Any] | None = None,
             shape: tuple[int, ...] | None = None) -> int:
        assert self.node is not None
        out = self.g.new_value(shape if shape is not None else self.out_shape())
        self.g.nodes.append(Node(op, inputs, attrs or {}, out, self.node.name, user_frame(self.node)))
        first = next((i for i in inputs if is_activation(i)), None)
        if op in MOVES_BYTES and first in self.g.dtypes:  # a view of a bool or integer value keeps its dtype
            self.g.dtypes[out] = self.g.dtypes[first]
        return out
    def act(self, v: Any) -> int:
        if not is_activation(v):
            raise self.fail("expected an activation operand here, got a constant")
        return v
    def shape(self, v: Operand) -> tuple[int, ...]:
        return self.g.shapes[v] if isinstance(v, int) else tuple(v.shape)
    def run(self) -> Graph:
        sig = self.ep.graph_signature
        constants = {**sig.inputs_to_parameters, **sig.inputs_to_buffers,
                     **getattr(sig, "inputs_to_lifted_tensor_constants", {})}
        state = {**self.ep.state_dict, **self.ep.constants}
        rules = self.rules
        check = checking_table()
        for n in self.ep.graph.nodes:
            self.node = n
            if n.op == "placeholder":
                if n.name in constants:
                    self.env[n] = const(state[constants[n.name]])
                else:
                    val = n.meta["val"]
                    if val.dtype not in (torch.float32, *INTEGER_INPUTS):
                        raise self.fail(f"input {n.name} is {val.dtype}; float32, integer (int64, int32) and bool "
                                        "inputs are supported")
                    vid = self.g.new_value(tuple(val.shape))
                    if val.dtype in INTEGER_INPUTS:  # token ids, lengths, masks: the program takes int32
                        self.g.dtypes[vid] = "I32"
                    self.g.inputs.append(vid)
                    self.g.input_names.append(n.name)
                    self.env[n] = vid
            elif n.op == "call_function":
                args = torch.fx.node.map_arg(n.args, lambda a: self.env[a])
                kwargs = torch.fx.node.map_arg(n.kwargs, lambda a: self.env[a])
                if n.target is operator.getitem:
                    self.env[n] = args[0][args[1]]
                    continue
                if str(n.target).startswith("aten._assert") or n.target is torch.ops.aten._assert_tensor_metadata.default:
                    continue
                if self._all_constant(args, kwargs):
                    self.env[n] = self._fold(n, args, kwargs)
                    continue
                rule = rules.get(n.target)
                if rule is None:
                    raise self.fail("unsupported operator: no torchmcu backend lowers it")
                first = len(self.g.nodes)
                self.env[n] = rule(self, *args, **kwargs)
                if check:
                    check_rule(n.target, self.g.nodes[first:])
            elif n.op == "output":
                # The model's own outputs: not the inputs it mutated in place (x.tanh_()
                # of an input), which torch.export returns too.
                kinds = [getattr(s, "kind", None) for s in getattr(sig, "output_specs", ())]
                outs = [o for k, o in enumerate(n.args[0])
                        if k >= len(kinds) or kinds[k] != torch.export.graph_signature.OutputKind.USER_INPUT_MUTATION]
                self.g.outputs = [self.env[o] for o in outs]
        return self.g
    @staticmethod
    def _all_constant(args: Any, kwargs: Any) -> bool:
        flat = list(args) + list(kwargs.values())
        flat = [y for x in flat for y in (x if isinstance(x, (list, tuple)) else [x])]
        return not any(is_activation(x) for x in flat)
    def _fold(self, n: torch.fx.Node, args: Any, kwargs: Any) -> Any:
        """Evaluate an op whose operands are all constants, at compile time.
        Dequantizing an integer constant (a quantized weight) keeps it integer."""
        if n.target in (QD.dequantize_per_channel.default, QD.dequantize_per_tensor.default):
            data = args[0]
            if isinstance(data, np.ndarray) and data.dtype.kind == "i":
                # An int8 tensor quantized to -8..7 (or narrower) holds int4 weights.
                per_channel = n.target == QD.dequantize_per_channel.default
                qmin, qmax = (args[4], args[5]) if per_channel else (args[3], args[4])
                bits = 4 if data.dtype == np.int8 and -8 <= int(qmin) and int(qmax) <= 7 else 8
                if per_channel:
                    return QConst(data, np.asarray(args[1], np.float64).reshape(-1),
                                  np.asarray(args[2], np.int64).reshape(-1), int(args[3]), bits)
                return QConst(data, np.asarray(float(args[1])), np.asarray(int(args[2])), None, bits)
        moves = n.target in _MOVES_BYTES
        def to_torch(x: Any) -> Any:
            if isinstance(x, QConst):  # a quantized constant: its integers where the op only moves them
                return torch.from_numpy(x.data) if moves and x.axis is None else torch.from_numpy(x.dequantized())
            if isinstance(x, np.ndarray):
                return torch.from_numpy(x)
            if isinstance(x, (list, tuple)):  # an FX immutable_list is no list to ATen's schema
                return (tuple if isinstance(x, tuple) else list)(to_torch(y) for y in x)
            return x
        result = n.target(*to_torch(args), **{k: to_torch(v) for k, v in kwargs.items()})
        qconsts = [x for x in [*args, *kwargs.values()] if isinstance(x, QConst)]
        if moves and len(qconsts) == 1 and qconsts[0].axis is None and isinstance(result, torch.Tensor):
            q = qconsts[0]  # the same integers at the same scale and zero point
            return QConst(result.numpy().copy(), q.scale, q.zero_point, None, q.bits)
        if isinstance(result, (bool, int, float)):
            return result  # a number (item(), shape arithmetic: operator.*, math.*, torch.sym_*) stays one
        return const(result)


# ATen ops that only select or rearrange their input's values: folded over a
# per-tensor quantized constant, their result is one at the same quantization.
_aten = torch.ops.aten
_MOVES_BYTES = {
    _aten.select.int, _aten.slice.Tensor, _aten.narrow.default, _aten.index.Tensor, _aten.index_select.default,
    _aten.view.default, _aten.reshape.default, _aten._unsafe_view.default, _aten.permute.default,
    _aten.transpose.int, _aten.t.default, _aten.expand.default, _aten.repeat.default, _aten.clone.default,
    _aten.alias.default, _aten.detach.default, _aten.squeeze.dim, _aten.squeeze.dims, _aten.unsqueeze.default,
    _aten.flatten.using_ints, _aten.unflatten.int}


def to_graph(ep: torch.export.ExportedProgram, rules: dict[Any, Callable[..., Any]]) -> Graph:
    return Converter(ep, rules).run()
