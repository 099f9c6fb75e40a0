"""Re-parameterization at compile time: parallel branches summed fold into one convolution.

Re-parameterizable models (RepVGG, MobileOne, RepGhost, ...) train with
several branches over one input whose sum is linear in that input: k x k
conv + batch norm, 1 x 1 conv + batch norm, a batch norm over the identity,
the identity itself. timm folds them by hand (`reparameterize_model`); a
model compiled as trained would run every branch and the adds between them
(MobileOne-S0: about 8x the instructions). This pass folds them in the
float graph that torch.export gives (frontend/capture.export), before
quantization, so that int8 calibrates the folded model:

    sum over the branches b of  BN_b(conv_b(x))  [+ BN(x)] [+ x] [+ a number]
      = conv(x, W, bias)  with  W = sum_b s_b * W_b  (each kernel zero-padded
        to the largest, the identity a one-hot kernel per group),
        bias = sum_b (s_b * bias_b + t_b)  [+ the number]

where s_b, t_b are batch norm b's per-channel scale and shift. A branch is
a conv2d (constant weights, any bias) with or without a batch norm after
it, a batch norm alone (an identity scaled per channel), or the input
itself; the sum is any tree of adds (each inner add used once), in any
association order, with Python numbers among its terms (timm's
`identity_out = 0`). Convolutions fold together when they read the same
input with the same stride, dilation (where a kernel is wider than 1) and
groups and give the same output
shape, their taps on one grid; an identity joins them when the output has
its input's shape. Terms that are no branch (another input, a constant
tensor) stay, added to the folded convolution.

The folded convolution names the branches' common module (the block) and
takes the first convolution's source line; a per-layer precision given for
a branch's conv (its module path) applies to it. compile(..., reparam=False)
(`--no-reparam`) keeps the branches as written.
"""

from __future__ import annotations

import warnings

import dataclasses
import numbers
import operator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.export.graph_signature import ExportGraphSignature, InputKind, InputSpec, TensorArgument
from torch.fx import Node

aten = torch.ops.aten

META_KEY = "torchmcu_reparam"  # a graph module's meta: what was folded (Folded)
PATHS_KEY = "torchmcu_folded_paths"  # a folded conv's meta: its branches' module paths (per-layer precision)


@dataclass
class Folded:
    """What the pass folded: `branches` branches summed into `convs` convolutions, `adds` adds removed
    (with those of a lone conv's `+ 0`)."""

    convs: int = 0
    branches: int = 0
    adds: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"convs": self.convs, "branches": self.branches, "adds_removed": self.adds}


def folded(obj: Any) -> Folded | None:
    """What reparameterize folded for `obj` (an ExportedProgram, or the graph module quantize made of it)."""
    gm = obj.graph_module if isinstance(obj, torch.export.ExportedProgram) else obj
    meta = getattr(gm, "meta", None)
    f = meta.get(META_KEY) if isinstance(meta, dict) else None
    return f if isinstance(f, Folded) and (f.convs or f.adds) else None


@dataclass
class Branch:
    """One term of a sum, linear in x: conv(x, kernel) * per-channel scale + bias, or x * scale + bias."""

    x: Node
    kernel: np.ndarray | None  # [C_out, C_in / groups, kh, kw], float64; None for an identity
    scale: np.ndarray | None  # per output channel (an identity's); None = 1
    bias: np.ndarray | None  # per output channel; None = 0
    stride: tuple[int, int] = (1, 1)
    padding: tuple[int, int] = (0, 0)
    dilation: tuple[int, int] = (1, 1)
    groups: int = 1
    conv: Node | None = None
    leaf: Node | None = None


def _pair(v: Any) -> tuple[int, int]:
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    return (int(v[0]), int(v[-1]))


def _shape(n: Any) -> tuple[int, ...] | None:
    val = n.meta.get("val") if isinstance(n, Node) else None
    return tuple(int(s) for s in val.shape) if isinstance(val, torch.Tensor) else None


class _Rewriter:
    def __init__(self, ep: torch.export.ExportedProgram) -> None:
        self.ep = ep
        self.graph = ep.graph
        sig = ep.graph_signature
        self.kinds = {s.arg.name: s for s in sig.input_specs if isinstance(s.arg, TensorArgument)}
        self.values = {**ep.state_dict, **ep.constants}
        self.new_constants: dict[str, torch.Tensor] = {}
        self.done = Folded()

    # -- reading the graph ------------------------------------------------------------------------

    def constant(self, n: Any) -> np.ndarray | None:
        """A parameter, buffer or lifted constant (float) as float64; None otherwise."""
        if not isinstance(n, Node) or n.op != "placeholder":
            return None
        spec = self.kinds.get(n.name)
        if spec is None or spec.kind not in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
            return None
        t = self.values.get(spec.target)
        if not isinstance(t, torch.Tensor) or t.dtype != torch.float32:
            return None
        return t.detach().numpy().astype(np.float64)

    def conv(self, n: Node) -> Branch | None:
        """conv2d with constant weights (and bias), used once."""
        if n.op != "call_function" or n.target != aten.conv2d.default or len(n.users) != 1:
            return None
        names = ("input", "weight", "bias", "stride", "padding", "dilation", "groups")
        a = {**dict(zip(names, n.args)), **n.kwargs}
        w = self.constant(a.get("weight"))
        b = a.get("bias")
        bias = self.constant(b) if b is not None else None
        if w is None or w.ndim != 4 or (b is not None and bias is None) or not isinstance(a.get("input"), Node):
            return None
        if isinstance(a.get("padding", 0), str):
            return None
        return Branch(a["input"], w, None, bias, _pair(a.get("stride", 1)), _pair(a.get("padding", 0)),
                      _pair(a.get("dilation", 1)), int(a.get("groups", 1)), conv=n)

    def batch_norm(self, n: Node) -> tuple[Node, np.ndarray, np.ndarray] | None:
        """An inference batch norm's (input, scale, shift) per channel; None if `n` is none, used once."""
        if n.op != "call_function":
            return None
        if n.target is operator.getitem and n.args[1] == 0 and isinstance(n.args[0], Node):
            bn = n.args[0]
            if bn.target != aten._native_batch_norm_legit_no_training.default or len(bn.users) != 1:
                return None
            x, w, b, mean, var, _momentum, eps = bn.args[:7]
        elif n.target == aten.batch_norm.default and not n.args[5]:
            x, w, b, mean, var, _training, _momentum, eps = n.args[:8]
        else:
            return None
        mean_v, var_v = self.constant(mean), self.constant(var)
        if mean_v is None or var_v is None or not isinstance(x, Node) or len(_shape(x) or ()) != 4:
            return None
        w_v = self.constant(w) if w is not None else np.ones_like(mean_v)
        b_v = self.constant(b) if b is not None else np.zeros_like(mean_v)
        if w_v is None or b_v is None:
            return None
        scale = w_v / np.sqrt(var_v + float(eps))
        return x, scale, b_v - mean_v * scale

    def branch(self, leaf: Node) -> Branch:
        """The term `leaf` as a branch: BN(conv(x)), conv(x), BN(x), or x itself."""
        bn = self.batch_norm(leaf) if len(leaf.users) == 1 else None
        if bn is not None:
            y, scale, shift = bn
            c = self.conv(y)
            if c is not None and c.kernel is not None and c.kernel.shape[0] == len(scale):
                c.kernel = c.kernel * scale.reshape(-1, 1, 1, 1)
                c.bias = (c.bias if c.bias is not None else 0) * scale + shift
                c.leaf = leaf
                return c
            return Branch(y, None, scale, shift, leaf=leaf)
        c = self.conv(leaf) if len(leaf.users) == 1 else None
        if c is not None:
            c.leaf = leaf
            return c
        return Branch(leaf, None, None, None, leaf=leaf)

    @staticmethod
    def is_add(n: Any) -> bool:
        return (isinstance(n, Node) and n.op == "call_function" and n.target == aten.add.Tensor
                and n.kwargs.get("alpha", 1) == 1 and len(n.args) == 2)

    def inner(self, n: Node) -> bool:
        """An add that is a term of the one add using it."""
        users = list(n.users)
        return self.is_add(n) and len(users) == 1 and self.is_add(users[0])

    def terms(self, root: Node) -> tuple[list[Node], float, list[Node]]:
        """The sum's node terms, its number terms added up, and its adds."""
        nodes: list[Node] = []
        number = 0.0
        adds: list[Node] = []
        todo = [root]
        while todo:
            n = todo.pop()
            adds.append(n)
            for a in n.args:
                if isinstance(a, Node) and self.inner(a):
                    todo.append(a)
                elif isinstance(a, Node):
                    nodes.append(a)
                elif isinstance(a, numbers.Number) and not isinstance(a, bool):
                    number += float(a)  # type: ignore[arg-type]
                else:
                    return [], 0.0, []
        return nodes, number, adds

    # -- folding ----------------------------------------------------------------------------------

    def groups(self, branches: list[Branch], out: tuple[int, ...]) -> list[list[Branch]]:
        """The branches in foldable groups, each with a convolution (the rest left out)."""
        groups: list[list[Branch]] = []
        for b in branches:
            if b.kernel is None or _shape(b.leaf) != out:
                continue
            for g in groups:
                c = g[0]
                if (c.x is b.x and (c.stride, c.groups) == (b.stride, b.groups)
                        and c.kernel.shape[:2] == b.kernel.shape[:2]  # type: ignore[union-attr]
                        and _grid(g + [b]) is not None):
                    g.append(b)
                    break
            else:
                if _grid([b]) is not None:
                    groups.append([b])
        for b in branches:  # identities join a group over their input that keeps its shape
            if b.kernel is not None or _shape(b.x) != out:
                continue
            for g in groups:
                c = g[0]
                c_out = c.kernel.shape[0]  # type: ignore[union-attr]
                if c.x is b.x and c.stride == (1, 1) and c_out == out[1] and _grid(g + [b]) is not None:
                    g.append(b)
                    break
        return groups

    def fold(self, root: Node) -> None:
        nodes, number, adds = self.terms(root)
        out = _shape(root)
        if not nodes or out is None or len(out) != 4 or any(_shape(n) is None for n in nodes):
            return
        branches = [self.branch(n) for n in nodes]
        groups = self.groups(branches, out)
        used = {id(b) for g in groups for b in g}
        rest = [b.leaf for b in branches if id(b) not in used]
        removed = len(adds) - (len(groups) + len(rest) - 1)
        if not groups or removed <= 0:
            return  # nothing to gain: a lone conv (+ BN) stays, as later passes fold it
        total: Node | None = None
        with self.graph.inserting_before(root):
            for k, g in enumerate(groups):
                conv = self.emit(g, out, number if k == 0 else 0.0)
                total = conv if total is None else self.add(total, conv, root)
            for n in rest:
                total = self.add(total, n, root)  # type: ignore[arg-type]
        assert total is not None
        root.replace_all_uses_with(total)
        # (a group of one is a conv + BN that a later pass folds as well: it counts as no branch folded)
        self.done.convs += sum(len(g) > 1 for g in groups)
        self.done.branches += sum(len(g) for g in groups if len(g) > 1)
        self.done.adds += removed

    def add(self, a: Node, b: Node, like: Node) -> Node:
        n = self.graph.call_function(aten.add.Tensor, (a, b))
        n.meta = dict(like.meta)
        return n

    def emit(self, group: list[Branch], out: tuple[int, ...], number: float) -> Node:
        """One conv2d for the group's sum (plus `number`), its weights new constants."""
        convs = [b for b in group if b.kernel is not None]
        first = convs[0]
        grid = _grid(group)
        assert grid is not None
        (kh, kw), (ph, pw) = grid
        c_out, c_in_g = first.kernel.shape[:2]  # type: ignore[union-attr]
        kernel = np.zeros((c_out, c_in_g, kh, kw))
        bias = np.full(c_out, number)
        d = _dilation(group)
        assert d is not None
        for b in group:
            if b.kernel is not None:
                oh, ow = (ph - b.padding[0]) // d[0], (pw - b.padding[1]) // d[1]
                kernel[:, :, oh:oh + b.kernel.shape[2], ow:ow + b.kernel.shape[3]] += b.kernel
            else:  # the identity: a one-hot kernel, input channel o of its group for output o
                oh, ow = ph // d[0], pw // d[1]
                o = np.arange(c_out)
                kernel[o, o % c_in_g, oh, ow] += b.scale if b.scale is not None else 1.0
            if b.bias is not None:
                bias += b.bias
        w = self.constant_node(torch.from_numpy(kernel.astype(np.float32)), first.conv)  # type: ignore[arg-type]
        bnode = self.constant_node(torch.from_numpy(bias.astype(np.float32)), first.conv)  # type: ignore[arg-type]
        conv = self.graph.call_function(aten.conv2d.default, (first.x, w, bnode, list(first.stride), [ph, pw],
                                                              list(d), first.groups))
        conv.meta = dict(first.conv.meta)  # type: ignore[union-attr]
        conv.meta["val"] = first.leaf.meta["val"]  # type: ignore[union-attr]
        # (an identity's leaf is the input: the block before)
        stack = _common_stack([b.leaf for b in group if b.leaf is not b.x] + [b.conv for b in convs])
        if stack is not None:
            conv.meta["nn_module_stack"] = stack
        stacks = [list((b.conv.meta.get("nn_module_stack") or {}).values()) for b in convs]  # type: ignore[union-attr]
        conv.meta[PATHS_KEY] = [str(s[-1][0]) for s in stacks if s]
        return conv

    def constant_node(self, t: torch.Tensor, like: Node) -> Node:
        """A new lifted constant: a placeholder before the user's inputs."""
        k = len(self.new_constants)
        while f"_torchmcu_reparam_{k}" in self.values or f"_torchmcu_reparam_{k}" in self.new_constants:
            k += 1  # (a program folded before, exported again)
        name = f"_torchmcu_reparam_{k}"
        first_user = next(n for n in self.graph.nodes if n.op == "placeholder"
                          and self.kinds.get(n.name, None) is not None
                          and self.kinds[n.name].kind == InputKind.USER_INPUT)
        with self.graph.inserting_before(first_user):
            ph = self.graph.placeholder(name)
        fake = like.meta.get("val")
        mode = getattr(fake, "fake_mode", None)
        ph.meta["val"] = mode.from_tensor(t, static_shapes=True) if mode is not None else t
        self.new_constants[name] = t
        self.kinds[ph.name] = InputSpec(InputKind.CONSTANT_TENSOR, TensorArgument(ph.name), name)
        return ph

    # -- the program again ------------------------------------------------------------------------

    def finish(self) -> torch.export.ExportedProgram:
        g = self.graph
        g.eliminate_dead_code()
        dropped: set[str] = set()
        for n in list(g.nodes):
            spec = self.kinds.get(n.name)
            if n.op == "placeholder" and not n.users and spec is not None and spec.kind in (
                    InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
                dropped.add(spec.target)  # type: ignore[arg-type]
                g.erase_node(n)
        specs = [self.kinds[n.name] for n in g.nodes if n.op == "placeholder"]
        # An output a folded sum was: its spec names the conv (or add) that replaced it.
        outs = g.output_node().args[0]
        output_specs = [dataclasses.replace(spec, arg=TensorArgument(o.name))
                        if isinstance(spec.arg, TensorArgument) and isinstance(o, Node) else spec
                        for spec, o in zip(self.ep.graph_signature.output_specs, outs)]
        sig = ExportGraphSignature(input_specs=specs, output_specs=output_specs)
        state = {k: v for k, v in self.ep.state_dict.items() if k not in dropped}
        constants = {**{k: v for k, v in self.ep.constants.items() if k not in dropped}, **self.new_constants}
        gm = self.ep.graph_module
        gm.recompile()
        with warnings.catch_warnings():  # torch's own deprecation inside its deep copy of the module call graph
            warnings.simplefilter("ignore", FutureWarning)
            return self.ep._update(gm, sig, state_dict=state, constants=constants)


def _grid(group: list[Branch]) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """The folded kernel's size and padding per spatial dim: every branch's taps on one grid,
    the same output size; None when they are not."""
    convs = [b for b in group if b.kernel is not None]
    d = _dilation(group)
    if d is None:
        return None
    size, pad = [], []
    for axis in (0, 1):
        # Tap t of a branch reads input row i * stride - padding + t * dilation: offsets from -padding on.
        spans = [(-b.padding[axis], -b.padding[axis] + (b.kernel.shape[2 + axis] - 1) * d[axis])
                 for b in convs if b.kernel is not None] + [(0, 0) for b in group if b.kernel is None]
        lo, hi = min(s for s, _ in spans), max(e for _, e in spans)
        if lo > 0 or any((s - lo) % d[axis] for s, _ in spans):
            return None
        size.append((hi - lo) // d[axis] + 1)
        pad.append(-lo)
    # The folded conv (padded on both sides) gives the branches' output size.
    x, s, out = _shape(convs[0].x), convs[0].stride, _shape(convs[0].leaf)
    if x is None or out is None or len(x) != 4:
        return None
    for axis in (0, 1):
        if (x[2 + axis] + 2 * pad[axis] - d[axis] * (size[axis] - 1) - 1) // s[axis] + 1 != out[2 + axis]:
            return None
    return (size[0], size[1]), (pad[0], pad[1])


def _dilation(group: list[Branch]) -> tuple[int, int] | None:
    """The group's dilation per spatial dim: its kernels wider than 1 there must agree (a 1-wide kernel
    has one tap, at any dilation)."""
    out = []
    for axis in (0, 1):
        ds = {b.dilation[axis] for b in group if b.kernel is not None and b.kernel.shape[2 + axis] > 1}
        if len(ds) > 1:
            return None
        out.append(ds.pop() if ds else 1)
    return out[0], out[1]


def _common_stack(nodes: list[Any]) -> dict[str, Any] | None:
    """The module stack the nodes share (outermost first): the block they are the branches of."""
    stacks = [list((n.meta.get("nn_module_stack") or {}).items()) for n in nodes if isinstance(n, Node)]
    if not stacks or not all(stacks):
        return None
    common = []
    for items in zip(*stacks):
        if any(it != items[0] for it in items):
            break
        common.append(items[0])
    return dict(common) if common else None


def reparameterize(ep: torch.export.ExportedProgram) -> torch.export.ExportedProgram:
    """`ep` with its parallel branches folded (see the module docstring); what was folded is
    `folded(result)`. `ep` itself is returned when nothing folds."""
    r = _Rewriter(ep)
    roots = [n for n in ep.graph.nodes if r.is_add(n) and not r.inner(n)]
    for root in roots:
        r.fold(root)
    if not (r.done.convs or r.done.adds):
        return ep
    out = r.finish()
    out.graph_module.meta[META_KEY] = r.done
    return out
