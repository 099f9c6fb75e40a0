"""Element-wise ops and activations, and the conversions between precisions.

ATen: relu, relu6, hardtanh, clamp (one "clamp" node, fused into its
producer's output range where it can be), sigmoid, tanh, hardswish, add,
sub (by a constant), mul, maximum, minimum; PT2E's quantize_per_tensor and
dequantize_per_tensor. Program ops: CLAMP, ADD, MUL, MAXIMUM, MINIMUM at
F32 and S8 (ADD/MUL also S16); SIGMOID/TANH/HARDSWISH_F32, and LUT_S8 for
them at int8 (a 256-entry table); QUANTIZE, DEQUANTIZE (S8, S16) and
REQUANTIZE. Reference twin: reference/elementwise.py.
"""

from __future__ import annotations

import numpy as np
import torch

from ... import reference
from ..graph import INF, QD, Graph, Node, const, is_activation
from .family import Family, always
from .helpers import act_params, act_q, act_q16, identity

F = Family("elementwise")
aten = torch.ops.aten


# -- ATen -> logical ---------------------------------------------------------------------------

@F.rule(aten.clamp.default)
def clamp(cv, x, lo=None, hi=None):
    lo = -INF if lo is None else float(lo)
    hi = INF if hi is None else float(hi)
    return cv.emit("clamp", [cv.act(x)], dict(range=(lo, hi)))


@F.rule(aten.relu.default)
def relu(cv, x):
    return clamp(cv, x, 0.0, None)


@F.rule(aten.relu6.default)
def relu6(cv, x):
    return clamp(cv, x, 0.0, 6.0)


@F.rule(aten.hardtanh.default)
def hardtanh(cv, x, lo=-1.0, hi=1.0):
    return clamp(cv, x, lo, hi)


def _unary(name: str):
    def convert(cv, x):
        return cv.emit(name, [cv.act(x)])
    return convert


F.rule(aten.sigmoid.default)(_unary("sigmoid"))
F.rule(aten.tanh.default)(_unary("tanh"))
F.rule(aten.hardswish.default)(_unary("hardswish"))


def _binary(name: str):
    def convert(cv, a, b, alpha=1):
        if alpha != 1:
            if not isinstance(b, np.ndarray):
                raise cv.fail("add/sub with alpha on two activations is not supported")
            b = b * np.float32(alpha)
        if not is_activation(a) and is_activation(b):
            a, b = b, a  # both ops commute; keep the activation first
        return cv.emit(name, [cv.act(a), b if is_activation(b) else const(b)], dict(act=(-INF, INF)))
    return convert


F.rule(aten.add.Tensor, aten.add.Scalar)(_binary("add"))
F.rule(aten.mul.Tensor, aten.mul.Scalar)(_binary("mul"))
F.rule(aten.maximum.default)(_binary("maximum"))
F.rule(aten.minimum.default)(_binary("minimum"))


@F.rule(aten.sub.Tensor)
def sub(cv, a, b, alpha=1):
    if is_activation(b):
        raise cv.fail("subtracting an activation is not supported yet (only constants)")
    return _binary("add")(cv, a, -const(b) * np.float32(alpha))


@F.rule(QD.quantize_per_tensor.default)
def quantize(cv, x, scale, zero_point, qmin, qmax, dtype):
    bits = 16 if dtype == torch.int16 and -32768 <= qmin and qmax <= 32767 and zero_point == 0 else 8
    if bits == 8 and (dtype != torch.int8 or (qmin, qmax) != (-128, 127)):
        raise cv.fail(f"only int8 activations (-128..127) or symmetric int16 ones are supported, not "
                      f"{dtype} {qmin}..{qmax} (zero point {zero_point})")
    out = cv.emit("quantize", [cv.act(x)], dict(scale=float(scale), zero_point=int(zero_point), bits=bits))
    cv.g.qparams[out] = (float(scale), int(zero_point))
    if bits == 16:
        cv.g.int16.add(out)
    return out


@F.rule(QD.dequantize_per_tensor.default)
def dequantize(cv, x, scale, zero_point, qmin, qmax, dtype, **kw):
    return cv.emit("dequantize", [cv.act(x)], dict(scale=float(scale), zero_point=int(zero_point),
                                                  bits=16 if dtype == torch.int16 else 8))


# -- which instances have integer kernels ------------------------------------------------------

def _two_activations(g: Graph, n: Node, in_q: list, out_q: tuple) -> bool:
    """Both operands activations (a constant operand runs in float)."""
    return all(isinstance(i, int) for i in n.inputs)


F.int8("add", "mul")(_two_activations)
F.int16("add", "mul")(_two_activations)
F.int8("maximum", "minimum", shared=True)(_two_activations)
F.int8("clamp", shared=True)(always)
F.int8("sigmoid", "tanh", "hardswish")(always)


# -- logical -> program ops --------------------------------------------------------------------

@F.lower("clamp", "sigmoid", "tanh", "hardswish")
def _unary_f32(lay, n: Node) -> None:
    x = n.inputs[0]
    tid, perm = lay.val[x]
    out = lay.activation(n.name, lay.p.tensors[tid].dims)
    if n.op == "clamp":
        lo, hi = n.attrs["range"]
        lay.emit("CLAMP_F32", [tid], [out], ("ClampParams", {"min": lo, "max": hi}), n, n.op)
    else:
        lay.emit(f"{n.op.upper()}_F32", [tid], [out], None, n, n.op)
    lay.val[n.out] = (out, perm)


@F.lower("add", "mul", "maximum", "minimum")
def _binary_f32(lay, n: Node) -> None:
    a, b = n.inputs
    shape = lay.g.shapes[n.out]
    rank = len(shape)
    if len(lay.g.shapes[a]) != rank:
        raise lay.fail(n, "broadcasting an activation of lower rank is not supported")
    perm = lay.val[a][1]
    ain = lay.val[a][0]
    if isinstance(b, int):
        if len(lay.g.shapes[b]) != rank:
            raise lay.fail(n, "broadcasting an activation of lower rank is not supported")
        bin_ = lay.get(b, perm, n)
    else:
        bin_ = lay.const_operand(b, rank, perm, f"{n.name}_other")
    out = lay.activation(n.name, tuple(shape[d] for d in perm))
    lay.emit(f"{n.op.upper()}_F32", [ain, bin_], [out], ("BinaryParams", act_params(n.attrs["act"])), n, n.op)
    lay.val[n.out] = (out, perm)


def _same_rank_operands(lay, n: Node) -> tuple[int, int, tuple[int, ...]]:
    a, b = n.inputs
    rank = len(lay.g.shapes[n.out])
    if len(lay.g.shapes[a]) != rank or len(lay.g.shapes[b]) != rank:
        raise lay.fail(n, "broadcasting an activation of lower rank is not supported")
    ain, perm = lay.val[a]
    return ain, lay.get(b, perm, n), perm


@F.lower("qadd", "qmul", "qmaximum", "qminimum")
def _binary_s8(lay, n: Node) -> None:
    ain, bin_, perm = _same_rank_operands(lay, n)
    shape = lay.g.shapes[n.out]
    (s1, z1), (s2, z2) = n.attrs["in_q"]
    s_out, zp_out = n.attrs["out_q"]
    lo, hi = act_q(n.attrs["act"], s_out, zp_out)
    out = lay.activation(n.name, tuple(shape[d] for d in perm), like=n.out)
    if n.op in ("qmaximum", "qminimum"):  # one quantization in and out: the raw values
        lay.emit(f"{n.op[1:].upper()}_S8", [ain, bin_], [out], None, n, n.op[1:])
    else:
        if n.op == "qadd":
            code, table = "ADD_S8", "QuantAddParams"
            params = reference.add_params(s1, z1, s2, z2, s_out, zp_out, lo, hi)
        else:
            code, table = "MUL_S8", "QuantMulParams"
            params = reference.mul_params(s1, z1, s2, z2, s_out, zp_out, lo, hi)
        lay.emit(code, [ain, bin_], [out], (table, {k: int(v) for k, v in params.items()}), n, n.op[1:])
    lay.val[n.out] = (out, perm)


@F.lower16("qadd", "qmul")
def _binary_s16(lay, n: Node) -> None:
    ain, bin_, perm = _same_rank_operands(lay, n)
    shape = lay.g.shapes[n.out]
    (s1, _), (s2, _) = n.attrs["in_q"]
    s_out, _ = n.attrs["out_q"]
    lo, hi = act_q16(n.attrs["act"], s_out)
    if n.op == "qadd":
        code, table = "ADD_S16", "QuantAddParams"
        params = reference.add_params_s16(s1, s2, s_out, lo, hi)
    else:
        code, table = "MUL_S16", "QuantMulParams"
        params = reference.mul_params(s1, 0, s2, 0, s_out, 0, lo, hi)
    out = lay.activation(n.name, tuple(shape[d] for d in perm), like=n.out)
    lay.emit(code, [ain, bin_], [out], (table, {k: int(v) for k, v in params.items()}), n, n.op[1:])
    lay.val[n.out] = (out, perm)


# The float function an int8 table holds (reference.lut_table tabulates it).
LUT_FUNCTIONS = {"qsigmoid": lambda v: 1.0 / (1.0 + np.exp(-v)), "qtanh": np.tanh, "qhardswish": reference.hardswish}


@F.lower("qclamp", *LUT_FUNCTIONS)
def _unary_s8(lay, n: Node) -> None:
    x = n.inputs[0]
    tid, perm = lay.val[x]
    out = lay.activation(n.name, lay.p.tensors[tid].dims, like=n.out)
    (s_in, zp_in), = n.attrs["in_q"]
    s_out, zp_out = n.attrs["out_q"]
    if n.op == "qclamp":
        lo, hi = act_q(n.attrs["range"], s_out, zp_out)
        lay.emit("CLAMP_S8", [tid], [out], ("QuantClampParams", {"min": lo, "max": hi}), n, "clamp")
    else:
        table = reference.lut_table(LUT_FUNCTIONS[n.op], s_in, zp_in, s_out, zp_out)
        lay.emit("LUT_S8", [tid, lay.constant(f"{n.name}_table", table, "I8")], [out], None, n, n.op[1:])
    lay.val[n.out] = (out, perm)


def _quantize(code: str):
    def emit(lay, n: Node) -> None:
        x = n.inputs[0]
        tid, perm = lay.val[x]
        out = lay.activation(n.name, lay.p.tensors[tid].dims, like=n.out)
        lay.emit(code, [tid], [out], None, n, "quantize")
        lay.val[n.out] = (out, perm)
    return emit


def _dequantize(code: str):
    def emit(lay, n: Node) -> None:
        x = n.inputs[0]
        tid, perm = lay.val[x]
        if lay.g.is_output(n.out):  # reorder the integer bytes, a quarter (or half) of the float ones
            perm = identity(len(lay.g.shapes[x]))
            tid = lay.get(x, perm, n)
        out = lay.activation(n.name, lay.p.tensors[tid].dims)
        lay.emit(code, [tid], [out], None, n, "dequantize")
        lay.val[n.out] = (out, perm)
    return emit


F.lower("quantize")(_quantize("QUANTIZE_S8"))
F.lower("dequantize")(_dequantize("DEQUANTIZE_S8"))
F.lower16("quantize")(_quantize("QUANTIZE_S16"))
F.lower16("dequantize")(_dequantize("DEQUANTIZE_S16"))


@F.lower16("requantize")
def _requantize(lay, n: Node) -> None:
    """int8 <-> int16 where mixed-precision layers meet (fusion.fold_requantize)."""
    x = n.inputs[0]
    tid, perm = lay.val[x]
    out = lay.activation(n.name, lay.p.tensors[tid].dims, like=n.out)
    lay.emit("REQUANTIZE", [tid], [out], None, n, "requantize")
    lay.val[n.out] = (out, perm)
