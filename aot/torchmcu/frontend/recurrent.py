"""Quantizing recurrent layers: what PT2E cannot see inside aten.lstm & co.

torch.export keeps nn.LSTM / nn.GRU / nn.RNN (and their cells) as one ATen
op each (aten.lstm.input, aten.gru.input, ...), with every layer's weights
in a list argument. PT2E observes only the op's inputs and outputs; the
integer scheme (reference/recurrent.py) also needs the range of every
layer's hidden state and of the LSTM's cell state at every time step. As
TFLite's converter does with its representative dataset, `record` runs the
float model over the calibration samples and, at each recurrent op, runs
the layers step by step (in float64) to take those ranges; they go into the
op's node.meta["custom"] (which torch.export keeps when the quantized model
is exported again), and the quantizer (`annotate`) turns them into fixed
quantizations:

- one hidden-state quantization per op, over all its layers and directions
  (int8 asymmetric, or int16 symmetric for a16w8, computed by the same
  observer PT2E uses for activations): the op's outputs y and h_n, its h0
  input, and every layer's output between layers;
- the LSTM's cell state: int16 at one power-of-two scale per op, the
  smallest that holds the largest |c| (never below +-1): its c0 input and
  c_n output;
- the weights: int8, symmetric, one scale per row (per output channel, the
  default) or per gate's matrix (TFLite's scheme, --recurrent-weights
  per-gate). PT2E cannot annotate them (they sit in a list argument), so
  `fake_quantize_weights` quantizes and dequantizes them in the q/dq graph
  itself, exactly as lowering will (reference.recurrent.quantize_gates):
  PyTorch's q/dq model then computes with the firmware's weights, and
  `run --check` compares like with like.

Ops that consume a recurrent output share its quantization (no second
observer on the edge), so no requantization sits between them.
"""

from __future__ import annotations

import math
import operator
import warnings
from typing import Any

import numpy as np
import torch
from torch.fx import Node

aten = torch.ops.aten

# torch.export warns about every nn.LSTM/GRU/RNN it captures (nn.RNNBase keeps
# its weights in a plain list, _flat_weights): nothing a user can act on.
warnings.filterwarnings("ignore", message=r"The tensor attributes .*_flat_weights", category=UserWarning)

SEQUENCE = {aten.lstm.input: "lstm", aten.gru.input: "gru", aten.rnn_tanh.input: "rnn_tanh",
            aten.rnn_relu.input: "rnn_relu"}
CELLS = {aten.lstm_cell.default: "lstm", aten.gru_cell.default: "gru", aten.rnn_tanh_cell.default: "rnn_tanh",
         aten.rnn_relu_cell.default: "rnn_relu"}
TARGETS = {**SEQUENCE, **CELLS}
META = "torchmcu_rnn"


def gates(kind: str) -> int:
    return {"lstm": 4, "gru": 3}.get(kind, 1)


def unpack(params: list[Any], has_biases: bool, num_layers: int, bidirectional: bool) -> list[tuple]:
    """The flat weight list of aten.lstm & co., as (w_ih, w_hh, b_ih, b_hh)
    per layer and direction (layer-major, forward first); biases None when
    absent. A list whose length fits no such split (LSTM projections: a
    fifth tensor per layer) raises ValueError."""
    per = 4 if has_biases else 2
    directions = 2 if bidirectional else 1
    if len(params) != per * num_layers * directions:
        raise ValueError(f"{len(params)} weight tensors for {num_layers} layer(s) x {directions} direction(s)")
    out = []
    for k in range(num_layers * directions):
        w = params[k * per:(k + 1) * per]
        out.append((w[0], w[1], w[2] if has_biases else None, w[3] if has_biases else None))
    return out


def _step(kind: str, x: torch.Tensor, h: torch.Tensor, c: torch.Tensor | None, w: tuple) -> tuple:
    """One time step of one layer in float64: (h', c')."""
    w_ih, w_hh, b_ih, b_hh = w
    gx = x @ w_ih.T + (b_ih if b_ih is not None else 0)
    gh = h @ w_hh.T + (b_hh if b_hh is not None else 0)
    if kind == "lstm":
        i, f, g, o = (gx + gh).chunk(4, -1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c
    if kind == "gru":
        xr, xz, xn = gx.chunk(3, -1)
        hr, hz, hn = gh.chunk(3, -1)
        r, z = torch.sigmoid(xr + hr), torch.sigmoid(xz + hz)
        n = torch.tanh(xn + r * hn)
        return (1 - z) * n + z * h, None
    pre = gx + gh
    return (torch.tanh(pre) if kind == "rnn_tanh" else torch.relu(pre)), None


def _ranges(kind: str, cell: bool, args: tuple, result: Any) -> dict[str, Any]:
    """The op's hidden-state range over every layer, direction and step, and
    the cell state's largest magnitude (LSTM)."""
    f64 = torch.float64
    if cell:
        x, hx, w_ih, w_hh = args[0], args[1], args[2], args[3]
        b_ih, b_hh = (args[4] if len(args) > 4 else None), (args[5] if len(args) > 5 else None)
        layers = [(w_ih, w_hh, b_ih, b_hh)]
        seq = x.to(f64).reshape(1, -1, x.shape[-1])
        hx = list(hx) if isinstance(hx, (list, tuple)) else [hx]
        h0 = [hx[0].to(f64).reshape(1, -1, w_hh.shape[1])]
        c0 = [hx[1].to(f64).reshape(1, -1, w_hh.shape[1])] if kind == "lstm" else None
        directions = 1
    else:
        x, hx, params, has_biases, num_layers = args[0], args[1], args[2], args[3], args[4]
        bidirectional, batch_first = args[7], args[8]
        layers = unpack(list(params), has_biases, num_layers, bidirectional)
        directions = 2 if bidirectional else 1
        seq = x.to(f64).transpose(0, 1) if batch_first else x.to(f64)
        hx = list(hx) if isinstance(hx, (list, tuple)) else [hx]
        h0 = list(hx[0].to(f64))
        c0 = list(hx[1].to(f64)) if kind == "lstm" else None
    layers = [tuple(None if t is None else t.detach().to(f64) for t in w) for w in layers]
    lo, hi, cmax = math.inf, -math.inf, 0.0
    for layer in range(len(layers) // directions):
        outs = []
        for d in range(directions):
            k = layer * directions + d
            h = h0[k].reshape(seq.shape[1], -1)
            c = c0[k].reshape(seq.shape[1], -1) if c0 is not None else None
            ys = []
            for t in (range(seq.shape[0] - 1, -1, -1) if d else range(seq.shape[0])):
                h, c = _step(kind, seq[t], h, c, layers[k])
                ys.append(h)
                lo, hi = min(lo, float(h.min())), max(hi, float(h.max()))
                if c is not None:
                    cmax = max(cmax, float(c.abs().max()))
            outs.append(torch.stack(ys[::-1] if d else ys))
        seq = torch.cat(outs, -1)
    # The op's own hidden outputs (y and h_n; a cell's h'), as PyTorch computed them.
    results = list(result) if isinstance(result, (tuple, list)) else [result]
    for r in results[:1] if cell else results[:2]:
        if isinstance(r, torch.Tensor) and r.numel():
            lo, hi = min(lo, float(r.min())), max(hi, float(r.max()))
    return {"h_min": lo, "h_max": hi, "c_absmax": cmax}


def record(gm: torch.fx.GraphModule, samples: list[tuple[torch.Tensor, ...]]) -> int:
    """Runs gm over `samples` and stores each recurrent op's ranges in its
    node.meta["custom"][META]; returns how many ops it found."""
    nodes = [n for n in gm.graph.nodes if n.op == "call_function" and n.target in TARGETS]
    if not nodes:
        return 0
    found: dict[Node, dict[str, Any]] = {}

    class Recorder(torch.fx.Interpreter):
        def call_function(self, target: Any, args: tuple, kwargs: dict) -> Any:
            result = super().call_function(target, args, kwargs)
            if target in TARGETS:
                r = _ranges(TARGETS[target], target in CELLS, args, result)
                acc = found.setdefault(self.current, {"h_min": math.inf, "h_max": -math.inf, "c_absmax": 0.0})
                acc["h_min"], acc["h_max"] = min(acc["h_min"], r["h_min"]), max(acc["h_max"], r["h_max"])
                acc["c_absmax"] = max(acc["c_absmax"], r["c_absmax"])
            return result

        def run_node(self, n: Node) -> Any:
            self.current = n
            return super().run_node(n)

    with torch.no_grad():
        for s in samples:
            Recorder(gm).run(*s)
    for n, ranges in found.items():
        n.meta.setdefault("custom", {})[META] = {"kind": TARGETS[n.target], **ranges}
    return len(nodes)


def _snap(v: float, up: bool) -> float:
    """v rounded outwards to 11 significant bits: a range computed twice
    with float noise in its last bits (the same sequences run whole, or
    frame by frame through a streaming model) gives one quantization."""
    if v == 0 or not math.isfinite(v):
        return v
    step = 2.0 ** (math.floor(math.log2(abs(v))) - 10)
    return (math.ceil(v / step) if up else math.floor(v / step)) * step


def snap_observers(prepared: torch.nn.Module) -> None:
    """The activation observers' ranges after calibration, snapped as the
    recurrent ranges are (_snap), in a model with recurrent ops: a streaming
    model calibrated frame by frame sees the whole-sequence model's values up
    to float noise (PyTorch computes a [1, T, H] linear and T [1, 1, H] ones
    with different roundings), and must get its quantization."""
    for m in prepared.modules():
        lo, hi = getattr(m, "min_val", None), getattr(m, "max_val", None)
        if isinstance(lo, torch.Tensor) and isinstance(hi, torch.Tensor) and lo.numel() == 1 and hi.numel() == 1 \
                and math.isfinite(float(lo)) and math.isfinite(float(hi)):
            lo.fill_(_snap(float(lo), False))
            hi.fill_(_snap(float(hi), True))


def _observed(spec: Any, lo: float, hi: float) -> tuple[float, int]:
    """(scale, zero point) that spec's observer computes for values in [lo, hi]
    (snapped outwards, see _snap)."""
    lo, hi = _snap(lo, False), _snap(hi, True)
    obs = spec.observer_or_fake_quant_ctr.with_args(dtype=spec.dtype, quant_min=spec.quant_min,
                                                    quant_max=spec.quant_max, qscheme=spec.qscheme)()
    obs(torch.tensor([lo, hi], dtype=torch.float32))
    scale, zp = obs.calculate_qparams()
    return float(scale.reshape(-1)[0]), int(zp.reshape(-1)[0])


def cell_power(absmax: float) -> int:
    """The LSTM cell state's scale 2^p (reference.recurrent.pot_cell_power)."""
    return int(math.ceil(math.log2(max(float(absmax), 1.0)))) - 15


def annotate(n: Node, act: Any, mark: Any) -> bool:
    """Annotates recurrent op n (act: the activation spec of its precision;
    mark(node, inputs, output)): fixed quantizations from the recorded
    ranges for its state inputs and outputs, act for its input. Without
    recorded ranges (a model quantized outside torchmcu's quantize), nothing:
    the op stays float. Records the chosen quantization in the node's meta."""
    from torchao.quantization.pt2e.quantizer import FixedQParamsQuantizationSpec

    meta = (n.meta.get("custom") or {}).get(META)
    x = n.args[0]
    if meta is None or not isinstance(x, Node):
        return False
    bits = 16 if act.dtype == torch.int16 else 8
    scale, zp = _observed(act, meta["h_min"], meta["h_max"])
    hspec = FixedQParamsQuantizationSpec(dtype=act.dtype, scale=scale, zero_point=zp, quant_min=act.quant_min,
                                         quant_max=act.quant_max, qscheme=torch.per_tensor_affine)
    power = cell_power(meta["c_absmax"])
    cspec = FixedQParamsQuantizationSpec(dtype=torch.int16, scale=2.0 ** power, zero_point=0, quant_min=-32768,
                                         quant_max=32767, qscheme=torch.per_tensor_affine)
    meta["q"] = {"bits": bits, "h_scale": scale, "h_zero_point": zp, "cell_power": power}
    lstm = meta["kind"] == "lstm"
    hx = n.args[1]
    hx = list(hx) if isinstance(hx, (list, tuple)) else [hx]
    inputs = {x: act}
    for k, h in enumerate(hx):  # model inputs and activations (not aten.zeros: a constant initial state)
        if (isinstance(h, Node) and isinstance(h.meta.get("val"), torch.Tensor)
                and (h.all_input_nodes or h.op == "placeholder")):
            inputs[h] = cspec if (lstm and k == 1) else hspec
    cell = n.target in CELLS
    if cell and not lstm:  # gru_cell / rnn_*_cell return h' itself
        mark(n, inputs, hspec)
        return True
    mark(n, inputs, None)
    for u in list(n.users):
        if u.target is operator.getitem:
            mark(u, {}, cspec if (lstm and u.args[1] == (1 if cell else 2)) else hspec)
    return True


def share_consumers(gm: torch.fx.GraphModule) -> None:
    """An op reading a recurrent op's output takes that output's fixed
    quantization (a shared spec) instead of observing the edge again."""
    from torchao.quantization.pt2e.quantizer import SharedQuantizationSpec

    fixed = set()
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.target in TARGETS and "quantization_annotation" in n.meta:
            outs = [u for u in n.users if u.target is operator.getitem] or [n]
            fixed |= {u for u in outs if u.meta.get("quantization_annotation") is not None
                      and u.meta["quantization_annotation"].output_qspec is not None}
    for n in gm.graph.nodes:  # in order: through ops that pass their input's quantization on (a squeeze)
        ann = n.meta.get("quantization_annotation")
        if ann is None or n.target in TARGETS:
            continue
        for src in list(ann.input_qspec_map):
            spec = ann.input_qspec_map[src]
            if src in fixed and not isinstance(spec, SharedQuantizationSpec):
                ann.input_qspec_map[src] = SharedQuantizationSpec(src)
        out = ann.output_qspec
        if isinstance(out, SharedQuantizationSpec):
            root = out.edge_or_node
            src = root[0] if isinstance(root, tuple) else root
            if src in fixed:
                fixed.add(n)


def _owner(gm: torch.nn.Module, target: str) -> tuple[torch.nn.Module, str]:
    *path, name = target.split(".")
    mod = gm
    for p in path:
        mod = getattr(mod, p)
    return mod, name


def _weights(n: Node) -> list[tuple[Node, int]]:
    """A recurrent op's weight matrices (get_attr nodes) and their gates."""
    kind = TARGETS[n.target]
    g = gates(kind)
    if n.target in CELLS:
        mats = [n.args[2], n.args[3]]
    else:
        params, has_biases, num_layers, bidirectional = n.args[2], n.args[3], n.args[4], n.args[7]
        try:
            layers = unpack(list(params), has_biases, num_layers, bidirectional)
        except ValueError:
            return []  # refused in lowering (projections)
        mats = [m for w_ih, w_hh, _, _ in layers for m in (w_ih, w_hh)]
    return [(m, g) for m in mats if isinstance(m, Node) and m.op == "get_attr"]


def fake_quantize_weights(gm: torch.fx.GraphModule, per_row: bool) -> int:
    """Replaces every annotated recurrent op's weight matrices in the q/dq
    model `gm` by their int8 values times their scales (per row, or per
    gate), as lowering quantizes them, and records the scheme in the op's
    meta (q["weights"]: "row" or "gate"). New tensors: the user's model and
    the saved float model keep theirs. Returns how many matrices."""
    from ..reference.recurrent import quantize_gates

    count = 0
    for n in gm.graph.nodes:
        meta = (n.meta.get("custom") or {}).get(META) if n.op == "call_function" else None
        if meta is None or n.target not in TARGETS or "q" not in meta:
            continue
        meta["q"]["weights"] = "row" if per_row else "gate"
        for m, g in _weights(n):
            owner, name = _owner(gm, m.target)
            w = getattr(owner, name)
            q, scales = quantize_gates(w.detach().numpy(), g, per_row=per_row)
            rows = scales if per_row else np.repeat(scales, w.shape[0] // g)
            fake = torch.from_numpy((q.astype(np.float64) * rows[:, None]).astype(np.float32))
            if isinstance(w, torch.nn.Parameter):
                setattr(owner, name, torch.nn.Parameter(fake, requires_grad=False))
            else:
                setattr(owner, name, fake)
            count += 1
    return count
