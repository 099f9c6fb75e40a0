"""A partition of the int8 program graph as a TOSA 1.0 flatbuffer.

Every op is lowered to TOSA ops whose integer arithmetic, as the TOSA
specification defines it, is the arithmetic of the project's reference
(`torchmcu.reference`, CMSIS-NN's), bit for bit:

    CONV2D_S8            CONV2D (input_zp, weight_zp 0, int32 bias) -> RESCALE -> CLAMP
    DEPTHWISE_CONV2D_S8  DEPTHWISE_CONV2D (weights [kh, kw, C, M]) -> RESCALE -> CLAMP
    LINEAR_S8            RESHAPE to [B, 1, 1, IC] -> CONV2D 1x1 (the folded bias, input_zp 0)
                         -> RESCALE -> CLAMP -> RESHAPE
    ADD_S8               per input: RESCALE (x - zp) * 2^20, RESCALE (multiplier, shift);
                         ADD (int32) -> RESCALE -> CLAMP  (TFLite's chain)
    AVG_POOL2D_S8        DEPTHWISE_CONV2D with every weight 4 (int32 sum * 4) -> RESCALE
                         that divides exactly (see avg_pool_rescale) -> CLAMP
    MAX_POOL2D_S8        MAX_POOL2D -> CLAMP
    CLAMP_S8             CLAMP
    LUT_S8               TABLE
    PERMUTE, PAD, CONCAT TRANSPOSE, PAD, CONCAT (int8 only)
    aliases (reshape, flatten)   RESHAPE

The bit-exactness question is RESCALE's. CMSIS-NN's arm_nn_requantize with a
multiplier m in [2^30, 2^31) and shift s <= 0 rounds twice: half up in the
doubling high multiply (x * m + 2^30) >> 31, then half away from zero in the
division by 2^-s. TOSA's RESCALE with rounding_mode DOUBLE_ROUND and shift
31 - s adds 2^(30 - s) + 2^30 (x >= 0) or 2^(30 - s) - 2^30 (x < 0) before a
single shift by 31 - s: nesting the two floor divisions shows the two are the
same integer for every int32 x (and for s > 0, both are one rounding half up
at 31 - s). So the per-channel (multiplier, shift) pairs go into RESCALE as
they are, with shift' = 31 - shift, which TOSA allows for shift <= 29. TOSA
also requires |x| < 2^(shift' - 1): any int32 for shift < 0, |x| < 2^30 for
shift 0; tosa_reference_model reports a graph breaking that as unpredictable,
and the backend's numerics check then keeps the op on the CPU.

Windows that run past the input's bottom or right edge (symmetric padding
that TOSA's exact output-size rule does not need) are cropped with SLICE.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

import numpy as np

from ...ir import PGraph, POp, PTensor

# The positions of an op's activation operands; the rest are constants or
# CMSIS-NN scratch (a planned buffer no NPU op reads).
DATA_INPUTS: dict[str, tuple[int, ...]] = {
    "CONV2D_S8": (0,), "DEPTHWISE_CONV2D_S8": (0,), "LINEAR_S8": (0,), "ADD_S8": (0, 1),
    "AVG_POOL2D_S8": (0,), "MAX_POOL2D_S8": (0,), "CLAMP_S8": (0,), "LUT_S8": (0,),
    "PERMUTE": (0,), "PAD": (0,),
}

# Ops with no exact TOSA form here, and why (reported for CPU fallbacks).
NO_TOSA_FORM = {
    "SOFTMAX_S8": "int8 softmax has no TOSA operator; its exp/reciprocal fixed-point steps would need "
                  "TABLE/CLZ chains that do not reproduce CMSIS-NN's bits",
    "QUANTIZE_S8": "float32 input: the NPU takes TOSA's integer profile (PRO-INT) only",
    "DEQUANTIZE_S8": "float32 output: the NPU takes TOSA's integer profile (PRO-INT) only",
    "MUL_S8": "no TOSA lowering implemented yet",
    "BATCH_MATMUL_S8": "no TOSA lowering implemented yet",
    "MAXIMUM_S8": "TOSA MAXIMUM is int32 only",
    "MINIMUM_S8": "TOSA MINIMUM is int32 only",
    "COPY": "a plain copy stays on the CPU",
}

ADD_LEFT_SHIFT = 20  # reference.add_params
AVG_POOL_WEIGHT = 4  # see avg_pool_rescale


class LoweringError(Exception):
    """An op (index into the program graph) has no exact TOSA form here."""

    def __init__(self, op_index: int, reason: str) -> None:
        super().__init__(reason)
        self.op_index = op_index
        self.reason = reason


@dataclass
class TosaGraph:
    data: bytes  # the TOSA 1.0 flatbuffer (file identifier "TOSA")
    ops: list[int]  # program-graph op indices, in order
    inputs: list[int]  # program-graph tensor ids, in the graph's placeholder order
    outputs: list[int]  # program-graph tensor ids, in the graph's output order
    tosa_ops: dict[str, int] = field(default_factory=dict)  # TOSA operator histogram


def tosa_serializer() -> Any:
    """The tosa-tools serializer module (import errors name the package)."""
    try:
        import tosa_serializer as ts
    except ImportError as e:  # pragma: no cover - depends on the machine
        raise ImportError(f"the Ethos-U backend needs the tosa-tools package (pip install tosa-tools): {e}") from e
    return ts


def avg_pool_rescale(count: int) -> tuple[int, int]:
    """(multiplier, TOSA shift) with which RESCALE (DOUBLE_ROUND) of 4 * s
    gives the reference's average round_half_away(s / count) for every sum s
    of `count` int8 values.

    With 2^r the smallest power of two >= 2 * count, m = ceil(2^(31 + r) /
    (4 * count)) stays below 2^31, the first rounding (at 2^31) moves the
    quotient by less than 1/(2 * count), which never crosses a rounding
    boundary of s / count, and exact ties (s / count = k + 1/2, an integer at
    2^r) are resolved away from zero by DOUBLE_ROUND's second rounding.
    tests/test_ethos_u.py checks it over every sum for many counts."""
    r = (2 * count - 1).bit_length()
    m = -(-(1 << (31 + r)) // (AVG_POOL_WEIGHT * count))
    return m, 31 + r


def _tail_pad(size: int, out: int, kernel: int, stride: int, dilation: int, pad_before: int) -> int:
    """The padding after the input that makes TOSA's output size exact:
    out = (size - 1 + before + after - (kernel - 1) * dilation) / stride + 1.
    Negative: that many trailing rows/columns are never read."""
    return (out - 1) * stride + (kernel - 1) * dilation + 1 - size - pad_before


class _Builder:
    def __init__(self, pg: PGraph, ops: list[int]) -> None:
        self.ts = tosa_serializer()
        self.pg = pg
        self.ops = ops
        # TOSA 1.0 (not the serializer's default 1.1 draft): the version Vela reads.
        self.ser = self.ts.TosaSerializer("", self.ts.ConstMode.EMBED, 1, 0, 0, False)
        self.values: dict[int, tuple[Any, tuple[int, ...]]] = {}  # buffer -> (TOSA tensor, dims)
        self.reshaped: dict[tuple[int, tuple[int, ...]], Any] = {}
        self.histogram: Counter[str] = Counter()
        self.names = 0
        self.op_index = -1

    # -- tensors -----------------------------------------------------------------------------
    def _name(self, stem: str) -> str:
        self.names += 1
        return f"{stem}_{self.names}"

    def const(self, data: np.ndarray, dtype: str) -> Any:
        data = np.ascontiguousarray(data)
        return self.ser.addConst(list(data.shape), getattr(self.ts.DType, dtype), data, self._name("c"))

    def scalar(self, value: int, dtype: str) -> Any:
        np_dtype = {"INT8": np.int8, "INT32": np.int32}[dtype]
        return self.const(np.array([value], np_dtype), dtype)

    def shape(self, values: list[int]) -> Any:
        return self.ser.addConst([len(values)], self.ts.DType.SHAPE, np.array(values, np.int64), self._name("s"))

    def tmp(self, dims: tuple[int, ...] | list[int], dtype: str = "INT8") -> Any:
        return self.ser.addIntermediate(list(dims), getattr(self.ts.DType, dtype))

    def emit(self, op: str, inputs: list[Any], output: Any, attr: Any = None) -> Any:
        if attr is None:
            attr = self.ts.TosaSerializerAttribute()
        self.ser.addOperator(getattr(self.ts.Op, op), [t.name for t in inputs], [output.name], attr)
        self.histogram[op] += 1
        return output

    def attr(self, kind: str, *args: Any) -> Any:
        a = self.ts.TosaSerializerAttribute()
        getattr(a, f"{kind}Attribute")(*args)
        return a

    # -- program-graph values ----------------------------------------------------------------
    def check_tensor(self, tid: int) -> tuple[PTensor, int]:
        """The tensor and its buffer, when the NPU path can take it."""
        t = self.pg.tensors[tid]
        if t.dtype != "I8":
            self.fail(f"tensor {t.name} is {t.dtype}; the NPU path takes int8 activations")
        if t.buffer is None or t.offset != 0 or t.nbytes != self.pg.buffers[t.buffer]:
            self.fail(f"tensor {t.name} is a slice of a larger buffer")
        assert t.buffer is not None
        return t, t.buffer

    def value(self, tid: int) -> Any:
        """Tensor `tid` as a TOSA tensor, reshaping an alias of a value already
        in the graph; a partition input becomes a placeholder."""
        t, buffer = self.check_tensor(tid)
        if buffer not in self.values:
            self.values[buffer] = (self.ser.addPlaceholder(list(t.dims), self.ts.DType.INT8), t.dims)
            self.placeholders.append(tid)
        tensor, dims = self.values[buffer]
        if dims == t.dims:
            return tensor
        key = (buffer, t.dims)
        if key not in self.reshaped:
            self.reshaped[key] = self.reshape(tensor, t.dims)
        return self.reshaped[key]

    def define(self, tid: int, tensor: Any) -> None:
        t, buffer = self.check_tensor(tid)
        self.values[buffer] = (tensor, t.dims)

    def fail(self, reason: str) -> NoReturn:
        raise LoweringError(self.op_index, reason)

    # -- common chains -------------------------------------------------------------------------
    def reshape(self, x: Any, dims: tuple[int, ...] | list[int], dtype: str = "INT8") -> Any:
        return self.emit("RESHAPE", [x, self.shape(list(dims))], self.tmp(dims, dtype), self.attr("Reshape"))

    def slice(self, x: Any, start: list[int], size: list[int]) -> Any:
        return self.emit("SLICE", [x, self.shape(start), self.shape(size)], self.tmp(size), self.attr("Slice"))

    def rescale(self, x: Any, dims: tuple[int, ...], multiplier: np.ndarray, shift: np.ndarray, *,
                in_dtype: str, out_dtype: str, in_zp: int = 0, out_zp: int = 0, double_round: bool = True) -> Any:
        """RESCALE with the reference's (multiplier, shift) pairs: real =
        m * 2^(shift - 31), TOSA's shift = 31 - shift."""
        m = np.asarray(multiplier, np.int64).ravel()
        s = 31 - np.asarray(shift, np.int64).ravel()
        if m.min() < 0 or m.max() >= 1 << 31:
            self.fail(f"requantization multiplier outside [0, 2^31): {int(m.min())}..{int(m.max())}")
        if s.min() < 2 or s.max() > 62:
            self.fail(f"requantization shift {31 - int(s.min())} is outside TOSA RESCALE's range (<= 29)")
        mode = self.ts.RoundingMode.DOUBLE_ROUND if double_round else self.ts.RoundingMode.SINGLE_ROUND
        attr = self.attr("Rescale", True, mode, m.size > 1, False, False)
        ins = [x, self.const(m.astype(np.int32), "INT32"), self.const(s.astype(np.int8), "INT8"),
               self.scalar(in_zp, in_dtype), self.scalar(out_zp, out_dtype)]
        return self.emit("RESCALE", ins, self.tmp(dims, out_dtype), attr)

    def clamp(self, x: Any, dims: tuple[int, ...], lo: int, hi: int) -> Any:
        if (lo, hi) == (-128, 127):
            return x
        attr = self.attr("Clamp", list(np.array([lo], np.int8).tobytes()), list(np.array([hi], np.int8).tobytes()),
                         self.ts.NanPropagationMode.PROPAGATE)
        return self.emit("CLAMP", [x], self.tmp(dims), attr)

    def crop(self, x: Any, dims: tuple[int, ...], rows: int, cols: int) -> tuple[Any, tuple[int, ...]]:
        """The first `rows` x `cols` of an NHWC tensor (a window's unread tail)."""
        n, h, w, c = dims
        if (rows, cols) == (h, w):
            return x, dims
        return self.slice(x, [0, 0, 0, 0], [n, rows, cols, c]), (n, rows, cols, c)

    def window(self, x: Any, dims: tuple[int, ...], out: tuple[int, ...], kernel: tuple[int, int],
               stride: tuple[int, int], dilation: tuple[int, int], pad: tuple[int, int]
               ) -> tuple[Any, tuple[int, ...], list[int]]:
        """The input cropped to what the windows read, and TOSA's
        [top, bottom, left, right] padding for it."""
        h, w = dims[1], dims[2]
        bottom = _tail_pad(h, out[1], kernel[0], stride[0], dilation[0], pad[0])
        right = _tail_pad(w, out[2], kernel[1], stride[1], dilation[1], pad[1])
        x, dims = self.crop(x, dims, h + min(bottom, 0), w + min(right, 0))
        return x, dims, [pad[0], max(bottom, 0), pad[1], max(right, 0)]

    # -- ops -----------------------------------------------------------------------------------
    def conv(self, op: POp, depthwise: bool) -> None:
        p = op.params[1] if op.params else {}
        x_t, w_t, b_t, m_t, s_t = (self.pg.tensors[i] for i in op.inputs[:5])
        y_t = self.pg.tensors[op.outputs[0]]
        x, dims = self.value(op.inputs[0]), x_t.dims
        if p.get("dilation_h", 1) < 1 or p.get("dilation_w", 1) < 1:
            self.fail("dilation must be >= 1")
        w = w_t.const
        assert w is not None and b_t.const is not None and m_t.const is not None and s_t.const is not None
        kh, kw = w.shape[1], w.shape[2]
        if not depthwise and w.shape[3] != dims[3]:
            self.fail("grouped convolution: TOSA's CONV2D has one group")
        stride, dil = (p["stride_h"], p["stride_w"]), (p["dilation_h"], p["dilation_w"])
        x, dims, pad = self.window(x, dims, y_t.dims, (kh, kw), stride, dil, (p["pad_top"], p["pad_left"]))
        zp_in = -int(p["input_offset"])
        acc_dims = y_t.dims
        attr = self.attr("DepthwiseConv2d" if depthwise else "Conv2d", pad, list(stride), list(dil), False,
                         self.ts.DType.INT32)
        if depthwise:
            c = dims[3]
            mult = int(p.get("multiplier", w.shape[3] // c))
            weights = self.const(w.reshape(kh, kw, c, mult).astype(np.int8), "INT8")
            opname = "DEPTHWISE_CONV2D"
        else:
            weights = self.const(w.astype(np.int8), "INT8")
            opname = "CONV2D"
        bias = self.const(np.asarray(b_t.const, np.int32), "INT32")
        acc = self.emit(opname, [x, weights, bias, self.scalar(zp_in, "INT8"), self.scalar(0, "INT8")],
                        self.tmp(acc_dims, "INT32"), attr)
        y = self.rescale(acc, acc_dims, m_t.const, s_t.const, in_dtype="INT32", out_dtype="INT8",
                         out_zp=int(p["output_offset"]))
        self.define(op.outputs[0], self.clamp(y, acc_dims, int(p["act_min"]), int(p["act_max"])))

    def linear(self, op: POp) -> None:
        p = op.params[1] if op.params else {}
        x_t, w_t, b_t, m_t, s_t = (self.pg.tensors[i] for i in op.inputs[:5])
        y_t = self.pg.tensors[op.outputs[0]]
        w = w_t.const
        assert w is not None and b_t.const is not None and m_t.const is not None and s_t.const is not None
        oc, ic = w.shape
        batch = int(np.prod(x_t.dims)) // ic
        x = self.reshape(self.value(op.inputs[0]), (batch, 1, 1, ic))
        attr = self.attr("Conv2d", [0, 0, 0, 0], [1, 1], [1, 1], False, self.ts.DType.INT32)
        # The bias already holds input_offset * sum(w) (reference.fold_linear_bias): input_zp 0.
        ins = [x, self.const(w.reshape(oc, 1, 1, ic).astype(np.int8), "INT8"),
               self.const(np.asarray(b_t.const, np.int32), "INT32"), self.scalar(0, "INT8"), self.scalar(0, "INT8")]
        dims = (batch, 1, 1, oc)
        acc = self.emit("CONV2D", ins, self.tmp(dims, "INT32"), attr)
        y = self.rescale(acc, dims, m_t.const, s_t.const, in_dtype="INT32", out_dtype="INT8",
                         out_zp=int(p["output_offset"]))
        y = self.clamp(y, dims, int(p["act_min"]), int(p["act_max"]))
        self.define(op.outputs[0], self.reshape(y, y_t.dims))

    def add(self, op: POp) -> None:
        p = op.params[1] if op.params else {}
        if p.get("left_shift", ADD_LEFT_SHIFT) != ADD_LEFT_SHIFT:
            self.fail(f"left_shift {p['left_shift']} (the lowering assumes {ADD_LEFT_SHIFT})")
        y_t = self.pg.tensors[op.outputs[0]]
        terms = []
        for k, tid in enumerate(op.inputs[:2], start=1):
            dims = self.pg.tensors[tid].dims
            # (x - zp) * 2^20 exactly: multiplier 2^30, shift 10, nothing to round.
            wide = self.rescale(self.value(tid), dims, np.array([1 << 30]), np.array([31 - 10]), in_dtype="INT8",
                                out_dtype="INT32", in_zp=-int(p[f"input{k}_offset"]), double_round=False)
            terms.append(self.rescale(wide, dims, np.array([p[f"input{k}_multiplier"]]),
                                      np.array([p[f"input{k}_shift"]]), in_dtype="INT32", out_dtype="INT32"))
        total = self.emit("ADD", terms, self.tmp(y_t.dims, "INT32"), self.attr("Add"))
        y = self.rescale(total, y_t.dims, np.array([p["output_multiplier"]]), np.array([p["output_shift"]]),
                         in_dtype="INT32", out_dtype="INT8", out_zp=int(p["output_offset"]))
        self.define(op.outputs[0], self.clamp(y, y_t.dims, int(p["act_min"]), int(p["act_max"])))

    def avg_pool(self, op: POp) -> None:
        p = op.params[1] if op.params else {}
        x_t, y_t = self.pg.tensors[op.inputs[0]], self.pg.tensors[op.outputs[0]]
        kh, kw, sh, sw = p["kernel_h"], p["kernel_w"], p["stride_h"], p["stride_w"]
        _, h, w, c = x_t.dims
        _, oh, ow, _ = y_t.dims
        rows, cols = (oh - 1) * sh + kh, (ow - 1) * sw + kw
        if p["pad_top"] or p["pad_left"] or rows > h or cols > w:
            self.fail("padded average pool: the divisor changes at the borders, no single exact RESCALE")
        if p.get("divisor_override"):
            self.fail("divisor_override: the RESCALE divides by the window")
        if p.get("round_half_even"):
            self.fail("the mean rounded half to even (PyTorch's): TOSA's RESCALE rounds ties up or away from zero")
        x, _ = self.crop(self.value(op.inputs[0]), x_t.dims, rows, cols)
        if (oh, ow) == (1, 1):  # one window: any stride reads the same taps; 1 suits the NPU
            sh = sw = 1
        attr = self.attr("DepthwiseConv2d", [0, 0, 0, 0], [sh, sw], [1, 1], False, self.ts.DType.INT32)
        weights = self.const(np.full((kh, kw, c, 1), AVG_POOL_WEIGHT, np.int8), "INT8")
        ins = [x, weights, self.const(np.zeros(c, np.int32), "INT32"), self.scalar(0, "INT8"), self.scalar(0, "INT8")]
        acc = self.emit("DEPTHWISE_CONV2D", ins, self.tmp(y_t.dims, "INT32"), attr)
        m, shift = avg_pool_rescale(kh * kw)
        y = self.rescale(acc, y_t.dims, np.array([m]), np.array([31 - shift]), in_dtype="INT32", out_dtype="INT8")
        self.define(op.outputs[0], self.clamp(y, y_t.dims, int(p["act_min"]), int(p["act_max"])))

    def max_pool(self, op: POp) -> None:
        p = op.params[1] if op.params else {}
        x_t, y_t = self.pg.tensors[op.inputs[0]], self.pg.tensors[op.outputs[0]]
        kernel, stride = (p["kernel_h"], p["kernel_w"]), (p["stride_h"], p["stride_w"])
        if p.get("dilation_h", 1) != 1 or p.get("dilation_w", 1) != 1:
            self.fail("dilated max pool: TOSA's MAX_POOL2D has no dilation")
        x, _, pad = self.window(self.value(op.inputs[0]), x_t.dims, y_t.dims, kernel, stride, (1, 1),
                                   (p["pad_top"], p["pad_left"]))
        if pad[0] >= kernel[0] or pad[1] >= kernel[0] or pad[2] >= kernel[1] or pad[3] >= kernel[1]:
            self.fail("max pool padding as large as the kernel (a window of padding only)")
        attr = self.attr("MaxPool2d", list(kernel), list(stride), pad, self.ts.NanPropagationMode.PROPAGATE)
        y = self.emit("MAX_POOL2D", [x], self.tmp(y_t.dims), attr)
        self.define(op.outputs[0], self.clamp(y, y_t.dims, int(p["act_min"]), int(p["act_max"])))

    def clamp_op(self, op: POp) -> None:
        p = op.params[1] if op.params else {}
        dims = self.pg.tensors[op.outputs[0]].dims
        x = self.value(op.inputs[0])
        y = self.clamp(x, dims, int(p["min"]), int(p["max"]))
        if y is x:  # clamp to the full range: a copy
            y = self.emit("IDENTITY", [x], self.tmp(dims), self.attr("Identity"))
        self.define(op.outputs[0], y)

    def lut(self, op: POp) -> None:
        table = self.pg.tensors[op.inputs[1]].const
        assert table is not None
        dims = self.pg.tensors[op.outputs[0]].dims
        y = self.emit("TABLE", [self.value(op.inputs[0]), self.const(np.asarray(table, np.int8), "INT8")],
                      self.tmp(dims), self.attr("Table"))
        self.define(op.outputs[0], y)

    def permute(self, op: POp) -> None:
        perm = list(op.params[1]["perm"]) if op.params else []
        dims = self.pg.tensors[op.outputs[0]].dims
        y = self.emit("TRANSPOSE", [self.value(op.inputs[0])], self.tmp(dims), self.attr("Transpose", perm))
        self.define(op.outputs[0], y)

    def pad(self, op: POp) -> None:
        p = op.params[1] if op.params else {}
        if min(p["before"]) < 0 or min(p["after"]) < 0:
            self.fail("negative padding (a crop)")
        dims = self.pg.tensors[op.outputs[0]].dims
        padding = [v for pair in zip(p["before"], p["after"]) for v in pair]
        ins = [self.value(op.inputs[0]), self.shape(padding), self.scalar(int(p.get("qvalue", 0)), "INT8")]
        self.define(op.outputs[0], self.emit("PAD", ins, self.tmp(dims), self.attr("Pad")))

    def concat(self, op: POp) -> None:
        axis = int(op.params[1]["axis"]) if op.params else 0
        dims = self.pg.tensors[op.outputs[0]].dims
        ins = [self.value(t) for t in op.inputs]
        self.define(op.outputs[0], self.emit("CONCAT", ins, self.tmp(dims), self.attr("Concat", axis)))

    def lower(self, outputs: list[int]) -> TosaGraph:
        self.placeholders: list[int] = []
        for i in self.ops:
            self.op_index = i
            op = self.pg.ops[i]
            handler = HANDLERS.get(op.code)
            if handler is None:
                self.fail(NO_TOSA_FORM.get(op.code, f"{op.code} has no TOSA lowering"))
            for t in op.outputs:
                self.check_tensor(t)
            handler(self, op)
        self.op_index = -1
        for tid in outputs:
            out, buffer = self.check_tensor(tid)
            tensor, dims = self.values[buffer]
            if dims != out.dims:
                tensor = self.reshape(tensor, out.dims)
            self.ser.addOutputTensor(tensor)
        return TosaGraph(bytes(self.ser.serialize()), list(self.ops), list(self.placeholders), list(outputs),
                         dict(self.histogram))


HANDLERS: dict[str, Callable[[_Builder, POp], None]] = {
    "CONV2D_S8": lambda b, op: b.conv(op, depthwise=False),
    "DEPTHWISE_CONV2D_S8": lambda b, op: b.conv(op, depthwise=True),
    "LINEAR_S8": lambda b, op: b.linear(op),
    "ADD_S8": lambda b, op: b.add(op),
    "AVG_POOL2D_S8": lambda b, op: b.avg_pool(op),
    "MAX_POOL2D_S8": lambda b, op: b.max_pool(op),
    "CLAMP_S8": lambda b, op: b.clamp_op(op),
    "LUT_S8": lambda b, op: b.lut(op),
    "PERMUTE": lambda b, op: b.permute(op),
    "PAD": lambda b, op: b.pad(op),
    "CONCAT": lambda b, op: b.concat(op),
}


def lower(pg: PGraph, ops: list[int], outputs: list[int]) -> TosaGraph:
    """The TOSA graph of `ops` (program-graph op indices in program order)
    whose results `outputs` (tensor ids produced by those ops) leave it.
    Raises LoweringError naming the first op without an exact form."""
    if not ops:
        raise ValueError("a TOSA graph needs at least one op")
    return _Builder(pg, ops).lower(outputs)


def check_op(pg: PGraph, index: int) -> str | None:
    """Why op `index` cannot be lowered on its own (None: it can)."""
    op = pg.ops[index]
    try:
        lower(pg, [index], list(op.outputs[:1]))
    except LoweringError as e:
        return e.reason
    return None
