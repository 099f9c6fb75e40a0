"""Lowering, second half: memory layouts and program ops.

Every logical value gets a physical tensor and a permutation `perm` such
that physical dim j holds logical dim perm[j]. Convolutions and pools want
NHWC (perm (0, 2, 3, 1)); linear, reshape and the model's outputs want
PyTorch's order. A permute or transpose in the model changes only `perm`
and moves no data; a real PERMUTE op is emitted only where an op needs a
different order, and not at all when the two orders differ only in dims of
size 1 (the bytes are then identical: reshape, flatten after a global pool,
NCHW input with one channel).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import cmsis_nn
from .errors import CompileError
from .lower import Graph, Node, QConst

NP_DTYPES = {"F32": np.float32, "I8": np.int8, "I32": np.int32, "I4": np.int8, "I16": np.int16, "I64": np.int64}  # I4: values, packed on serialize

NHWC = (0, 2, 3, 1)


@dataclass
class PTensor:
    name: str
    dims: tuple[int, ...]  # physical
    dtype: str = "F32"
    buffer: int | None = None  # activation storage; tensors sharing it alias
    const: np.ndarray | None = None  # constants, already in physical layout
    scale: float = 0.0  # int8: real = scale * (q - zero_point)
    zero_point: int = 0
    channel_scales: tuple[float, ...] = ()  # per-channel int8 weights
    channel_axis: int = -1
    offset: int = 0  # byte offset in its buffer (a slice: concat inputs, in-place outputs, tiles)

    @property
    def nbytes(self) -> int:
        n = int(np.prod(self.dims, dtype=np.int64))
        if self.dtype == "I4":  # two per byte (reference.pack_int4)
            return (n + 1) // 2
        return n * {"F32": 4, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "I64": 8}[self.dtype]


@dataclass
class POp:
    code: str
    inputs: list[int]  # tensor ids, -1 for an absent optional operand
    outputs: list[int]
    params: tuple[str, dict[str, Any]] | None
    name: str
    source: str | None
    kind: str  # the logical op, for reports
    backend: str = "portable"
    macs: int = 0


@dataclass
class PGraph:
    tensors: list[PTensor] = field(default_factory=list)
    ops: list[POp] = field(default_factory=list)
    inputs: list[int] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)
    buffers: list[int] = field(default_factory=list)  # bytes per activation buffer


def _identity(rank: int) -> tuple[int, ...]:
    return tuple(range(rank))


def _same_bytes(shape: tuple[int, ...], p: tuple[int, ...], q: tuple[int, ...]) -> bool:
    """Two orders of one tensor lay out the same bytes when they agree on the
    order of every dim larger than 1."""
    return [d for d in p if shape[d] != 1] == [d for d in q if shape[d] != 1]


def _round_away(x: float) -> int:
    return int(np.sign(x) * np.floor(abs(x) + 0.5))


def _act_q(act: tuple[float, float], scale: float, zero_point: int) -> tuple[int, int]:
    """A float activation range as int8 bounds, as TFLite's
    CalculateActivationRangeQuantized (zero_point + round(x / scale))."""
    lo = -128 if act[0] == -np.inf else max(-128, zero_point + _round_away(act[0] / scale))
    hi = 127 if act[1] == np.inf else min(127, zero_point + _round_away(act[1] / scale))
    return lo, hi


def _bias_q(b: np.ndarray | None, s_in: float, s_w: np.ndarray, cout: int) -> np.ndarray:
    """Float bias at scale s_in * s_w[c], as int32 (zero when absent)."""
    if b is None:
        return np.zeros(cout, np.int64)
    q = np.round(b.astype(np.float64) / (s_in * s_w.astype(np.float64)))
    return np.clip(q, -(2 ** 31), 2 ** 31 - 1).astype(np.int64)


def _act_params(act: tuple[float, float]) -> dict[str, float]:
    return {"act_min": float(act[0]), "act_max": float(act[1])}


class _Layout:
    def __init__(self, g: Graph) -> None:
        self.g = g
        self.p = PGraph()
        self.val: dict[int, tuple[int, tuple[int, ...]]] = {}  # value -> (tensor, perm)
        self.cache: dict[tuple[int, tuple[int, ...]], int] = {}

    # -- tensors -----------------------------------------------------------------------------
    def activation(self, name: str, dims: tuple[int, ...], like: int | None = None) -> int:
        """A new buffer; `like` (a logical value) gives its dtype and quantization."""
        t = PTensor(name, tuple(int(d) for d in dims), buffer=len(self.p.buffers))
        if like is not None and like in self.g.qparams:
            t.dtype = "I16" if like in self.g.int16 else "I8"
            t.scale, t.zero_point = self.g.qparams[like]
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
        if _same_bytes(shape, perm, want):
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

    # -- ops ---------------------------------------------------------------------------------
    def conv2d(self, n: Node) -> None:
        x, w, b = n.inputs
        w = w.dequantized() if isinstance(w, QConst) else w  # a float fallback of a quantized model
        out_shape = self.g.shapes[n.out]
        xin = self.get(x, NHWC, n)  # type: ignore[arg-type]
        out = self.activation(n.name, tuple(out_shape[d] for d in NHWC))
        groups = n.attrs["groups"]
        cin = self.g.shapes[x][1]  # type: ignore[index]
        cout, _, kh, kw = w.shape
        a = n.attrs
        params = {
            "stride_h": a["stride"][0], "stride_w": a["stride"][1],
            "pad_top": a["padding"][0], "pad_left": a["padding"][1],
            "dilation_h": a["dilation"][0], "dilation_w": a["dilation"][1],
            "groups": groups, **_act_params(a["act"]),
        }
        if groups > 1 and groups == cin and w.shape[1] == 1:
            code, wt = "DEPTHWISE_CONV2D_F32", np.transpose(w, (1, 2, 3, 0))  # [1, kh, kw, cout]
            params["multiplier"] = cout // cin
        else:
            code, wt = "CONV2D_F32", np.transpose(w, (0, 2, 3, 1))  # OHWI
        ins = [xin, self.constant(f"{n.name}_weight", wt)]
        if b is not None:
            ins.append(self.constant(f"{n.name}_bias", b))
        macs = int(np.prod(out_shape)) * int(w.shape[1]) * kh * kw
        self.emit(code, ins, [out], ("Conv2dParams", params), n, "conv2d", macs)
        self.val[n.out] = (out, NHWC)

    def linear(self, n: Node) -> None:
        x, w, b = n.inputs
        w = w.dequantized() if isinstance(w, QConst) else w
        shape = self.g.shapes[n.out]
        xin = self.get(x, _identity(len(self.g.shapes[x])), n)  # type: ignore[arg-type]
        out = self.activation(n.name, shape)
        ins = [xin, self.constant(f"{n.name}_weight", w)]
        if b is not None:
            ins.append(self.constant(f"{n.name}_bias", b))
        self.emit("LINEAR_F32", ins, [out], ("LinearParams", _act_params(n.attrs["act"])), n, "linear",
                  int(np.prod(shape)) * int(w.shape[1]))
        self.val[n.out] = (out, _identity(len(shape)))

    def unary(self, n: Node) -> None:
        x = n.inputs[0]
        tid, perm = self.val[x]  # type: ignore[index]
        out = self.activation(n.name, self.p.tensors[tid].dims)
        if n.op == "clamp":
            lo, hi = n.attrs["range"]
            self.emit("CLAMP_F32", [tid], [out], ("ClampParams", {"min": lo, "max": hi}), n, n.op)
        else:
            self.emit(f"{n.op.upper()}_F32", [tid], [out], None, n, n.op)
        self.val[n.out] = (out, perm)

    def binary(self, n: Node) -> None:
        a, b = n.inputs
        shape = self.g.shapes[n.out]
        rank = len(shape)
        if len(self.g.shapes[a]) != rank:  # type: ignore[index]
            raise self.fail(n, "broadcasting an activation of lower rank is not supported")
        perm = self.val[a][1]  # type: ignore[index]
        ain = self.val[a][0]  # type: ignore[index]
        if isinstance(b, int):
            if len(self.g.shapes[b]) != rank:
                raise self.fail(n, "broadcasting an activation of lower rank is not supported")
            bin_ = self.get(b, perm, n)
        else:
            bin_ = self.const_operand(b, rank, perm, f"{n.name}_other")
        out = self.activation(n.name, tuple(shape[d] for d in perm))
        self.emit(f"{n.op.upper()}_F32", [ain, bin_], [out], ("BinaryParams", _act_params(n.attrs["act"])), n, n.op)
        self.val[n.out] = (out, perm)

    def pool(self, n: Node) -> None:
        x = n.inputs[0]
        a = n.attrs
        shape = self.g.shapes[n.out]
        xin = self.get(x, NHWC, n)  # type: ignore[arg-type]
        out = self.activation(n.name, tuple(shape[d] for d in NHWC))
        params = {
            "kernel_h": a["kernel"][0], "kernel_w": a["kernel"][1],
            "stride_h": a["stride"][0], "stride_w": a["stride"][1],
            "pad_top": a["padding"][0], "pad_left": a["padding"][1],
            "dilation_h": a["dilation"][0], "dilation_w": a["dilation"][1],
            "count_include_pad": a["count_include_pad"], "divisor_override": a["divisor_override"],
            **_act_params(a["act"]),
        }
        code = "MAX_POOL2D_F32" if n.op == "max_pool2d" else "AVG_POOL2D_F32"
        self.emit(code, [xin], [out], ("Pool2dParams", params), n, n.op)
        self.val[n.out] = (out, NHWC)

    def mean(self, n: Node) -> None:
        x = n.inputs[0]
        tid, perm = self.val[x]  # type: ignore[index]
        in_dims = self.p.tensors[tid].dims
        reduced = set(n.attrs["dims"])
        mask = sum(1 << j for j, d in enumerate(perm) if d in reduced)
        rank = len(perm)
        if len(self.g.shapes[n.out]) == rank:  # keepdim
            out_perm = perm
            dims = tuple(1 if perm[j] in reduced else in_dims[j] for j in range(rank))
        else:
            kept = [d for d in range(rank) if d not in reduced]
            out_perm = tuple(kept.index(perm[j]) for j in range(rank) if perm[j] not in reduced)
            dims = tuple(in_dims[j] for j in range(rank) if perm[j] not in reduced) or (1,)
            if not kept:
                out_perm = (0,) if self.g.shapes[n.out] else ()
        out = self.activation(n.name, dims)
        self.emit("MEAN_F32", [tid], [out], ("ReduceParams", {"axis_mask": mask}), n, "mean")
        self.val[n.out] = (out, out_perm)

    def softmax(self, n: Node) -> None:
        x = n.inputs[0]
        tid, perm = self.val[x]  # type: ignore[index]
        out = self.activation(n.name, self.p.tensors[tid].dims)
        self.emit("SOFTMAX_F32", [tid], [out], ("SoftmaxParams", {"axis": perm.index(n.attrs["dim"])}), n, "softmax")
        self.val[n.out] = (out, perm)

    def reshape(self, n: Node) -> None:
        x = n.inputs[0]
        shape = self.g.shapes[n.out]
        tid = self.get(x, _identity(len(self.g.shapes[x])), n)  # type: ignore[arg-type]
        self.val[n.out] = (self.alias(tid, shape or (1,), n.name), _identity(len(shape)))

    def permute(self, n: Node) -> None:
        tid, perm = self.val[n.inputs[0]]  # type: ignore[index]
        q = n.attrs["perm"]
        self.val[n.out] = (tid, tuple(q.index(d) for d in perm))

    def cat(self, n: Node) -> None:
        shape = self.g.shapes[n.out]
        first = next(i for i in n.inputs if isinstance(i, int))
        perm = self.val[first][1]
        ins = [self.get(i, perm, n) if isinstance(i, int) else self.const_operand(i, len(shape), perm, f"{n.name}_c")
               for i in n.inputs]
        out = self.activation(n.name, tuple(shape[d] for d in perm), like=n.out)
        self.emit("CONCAT", ins, [out], ("ConcatParams", {"axis": perm.index(n.attrs["dim"])}), n, "cat")
        self.val[n.out] = (out, perm)

    def pad(self, n: Node) -> None:
        """Constant padding in the input's physical order (float or int8:
        an int8 value pads with the value quantized at its quantization)."""
        from . import reference

        x = n.inputs[0]
        tid, perm = self.val[x]  # type: ignore[index]
        shape = self.g.shapes[n.out]
        out = self.activation(n.name, tuple(shape[d] for d in perm), like=n.out)
        value = float(n.attrs["value"])
        qvalue = 0
        if n.out in self.g.qparams:
            s_out, zp_out = self.g.qparams[n.out]
            qvalue = int(reference.quantize(np.float32(value), s_out, zp_out))
        params = {"before": [int(n.attrs["before"][d]) for d in perm],
                  "after": [int(n.attrs["after"][d]) for d in perm], "value": value, "qvalue": qvalue}
        self.emit("PAD", [tid], [out], ("PadParams", params), n, "pad")
        self.val[n.out] = (out, perm)

    def bmm(self, n: Node) -> None:
        """a [..., M, K] @ b [..., K, N], both in PyTorch's order."""
        from . import reference

        a, b = n.inputs
        shape = self.g.shapes[n.out]
        ident = _identity(len(shape))
        ain = self.get(a, ident, n)  # type: ignore[arg-type]
        bin_ = self.get(b, ident, n)  # type: ignore[arg-type]
        out = self.activation(n.name, shape, like=n.out)
        macs = int(np.prod(shape)) * int(self.g.shapes[a][-1])  # type: ignore[index]
        if n.op == "qbmm":
            (s1, z1), (s2, z2) = n.attrs["in_q"]
            s_out, zp_out = n.attrs["out_q"]
            params = reference.batch_matmul_params(s1, z1, s2, z2, s_out, zp_out)
            self.emit("BATCH_MATMUL_S8", [ain, bin_], [out],
                      ("QuantBatchMatmulParams", {k: int(v) for k, v in params.items()}), n, "bmm", macs)
        else:
            self.emit("BATCH_MATMUL_F32", [ain, bin_], [out], None, n, "bmm", macs)
        self.val[n.out] = (out, ident)

    # -- int8 ops (see lower.fold_qdq; arithmetic in firmware/kernels/portable/portable_s8.h) --
    def qconv2d(self, n: Node) -> None:
        from . import reference

        x, w, b = n.inputs
        assert isinstance(w, QConst)
        (s_in, zp_in), = n.attrs["in_q"]
        s_out, zp_out = n.attrs["out_q"]
        out_shape = self.g.shapes[n.out]
        xin = self.get(x, NHWC, n)  # type: ignore[arg-type]
        out = self.activation(n.name, tuple(out_shape[d] for d in NHWC), like=n.out)
        cout, _, kh, kw = w.shape
        s_w = np.broadcast_to(np.asarray(w.scale, np.float64), (cout,))
        mult, shift = reference.conv_requant(s_in, s_w, s_out)
        lo, hi = _act_q(n.attrs["act"], s_out, zp_out)
        a = n.attrs
        params = {
            "stride_h": a["stride"][0], "stride_w": a["stride"][1],
            "pad_top": a["padding"][0], "pad_left": a["padding"][1],
            "dilation_h": a["dilation"][0], "dilation_w": a["dilation"][1],
            "input_offset": -zp_in, "output_offset": zp_out, "act_min": lo, "act_max": hi,
        }
        cin = self.g.shapes[x][1]  # type: ignore[index]
        if a["groups"] > 1:
            code, wt = "DEPTHWISE_CONV2D_S8", np.transpose(w.data, (1, 2, 3, 0))
            params["multiplier"] = cout // cin
        else:
            code, wt = "CONV2D_S8", np.transpose(w.data, (0, 2, 3, 1))
        wdtype = "I8"
        if w.bits == 4:  # W4A8: the same op with packed int4 weights
            code, wdtype = code[:-2] + "S4", "I4"
        bias = _bias_q(b, s_in, s_w, cout)
        wid = self.constant(f"{n.name}_weight", wt, wdtype)
        # Output channels: OHWI's first axis; the last of depthwise [1, kh, kw, C*m].
        self.p.tensors[wid].channel_scales = tuple(float(v) for v in s_w)
        self.p.tensors[wid].channel_axis = 3 if a["groups"] > 1 else 0
        ins = [xin, wid, self.constant(f"{n.name}_bias", bias, "I32"),
               self.constant(f"{n.name}_multiplier", mult, "I32"), self.constant(f"{n.name}_shift", shift, "I32")]
        nbytes = cmsis_nn.scratch_bytes(code, self.p.tensors[xin].dims, wt.shape, self.p.tensors[out].dims, params)
        if nbytes > 0:  # CMSIS-NN's buffer (any ISA), planned RAM live during this op; int8 like `out`
            ins.append(self.activation(f"{n.name}_scratch", (nbytes,), like=n.out))
        macs = int(np.prod(out_shape)) * int(w.shape[1]) * kh * kw
        self.emit(code, ins, [out], ("QuantConv2dParams", params), n, "conv2d", macs)
        self.val[n.out] = (out, NHWC)

    def qlinear(self, n: Node) -> None:
        from . import reference

        x, w, b = n.inputs
        assert isinstance(w, QConst)
        (s_in, zp_in), = n.attrs["in_q"]
        s_out, zp_out = n.attrs["out_q"]
        shape = self.g.shapes[n.out]
        xin = self.get(x, _identity(len(self.g.shapes[x])), n)  # type: ignore[arg-type]
        out = self.activation(n.name, shape, like=n.out)
        cout = w.shape[0]
        s_w = np.broadcast_to(np.asarray(w.scale, np.float64), (cout,))
        mult, shift = reference.conv_requant(s_in, s_w, s_out)
        # The kernel sums: input_offset * sum(w) folded into the bias ahead of time.
        bias = _bias_q(b, s_in, s_w, cout) + np.int64(-zp_in) * w.data.astype(np.int64).sum(1)
        lo, hi = _act_q(n.attrs["act"], s_out, zp_out)
        code, wdtype = ("LINEAR_S4", "I4") if w.bits == 4 else ("LINEAR_S8", "I8")
        wid = self.constant(f"{n.name}_weight", w.data, wdtype)
        self.p.tensors[wid].channel_scales = tuple(float(v) for v in s_w)
        self.p.tensors[wid].channel_axis = 0
        ins = [xin, wid, self.constant(f"{n.name}_bias", bias, "I32"),
               self.constant(f"{n.name}_multiplier", mult, "I32"), self.constant(f"{n.name}_shift", shift, "I32")]
        params = {"input_offset": -zp_in, "output_offset": zp_out, "act_min": lo, "act_max": hi}
        nbytes = cmsis_nn.scratch_bytes(code, self.p.tensors[xin].dims, w.shape, shape, params)
        if nbytes > 0:  # as qconv2d (none today: MVE's kernel sums are the folded bias)
            ins.append(self.activation(f"{n.name}_scratch", (nbytes,), like=n.out))
        self.emit(code, ins, [out], ("QuantLinearParams", params), n, "linear",
                  int(np.prod(shape)) * int(w.shape[1]))
        self.val[n.out] = (out, _identity(len(shape)))

    def qbinary(self, n: Node) -> None:
        from . import reference

        a, b = n.inputs
        shape = self.g.shapes[n.out]
        rank = len(shape)
        if len(self.g.shapes[a]) != rank or len(self.g.shapes[b]) != rank:  # type: ignore[index]
            raise self.fail(n, "broadcasting an activation of lower rank is not supported")
        ain, perm = self.val[a]  # type: ignore[index]
        bin_ = self.get(b, perm, n)  # type: ignore[arg-type]
        (s1, z1), (s2, z2) = n.attrs["in_q"]
        s_out, zp_out = n.attrs["out_q"]
        lo, hi = _act_q(n.attrs["act"], s_out, zp_out)
        if n.op in ("qmaximum", "qminimum"):  # one quantization in and out: the raw values
            out = self.activation(n.name, tuple(shape[d] for d in perm), like=n.out)
            self.emit(f"{n.op[1:].upper()}_S8", [ain, bin_], [out], None, n, n.op[1:])
            self.val[n.out] = (out, perm)
            return
        if n.op == "qadd":
            code, table = "ADD_S8", "QuantAddParams"
            params = reference.add_params(s1, z1, s2, z2, s_out, zp_out, lo, hi)
        else:
            code, table = "MUL_S8", "QuantMulParams"
            params = reference.mul_params(s1, z1, s2, z2, s_out, zp_out, lo, hi)
        out = self.activation(n.name, tuple(shape[d] for d in perm), like=n.out)
        self.emit(code, [ain, bin_], [out], (table, {k: int(v) for k, v in params.items()}), n, n.op[1:])
        self.val[n.out] = (out, perm)

    def qpool(self, n: Node) -> None:
        x = n.inputs[0]
        a = n.attrs
        s_out, zp_out = a["out_q"]
        xin = self.get(x, NHWC, n)  # type: ignore[arg-type]
        batch, channels, h, w = self.g.shapes[x]  # type: ignore[index]
        lo, hi = _act_q(a.get("act", (-np.inf, np.inf)), s_out, zp_out)
        if n.op == "qmean":  # a global average pool: the window is the whole plane
            params = {"kernel_h": h, "kernel_w": w, "stride_h": 1, "stride_w": 1, "pad_top": 0, "pad_left": 0}
            out_nhwc = (batch, 1, 1, channels)
            code = "AVG_POOL2D_S8"
        else:
            params = {"kernel_h": a["kernel"][0], "kernel_w": a["kernel"][1], "stride_h": a["stride"][0],
                      "stride_w": a["stride"][1], "pad_top": a["padding"][0], "pad_left": a["padding"][1]}
            shape = self.g.shapes[n.out]
            out_nhwc = tuple(shape[d] for d in NHWC)
            code = "MAX_POOL2D_S8" if n.op == "qmax_pool2d" else "AVG_POOL2D_S8"
        out = self.activation(n.name, out_nhwc, like=n.out)
        params.update(act_min=lo, act_max=hi)
        self.emit(code, [xin], [out], ("QuantPool2dParams", params), n, n.op[1:])
        if n.op == "qmean" and len(self.g.shapes[n.out]) == 2:  # keepdim=False: [n, 1, 1, c] holds [n, c]
            self.val[n.out] = (self.alias(out, self.g.shapes[n.out]), (0, 1))
        else:
            self.val[n.out] = (out, NHWC)

    def qsoftmax(self, n: Node) -> None:
        from . import reference

        x = n.inputs[0]
        rank = len(self.g.shapes[x])  # type: ignore[index]
        tid = self.get(x, _identity(rank), n)  # type: ignore[arg-type]
        (s_in, _), = n.attrs["in_q"]
        out = self.activation(n.name, self.p.tensors[tid].dims, like=n.out)
        params = {k: int(v) for k, v in reference.softmax_params(s_in).items()}
        self.emit("SOFTMAX_S8", [tid], [out], ("QuantSoftmaxParams", params), n, "softmax")
        self.val[n.out] = (out, _identity(rank))

    def qunary(self, n: Node) -> None:
        from . import reference

        x = n.inputs[0]
        tid, perm = self.val[x]  # type: ignore[index]
        out = self.activation(n.name, self.p.tensors[tid].dims, like=n.out)
        (s_in, zp_in), = n.attrs["in_q"]
        s_out, zp_out = n.attrs["out_q"]
        if n.op == "qclamp":
            lo, hi = _act_q(n.attrs["range"], s_out, zp_out)
            self.emit("CLAMP_S8", [tid], [out], ("QuantClampParams", {"min": lo, "max": hi}), n, "clamp")
        else:
            fn = {"qsigmoid": lambda v: 1.0 / (1.0 + np.exp(-v)), "qtanh": np.tanh,
                  "qhardswish": reference.hardswish}[n.op]
            table = reference.lut_table(fn, s_in, zp_in, s_out, zp_out)
            self.emit("LUT_S8", [tid, self.constant(f"{n.name}_table", table, "I8")], [out], None, n, n.op[1:])
        self.val[n.out] = (out, perm)

    def quantize(self, n: Node) -> None:
        x = n.inputs[0]
        tid, perm = self.val[x]  # type: ignore[index]
        out = self.activation(n.name, self.p.tensors[tid].dims, like=n.out)
        self.emit("QUANTIZE_S8", [tid], [out], None, n, "quantize")
        self.val[n.out] = (out, perm)

    def dequantize(self, n: Node) -> None:
        x = n.inputs[0]
        tid, perm = self.val[x]  # type: ignore[index]
        if self.g.is_output(n.out):  # reorder the int8 bytes, a quarter of the float ones
            perm = _identity(len(self.g.shapes[x]))  # type: ignore[index]
            tid = self.get(x, perm, n)  # type: ignore[arg-type]
        out = self.activation(n.name, self.p.tensors[tid].dims)
        self.emit("DEQUANTIZE_S8", [tid], [out], None, n, "dequantize")
        self.val[n.out] = (out, perm)

    # -- driver ------------------------------------------------------------------------------
    def run(self) -> PGraph:
        g = self.g
        for vid, name in zip(g.inputs, g.input_names):
            shape = g.shapes[vid]
            tid = self.activation(name, shape or (1,), like=vid)
            self.p.inputs.append(tid)
            self.val[vid] = (tid, _identity(len(shape)))
        handlers = {
            "conv2d": self.conv2d, "linear": self.linear, "clamp": self.unary, "sigmoid": self.unary,
            "tanh": self.unary, "add": self.binary, "mul": self.binary, "max_pool2d": self.pool,
            "avg_pool2d": self.pool, "mean": self.mean, "softmax": self.softmax, "reshape": self.reshape,
            "permute": self.permute, "cat": self.cat, "pad": self.pad, "maximum": self.binary,
            "minimum": self.binary, "hardswish": self.unary, "bmm": self.bmm,
            "qpad": self.pad, "qmaximum": self.qbinary, "qminimum": self.qbinary, "qhardswish": self.qunary,
            "qbmm": self.bmm,
            "qconv2d": self.qconv2d, "qlinear": self.qlinear, "qadd": self.qbinary, "qmul": self.qbinary,
            "qmax_pool2d": self.qpool, "qavg_pool2d": self.qpool, "qmean": self.qpool, "qsoftmax": self.qsoftmax,
            "qclamp": self.qunary, "qsigmoid": self.qunary, "qtanh": self.qunary,
            "qreshape": self.reshape, "qpermute": self.permute, "qcat": self.cat,
            "quantize": self.quantize, "dequantize": self.dequantize,
        }
        from . import lower_s16

        for n in g.nodes:
            if n.attrs.get("bits") == 16:  # a16w8: the int16 ops (lower_s16.py)
                lower_s16.emit(self, n)
            else:
                handlers[n.op](n)
        self.outputs()
        return self.p

    def outputs(self) -> None:
        taken = {self.p.tensors[t].buffer for t in self.p.inputs}
        for k, o in enumerate(self.g.outputs):
            node = Node("output", [], {}, -1, f"output_{k}")
            if isinstance(o, int):
                tid = self.get(o, _identity(len(self.g.shapes[o])), node)
                t = self.p.tensors[tid]
                if t.buffer in taken:  # an output that is an input, or another output
                    out = self.activation(f"output_{k}", t.dims, like=o)
                    self.emit("COPY", [tid], [out], None, node, "copy")
                    tid = out
            else:
                src = self.constant(f"output_{k}_value", np.asarray(o))
                tid = self.activation(f"output_{k}", self.p.tensors[src].dims)
                self.emit("COPY", [src], [tid], None, node, "copy")
            taken.add(self.p.tensors[tid].buffer)
            self.p.outputs.append(tid)


def to_program_graph(g: Graph) -> PGraph:
    return _Layout(g).run()
