"""The compiled program as the TFLite exporter reads it, and the checks that
TFLite derives the program's requantization parameters from the tensors'
scales."""

from __future__ import annotations

import math

import numpy as np

from ... import reference as ref
from ...errors import TorchMCUError
from ...program import schema

NP = {"F32": np.float32, "I8": np.int8, "I16": np.int16, "I32": np.int32, "U8": np.uint8, "I64": np.int64}
# U8 holds the program's booleans (1 or 0: masks, comparisons): TFLite's BOOL, the same bytes.
TFL_DTYPE = {"F32": "float32", "I8": "int8", "I16": "int16", "I32": "int32", "U8": "bool", "I64": "int64"}


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
                    "LINEAR_S16", "CONV2D_S4", "DEPTHWISE_CONV2D_S4", "LINEAR_S4", "TRANSPOSE_CONV2D_S8",
                    "TRANSPOSE_CONV2D_S16"):
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
            exp = ref.softmax_params(p.qparams(ins[0])[0], params.get("beta", 1.0))
            diff = {k: (params[k], v) for k, v in exp.items() if params.get(k) != v}
            if diff:
                problems.append(f"{p.describe(i)}: parameters differ from TFLite's: {diff}")
            if p.qparams(out) != (1.0 / 256, -128):
                problems.append(f"{p.describe(i)}: output quantization {p.qparams(out)}, TFLite's is (1/256, -128)")
        elif code in ("BATCH_MATMUL_S8", "BATCH_MATMUL_S16"):
            (s1, z1), (s2, z2), (so, zo) = p.qparams(ins[0]), p.qparams(ins[1]), p.qparams(out)
            exp = ref.batch_matmul_params(s1, z1, s2, z2, so, zo, params["act_min"], params["act_max"],
                                          params.get("adj_y", False))
            diff = {k: (params[k], v) for k, v in exp.items() if params.get(k) != v}
            if diff:
                problems.append(f"{p.describe(i)}: parameters differ from TFLite's: {diff}")
        elif code in ("SUB_S8", "SUB_S16", "DIV_S8", "PRELU_S8", "PRELU_S16", "MEAN_S8", "MEAN_S16", "LOG_SOFTMAX_S8"):
            exp = _derived_c(p, code, params, ins, out)
            diff = {k: (params.get(k), v) for k, v in exp.items() if params.get(k) != v}
            if diff:
                problems.append(f"{p.describe(i)}: parameters differ from TFLite's: {diff}")
        elif code in ("MAX_POOL2D_S8", "AVG_POOL2D_S8", "CLAMP_S8", "CONCAT", "PERMUTE", "COPY", "PAD",
                      "MAXIMUM_S8", "MINIMUM_S8", "MAX_POOL2D_S16", "AVG_POOL2D_S16", "RESIZE_NEAREST",
                      "RESIZE_BILINEAR_S8", "RESIZE_BILINEAR_S16", "ADAPTIVE_AVG_POOL2D_S8", "ADAPTIVE_AVG_POOL2D_S16"):
            if p.tensors[out]["dtype"] in ("I8", "I16"):
                for t in ins:
                    if t >= 0 and p.qparams(t) != p.qparams(out):
                        problems.append(f"{p.describe(i)}: input t{t} quantization {p.qparams(t)} differs from "
                                        f"the output's {p.qparams(out)} (TFLite would requantize)")
        elif code == "MASKED_FILL" and p.tensors[out]["dtype"] in ("I8", "I16") and p.qparams(ins[0]) != p.qparams(out):
            problems.append(f"{p.describe(i)}: input t{ins[0]} quantization {p.qparams(ins[0])} differs from the "
                            f"output's {p.qparams(out)} (TFLite's SELECT_V2 copies the raw values)")
    return problems


def _derived_c(p: _Program, code: str, params: dict, ins: list, out: int) -> dict:
    """What TFLite derives for the element-wise and reduction ops of
    reference/elementwise.py, activations.py and reduce.py."""
    (s1, z1), (so, zo) = p.qparams(ins[0]), p.qparams(out)
    lo, hi = params.get("act_min", -128), params.get("act_max", 127)
    if code.startswith("SUB"):
        s2, z2 = p.qparams(ins[1])
        return ref.sub_params(s1, z1, s2, z2, so, zo, lo, hi, 16 if code.endswith("S16") else 8)
    if code == "DIV_S8":
        s2, z2 = p.qparams(ins[1])
        return ref.div_params(s1, z1, s2, z2, so, zo, lo, hi)
    if code.startswith("PRELU"):
        sa, za = p.qparams(ins[1])
        return ref.prelu_params(s1, z1, sa, za, so, zo, lo, hi)
    if code.startswith("MEAN"):
        dims = p.tensors[ins[0]]["dims"]
        count = int(np.prod([d for j, d in enumerate(dims) if params["axis_mask"] >> j & 1]))
        return ref.mean_params(s1, z1, so, zo, count, lo, hi)
    return ref.log_softmax_params(s1)
