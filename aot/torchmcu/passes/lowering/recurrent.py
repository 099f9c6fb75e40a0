"""Recurrent layers: nn.LSTM, nn.GRU, nn.RNN (tanh, relu) and their cells.

ATen: lstm.input, gru.input, rnn_tanh.input, rnn_relu.input (one op for
all layers and directions, weights in a list), lstm_cell, gru_cell,
rnn_tanh_cell, rnn_relu_cell. Each layer and direction becomes one logical
node ("lstm", "gru", "rnn") and one program op: LSTM_F32 / GRU_F32 /
RNN_F32, and at int8 LSTM_S8 (TFLite's integer LSTM; CMSIS-NN's kernel where
bit-exact), GRU_S8, RNN_S8; at a16w8 LSTM_S16, GRU_S16, RNN_S16. The ops are time-major: a
batch_first sequence is the same bytes when the batch is 1, else a PERMUTE.
The final hidden state of a direction is its output's last step (first
when reversed), an alias; h_n and c_n of several layers are concatenations.
A cell is the same op over one step. Bidirectional layers concatenate their
directions' outputs along features (CONCAT).

Quantization (frontend/recurrent.py records the ranges, fold_recurrent
here turns a float group into integer ops): the input's quantization comes
from PT2E, the hidden state's and the cell state's from the recorded
ranges, the weights are quantized here per gate. Reference twin:
reference/recurrent.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ...frontend import recurrent as rq
from ...ir import PTensor
from ...reference import recurrent as ref
from ..graph import Graph, Node, QConst, is_activation
from .family import Family
from .helpers import identity

F = Family("recurrent")
aten = torch.ops.aten
OPS = ("lstm", "gru", "rnn")
ASSEMBLY = ("rnn_last", "rnn_state_slice", "reshape", "cat")  # what a group builds around its ops


# -- ATen -> logical ---------------------------------------------------------------------------

def _array(cv, v: Any, what: str) -> np.ndarray | None:
    if v is None:
        return None
    if isinstance(v, QConst):
        return v.dequantized()
    if not isinstance(v, np.ndarray):
        raise cv.fail(f"{what} must be a constant (a parameter)")
    return v.astype(np.float32)


class _Group:
    """The logical nodes one recurrent ATen op becomes (tagged, so that
    fold_recurrent can make them integer together)."""

    def __init__(self, cv, kind: str, batch_first: bool) -> None:
        self.cv, self.kind, self.batch_first = cv, kind, batch_first
        self.id = len(cv.g.nodes)
        meta = (cv.node.meta.get("custom") or {}).get(rq.META) or {}
        self.q = meta.get("q")

    def emit(self, op: str, inputs: list, attrs: dict, shape: tuple[int, ...]) -> int:
        return self.cv.emit(op, inputs, {**attrs, "rnn_group": self.id, "rnn_q": self.q}, shape=shape)

    def seq_shape(self, T: int, B: int, H: int) -> tuple[int, int, int]:
        return (B, T, H) if self.batch_first else (T, B, H)

    def state(self, hx: Any, k: int, count: int, B: int, H: int, role: str = "h") -> Any:
        """Layer-direction k's initial state from hx [count, B, H]: None for
        zeros, a constant, or a slice of the activation."""
        if hx is None:
            return None
        if not is_activation(hx):
            hx = hx.dequantized() if isinstance(hx, QConst) else hx
            v = np.asarray(hx, np.float32).reshape(count, B, H)[k]
            return None if not np.any(v) else v
        if self.cv.shape(hx) == (B, H):
            return hx
        return self.emit("rnn_state_slice", [hx], {"index": k, "role": role}, (B, H))

    def stack(self, parts: list[int], B: int, H: int) -> int:
        """[L*D, B, H] from [B, H] parts."""
        rows = [self.emit("reshape", [p], {}, (1, B, H)) for p in parts]
        return rows[0] if len(rows) == 1 else self.emit("cat", rows, {"dim": 0}, (len(rows), B, H))


def _sequence(cv, kind: str, x, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first,
              activation: int = 0):
    if train:
        raise cv.fail("the recurrent layer is in training mode; call model.eval() before compiling")
    x = cv.act(x)
    shape = cv.shape(x)
    if len(shape) != 3:
        raise cv.fail(f"a {kind.upper()} input of rank {len(shape)}; expected [T, B, I] or [B, T, I]")
    try:
        layers = rq.unpack(list(params), bool(has_biases), int(num_layers), bool(bidirectional))
    except ValueError:
        raise cv.fail("LSTM projections (proj_size > 0) are not supported") from None
    g = _Group(cv, kind, bool(batch_first))
    T, B = (shape[1], shape[0]) if batch_first else (shape[0], shape[1])
    H = np.asarray(_array(cv, layers[0][1], "the weights")).shape[1]
    D = 2 if bidirectional else 1
    hx = list(hx) if isinstance(hx, (list, tuple)) else [hx]
    finals_h, finals_c = [], []
    seq = x
    for layer in range(int(num_layers)):
        outs = []
        for d in range(D):
            k = layer * D + d
            w_ih, w_hh, b_ih, b_hh = (_array(cv, w, "the weights") for w in layers[k])
            ins = [seq, w_ih, w_hh, b_ih, b_hh, g.state(hx[0], k, num_layers * D, B, H)]
            attrs = {"kind": kind, "reverse": d == 1, "batch_first": g.batch_first, "activation": activation}
            if kind == "lstm":
                ins.append(g.state(hx[1], k, num_layers * D, B, H, "c"))
                c = cv.g.new_value((B, H))
                attrs["outs"] = [c]
                finals_c.append(c)
            y = g.emit(kind, ins, attrs, g.seq_shape(T, B, H))
            outs.append(y)
            finals_h.append(g.emit("rnn_last", [y], {"step": 0 if d else T - 1, "batch_first": g.batch_first},
                                   (B, H)))
        seq = outs[0] if D == 1 else g.emit("cat", outs, {"dim": 2}, g.seq_shape(T, B, D * H))
    h_n = g.stack(finals_h, B, H)
    return (seq, h_n, g.stack(finals_c, B, H)) if kind == "lstm" else (seq, h_n)


@F.rule(aten.lstm.input)
def lstm(cv, x, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    return _sequence(cv, "lstm", x, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)


@F.rule(aten.gru.input)
def gru(cv, x, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    return _sequence(cv, "gru", x, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)


@F.rule(aten.rnn_tanh.input, aten.rnn_relu.input)
def rnn(cv, x, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    relu = cv.node.target == aten.rnn_relu.input
    return _sequence(cv, "rnn", x, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first,
                     activation=1 if relu else 0)


def _cell(cv, kind: str, x, hx, w_ih, w_hh, b_ih=None, b_hh=None, activation: int = 0):
    """One step: the sequence op over T = 1 of x [B, I]."""
    x = cv.act(x)
    if len(cv.shape(x)) != 2:
        raise cv.fail(f"a {kind.upper()} cell input of rank {len(cv.shape(x))}; expected [B, I]")
    B, _ = cv.shape(x)
    w_ih, w_hh = _array(cv, w_ih, "the weights"), _array(cv, w_hh, "the weights")
    b_ih, b_hh = _array(cv, b_ih, "the bias"), _array(cv, b_hh, "the bias")
    H = w_hh.shape[1]
    g = _Group(cv, kind, False)
    seq = g.emit("reshape", [x], {"role": "x"}, (1, B, cv.shape(x)[1]))
    hx = list(hx) if isinstance(hx, (list, tuple)) else [hx]
    ins = [seq, w_ih, w_hh, b_ih, b_hh, g.state(hx[0], 0, 1, B, H)]
    attrs = {"kind": kind, "reverse": False, "batch_first": False, "activation": activation}
    c = None
    if kind == "lstm":
        ins.append(g.state(hx[1], 0, 1, B, H, "c"))
        c = cv.g.new_value((B, H))
        attrs["outs"] = [c]
    y = g.emit(kind, ins, attrs, (1, B, H))
    h = g.emit("reshape", [y], {}, (B, H))
    return (h, c) if kind == "lstm" else h


@F.rule(aten.lstm_cell.default)
def lstm_cell(cv, x, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    return _cell(cv, "lstm", x, hx, w_ih, w_hh, b_ih, b_hh)


@F.rule(aten.gru_cell.default)
def gru_cell(cv, x, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    return _cell(cv, "gru", x, hx, w_ih, w_hh, b_ih, b_hh)


@F.rule(aten.rnn_tanh_cell.default, aten.rnn_relu_cell.default)
def rnn_cell(cv, x, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    relu = cv.node.target == aten.rnn_relu_cell.default
    return _cell(cv, "rnn", x, hx, w_ih, w_hh, b_ih, b_hh, activation=1 if relu else 0)


# -- integer groups ----------------------------------------------------------------------------

def fold_recurrent(g: Graph) -> None:
    """Each recurrent group whose input is dequantized and which carries its
    recorded quantization becomes integer: its ops "q" + op at the hidden
    state's quantization, its outputs dequantized for their users (the
    quantize nodes that follow at the same parameters then cancel, in
    fusion.fold_qdq)."""
    groups: dict[int, list[Node]] = {}
    for n in g.nodes:
        if "rnn_group" in n.attrs:
            groups.setdefault(n.attrs["rnn_group"], []).append(n)
    for members in groups.values():
        ops = [n for n in members if n.op in OPS]
        q = ops[0].attrs.get("rnn_q") if ops else None
        if not q or not _integer_ok(g, ops, q):
            continue
        _make_integer(g, members, ops, q)


def _producer(g: Graph, v: Any) -> Node | None:
    return next((n for n in g.nodes if n.out == v), None) if isinstance(v, int) else None


def _integer_ok(g: Graph, ops: list[Node], q: dict) -> bool:
    bits = q["bits"]
    x = ops[0].inputs[0]
    p = _producer(g, x)
    if p is not None and p.op == "reshape" and p.attrs.get("rnn_group") == ops[0].attrs["rnn_group"]:
        p = _producer(g, p.inputs[0])  # a cell's [B, I] -> [1, B, I]
    return p is not None and p.op == "dequantize" and p.attrs.get("bits", 8) == bits \
        and (bits == 8 or p.attrs["zero_point"] == 0)


def _make_integer(g: Graph, members: list[Node], ops: list[Node], q: dict) -> None:
    bits = q["bits"]
    hq = (float(q["h_scale"]), int(q["h_zero_point"]))
    cq = (2.0 ** int(q["cell_power"]), 0)
    inside = {n.out for n in members} | {o for n in members for o in n.attrs.get("outs", ())}
    first = next(k for k, m in enumerate(g.nodes) if m is members[0])
    new_nodes: list[Node] = []

    def quantized(v: int, qp: tuple[float, int], wide: bool) -> int:
        """v (a float value from outside) as an integer value at qp."""
        p = _producer(g, v)
        if p is not None and p.op == "dequantize" and (p.attrs["scale"], p.attrs["zero_point"]) == qp:
            return p.inputs[0]
        out = g.new_value(g.shapes[v])
        new_nodes.append(Node("quantize", [v], dict(scale=qp[0], zero_point=qp[1], bits=16 if wide else 8),
                              out, members[0].name, members[0].source))
        g.qparams[out] = qp
        if wide:
            g.int16.add(out)
        return out

    for n in members:
        if n.op in OPS:
            x = n.inputs[0]
            if x not in inside:  # the group's input: its dequantize's source
                n.inputs[0] = _producer(g, x).inputs[0]
                n.attrs["in_q"] = [g.qparams.get(n.inputs[0]) or _dq_params(g, x)]
            else:  # a layer below, or a cell's input reshaped (members come in order)
                n.attrs["in_q"] = [g.qparams[x]]
            for k, qp, wide in ((5, hq, bits == 16), (6, cq, True)):
                v = n.inputs[k] if len(n.inputs) > k else None
                if isinstance(v, int) and v not in inside:
                    n.inputs[k] = quantized(v, qp, wide)
            n.attrs.update(out_q=hq, cell_q=cq, bits=bits)
            g.qparams[n.out] = hq
            if bits == 16:
                g.int16.add(n.out)
            for c in n.attrs.get("outs", ()):
                g.qparams[c] = cq
                g.int16.add(c)
        else:  # the assembly moves bytes at its input's quantization
            src = next(i for i in n.inputs if isinstance(i, int))
            role = n.attrs.get("role")
            if src not in inside and role == "x":  # a cell's input: its dequantize's source
                n.inputs[0] = src = _producer(g, src).inputs[0]
            elif src not in inside:  # a state input (slices of h0 or c0)
                n.inputs = [quantized(i, cq if role == "c" else hq, bits == 16 or role == "c")
                            if isinstance(i, int) else i for i in n.inputs]
                src = n.inputs[0]
            g.qparams[n.out] = g.qparams.get(src, hq)
            if src in g.int16:
                g.int16.add(n.out)
        n.op = "q" + n.op
    # Outputs used outside the group (or by the model) are dequantized for their users.
    after: list[tuple[Node, Node]] = []
    ids = {id(m) for m in members}  # (nodes compare by value: their arrays)
    for n in members:
        for v in [n.out, *n.attrs.get("outs", ())]:
            outside = [u for u in g.users(v) if id(u) not in ids]
            if not outside and not g.is_output(v):
                continue
            f = g.new_value(g.shapes[v])
            s, zp = g.qparams[v]
            dq = Node("dequantize", [v], dict(scale=s, zero_point=zp, bits=16 if v in g.int16 else 8), f, n.name,
                      n.source)
            for u in outside:
                u.inputs = [f if isinstance(i, int) and i == v else i for i in u.inputs]
            g.outputs = [f if isinstance(o, int) and o == v else o for o in g.outputs]
            after.append((n, dq))
    g.nodes[first:first] = new_nodes
    for n, dq in after:
        g.nodes.insert(next(k for k, m in enumerate(g.nodes) if m is n) + 1, dq)


def _dq_params(g: Graph, v: int) -> tuple[float, int]:
    p = _producer(g, v)
    return (p.attrs["scale"], p.attrs["zero_point"]) if p is not None else (0.0, 0)


# -- logical -> program ops --------------------------------------------------------------------

def _time_major(n: Node) -> tuple[int, int, int]:
    """The physical order of a sequence value: [T, B, feature]."""
    return (1, 0, 2) if n.attrs.get("batch_first") else (0, 1, 2)


def _scratch(lay, n: Node, dims: tuple[int, ...]) -> int:
    t = PTensor(f"{n.name}_scratch", dims, "I16", buffer=len(lay.p.buffers))
    lay.p.buffers.append(t.nbytes)
    lay.p.tensors.append(t)
    return len(lay.p.tensors) - 1


def _state_in(lay, n: Node, k: int, dims: tuple[int, ...], dtype: str = "F32", qp: tuple | None = None) -> int:
    v = n.inputs[k] if len(n.inputs) > k else None
    if v is None:
        return -1
    if isinstance(v, int):
        return lay.get(v, identity(len(lay.g.shapes[v])), n)
    data = np.asarray(v, np.float32).reshape(dims)
    if dtype == "F32":
        return lay.constant(f"{n.name}_state{k}", data)
    from ... import reference

    q = reference.quantize(data, *qp) if dtype == "I8" else reference.quantize_s16(data, *qp)
    return lay.constant(f"{n.name}_state{k}", q, dtype)


def _shapes(lay, n: Node) -> tuple[int, int, int, int]:
    T, B, _ = (lay.g.shapes[n.out][d] for d in _time_major(n))
    return T, B, n.inputs[1].shape[1], n.inputs[2].shape[1]


@F.lower("lstm", "gru", "rnn")
def _recurrent_f32(lay, n: Node) -> None:
    kind = n.op
    order = _time_major(n)
    T, B, I, H = _shapes(lay, n)
    x = lay.get(n.inputs[0], order, n)
    _, w_ih, w_hh, b_ih, b_hh = n.inputs[:5]
    ins = [x, lay.constant(f"{n.name}_w_ih", w_ih), lay.constant(f"{n.name}_w_hh", w_hh)]
    if b_ih is None and b_hh is None:
        ins.append(-1)
    elif kind == "gru":
        zero = np.zeros(3 * H, np.float32)
        ins.append(lay.constant(f"{n.name}_bias", np.stack([zero if b_ih is None else b_ih,
                                                             zero if b_hh is None else b_hh])))
    else:
        ins.append(lay.constant(f"{n.name}_bias", (0 if b_ih is None else b_ih) + (0 if b_hh is None else b_hh)))
    ins.append(_state_in(lay, n, 5, (B, H)))
    y = lay.activation(n.name, (T, B, H))
    outs = [y]
    if kind == "lstm":
        ins.append(_state_in(lay, n, 6, (B, H)))
        c = lay.activation(f"{n.name}_c", (B, H))
        outs.append(c)
        lay.val[n.attrs["outs"][0]] = (c, (0, 1))
    params = {"reverse": bool(n.attrs["reverse"]), "activation": int(n.attrs.get("activation", 0))}
    lay.emit(f"{kind.upper()}_F32", ins, outs, ("RecurrentParams", params), n, kind,
             T * B * w_ih.shape[0] * (I + H))
    lay.val[n.out] = (y, order)


def _quant_weights(lay, n: Node, w: np.ndarray, gates: int, name: str,
                   per_row: bool) -> tuple[int, np.ndarray, np.ndarray]:
    """The weight matrix as an int8 constant: (tensor, values, scales per
    gate or per row)."""
    q, scales = ref.quantize_gates(w, gates, per_row=per_row)
    tid = lay.constant(f"{n.name}_{name}", q, "I8")
    H = w.shape[0] // gates
    lay.p.tensors[tid].channel_scales = tuple(float(s) for s in (scales if per_row else np.repeat(scales, H)))
    lay.p.tensors[tid].channel_axis = 0
    return tid, q, scales


def _may_saturate(qh: np.ndarray, s_h: float, s_wh: np.ndarray, zp_h: int, gates: int, wide: bool) -> bool:
    """Whether some gate's hidden-side product, requantized into Q3.12 on its
    own, could leave int16 (CMSIS-NN saturates only after adding the
    input side, TFLite before): a bound over all hidden states."""
    reach = 32768 if wide else max(abs(-128 - zp_h), abs(127 - zp_h))
    sums = np.abs(qh.astype(np.int64)).sum(-1)  # per row
    rows = s_wh if len(s_wh) == len(sums) else np.repeat(s_wh, len(sums) // gates)
    real = sums * reach * np.float32(s_h) * rows.astype(np.float64) / ref.GATE_SCALE
    return bool(np.any(real >= 32767))


@F.lower("qlstm", "qgru", "qrnn")
@F.lower16("qlstm", "qgru", "qrnn")
def _recurrent_int(lay, n: Node) -> None:
    kind = n.op[1:]
    wide = n.attrs.get("bits") == 16
    order = _time_major(n)
    T, B, I, H = _shapes(lay, n)
    gates = rq.gates(kind)
    (s_x, zp_x), = n.attrs["in_q"]
    s_h, zp_h = n.attrs["out_q"]
    x = lay.get(n.inputs[0], order, n)
    _, w_ih, w_hh, b_ih, b_hh = n.inputs[:5]
    # Per-row scales where the frontend fake-quantized the weights so (the
    # default for LSTM and GRU; RNN's params hold one scale: per tensor).
    per_row = kind in ("lstm", "gru") and (n.attrs.get("rnn_q") or {}).get("weights") == "row"
    wi, qi, swx = _quant_weights(lay, n, w_ih, gates, "w_ih", per_row)
    wh, qh, swh = _quant_weights(lay, n, w_hh, gates, "w_hh", per_row)
    hb = 1 if per_row else H  # quantize_bias's rows per scale
    zero = np.zeros(gates * H, np.float32)
    b_ih = zero if b_ih is None else b_ih
    b_hh = zero if b_hh is None else b_hh
    if kind == "gru":  # r and z take both biases on the input side; n's hidden one stays in r * (...)
        bx = ref.quantize_bias(b_ih + np.concatenate([b_hh[:2 * H], zero[:H]]), s_x, swx, hb, 64 if wide else 32)
        bh = ref.quantize_bias(np.concatenate([zero[:2 * H], b_hh[2 * H:]]), s_h, swh, hb, 64 if wide else 32)
    else:
        bx = ref.quantize_bias(b_ih + b_hh, s_x, swx, hb, 64 if wide else 32)
        bh = np.zeros(gates * H, np.int64)
    bias = np.stack([bx - zp_x * qi.astype(np.int64).sum(1), bh - zp_h * qh.astype(np.int64).sum(1)])
    if not wide and (bias.min() < -(2 ** 31) or bias.max() > 2 ** 31 - 1):
        raise lay.fail(n, "the quantized bias does not fit int32 (weights or biases far larger than the inputs)")
    dt = "I16" if wide else "I8"
    ins = [x, wi, wh, lay.constant(f"{n.name}_bias", bias, "I64" if wide else "I32"),
           _state_in(lay, n, 5, (B, H), dt, (s_h, zp_h))]
    y = lay.activation(n.name, (T, B, H), like=n.out)
    outs = [y]
    if kind == "lstm":
        cq = n.attrs["cell_q"]
        ins.append(_state_in(lay, n, 6, (B, H), "I16", cq))
        c_out = n.attrs["outs"][0]
        c = lay.activation(f"{n.name}_c", (B, H), like=c_out)
        outs.append(c)
        lay.val[c_out] = (c, (0, 1))
        power = int(round(np.log2(cq[0])))
        params = ref.lstm_params(s_x, zp_x, swx, s_h, zp_h, swh, power, bool(n.attrs["reverse"]))
        params["may_saturate"] = _may_saturate(qh, s_h, swh, zp_h, gates, wide)
        table, code = "QuantLstmParams", "LSTM_S16" if wide else "LSTM_S8"
    elif kind == "gru":
        params = ref.gru_params(s_x, zp_x, swx, s_h, zp_h, swh, bool(n.attrs["reverse"]))
        table, code = "QuantGruParams", "GRU_S16" if wide else "GRU_S8"
    else:
        act = int(n.attrs.get("activation", 0))
        params = ref.rnn_params(s_x, zp_x, float(swx[0]), s_h, zp_h, float(swh[0]), act, bool(n.attrs["reverse"]),
                                wide)
        table, code = "QuantRnnParams", "RNN_S16" if wide else "RNN_S8"
    requant = ref.gate_table(params) if per_row else None  # per-row requantization: an operand
    nbytes = lay.scratch(code, (T, B, I), (gates * H, I), (T, B, H), params)  # the backends' working memory
    if nbytes > 0:
        ins.append(_scratch(lay, n, ((nbytes + 1) // 2,)))
    if requant is not None:  # after the scratch (absent: -1)
        ins += [-1] * (nbytes <= 0) + [lay.constant(f"{n.name}_requant", requant, "I32")]
    lay.emit(code, ins, outs, (table, params), n, kind, T * B * gates * H * (I + H))
    lay.val[n.out] = (y, order)


@F.lower("rnn_last", "qrnn_last")
@F.lower16("qrnn_last")
def _last(lay, n: Node) -> None:
    """A direction's final hidden state: one step of its time-major output, in place."""
    tid, perm = lay.val[n.inputs[0]]
    src = lay.p.tensors[tid]
    T, B, H = src.dims
    step = src.nbytes // T
    lay.p.tensors.append(PTensor(f"{n.name}_h", (B, H), src.dtype, src.buffer, None, src.scale, src.zero_point,
                                 offset=src.offset + n.attrs["step"] * step))
    lay.val[n.out] = (len(lay.p.tensors) - 1, (0, 1))


@F.lower("rnn_state_slice", "qrnn_state_slice")
@F.lower16("qrnn_state_slice")
def _state_slice(lay, n: Node) -> None:
    """Layer-direction k's initial state: slice k of hx [L*D, B, H], in place."""
    x = n.inputs[0]
    tid = lay.get(x, identity(len(lay.g.shapes[x])), n)
    src = lay.p.tensors[tid]
    count, B, H = src.dims
    k = n.attrs["index"]
    if src.const is not None:  # constants are placed whole: a slice is its own constant
        lay.val[n.out] = (lay.constant(f"{n.name}_h0", src.const[k], src.dtype), (0, 1))
        return
    lay.p.tensors.append(PTensor(f"{n.name}_h0", (B, H), src.dtype, src.buffer, None, src.scale,
                                 src.zero_point, offset=src.offset + k * (src.nbytes // count)))
    lay.val[n.out] = (len(lay.p.tensors) - 1, (0, 1))
