"""Streaming state in the logical graph: a state input and the output that
updates it (compile(..., state=...), see plan/state.py) keep the integer
form the program computes them in when both edges are quantized alike (an
LSTM's h at its hidden quantization, c at its cell scale): the state is then
stored as int8/int16, with no QUANTIZE or DEQUANTIZE per execution."""

from __future__ import annotations

from .graph import Graph, drop_dead, replace_uses


def _quant(n) -> tuple:
    return (n.attrs["scale"], n.attrs["zero_point"], n.attrs.get("bits", 8))


def integer_state(g: Graph, pairs: list[tuple[int, int]]) -> None:
    """pairs: (index in g.inputs, index in g.outputs)."""
    producer = {n.out: n for n in g.nodes}
    for k, j in pairs:
        vin, vout = g.inputs[k], g.outputs[j]
        users = g.users(vin)
        p = producer.get(vout) if isinstance(vout, int) else None
        if not users or any(u.op != "quantize" for u in users) or p is None or p.op != "dequantize":
            continue
        q = {_quant(u) for u in users}
        if q != {_quant(p)}:
            continue  # quantized differently on the two edges: the state stays float
        scale, zp, bits = q.pop()
        g.qparams[vin] = (scale, zp)
        if bits == 16:
            g.int16.add(vin)
        for u in users:
            replace_uses(g, u.out, vin)
            g.nodes.remove(u)
        g.outputs[j] = p.inputs[0]
    drop_dead(g)
