"""Attention for quantization: torchmcu's attention softmax, and the
rewrite that takes scaled_dot_product_attention apart before PT2E
calibrates the model.

PyTorch's composite attention op hides its scores and probabilities; an
integer program needs their ranges. So, before annotation
(TorchMCUQuantizer.transform_for_annotation), each
aten.scaled_dot_product_attention becomes

    s = q @ k^T  [+ the finite part of an additive mask / scale]
    p = torchmcu.attention_softmax(s, scale, masked)      (one op: TFLite's softmax
                                                           beta takes the scale)
    out = p @ v

and PyTorch's own need_weights attention (nn.MultiheadAttention: baddbmm(mask,
q, k^T) then softmax) likewise, so calibration observes s and p. `masked` is
a constant boolean tensor: the entries a boolean mask excludes, is_causal's
upper triangle, and an additive mask's entries at or below -1e4 (where
float32's exp is 0 for any realistic score). Masks that are not constants
keep the composite op (in float).
"""

# No `from __future__ import annotations`: torch.library reads the op's
# annotations as types to infer its schema.
import math
from typing import Any, Optional

import torch
from torch.fx import GraphModule, Node

aten = torch.ops.aten
MASKED_BELOW = -1e4


@torch.library.custom_op("torchmcu::attention_softmax", mutates_args=())
def attention_softmax(x: torch.Tensor, beta: float = 1.0, mask: Optional[torch.Tensor] = None) -> torch.Tensor:
    """softmax(beta * x) over the last axis, entries where `mask` is True left out."""
    s = x * beta
    if mask is not None:
        s = s.masked_fill(mask, float("-inf"))
    return torch.softmax(s, -1)


@attention_softmax.register_fake
def _(x: torch.Tensor, beta: float = 1.0, mask: Optional[torch.Tensor] = None) -> torch.Tensor:
    return torch.empty_like(x)


class _NotConstant(Exception):
    pass


def _constant(gm: GraphModule, n: Any) -> Any:
    """The value of a node computed from constants only (get_attr and ops on them)."""
    if not isinstance(n, Node):
        return n
    if n.op == "get_attr":
        obj: Any = gm
        for part in str(n.target).split("."):
            obj = getattr(obj, part)
        return obj
    if n.op == "call_function":
        args = torch.fx.node.map_aggregate(n.args, lambda a: _constant(gm, a))
        kwargs = torch.fx.node.map_aggregate(n.kwargs, lambda a: _constant(gm, a))
        return n.target(*args, **kwargs)
    raise _NotConstant(n.name)


def split_mask(mask: Optional[torch.Tensor], is_causal: bool, shape: tuple[int, int]
               ) -> tuple[Optional[torch.Tensor], Optional[torch.Tensor]]:
    """(masked booleans or None, the finite additive part or None) of an
    attention mask, as scaled_dot_product_attention reads it."""
    masked = finite = None
    if is_causal:
        masked = torch.ones(shape, dtype=torch.bool).triu(1)
    if mask is not None:
        mask = mask.detach()
        if mask.dtype == torch.bool:
            m = ~mask
        else:
            m = mask <= MASKED_BELOW
            rest = torch.where(m, torch.zeros((), dtype=mask.dtype), mask).float()
            finite = rest if bool(rest.any()) else None
        masked = m if masked is None else masked | m
    return masked, finite


class _Builder:
    """New nodes before `anchor`, each with its value's meta (fake tensors)."""

    def __init__(self, gm: GraphModule, anchor: Node) -> None:
        self.gm = gm
        self.anchor = anchor
        vals = [a.meta["val"] for a in anchor.all_input_nodes if isinstance(a.meta.get("val"), torch.Tensor)]
        self.mode = vals[0].fake_mode

    def const(self, name: str, value: torch.Tensor) -> Node:
        attr = name
        k = 0
        while hasattr(self.gm, attr):
            k += 1
            attr = f"{name}_{k}"
        self.gm.register_buffer(attr, value.contiguous())
        with self.gm.graph.inserting_before(self.anchor):
            n = self.gm.graph.get_attr(attr)
        n.meta["val"] = self.mode.from_tensor(value)
        return n

    def op(self, target: Any, *args: Any, **kwargs: Any) -> Node:
        with self.gm.graph.inserting_before(self.anchor):
            n = self.gm.graph.call_function(target, args, kwargs)
        vals = torch.fx.node.map_aggregate(args, lambda a: a.meta["val"] if isinstance(a, Node) else a)
        with self.mode:
            n.meta["val"] = target(*vals, **kwargs)
        for key in ("stack_trace", "nn_module_stack", "source_fn_stack"):
            if key in self.anchor.meta:
                n.meta[key] = self.anchor.meta[key]
        return n


def _attention(b: _Builder, q: Node, kt: Node, v: Node, scale: float, masked, finite, like: torch.Tensor,
               name: str) -> Node:
    s = b.op(aten.matmul.default, q, kt)
    if finite is not None:
        s = b.op(aten.add.Tensor, s, b.const(f"{name}_bias", finite / scale))
    if isinstance(masked, Node):  # computed from the inputs: the entries it leaves out
        mask = masked
    else:
        mask = b.const(f"{name}_mask", masked) if masked is not None and bool(masked.any()) else None
    p = b.op(torch.ops.torchmcu.attention_softmax.default, s, float(scale), mask)
    out = b.op(aten.matmul.default, p, v)
    # The composite's output may lie in memory in another order (the graph's
    # views after it count on that): the product laid out so.
    order = sorted(range(like.dim()), key=lambda d: -like.stride(d))
    if order != list(range(like.dim())) and like.dim() == out.meta["val"].dim():
        inverse = [order.index(d) for d in range(like.dim())]
        out = b.op(aten.permute.default, out, order)
        out = b.op(aten.clone.default, out, memory_format=torch.contiguous_format)
        out = b.op(aten.permute.default, out, inverse)
    return out


VIEWS = {aten.view.default, aten.reshape.default, aten.expand.default, aten.unsqueeze.default,
         aten._unsafe_view.default, aten.squeeze.dim}
FILLS = {aten.masked_fill.Scalar, aten.masked_fill_.Scalar}


def _filled_with_minus_inf(mask: Any) -> Optional[tuple]:
    """(bool node, the views from it to `mask`) when `mask` is zeros filled
    with -inf where a bool node holds, then viewed (PyTorch's canonical float
    mask of a bool key_padding_mask); else None."""
    views = []
    n = mask
    while isinstance(n, Node) and n.op == "call_function" and n.target in VIEWS:
        views.append(n)
        n = n.args[0]
    if not (isinstance(n, Node) and n.op == "call_function" and n.target in FILLS and len(n.args) >= 3):
        return None
    zeros, source, value = n.args[:3]
    if not (isinstance(source, Node) and source.meta["val"].dtype == torch.bool and value == float("-inf")):
        return None
    if not (isinstance(zeros, Node) and zeros.op == "call_function" and (
            zeros.target in (aten.zeros_like.default, aten.zeros.default)
            or (zeros.target in (aten.full.default, aten.full_like.default) and zeros.args[1] == 0))):
        return None
    if tuple(source.meta["val"].shape) != tuple(n.meta["val"].shape):
        return None
    return source, list(reversed(views))


def _drop_unused_fills(gm: GraphModule) -> None:
    """Fills of -inf (in place too) whose every use was an attention taken apart."""
    for n in reversed(list(gm.graph.nodes)):
        if n.op == "call_function" and (n.target in FILLS or n.target in VIEWS or n.target in (
                aten.zeros_like.default, aten.zeros.default, aten.full.default, aten.full_like.default)) \
                and not n.users:
            gm.graph.erase_node(n)


def decompose_attention(gm: GraphModule) -> GraphModule:
    """The rewrite of the module docstring, in place."""
    changed = False
    for n in list(gm.graph.nodes):
        if n.op != "call_function":
            continue
        if n.target == aten.scaled_dot_product_attention.default:
            args = list(n.args) + [None] * (6 - len(n.args))
            q, k, v, mask, dropout, causal = args[:6]
            mask = n.kwargs.get("attn_mask", mask)
            causal = bool(n.kwargs.get("is_causal", causal) or False)
            scale = n.kwargs.get("scale")
            if n.kwargs.get("enable_gqa") or (n.kwargs.get("dropout_p", dropout) or 0.0) != 0.0:
                continue
            qv, kv = q.meta["val"], k.meta["val"]
            computed = excluded = None
            try:
                masked, finite = split_mask(_constant(gm, mask), causal, (qv.shape[-2], kv.shape[-2]))
            except _NotConstant:
                # a bool mask computed from the inputs (arange < length): its negation is what the
                # softmax leaves out; a float one made of one (nn.MultiheadAttention's
                # key_padding_mask: zeros filled with -inf where it holds, viewed): that one;
                # another kind keeps the composite op (in float)
                excluded = None if causal else _filled_with_minus_inf(mask)
                if excluded is None and (causal or not isinstance(mask, Node)
                                         or mask.meta["val"].dtype != torch.bool):
                    continue
                computed, finite = mask, None
            scale = 1.0 / math.sqrt(qv.shape[-1]) if scale is None else float(scale)
            b = _Builder(gm, n)
            if excluded is not None:
                source, views = excluded
                masked = source
                for view in views:  # the float mask's views, on the booleans
                    masked = b.op(view.target, masked, *view.args[1:], **view.kwargs)
            elif computed is not None:
                masked = b.op(aten.logical_not.default, computed)
            kt = b.op(aten.transpose.int, k, -2, -1)
            out = _attention(b, q, kt, v, scale, masked, finite, n.meta["val"], n.name)
        elif n.target == aten.baddbmm.default and len(n.users) == 1:
            user = next(iter(n.users))
            if user.target not in (aten.softmax.int, aten._softmax.default) or user.args[1] not in (-1, 2):
                continue
            if n.kwargs.get("beta", 1) != 1 or n.kwargs.get("alpha", 1) != 1:
                continue
            try:
                masked, finite = split_mask(_constant(gm, n.args[0]), False, tuple(n.meta["val"].shape[-2:]))
            except _NotConstant:
                continue
            b = _Builder(gm, n)
            s = b.op(aten.matmul.default, n.args[1], n.args[2])
            if finite is not None:
                s = b.op(aten.add.Tensor, s, b.const(f"{n.name}_bias", finite))
            mask = b.const(f"{n.name}_mask", masked) if masked is not None and bool(masked.any()) else None
            out = b.op(torch.ops.torchmcu.attention_softmax.default, s, 1.0, mask)
            user.replace_all_uses_with(out)
            gm.graph.erase_node(user)
            gm.graph.erase_node(n)
            changed = True
            continue
        else:
            continue
        n.replace_all_uses_with(out)
        gm.graph.erase_node(n)
        changed = True
    if changed:
        gm.graph.eliminate_dead_code()
        _drop_unused_fills(gm)
        gm.recompile()
    return gm

