"""Graph passes on the logical graph: folding and fusion, before layout.

Order matters (PASSES in passes/__init__.py): folding batch norm into a
conv must come before fusing the activation that follows the batch norm,
and a fused clamp must be in its producer's range before fold_qdq turns
dequantize -> op -> quantize into one integer op.
"""

from __future__ import annotations

import numpy as np

from .graph import Graph, Node, drop_dead, replace_uses
from .lowering import ALL

Q = tuple[float, int]


def int8_supported(g: Graph, n: Node, in_q: list[Q], out_q: Q) -> bool:
    """Whether an int8 kernel implements this instance (its family says)."""
    entry = ALL.int8_ops.get(n.op)
    if entry is None:
        return False
    predicate, shared = entry
    if shared and any(q != out_q for q in in_q):
        return False
    return predicate(g, n, in_q, out_q)


def int16_supported(g: Graph, n: Node, in_q: list[Q], out_q: Q) -> bool:
    """Whether an int16 (a16w8) kernel implements this instance: symmetric
    (zero points 0), and its family says so."""
    entry = ALL.int16_ops.get(n.op)
    if entry is None or any(zp != 0 for _, zp in in_q) or out_q[1] != 0:
        return False
    predicate, shared = entry
    if shared and any(q != out_q for q in in_q):
        return False
    return predicate(g, n, in_q, out_q)


def fold_batch_norm(g: Graph) -> None:
    """conv -> batch_norm (or linear -> batch_norm over features) becomes one
    op with scaled weights; a batch norm after anything else becomes a
    per-channel multiply-add ("affine")."""
    new_nodes: list[Node] = []
    producer = {n.out: n for n in g.nodes}
    for n in g.nodes:
        if n.op != "batch_norm":
            new_nodes.append(n)
            continue
        x, weight, bias, mean, var = n.inputs
        scale = (weight / np.sqrt(var + n.attrs["eps"])).astype(np.float32)
        shift = (bias - mean * scale).astype(np.float32)
        p = producer.get(x)  # type: ignore[arg-type]
        # Channels are dim 1 of the batch norm's input: a conv's output channel,
        # or a linear's output feature when its output is [N, C].
        foldable = p is not None and len(p.inputs) > 1 and isinstance(p.inputs[1], np.ndarray) and (
            p.op == "conv2d" or (p.op == "linear" and len(g.shapes[p.out]) == 2))
        if foldable and len(g.users(p.out)) == 1 and not g.is_output(p.out):  # type: ignore[union-attr]
            w, b = p.inputs[1], p.inputs[2]  # type: ignore[union-attr]
            p.inputs[1] = (w * scale.reshape((-1,) + (1,) * (w.ndim - 1))).astype(np.float32)  # type: ignore[union-attr]
            p.inputs[2] = ((b if b is not None else 0) * scale + shift).astype(np.float32)  # type: ignore[union-attr]
            replace_uses(g, n.out, p.out)  # type: ignore[union-attr]
            continue
        # One node (x * scale + shift per channel), so an int8 model runs it as one
        # integer op (passes/lowering/attention_norm.py).
        new_nodes.append(Node("affine", [x, scale, shift], {}, n.out, n.name, n.source))
    g.nodes = new_nodes


def fuse_activations(g: Graph) -> None:
    """A clamp (ReLU, ReLU6, hardtanh) whose input has no other use folds into
    its producer's output range."""
    fusable = {"conv2d", "linear", "add", "mul", "max_pool2d", "avg_pool2d", "conv_transpose2d"}
    producer = {n.out: n for n in g.nodes}
    keep: list[Node] = []
    for n in g.nodes:
        p = producer.get(n.inputs[0]) if n.op == "clamp" and isinstance(n.inputs[0], int) else None
        if p is not None and p.op in fusable and len(g.users(p.out)) == 1 and not g.is_output(p.out):
            lo, hi = p.attrs["act"]
            clo, chi = n.attrs["range"]
            p.attrs["act"] = (max(lo, clo), min(hi, chi))
            replace_uses(g, n.out, p.out)
            g.shapes[p.out] = g.shapes[n.out]
            continue
        keep.append(n)
    g.nodes = keep


def fold_qdq(g: Graph) -> None:
    """dequantize -> op -> quantize becomes one int8 op ("q" + op) reading and
    writing int8 values; quantize(dequantize(x)) with equal parameters
    cancels; what remains of quantize/dequantize converts at the int8 edges."""
    producer = {n.out: n for n in g.nodes}
    dead: set[int] = set()
    for n in g.nodes:
        if n.op not in ALL.int8_ops and n.op not in ALL.int16_ops:
            continue
        acts = [i for i in n.inputs if isinstance(i, int) and i not in g.dtypes]  # (not a bool mask)
        dqs = [producer.get(i) for i in acts]
        users = g.users(n.out)
        if not acts or any(d is None or d.op != "dequantize" for d in dqs):
            continue
        if len(users) != 1 or users[0].op != "quantize" or g.is_output(n.out):
            continue
        q = users[0]
        in_q = [(d.attrs["scale"], d.attrs["zero_point"]) for d in dqs]  # type: ignore[union-attr]
        out_q = (q.attrs["scale"], q.attrs["zero_point"])
        bits = {d.attrs.get("bits", 8) for d in dqs} | {q.attrs.get("bits", 8)}  # type: ignore[union-attr]
        if bits == {16}:  # a16w8: the ops with an int16 kernel
            if not int16_supported(g, n, in_q, out_q):
                continue
            g.int16.add(n.out)
            n.attrs = dict(n.attrs, bits=16)
        elif bits != {8} or not int8_supported(g, n, in_q, out_q):
            continue
        mapping = {d.out: d.inputs[0] for d in dqs}  # type: ignore[union-attr]
        n.inputs = [mapping.get(i, i) if isinstance(i, int) else i for i in n.inputs]
        n.attrs = dict(n.attrs, in_q=in_q, out_q=out_q)
        n.op = "q" + n.op
        replace_uses(g, q.out, n.out)
        g.shapes[n.out] = g.shapes[q.out]
        g.qparams[n.out] = out_q
        dead.add(q.out)
    g.nodes = [n for n in g.nodes if n.out not in dead]
    # quantize(dequantize(x)) at the same parameters is x.
    producer = {n.out: n for n in g.nodes}
    for n in list(g.nodes):
        if n.op == "quantize":
            p = producer.get(n.inputs[0])  # type: ignore[arg-type]
            if p is not None and p.op == "dequantize" and (p.attrs["scale"], p.attrs["zero_point"]) == (
                    n.attrs["scale"], n.attrs["zero_point"]) and p.attrs.get("bits", 8) == n.attrs.get("bits", 8):
                replace_uses(g, n.out, p.inputs[0])  # type: ignore[arg-type]
                g.nodes.remove(n)
    if g.int16:  # where int8 and int16 layers meet: one integer requantize
        fold_requantize(g)
    drop_dead(g)


def int8_io(g: Graph) -> None:
    """Model inputs and outputs in int8 instead of float: an input whose every
    use is a quantize at one scale becomes that int8 value, and an output that
    is a dequantize becomes its int8 input. What cannot be (a float input used
    in float, say) stays float."""
    for vid in g.inputs:
        users = g.users(vid)
        params = {(n.attrs["scale"], n.attrs["zero_point"]) for n in users if n.op == "quantize"}
        if not users or len(params) != 1 or any(n.op != "quantize" or n.attrs.get("bits", 8) != 8 for n in users):
            continue  # (an int16 first layer of a mixed-precision model keeps a float input)
        g.qparams[vid] = params.pop()
        for n in users:
            replace_uses(g, n.out, vid)
            g.nodes.remove(n)
    producer = {n.out: n for n in g.nodes}
    for k, o in enumerate(g.outputs):
        p = producer.get(o) if isinstance(o, int) else None
        if p is not None and p.op == "dequantize" and p.attrs.get("bits", 8) == 8:
            g.outputs[k] = p.inputs[0]
    drop_dead(g)


def fold_requantize(g: Graph) -> None:
    """quantize(dequantize(x)) where x and the result differ in width (int8
    and int16): one "requantize" node reading x."""
    producer = {n.out: n for n in g.nodes}
    for k, n in enumerate(g.nodes):
        if n.op != "quantize":
            continue
        p = producer.get(n.inputs[0])  # type: ignore[arg-type]
        if p is None or p.op != "dequantize" or p.attrs.get("bits", 8) == n.attrs.get("bits", 8):
            continue
        g.nodes[k] = Node("requantize", [p.inputs[0]], {"bits": 16}, n.out, n.name, n.source)
