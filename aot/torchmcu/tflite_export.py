"""A compiled int8 program (model.pte) as a TensorFlow Lite model (.tflite),
and TensorFlow Lite Micro as an independent oracle for it.

The program's tensors keep their physical layouts: 4-D activations are NHWC,
which is TFLite's layout, conv weights OHWI, depthwise weights [1, kh, kw,
C*m] and linear weights [out, in], as TFLite wants them. Every int8 op maps to
the builtin operator with the same integer arithmetic:

    CONV2D_S8            CONV_2D (PAD first where the padding is not SAME/VALID)
    DEPTHWISE_CONV2D_S8  DEPTHWISE_CONV_2D (idem)
    LINEAR_S8            FULLY_CONNECTED (bias without the folded input offset)
    ADD_S8, MUL_S8       ADD, MUL
    MAX_POOL2D_S8        MAX_POOL_2D (PADV2 with -128 first where needed)
    AVG_POOL2D_S8        AVERAGE_POOL_2D (SAME or VALID only)
    SOFTMAX_S8           SOFTMAX (beta 1)
    CLAMP_S8             RELU / RELU6 where the bounds are theirs, else MAXIMUM + MINIMUM
    LUT_S8               LOGISTIC / TANH when the table is the sigmoid's / tanh's (a hardswish
                         table has no TFLite form: TFLite's int8 HARD_SWISH is a fixed-point
                         approximation that differs from the float table by 1 LSB on a few inputs)
    MAXIMUM_S8, MINIMUM_S8       MAXIMUM, MINIMUM (one shared quantization)
    BATCH_MATMUL_S8      BATCH_MATMUL (adj_x = adj_y = false; MAXIMUM/MINIMUM after for a clamp)
    QUANTIZE_S8, DEQUANTIZE_S8   QUANTIZE, DEQUANTIZE
    PERMUTE, CONCAT, COPY        TRANSPOSE, CONCATENATION, RESHAPE
    PAD                  PAD where the value is the zero point (int8) or 0 (float), else PADV2
    aliases (flatten, reshape: a second tensor over the same bytes)   RESHAPE

Fused activation ranges become TFLite's fused activations when
CalculateActivationRangeQuantized gives the same bounds, else MAXIMUM/MINIMUM
ops follow. Requantization multipliers and shifts, ADD/MUL/SOFTMAX parameters
are not exported: TFLite derives them from the tensors' scales, which
`verify_derived` checks gives the program's values (and TFLM then the same
bits, tests/test_oracle.py). Weight scales come from the weight tensor's
channel_scales, or, in programs written before those existed, are recovered
from the multipliers (then `verify_derived` tells whether TFLite would
recompute the same ones).

Float fallback ops inside an int8 program become float TFLite ops where there
is one with the same meaning; others raise ExportError naming the op.

a16w8 programs (int16 activations) map the same way to TFLite's int16x8
operators: CONV2D_S16, DEPTHWISE_CONV2D_S16 and LINEAR_S16 to CONV_2D,
DEPTHWISE_CONV_2D and FULLY_CONNECTED with int16 activations, int8 weights
and int64 biases; ADD_S16, MUL_S16, MAX_POOL2D_S16, AVG_POOL2D_S16,
QUANTIZE_S16, DEQUANTIZE_S16 to ADD, MUL, MAX_POOL_2D, AVERAGE_POOL_2D,
QUANTIZE, DEQUANTIZE.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from . import reference as ref
from . import schema
from .errors import TorchMCUError
from .tflite_writer import _DTYPES, TFLiteWriter

NP = {"F32": np.float32, "I8": np.int8, "I16": np.int16, "I32": np.int32, "U8": np.uint8, "I64": np.int64}
TFL_DTYPE = {"F32": "float32", "I8": "int8", "I16": "int16", "I32": "int32", "U8": "uint8", "I64": "int64"}


class ExportError(TorchMCUError):
    """A program (or one of its ops) that has no faithful TFLite form."""


def _f32(x: float) -> float:
    return float(np.float32(x))


def _round_away(x: float) -> int:
    return int(math.copysign(math.floor(abs(x) + 0.5), x))


# TFLite's fused activations for int8 outputs: CalculateActivationRangeQuantized
# (tensorflow/lite/kernels/kernel_util.cc), zero_point + TfLiteRound(f / scale)
# in float32, clamped to int8.
def _tflite_act_range(act: str, scale: float, zp: int, lo: int = -128, hi: int = 127) -> tuple[int, int]:
    def q(f: float) -> int:
        return zp + _round_away(float(np.float32(f) / np.float32(scale)))

    if act == "NONE":
        return lo, hi
    if act == "RELU":
        return max(lo, q(0.0)), hi
    if act == "RELU6":
        return max(lo, q(0.0)), min(hi, q(6.0))
    if act == "RELU_N1_TO_1":
        return max(lo, q(-1.0)), min(hi, q(1.0))
    raise ValueError(act)


_FLOAT_ACTS = {(-math.inf, math.inf): "NONE", (0.0, math.inf): "RELU", (0.0, 6.0): "RELU6",
               (-1.0, 1.0): "RELU_N1_TO_1"}


class _Program:
    """The decoded program with its constants readable."""

    def __init__(self, pte: bytes) -> None:
        self.pte = bytes(pte)
        self.prog = schema.decode(self.pte)
        self.tensors = self.prog["tensors"]
        self.ops = self.prog["ops"]
        self.seg = self.prog["constant_offset"]

    def const(self, tid: int) -> np.ndarray:
        """A constant's values (an int4 tensor's unpacked to int8)."""
        t = self.tensors[tid]
        if t["region"] != "CONSTANT":
            raise ExportError(f"tensor t{tid} ({t['name']}) is not a constant")
        if t["dtype"] == "I4":
            count = int(np.prod(t["dims"], dtype=np.int64))
            return ref.unpack_int4(self.packed(tid), count).astype(np.int8).reshape(t["dims"])
        dtype = NP[t["dtype"]]
        count = t["nbytes"] // np.dtype(dtype).itemsize
        return np.frombuffer(self.pte, dtype=dtype, count=count,
                             offset=self.seg + t["offset"]).reshape(t["dims"]).copy()

    def packed(self, tid: int) -> np.ndarray:
        """An int4 constant's bytes as stored: two values per byte, low nibble first."""
        t = self.tensors[tid]
        return np.frombuffer(self.pte, dtype=np.uint8, count=t["nbytes"], offset=self.seg + t["offset"]).copy()

    def is_const(self, tid: int) -> bool:
        return tid >= 0 and self.tensors[tid]["region"] == "CONSTANT"

    def qparams(self, tid: int) -> tuple[float, int]:
        t = self.tensors[tid]
        return float(t["scale"]), int(t["zero_point"])

    def describe(self, index: int) -> str:
        op = self.ops[index]
        return f"op {index} {op['code']} ({op['name']})"


def weight_scales(p: _Program, op_index: int) -> np.ndarray:
    """Per-output-channel weight scales (float32) of a conv/depthwise/linear
    int8 op: the weight tensor's channel_scales, or, when the program has
    none, recovered from the requantization operands: multiplier * 2^(shift -
    31) = s_in * s_w / s_out (inexact: see verify_derived)."""
    op = p.ops[op_index]
    w = p.tensors[op["inputs"][1]]
    if w.get("channel_scales"):
        return np.asarray(w["channel_scales"], np.float32)
    mult = p.const(op["inputs"][3]).astype(np.float64)
    shift = p.const(op["inputs"][4]).astype(np.float64)
    s_in, _ = p.qparams(op["inputs"][0])
    s_out, _ = p.qparams(op["outputs"][0])
    return (mult * np.exp2(shift - 31) * _f32(s_out) / _f32(s_in)).astype(np.float32)


def verify_derived(pte: bytes) -> list[str]:
    """The derived data of the int8 ops (requantization multipliers/shifts,
    ADD/MUL/SOFTMAX parameters, input/output offsets) against what TFLite
    computes from the exported scales and zero points. Returns the
    discrepancies, one line each (empty: TFLite derives exactly the program's
    parameters)."""
    p = _Program(pte)
    problems = []
    for i, op in enumerate(p.ops):
        code = op["code"]
        params = op["params"][1] if op["params"] else {}
        ins, out = op["inputs"], op["outputs"][0]
        if code in ("CONV2D_S8", "DEPTHWISE_CONV2D_S8", "LINEAR_S8", "CONV2D_S16", "DEPTHWISE_CONV2D_S16",
                    "LINEAR_S16", "CONV2D_S4", "DEPTHWISE_CONV2D_S4", "LINEAR_S4"):
            s_in, zp_in = p.qparams(ins[0])
            s_out, zp_out = p.qparams(out)
            m, s = ref.conv_requant(s_in, weight_scales(p, i), s_out)
            if not (np.array_equal(m, p.const(ins[3]).ravel()) and np.array_equal(s, p.const(ins[4]).ravel())):
                bad = int(np.sum((m != p.const(ins[3]).ravel()) | (s != p.const(ins[4]).ravel())))
                problems.append(f"{p.describe(i)}: TFLite's multipliers differ in {bad} channel(s)")
            if params["input_offset"] != -zp_in or params["output_offset"] != zp_out:
                problems.append(f"{p.describe(i)}: offsets {params['input_offset']}, {params['output_offset']} "
                                f"but tensor zero points {zp_in}, {zp_out}")
        elif code in ("ADD_S8", "MUL_S8", "ADD_S16", "MUL_S16"):
            (s1, z1), (s2, z2), (so, zo) = p.qparams(ins[0]), p.qparams(ins[1]), p.qparams(out)
            if code == "ADD_S16":
                exp = ref.add_params_s16(s1, s2, so, params["act_min"], params["act_max"])
            else:
                fn = ref.add_params if code == "ADD_S8" else ref.mul_params
                exp = fn(s1, z1, s2, z2, so, zo, params["act_min"], params["act_max"])
            diff = {k: (params[k], v) for k, v in exp.items() if params.get(k) != v}
            if diff:
                problems.append(f"{p.describe(i)}: parameters differ from TFLite's: {diff}")
        elif code == "SOFTMAX_S8":
            exp = ref.softmax_params(p.qparams(ins[0])[0])
            diff = {k: (params[k], v) for k, v in exp.items() if params.get(k) != v}
            if diff:
                problems.append(f"{p.describe(i)}: parameters differ from TFLite's: {diff}")
            if p.qparams(out) != (1.0 / 256, -128):
                problems.append(f"{p.describe(i)}: output quantization {p.qparams(out)}, TFLite's is (1/256, -128)")
        elif code == "BATCH_MATMUL_S8":
            (s1, z1), (s2, z2), (so, zo) = p.qparams(ins[0]), p.qparams(ins[1]), p.qparams(out)
            exp = ref.batch_matmul_params(s1, z1, s2, z2, so, zo, params["act_min"], params["act_max"])
            diff = {k: (params[k], v) for k, v in exp.items() if params.get(k) != v}
            if diff:
                problems.append(f"{p.describe(i)}: parameters differ from TFLite's: {diff}")
        elif code in ("MAX_POOL2D_S8", "AVG_POOL2D_S8", "CLAMP_S8", "CONCAT", "PERMUTE", "COPY", "PAD",
                      "MAXIMUM_S8", "MINIMUM_S8", "MAX_POOL2D_S16", "AVG_POOL2D_S16"):
            if p.tensors[out]["dtype"] in ("I8", "I16"):
                for t in ins:
                    if t >= 0 and p.qparams(t) != p.qparams(out):
                        problems.append(f"{p.describe(i)}: input t{t} quantization {p.qparams(t)} differs from "
                                        f"the output's {p.qparams(out)} (TFLite would requantize)")
    return problems


# --------------------------------------------------------------------------- the writer


class _Exporter:
    def __init__(self, p: _Program) -> None:
        self.p = p
        self.w = TFLiteWriter(description="torchmcu program")
        self.tfl: dict[int, int] = {}  # program tensor -> TFLite tensor

    # -- tensors ------------------------------------------------------------------------------
    def new_tensor(self, tid: int, dims=None, name: str | None = None) -> int:
        """A TFLite tensor shaped and quantized as program tensor tid
        (without data)."""
        t = self.p.tensors[tid]
        scale = zp = None
        if t["dtype"] in ("I8", "I16", "U8") and t["scale"]:
            scale, zp = float(t["scale"]), int(t["zero_point"])
        return self.w.add_tensor(name or t["name"], dims or t["dims"], TFL_DTYPE[t["dtype"]], scale, zp)

    def like(self, tid: int, suffix: str) -> int:
        """An intermediate tensor quantized as TFLite tensor tid."""
        t = self.w._tensors[tid]
        quant = t["quant"]
        dtype = self.dtype_of(tid)
        return self.w.add_tensor(f"{t['name']}_{suffix}", t["shape"], dtype,
                                 None if quant is None else quant[0], None if quant is None else quant[1])

    def dtype_of(self, tid: int) -> str:
        code = self.w._tensors[tid]["type"]
        return next(k for k, v in _DTYPES.items() if v[0] == code)

    def const_tensor(self, name: str, data: np.ndarray, dtype: str, scale=None, zp=None, qdim=None) -> int:
        data = np.asarray(data)
        return self.w.add_tensor(name, data.shape or (1,), dtype, scale, zp, data=data, quantized_dimension=qdim)

    def constant(self, tid: int) -> int:
        t = self.p.tensors[tid]
        scale = zp = None
        if t["dtype"] in ("I8", "U8", "I16") and t["scale"]:
            scale, zp = float(t["scale"]), int(t["zero_point"])
        return self.const_tensor(t["name"], self.p.const(tid), TFL_DTYPE[t["dtype"]], scale, zp)

    def weights(self, tid: int, values: np.ndarray, scales: np.ndarray, qdim: int, int4: bool = True) -> int:
        """A conv/depthwise/linear weight tensor, per-channel symmetric: int8,
        or TFLite's packed INT4 (the program's own bytes: the same packing)
        for the W4A8 ops when `int4`."""
        t = self.p.tensors[tid]
        zps = [0] * len(scales)
        if t["dtype"] == "I4" and int4:
            return self.w.add_tensor(t["name"], values.shape, "int4", scales, zps, data=self.p.packed(tid),
                                     quantized_dimension=qdim)
        return self.const_tensor(t["name"], values, "int8", scales, zps, qdim)

    def int_vector(self, name: str, values) -> int:
        return self.const_tensor(name, np.asarray(values, np.int32), "int32")

    # -- helpers ------------------------------------------------------------------------------
    def fused_act(self, lo: int, hi: int, out_tid: int, allowed=("NONE", "RELU", "RELU6")) -> tuple[str, tuple]:
        """The fused activation giving int8 bounds [lo, hi] at the output's
        quantization, or NONE and the bounds a MAXIMUM/MINIMUM pair must
        apply afterwards."""
        scale, zp = self.p.qparams(out_tid)
        limits = (-32768, 32767) if self.p.tensors[out_tid]["dtype"] == "I16" else (-128, 127)
        for act in allowed:
            if _tflite_act_range(act, scale, zp, *limits) == (lo, hi):
                return act, ()
        return "NONE", (lo, hi)

    def float_act(self, p: dict, lo_key="act_min", hi_key="act_max") -> tuple[str, tuple]:
        lo, hi = float(p.get(lo_key, -math.inf)), float(p.get(hi_key, math.inf))
        act = _FLOAT_ACTS.get((lo, hi))
        if act in ("NONE", "RELU", "RELU6"):
            return act, ()
        return "NONE", (lo, hi)

    def with_clamp(self, emit: Callable[[int], None], out: int, bounds: tuple, dtype: str) -> None:
        """emit(target) writes the op into target: `out`, or with bounds
        (lo, hi) an intermediate that MAXIMUM/MINIMUM clamp into `out`."""
        if not bounds:
            emit(out)
            return
        mid = self.like(out, "unclamped")
        emit(mid)
        self.clamp(mid, out, bounds, dtype)

    def clamp(self, src: int, out: int, bounds: tuple, dtype: str) -> None:
        """out = min(max(src, lo), hi) on the raw values (int8: no
        requantization, src and out share the quantization); bounds that
        clamp nothing (or none) copy."""
        lo, hi = bounds if bounds else (-math.inf, math.inf)
        quant = self.w._tensors[out]["quant"]
        scale, zp = (None, None) if quant is None else (quant[0], quant[1])
        np_t = {"int8": np.int8, "int16": np.int16}.get(dtype, np.float32)
        floor, ceil = {"int8": (-128, 127), "int16": (-32768, 32767)}.get(dtype, (-math.inf, math.inf))
        cur = src
        if lo > floor:
            nxt = self.like(out, "min_clamped") if hi < ceil else out
            self.w.add_op("MAXIMUM", [cur, self.const_tensor("clamp_min", np.asarray([lo], np_t), dtype, scale, zp)],
                          [nxt])
            cur = nxt
        if hi < ceil:
            self.w.add_op("MINIMUM", [cur, self.const_tensor("clamp_max", np.asarray([hi], np_t), dtype, scale, zp)],
                          [out])
            cur = out
        if cur != out:
            shape = self.w._tensors[out]["shape"]
            self.w.add_op("RESHAPE", [cur, self.int_vector("shape", shape)], [out], {"new_shape": shape})

    @staticmethod
    def padding(in_hw, k, stride, dil, pad, out_hw) -> tuple[str, list[tuple[int, int]] | None]:
        """TFLite padding for a window op: ("SAME" | "VALID", None) when one
        of them gives the program's padding and output size, else ("VALID",
        [(top, bottom), (left, right)]) for an explicit PAD first."""
        valid = all(p == 0 and o == (i - ((kk - 1) * d + 1)) // s + 1
                    for i, kk, s, d, p, o in zip(in_hw, k, stride, dil, pad, out_hw))
        if valid:
            return "VALID", None
        same = True
        for i, kk, s, d, p, o in zip(in_hw, k, stride, dil, pad, out_hw):
            total = max((o - 1) * s + (kk - 1) * d + 1 - i, 0)
            same &= o == (i + s - 1) // s and p == total // 2
        if same:
            return "SAME", None
        pads = []
        for i, kk, s, d, p, o in zip(in_hw, k, stride, dil, pad, out_hw):
            after = max((o - 1) * s + (kk - 1) * d + 1 - i - p, 0)
            if (i + p + after - ((kk - 1) * d + 1)) // s + 1 != o:
                raise ExportError(f"padding {pad} with output {out_hw} has no TFLite form")
            pads.append((p, after))
        return "VALID", pads

    def pad(self, x: int, pads, value=None) -> int:
        """x padded in H and W: PAD (the zero point, i.e. real 0) or PADV2 with `value`."""
        t = self.w._tensors[x]
        n, h, wd, c = t["shape"]
        shape = (n, h + sum(pads[0]), wd + sum(pads[1]), c)
        quant = t["quant"]
        dtype = self.dtype_of(x)
        out = self.w.add_tensor(f"{t['name']}_padded", shape, dtype,
                                None if quant is None else quant[0], None if quant is None else quant[1])
        paddings = self.int_vector("paddings", [[0, 0], list(pads[0]), list(pads[1]), [0, 0]])
        if value is None:
            self.w.add_op("PAD", [x, paddings], [out])
        else:
            v = self.const_tensor("pad_value", np.asarray([value], np.int8 if dtype == "int8" else np.float32),
                                  dtype, None if quant is None else quant[0], None if quant is None else quant[1])
            self.w.add_op("PADV2", [x, paddings, v], [out])
        return out

    # -- ops ----------------------------------------------------------------------------------
    def emit(self, index: int, ins: list[int], out: int) -> None:
        """Program op `index` as TFLite ops reading TFLite tensors `ins`
        (-1 kept for absent operands; constants are ignored there and read
        from the program) into TFLite tensor `out`."""
        op = self.p.ops[index]
        code = op["code"]
        handler = getattr(self, f"op_{code.lower()}", None)
        if handler is None:
            raise ExportError(f"{self.p.describe(index)} has no TFLite counterpart in this exporter")
        params = op["params"][1] if op["params"] else {}
        handler(index, op, params, ins, out)

    def _conv(self, index, op, p, ins, out, depthwise: bool, quant: bool) -> None:
        P = self.p
        xt, wt, bt = op["inputs"][:3]
        x_dims, o_dims = P.tensors[xt]["dims"], P.tensors[op["outputs"][0]]["dims"]
        w = P.const(wt)
        kh, kw = w.shape[1], w.shape[2]
        if not depthwise and not quant and p.get("groups", 1) != 1:
            raise ExportError(f"{P.describe(index)}: grouped convolution (groups {p['groups']}) has no TFLite "
                              "CONV_2D form that TFLite Micro runs")
        if not depthwise and w.shape[3] != x_dims[3]:
            raise ExportError(f"{P.describe(index)}: weight input channels {w.shape[3]} != {x_dims[3]}")
        padding, pads = self.padding(x_dims[1:3], (kh, kw), (p["stride_h"], p["stride_w"]),
                                     (p["dilation_h"], p["dilation_w"]), (p["pad_top"], p["pad_left"]),
                                     o_dims[1:3])
        x = ins[0] if pads is None else self.pad(ins[0], pads)
        name = P.tensors[wt]["name"]
        if quant:
            s_in, zp_in = P.qparams(xt)
            s_w = weight_scales(P, index)
            wq = self.weights(wt, w, s_w, 3 if depthwise else 0)
            bias = None
            wide = op["code"].endswith("_S16")  # int16x8: int64 bias
            if bt >= 0:
                bias = self.const_tensor(P.tensors[bt]["name"], P.const(bt).astype(np.int64 if wide else np.int32),
                                         "int64" if wide else "int32", _f32(s_in) * s_w.astype(np.float64),
                                         [0] * len(s_w), 0)
            act, bounds = self.fused_act(p["act_min"], p["act_max"], op["outputs"][0])
            dtype = "int16" if wide else "int8"
        else:
            wq = self.const_tensor(name, w, "float32")
            bias = None if bt < 0 else self.const_tensor(P.tensors[bt]["name"], P.const(bt), "float32")
            act, bounds = self.float_act(p)
            dtype = "float32"
        opts: dict[str, Any] = dict(padding=padding, stride_h=p["stride_h"], stride_w=p["stride_w"],
                                    dilation_h_factor=p["dilation_h"], dilation_w_factor=p["dilation_w"],
                                    fused_activation_function=act)
        if depthwise:
            opts["depth_multiplier"] = p["multiplier"]
        opcode = "DEPTHWISE_CONV_2D" if depthwise else "CONV_2D"
        self.with_clamp(lambda o: self.w.add_op(opcode, [x, wq, -1 if bias is None else bias], [o], opts),
                        out, bounds, dtype)

    def op_conv2d_s8(self, index, op, p, ins, out):
        self._conv(index, op, p, ins, out, depthwise=False, quant=True)

    def op_depthwise_conv2d_s8(self, index, op, p, ins, out):
        self._conv(index, op, p, ins, out, depthwise=True, quant=True)

    op_conv2d_s16 = op_conv2d_s8
    op_depthwise_conv2d_s16 = op_depthwise_conv2d_s8
    # W4A8: the int8 ops with TFLite INT4 weights (TFLite Micro unpacks them).
    op_conv2d_s4 = op_conv2d_s8
    op_depthwise_conv2d_s4 = op_depthwise_conv2d_s8

    def op_linear_s16(self, index, op, p, ins, out):
        P = self.p
        xt, wt, bt = op["inputs"][:3]
        w = P.const(wt)
        s_in, _ = P.qparams(xt)
        s_w = weight_scales(P, index)
        wq = self.const_tensor(P.tensors[wt]["name"], w, "int8", s_w, [0] * len(s_w), 0)
        bias = np.zeros(w.shape[0], np.int64) if bt < 0 else P.const(bt).astype(np.int64)
        b = self.const_tensor(P.tensors[bt]["name"] if bt >= 0 else f"{op['name']}_bias", bias, "int64",
                              _f32(s_in) * s_w.astype(np.float64), [0] * len(s_w), 0)
        act, bounds = self.fused_act(p["act_min"], p["act_max"], op["outputs"][0])
        self.with_clamp(lambda o: self.w.add_op("FULLY_CONNECTED", [ins[0], wq, b], [o], self._fc_opts(op, act)),
                        out, bounds, "int16")

    def op_quantize_s16(self, index, op, p, ins, out):
        self.w.add_op("QUANTIZE", [ins[0]], [out])

    def op_dequantize_s16(self, index, op, p, ins, out):
        self.w.add_op("DEQUANTIZE", [ins[0]], [out])

    def op_conv2d_f32(self, index, op, p, ins, out):
        self._conv(index, op, p, ins, out, depthwise=False, quant=False)

    def op_depthwise_conv2d_f32(self, index, op, p, ins, out):
        self._conv(index, op, p, ins, out, depthwise=True, quant=False)

    def _fc_opts(self, op, act) -> dict:
        keep = len(self.p.tensors[op["outputs"][0]]["dims"]) > 2
        return dict(fused_activation_function=act, keep_num_dims=keep)

    def op_linear_s8(self, index, op, p, ins, out):
        P = self.p
        xt, wt, bt = op["inputs"][:3]
        w = P.const(wt)
        s_in, _ = P.qparams(xt)
        s_w = weight_scales(P, index)
        # TFLite Micro refuses INT4 filters in a per-channel FULLY_CONNECTED
        # (fully_connected_common.cc): LINEAR_S4's values go in widened to
        # int8, the same products.
        wq = self.weights(wt, w, s_w, 0, int4=False)
        folded = np.zeros(w.shape[0], np.int64) if bt < 0 else P.const(bt).astype(np.int64)
        # LINEAR_S8's bias has input_offset * sum(w) folded in; FULLY_CONNECTED adds the offset itself.
        bias = folded - int(p["input_offset"]) * w.astype(np.int64).sum(1)
        if bias.min() < ref.INT32_MIN or bias.max() > ref.INT32_MAX:
            raise ExportError(f"{P.describe(index)}: the unfolded bias does not fit int32")
        b = self.const_tensor(P.tensors[bt]["name"] if bt >= 0 else f"{op['name']}_bias", bias.astype(np.int32),
                              "int32", _f32(s_in) * s_w.astype(np.float64), [0] * len(s_w), 0)
        act, bounds = self.fused_act(p["act_min"], p["act_max"], op["outputs"][0])
        self.with_clamp(lambda o: self.w.add_op("FULLY_CONNECTED", [ins[0], wq, b], [o], self._fc_opts(op, act)),
                        out, bounds, "int8")

    def op_linear_s4(self, index, op, p, ins, out):
        self.op_linear_s8(index, op, p, ins, out)

    def op_linear_f32(self, index, op, p, ins, out):
        P = self.p
        wt, bt = op["inputs"][1], op["inputs"][2] if len(op["inputs"]) > 2 else -1
        wq = self.const_tensor(P.tensors[wt]["name"], P.const(wt), "float32")
        b = -1 if bt < 0 else self.const_tensor(P.tensors[bt]["name"], P.const(bt), "float32")
        act, bounds = self.float_act(p)
        self.with_clamp(lambda o: self.w.add_op("FULLY_CONNECTED", [ins[0], wq, b], [o], self._fc_opts(op, act)),
                        out, bounds, "float32")

    def _binary(self, index, op, p, ins, out, opcode, quant):
        ins = [self.constant(t) if self.p.is_const(t) else i for t, i in zip(op["inputs"], ins)]
        if quant:
            act, bounds = self.fused_act(p["act_min"], p["act_max"], op["outputs"][0])
        else:
            act, bounds = self.float_act(p)
        self.with_clamp(lambda o: self.w.add_op(opcode, ins[:2], [o], dict(fused_activation_function=act)),
                        out, bounds, self._int_dtype(op) if quant else "float32")

    def _int_dtype(self, op) -> str:
        return "int16" if self.p.tensors[op["outputs"][0]]["dtype"] == "I16" else "int8"

    def op_add_s8(self, index, op, p, ins, out):
        self._binary(index, op, p, ins, out, "ADD", True)

    def op_mul_s8(self, index, op, p, ins, out):
        self._binary(index, op, p, ins, out, "MUL", True)

    def op_add_f32(self, index, op, p, ins, out):
        self._binary(index, op, p, ins, out, "ADD", False)

    def op_mul_f32(self, index, op, p, ins, out):
        self._binary(index, op, p, ins, out, "MUL", False)

    def _pool(self, index, op, p, ins, out, opcode, quant):
        P = self.p
        x_dims, o_dims = P.tensors[op["inputs"][0]]["dims"], P.tensors[op["outputs"][0]]["dims"]
        if p.get("dilation_h", 1) != 1 or p.get("dilation_w", 1) != 1:
            raise ExportError(f"{P.describe(index)}: dilated pooling has no TFLite form")
        if p.get("divisor_override"):
            raise ExportError(f"{P.describe(index)}: divisor_override has no TFLite form")
        k, s = (p["kernel_h"], p["kernel_w"]), (p["stride_h"], p["stride_w"])
        padding, pads = self.padding(x_dims[1:3], k, s, (1, 1), (p["pad_top"], p["pad_left"]), o_dims[1:3])
        x = ins[0]
        if pads is not None:
            if opcode == "MAX_POOL_2D":  # padded taps never win: the lowest value
                x = self.pad(x, pads, (-32768 if self._int_dtype(op) == "int16" else -128) if quant else -np.inf)
            elif not quant and p.get("count_include_pad", True):
                x = self.pad(x, pads)  # zeros that count, as PyTorch's count_include_pad
            else:
                raise ExportError(f"{P.describe(index)}: average pooling with padding {pads} that TFLite's "
                                  "SAME/VALID cannot express (TFLite divides by the in-bounds taps)")
        elif padding == "SAME" and not quant and opcode == "AVERAGE_POOL_2D" and p.get("count_include_pad", True) \
                and (p["pad_top"] or p["pad_left"]):
            raise ExportError(f"{P.describe(index)}: count_include_pad average pooling with padding")
        if quant:
            act, bounds = self.fused_act(p["act_min"], p["act_max"], op["outputs"][0])
        else:
            act, bounds = self.float_act(p)
        opts = dict(padding=padding, stride_h=s[0], stride_w=s[1], filter_height=k[0], filter_width=k[1],
                    fused_activation_function=act)
        self.with_clamp(lambda o: self.w.add_op(opcode, [x], [o], opts), out, bounds,
                        self._int_dtype(op) if quant else "float32")

    def op_max_pool2d_s8(self, index, op, p, ins, out):
        self._pool(index, op, p, ins, out, "MAX_POOL_2D", True)

    def op_avg_pool2d_s8(self, index, op, p, ins, out):
        self._pool(index, op, p, ins, out, "AVERAGE_POOL_2D", True)

    # int16x8: the same TFLite ops on int16 tensors (_int_dtype, the pools' quantization).
    op_add_s16 = op_add_s8
    op_mul_s16 = op_mul_s8
    op_max_pool2d_s16 = op_max_pool2d_s8
    op_avg_pool2d_s16 = op_avg_pool2d_s8

    def op_max_pool2d_f32(self, index, op, p, ins, out):
        self._pool(index, op, p, ins, out, "MAX_POOL_2D", False)

    def op_avg_pool2d_f32(self, index, op, p, ins, out):
        self._pool(index, op, p, ins, out, "AVERAGE_POOL_2D", False)

    def op_softmax_s8(self, index, op, p, ins, out):
        self.w.add_op("SOFTMAX", [ins[0]], [out], dict(beta=1.0))

    def op_requantize(self, index, op, p, ins, out):  # TFLite's QUANTIZE from an integer input
        self.w.add_op("QUANTIZE", [ins[0]], [out])

    def op_softmax_s16(self, index, op, p, ins, out):  # TFLM builds its own tables (the program's are the same)
        self.w.add_op("SOFTMAX", [ins[0]], [out], dict(beta=1.0))

    def op_softmax_f32(self, index, op, p, ins, out):
        rank = len(self.p.tensors[op["inputs"][0]]["dims"])
        if p["axis"] != rank - 1:
            raise ExportError(f"{self.p.describe(index)}: softmax over axis {p['axis']} of {rank} (TFLite's "
                              "SOFTMAX is over the last axis)")
        self.w.add_op("SOFTMAX", [ins[0]], [out], dict(beta=1.0))

    def op_clamp_s8(self, index, op, p, ins, out):
        # TFLM's int8 RELU requantizes input -> output scale (exact when they are equal, as verify_derived
        # checks) and clamps at [max(-128, zp), 127]; RELU6 at [zp, zp + round(6 / scale)].
        act, bounds = self.fused_act(p["min"], p["max"], op["outputs"][0])
        if act == "NONE":
            self.clamp(ins[0], out, bounds, "int8")
        else:
            self.w.add_op(act, [ins[0]], [out])

    def op_clamp_f32(self, index, op, p, ins, out):
        act, bounds = self.float_act(p, "min", "max")
        if act == "NONE":
            self.clamp(ins[0], out, bounds, "float32")
        else:
            self.w.add_op(act, [ins[0]], [out])

    def op_lut_s8(self, index, op, p, ins, out):
        P = self.p
        table = P.const(op["inputs"][1]).ravel()
        s_in, zp_in = P.qparams(op["inputs"][0])
        s_out, zp_out = P.qparams(op["outputs"][0])
        # TFLite's int8 LOGISTIC and TANH have fixed output quantizations (TFLM refuses other
        # LOGISTIC outputs and silently assumes TANH's).
        fns = {"LOGISTIC": (lambda v: 1.0 / (1.0 + np.exp(-v)), (1.0 / 256, -128)),
               "TANH": (np.tanh, (1.0 / 128, 0))}
        for opcode, (fn, qout) in fns.items():
            if np.array_equal(table, ref.lut_table(fn, s_in, zp_in, s_out, zp_out)):
                if (s_out, zp_out) != qout:
                    raise ExportError(f"{P.describe(index)}: a {opcode.lower()} table with output quantization "
                                      f"({s_out:g}, {zp_out}); TFLite's int8 {opcode} requires "
                                      f"({qout[0]:g}, {qout[1]})")
                self.w.add_op(opcode, [ins[0]], [out])
                return
        if np.array_equal(table, ref.lut_table(ref.hardswish, s_in, zp_in, s_out, zp_out)):
            raise ExportError(f"{P.describe(index)}: a hardswish table: TFLite's int8 HARD_SWISH is a "
                              "fixed-point approximation that differs from it by 1 LSB on some inputs, so no "
                              "TFLite op computes it exactly")
        raise ExportError(f"{P.describe(index)}: the table is neither the sigmoid's nor tanh's at its "
                          "quantization: no TFLite op computes it")

    def op_hardswish_f32(self, index, op, p, ins, out):
        self.w.add_op("HARD_SWISH", [ins[0]], [out])

    def op_maximum_s8(self, index, op, p, ins, out):
        self.w.add_op("MAXIMUM", ins[:2], [out])

    def op_minimum_s8(self, index, op, p, ins, out):
        self.w.add_op("MINIMUM", ins[:2], [out])

    def _max_min_f32(self, op, p, ins, out, opcode):
        ins = [self.constant(t) if self.p.is_const(t) else i for t, i in zip(op["inputs"], ins)]
        act, bounds = self.float_act(p)
        if act != "NONE":  # MAXIMUM/MINIMUM have no fused activation
            bounds = (float(p.get("act_min", -math.inf)), float(p.get("act_max", math.inf)))
        self.with_clamp(lambda o: self.w.add_op(opcode, ins[:2], [o]), out, bounds, "float32")

    def op_maximum_f32(self, index, op, p, ins, out):
        self._max_min_f32(op, p, ins, out, "MAXIMUM")

    def op_minimum_f32(self, index, op, p, ins, out):
        self._max_min_f32(op, p, ins, out, "MINIMUM")

    def op_batch_matmul_s8(self, index, op, p, ins, out):
        # TFLite's BATCH_MATMUL has no fused activation: a narrower range clamps afterwards.
        bounds = () if (p["act_min"], p["act_max"]) == (-128, 127) else (p["act_min"], p["act_max"])
        self.with_clamp(lambda o: self.w.add_op("BATCH_MATMUL", ins[:2], [o], dict(adj_x=False, adj_y=False)),
                        out, bounds, "int8")

    def op_batch_matmul_f32(self, index, op, p, ins, out):
        self.w.add_op("BATCH_MATMUL", ins[:2], [out], dict(adj_x=False, adj_y=False))

    def op_pad(self, index, op, p, ins, out):
        P = self.p
        t = P.tensors[op["outputs"][0]]
        src = self.constant(op["inputs"][0]) if P.is_const(op["inputs"][0]) else ins[0]
        paddings = self.int_vector("paddings", [[b, a] for b, a in zip(p["before"], p["after"])])
        if t["dtype"] == "I8":
            value, default = p.get("qvalue", 0), int(t["zero_point"])  # TFLite's PAD pads int8 with the zero point
        elif t["dtype"] == "F32":
            value, default = p.get("value", 0.0), 0.0
        else:
            raise ExportError(f"{P.describe(index)}: padding a {t['dtype']} tensor")
        if value == default:
            self.w.add_op("PAD", [src, paddings], [out])
        else:
            if t["dtype"] == "I8":
                v = self.const_tensor("pad_value", np.asarray([value], np.int8), "int8", float(t["scale"]),
                                      int(t["zero_point"]))
            else:
                v = self.const_tensor("pad_value", np.asarray([value], np.float32), "float32")
            self.w.add_op("PADV2", [src, paddings, v], [out])

    def op_sigmoid_f32(self, index, op, p, ins, out):
        self.w.add_op("LOGISTIC", [ins[0]], [out])

    def op_tanh_f32(self, index, op, p, ins, out):
        self.w.add_op("TANH", [ins[0]], [out])

    def op_mean_f32(self, index, op, p, ins, out):
        rank = len(self.p.tensors[op["inputs"][0]]["dims"])
        axes = [d for d in range(rank) if p["axis_mask"] >> d & 1]
        keep = len(self.p.tensors[op["outputs"][0]]["dims"]) == rank
        self.w.add_op("MEAN", [ins[0], self.int_vector("axes", axes)], [out], dict(keep_dims=keep))

    def op_quantize_s8(self, index, op, p, ins, out):
        self.w.add_op("QUANTIZE", [ins[0]], [out])

    def op_dequantize_s8(self, index, op, p, ins, out):
        self.w.add_op("DEQUANTIZE", [ins[0]], [out])

    def op_permute(self, index, op, p, ins, out):
        self.w.add_op("TRANSPOSE", [ins[0], self.int_vector("perm", p["perm"])], [out])

    def op_concat(self, index, op, p, ins, out):
        ins = [self.constant(t) if self.p.is_const(t) else i for t, i in zip(op["inputs"], ins)]
        self.w.add_op("CONCATENATION", ins, [out], dict(axis=p["axis"], fused_activation_function="NONE"))

    def op_copy(self, index, op, p, ins, out):
        src = self.constant(op["inputs"][0]) if self.p.is_const(op["inputs"][0]) else ins[0]
        shape = self.w._tensors[out]["shape"]
        self.w.add_op("RESHAPE", [src, self.int_vector("shape", shape)], [out], {"new_shape": shape})


_SCRATCH_AFTER = {"CONV2D_S8": 5, "DEPTHWISE_CONV2D_S8": 5, "LINEAR_S8": 5, "CONV2D_S16": 5,
                  "DEPTHWISE_CONV2D_S16": 5, "LINEAR_S16": 5, "CONV2D_S4": 5, "DEPTHWISE_CONV2D_S4": 5,
                  "LINEAR_S4": 5}


def _operands(op: dict) -> list[int]:
    """The op's operands without the optional scratch buffer of the int8
    conv/depthwise/linear kernels (working memory, no data)."""
    return op["inputs"][:_SCRATCH_AFTER.get(op["code"], len(op["inputs"]))]


def _is_int8_program(p: _Program) -> bool:
    return any(op["code"].endswith(("_S8", "_S16", "_S4")) for op in p.ops)


def export_tflite(pte: bytes, *, strict: bool = True, tensor_map: dict[int, int] | None = None) -> bytes:
    """The whole int8 program as a .tflite model: same inputs (float, in the
    program's input layout), same outputs. strict: refuse programs whose
    derived parameters TFLite would compute differently (verify_derived).
    tensor_map, when given, is filled with program tensor -> TFLite tensor."""
    p = _Program(pte)
    if not _is_int8_program(p):
        raise ExportError("a float32 program: the TFLite export is for int8 programs "
                          "(compile with --quant int8)")
    if strict:
        problems = verify_derived(pte)
        if problems:
            raise ExportError("TFLite would derive different parameters:\n  " + "\n  ".join(problems))
    e = _Exporter(p)
    written: list[tuple[int, int, int, int]] = []  # (arena, start, end, program tensor), in write order

    def record(tid: int) -> None:
        t = p.tensors[tid]
        written.append((t["arena"], t["offset"], t["offset"] + t["nbytes"], tid))

    def resolve(tid: int) -> int:
        if tid < 0:
            return -1
        if tid in e.tfl:
            return e.tfl[tid]
        t = p.tensors[tid]
        if t["region"] == "CONSTANT":
            return -1  # read by the op handlers from the program
        # An alias: a second view of bytes another tensor wrote (reshape, flatten).
        start, end = t["offset"], t["offset"] + t["nbytes"]
        src = next((w for w in reversed(written) if w[0] == t["arena"] and w[1] < end and start < w[2]), None)
        if src is None or (src[1], src[2]) != (start, end):
            raise ExportError(f"tensor t{tid} ({t['name']}) is read but no op wrote exactly its bytes")
        s = p.tensors[src[3]]
        if s["dtype"] != t["dtype"] or (s["scale"], s["zero_point"]) != (t["scale"], t["zero_point"]):
            raise ExportError(f"tensor t{tid} ({t['name']}) aliases t{src[3]} with another type/quantization")
        e.tfl[tid] = e.new_tensor(tid)
        e.w.add_op("RESHAPE", [e.tfl[src[3]], e.int_vector("shape", t["dims"])], [e.tfl[tid]],
                   {"new_shape": t["dims"]})
        return e.tfl[tid]

    for tid in p.prog["inputs"]:
        e.tfl[tid] = e.new_tensor(tid)
        record(tid)
    for index, op in enumerate(p.ops):
        ins = [resolve(t) for t in _operands(op)]
        out_tid = op["outputs"][0]
        out = e.new_tensor(out_tid)
        e.emit(index, ins, out)
        e.tfl[out_tid] = out
        record(out_tid)
    outputs = [resolve(t) for t in p.prog["outputs"]]
    e.w.set_io([e.tfl[t] for t in p.prog["inputs"]], outputs)
    if tensor_map is not None:
        tensor_map.update(e.tfl)
    return e.w.finish()


# ------------------------------------------------------------------------- one op alone


def trace(pte: bytes, inputs: list[np.ndarray]) -> list[tuple[list[np.ndarray | None], np.ndarray]]:
    """Runs the NumPy reference (interpret.py) op by op; per op, the values
    of its operands (None for absent ones) and of its output."""
    from .interpret import OPS, Interpreter

    it = Interpreter(pte)
    prog = it.prog
    for index, x in zip(prog["inputs"], inputs):
        it.write(index, np.asarray(x).reshape(prog["tensors"][index]["dims"]))
    steps = []
    for op in prog["ops"]:
        args = [None if i < 0 else it.tensor(i).copy() for i in op["inputs"]]
        outs = [prog["tensors"][i] for i in op["outputs"]]
        params = op["params"][1] if op["params"] else {}
        if op["code"] in ("DEQUANTIZE_S8", "DEQUANTIZE_S16"):
            src = prog["tensors"][op["inputs"][0]]
            result = ref.dequantize(args[0], src["scale"], src["zero_point"])
        elif op["code"] == "REQUANTIZE":
            result = ref.requantize_tensor(args[0], prog["tensors"][op["inputs"][0]], outs[0])
        else:
            result = OPS[op["code"]](args, params, outs)
        it.write(op["outputs"][0], np.asarray(result).reshape(outs[0]["dims"]))
        steps.append((args, it.tensor(op["outputs"][0]).copy()))
    return steps


def export_op(pte: bytes, op_index: int, inputs: list[np.ndarray],
              steps: list | None = None) -> tuple[bytes, list[np.ndarray]]:
    """Program op `op_index` alone as a .tflite model, and the values its
    activation operands take when the program runs `inputs` (one sample, as
    interpret.Interpreter.run takes) in the NumPy reference. `steps`: a
    trace() of those inputs, to reuse one run for many ops."""
    p = _Program(pte)
    if not 0 <= op_index < len(p.ops):
        raise ExportError(f"no op {op_index} (the program has {len(p.ops)})")
    steps = trace(pte, inputs) if steps is None else steps
    args, _ = steps[op_index]
    op = p.ops[op_index]
    e = _Exporter(p)
    ins, values, graph_inputs = [], [], []
    for tid, value in zip(_operands(op), args):
        if tid < 0 or p.is_const(tid):
            ins.append(-1)
            continue
        k = e.new_tensor(tid)
        ins.append(k)
        graph_inputs.append(k)
        values.append(value)
    out = e.new_tensor(op["outputs"][0])
    e.emit(op_index, ins, out)
    e.w.set_io(graph_inputs, [out])
    return e.w.finish(), values


# ------------------------------------------------------------------------------- TFLM


def run_tflite_micro(tflite: bytes, inputs: list[np.ndarray], arena_size: int | None = None,
                     tensors: list[int] | None = None) -> list[np.ndarray]:
    """Runs a .tflite model once in TensorFlow Lite Micro (the tflite-micro
    wheel's interpreter, reference kernels). inputs: one array per graph
    input (reshaped to the input's shape). Returns the graph outputs, then
    the values of `tensors` (TFLite tensor indices, all kept alive)."""
    try:
        from tflite_micro.python.tflite_micro import runtime
    except ImportError as exc:  # pragma: no cover - the wheel is a test dependency
        raise TorchMCUError("TensorFlow Lite Micro is not installed (pip install tflite-micro)") from exc
    config = runtime.InterpreterConfig.kPreserveAllTensors if tensors else \
        runtime.InterpreterConfig.kAllocationRecording
    it = runtime.Interpreter.from_bytes(bytes(tflite), arena_size=arena_size or max(1 << 22, 8 * len(tflite)),
                                        intrepreter_config=config)
    for i, x in enumerate(inputs):
        shape = it.get_input_details(i)["shape"]
        it.set_input(np.ascontiguousarray(np.asarray(x).reshape(shape)), i)
    it.invoke()
    outs = [np.array(it.get_output(i)) for i in range(_output_count(tflite))]
    return outs + [np.array(it.GetTensor(t, 0)["tensor_data"]) for t in (tensors or [])]


def _output_count(tflite: bytes) -> int:
    import tflite as tfl

    return tfl.Model.GetRootAsModel(tflite, 0).Subgraphs(0).OutputsLength()


def summary(tflite: bytes) -> dict[str, Any]:
    """Operator counts, tensor count and size of a .tflite model."""
    import tflite as tfl  # the flatbuffer reader package

    model = tfl.Model.GetRootAsModel(tflite, 0)
    names = {v: k for k, v in vars(tfl.BuiltinOperator).items() if not k.startswith("_")}
    sg = model.Subgraphs(0)
    counts: dict[str, int] = {}
    for i in range(sg.OperatorsLength()):
        code = model.OperatorCodes(sg.Operators(i).OpcodeIndex())
        name = names.get(max(code.BuiltinCode(), code.DeprecatedBuiltinCode()), "?")
        counts[name] = counts.get(name, 0) + 1
    return {"bytes": len(tflite), "operators": sg.OperatorsLength(), "tensors": sg.TensorsLength(),
            "inputs": sg.InputsLength(), "outputs": sg.OutputsLength(), "op_counts": counts}


__all__ = ["ExportError", "export_tflite", "export_op", "trace", "run_tflite_micro", "verify_derived",
           "weight_scales", "summary"]
