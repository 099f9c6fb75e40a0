"""ONNX ops onnx2torch has no converter for, or one torch.export cannot take,
registered in its registry as ours: Identity of opset 19 and later (its
converter: those versions only add types), LSTM (onnx2torch 1.5 has none; silero-vad's
ONNX uses it) and Pad with constant pads (onnx2torch's reads the pads with
.tolist() in forward, data-dependent to torch.export, and refuses a reflect
pad of a 2-D tensor that torch itself takes).

LSTM becomes torch.nn.LSTM (aten.lstm, which the recurrent family lowers):
ONNX's gates are ordered i, o, f, c and torch's i, f, g, o; its bias is
[Wb, Rb] per direction (torch's bias_ih, bias_hh). A forward or
bidirectional LSTM with the default activations, no clip, no input-forget
coupling, no peepholes and no sequence lengths is taken; anything else is
refused by name (onnx_fold.convert makes that one line).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

_REGISTERED = False


class OnnxLSTM(nn.Module):
    """ONNX LSTM (layout 0): X [seq, batch, in], initial_h/c [dirs, batch, H] ->
    Y [seq, dirs, batch, H], Y_h, Y_c [dirs, batch, H]."""

    def __init__(self, lstm: nn.LSTM, has_h: bool, has_c: bool, layout: int) -> None:
        super().__init__()
        self.lstm, self.has_h, self.has_c, self.layout = lstm, has_h, has_c, layout

    def forward(self, x: torch.Tensor, *state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        dirs = 2 if self.lstm.bidirectional else 1
        if self.layout:  # [batch, seq, in], states [batch, dirs, H]
            x = x.transpose(0, 1)
            state = tuple(s.transpose(0, 1) for s in state)
        batch, hidden = x.shape[1], self.lstm.hidden_size
        it = iter(state)
        h0 = next(it) if self.has_h else x.new_zeros(dirs, batch, hidden)
        c0 = next(it) if self.has_c else x.new_zeros(dirs, batch, hidden)
        y, (h, c) = self.lstm(x, (h0, c0))
        y = y.reshape(y.shape[0], batch, dirs, hidden).transpose(1, 2)  # [seq, dirs, batch, H]
        if self.layout:
            return y.permute(2, 0, 1, 3), h.transpose(0, 1), c.transpose(0, 1)
        return y, h, c


def _reorder(w: torch.Tensor, hidden: int) -> torch.Tensor:
    """ONNX's gate blocks i, o, f, c -> torch's i, f, g, o (along axis 0)."""
    i, o, f, c = (w[k * hidden:(k + 1) * hidden] for k in range(4))
    return torch.cat([i, f, c, o], 0)


class OnnxPad(nn.Module):
    """ONNX Pad with constant pads: F.pad with the pads of the dims padded (torch's order, last dim first)."""

    def __init__(self, pads: list[int], mode: str, value: float) -> None:
        super().__init__()
        self.pads, self.mode, self.value = pads, mode, value

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.mode == "constant":
            return nn.functional.pad(x, self.pads, value=self.value)
        return nn.functional.pad(x, self.pads, mode=self.mode)


def _torch_pads(onnx_pads: list[int]) -> list[int]:
    half = len(onnx_pads) // 2
    out: list[int] = []
    for begin, end in zip(onnx_pads[:half][::-1], onnx_pads[half:][::-1]):
        out += [int(begin), int(end)]
    while len(out) > 2 and out[-2:] == [0, 0]:  # the leading dims not padded
        out = out[:-2]
    return out


class OnnxStaticShape(nn.Module):
    """Squeeze / Unsqueeze / Slice / Reshape / Expand whose axes, starts, shape ... are constants:
    the op with those numbers (onnx2torch's modules take them as tensors and read them as
    numbers in forward, which torch.export traces as data-dependent)."""

    def __init__(self, op: str, **numbers: Any) -> None:
        super().__init__()
        self.op, self.numbers = op, numbers

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k = self.numbers
        if self.op == "Squeeze":
            axes = sorted((a % x.dim() for a in k["axes"]), reverse=True) if k["axes"] is not None else \
                [d for d in range(x.dim() - 1, -1, -1) if x.shape[d] == 1]
            for a in axes:
                x = x.squeeze(a)
            return x
        if self.op == "Unsqueeze":
            rank = x.dim() + len(k["axes"])
            for a in sorted(a % rank for a in k["axes"]):
                x = x.unsqueeze(a)
            return x
        if self.op == "Slice":
            for start, end, axis, step in zip(k["starts"], k["ends"], k["axes"], k["steps"]):
                d, n = axis % x.dim(), x.shape[axis % x.dim()]
                if step < 0:  # flip, then the mirrored bounds
                    x = x.flip(d)
                    start, end, step = n - 1 - min(start, n - 1), n - 1 - end, -step
                start, end = max(0, min(n, start + n if start < 0 else start)), \
                    max(0, min(n, end + n if end < 0 else end))
                x = x.narrow(d, start, max(0, end - start)) if step == 1 else \
                    x[(slice(None),) * d + (slice(start, end, step),)]
            return x
        if self.op == "Reshape":
            shape = [x.shape[i] if v == 0 and not k["allowzero"] else v for i, v in enumerate(k["shape"])]
            return x.reshape(shape)
        if self.op == "Expand":
            shape = list(k["shape"])
            rank = max(len(shape), x.dim())
            shape = [1] * (rank - len(shape)) + shape
            have = [1] * (rank - x.dim()) + list(x.shape)
            return x.reshape(have).expand([max(s, h) for s, h in zip(shape, have)])
        raise NotImplementedError(self.op)


def _static(node: Any, graph: Any, fallback: Any) -> Any:
    """The op's constant inputs as numbers (OnnxStaticShape), or onnx2torch's own converter."""
    from onnx2torch.utils.common import OnnxMapping, OperationConverterResult

    op, ins = node.operation_type, list(node.input_values)
    consts = ins[1:]
    if not consts or not all(c == "" or c in graph.initializers for c in consts):
        return fallback(node, graph)

    def numbers(i: int) -> list[int] | None:
        if i >= len(ins) or not ins[i]:
            return None
        return [int(v) for v in graph.initializers[ins[i]].to_torch().reshape(-1).tolist()]

    if op in ("Squeeze", "Unsqueeze"):
        kw: dict[str, Any] = {"axes": numbers(1)}
    elif op == "Slice":
        starts, ends = numbers(1), numbers(2)
        axes = numbers(3) or list(range(len(starts or [])))
        kw = {"starts": starts, "ends": ends, "axes": axes, "steps": numbers(4) or [1] * len(axes)}
    elif op == "Reshape":
        kw = {"shape": numbers(1), "allowzero": int(node.attributes.get("allowzero", 0))}
    else:  # Expand
        kw = {"shape": numbers(1)}
    return OperationConverterResult(torch_module=OnnxStaticShape(op, **kw),
                                    onnx_mapping=OnnxMapping(inputs=(ins[0],), outputs=node.output_values))


_STATIC = {"Squeeze": (13, 21), "Unsqueeze": (13,), "Slice": (10, 11, 13), "Reshape": (5, 13, 14),
           "Expand": (8, 13)}


def register() -> None:
    global _REGISTERED
    if _REGISTERED:
        return
    from onnx2torch.node_converters.registry import _CONVERTER_REGISTRY, OperationDescription, add_converter
    from onnx2torch.utils.common import OnnxMapping, OperationConverterResult

    def lstm(node: Any, graph: Any) -> Any:
        a = node.attributes
        inputs = list(node.input_values) + [""] * (8 - len(node.input_values))
        x, w_name, r_name, b_name, seq_lens, h_name, c_name, p_name = inputs
        if seq_lens or p_name:
            raise NotImplementedError("LSTM with sequence_lens or peepholes (P) is not supported")
        if a.get("clip") is not None or a.get("input_forget", 0):
            raise NotImplementedError("LSTM with clip or input_forget is not supported")
        acts = [s.decode() if isinstance(s, bytes) else s for s in a.get("activations", [])]
        if acts and any(v.lower() != d for v, d in zip(acts, ["sigmoid", "tanh", "tanh"] * 2)):
            raise NotImplementedError(f"LSTM with activations {acts} is not supported")
        direction = a.get("direction", "forward")
        direction = direction.decode() if isinstance(direction, bytes) else direction
        if direction not in ("forward", "bidirectional"):
            raise NotImplementedError(f"LSTM direction {direction!r} is not supported (forward, bidirectional)")
        for name in (w_name, r_name, b_name):
            if name and name not in graph.initializers:
                raise NotImplementedError(f"LSTM weights computed in the graph ({name}) are not supported")
        w = graph.initializers[w_name].to_torch()
        r = graph.initializers[r_name].to_torch()
        dirs, hidden = w.shape[0], int(a.get("hidden_size", r.shape[-1]))
        b = graph.initializers[b_name].to_torch() if b_name else torch.zeros(dirs, 8 * hidden, dtype=w.dtype)
        m = nn.LSTM(w.shape[2], hidden, bidirectional=dirs == 2)
        with torch.no_grad():
            for d in range(dirs):
                sfx = "_reverse" if d else ""
                getattr(m, f"weight_ih_l0{sfx}").copy_(_reorder(w[d], hidden))
                getattr(m, f"weight_hh_l0{sfx}").copy_(_reorder(r[d], hidden))
                getattr(m, f"bias_ih_l0{sfx}").copy_(_reorder(b[d, :4 * hidden], hidden))
                getattr(m, f"bias_hh_l0{sfx}").copy_(_reorder(b[d, 4 * hidden:], hidden))
        module = OnnxLSTM(m.eval(), bool(h_name), bool(c_name), int(a.get("layout", 0)))
        ins = tuple(v for v in (x, h_name, c_name) if v)
        return OperationConverterResult(torch_module=module,
                                        onnx_mapping=OnnxMapping(inputs=ins, outputs=node.output_values))

    def pad(node: Any, graph: Any) -> Any:
        mode = node.attributes.get("mode", "constant")
        mode = mode.decode() if isinstance(mode, bytes) else mode
        torch_mode = {"constant": "constant", "reflect": "reflect", "edge": "replicate"}.get(mode)
        if torch_mode is None:
            raise NotImplementedError(f"Pad mode {mode!r} is not supported (constant, reflect, edge)")
        names = list(node.input_values) + ["", "", ""]
        x, pads_name, value_name, axes_name = names[:4]
        if axes_name:
            raise NotImplementedError("Pad with axes is not supported")
        if pads_name not in graph.initializers or (value_name and value_name not in graph.initializers):
            raise NotImplementedError("Pad whose pads or value are computed in the graph is not supported")
        pads = [int(v) for v in graph.initializers[pads_name].to_torch().reshape(-1).tolist()]
        value = float(graph.initializers[value_name].to_torch().reshape(-1)[0]) if value_name else 0.0
        return OperationConverterResult(torch_module=OnnxPad(_torch_pads(pads), torch_mode, value),
                                        onnx_mapping=OnnxMapping(inputs=(x,), outputs=node.output_values))

    for op, versions in _STATIC.items():
        for version in versions:
            key = OperationDescription("", op, version)
            theirs = _CONVERTER_REGISTRY.get(key)
            if theirs is not None:
                _CONVERTER_REGISTRY[key] = lambda node, graph, theirs=theirs: _static(node, graph, theirs)
    identity = _CONVERTER_REGISTRY.get(OperationDescription("", "Identity", 16))
    for version in (19, 21, 23, 24, 25):  # Identity's later versions only add types
        if identity is not None and OperationDescription("", "Identity", version) not in _CONVERTER_REGISTRY:
            _CONVERTER_REGISTRY[OperationDescription("", "Identity", version)] = identity
    for version in (11, 13):  # onnx2torch's own Pad converters, replaced
        _CONVERTER_REGISTRY[OperationDescription("", "Pad", version)] = pad
    for version in (7, 14):
        if OperationDescription("", "LSTM", version) not in _CONVERTER_REGISTRY:
            add_converter(operation_type="LSTM", version=version)(lstm)
    _REGISTERED = True
