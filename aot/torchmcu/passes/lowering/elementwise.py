"""Element-wise ops and activations, and the conversions between precisions.

ATen: relu, relu6, hardtanh, clamp (one "clamp" node, fused into its
producer's output range where it can be), sigmoid, tanh, hardswish, add,
sub, rsub, neg, mul, div (by a constant: a multiplication), maximum,
minimum; PT2E's quantize_per_tensor and dequantize_per_tensor. Operands
broadcast as numpy's (a lower-rank activation gains leading 1s); add/sub
take alpha. Program ops: CLAMP, ADD, SUB, MUL, MAXIMUM, MINIMUM at F32 and
S8 (ADD/SUB/MUL also S16: a constant operand is quantized, TFLite's way),
DIV at F32 and S8; SIGMOID/TANH/HARDSWISH_F32, and LUT_S8 for them at int8
(a 256-entry table; int16: activations.py); QUANTIZE, DEQUANTIZE (S8, S16)
and REQUANTIZE. Reference twin: reference/elementwise.py.
"""

from __future__ import annotations

import numpy as np
import torch

from ... import reference
from ..graph import INF, QD, Graph, Node, QConst, const, is_activation
from . import operands
from .family import Family, always
from .helpers import act_params, act_q, act_q16, identity
from .operands import order_of

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


def _value(v):
    """A constant operand as a float array: a constant PT2E quantized (a
    parameter viewed in forward) at its dequantized value, as the q/dq model."""
    return v.dequantized() if isinstance(v, QConst) else const(v)


def _binary(name: str):
    def convert(cv, a, b):
        if not is_activation(a) and is_activation(b):
            a, b = b, a  # these ops commute; keep the activation first
        return cv.emit(name, [cv.act(a), b if is_activation(b) else _value(b)], dict(act=(-INF, INF)))
    return convert


F.rule(aten.mul.Tensor, aten.mul.Scalar)(_binary("mul"))
F.rule(aten.maximum.default)(_binary("maximum"))
F.rule(aten.minimum.default)(_binary("minimum"))


def _broadcast(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(d) for d in np.broadcast_shapes(*shapes))


@F.rule(aten.clamp.Tensor)
def clamp_tensor(cv, x, lo=None, hi=None):
    """clamp with tensor bounds (broadcast): minimum(maximum(x, lo), hi), as
    PyTorch defines it (a bound above the other gives hi)."""
    if not is_activation(x):  # clamp(constant, bound activations): a maximum / minimum commutes
        x = _value(x)
    for op, bound in (("maximum", lo), ("minimum", hi)):
        if bound is None:
            continue
        shape = _broadcast(cv.shape(x), cv.shape(bound if is_activation(bound) else _value(bound)))
        a, b = (x, bound) if is_activation(x) else (bound, x)
        x = cv.emit(op, [cv.act(a), b if is_activation(b) else _value(b)], dict(act=(-INF, INF)), shape=shape)
    if not is_activation(x):
        raise cv.fail("clamp of a constant by constant bounds")  # folded by the converter; never here
    return x


@F.rule(aten.clamp_min.Tensor)
def clamp_min_tensor(cv, x, lo):
    return clamp_tensor(cv, x, lo, None)


@F.rule(aten.clamp_max.Tensor)
def clamp_max_tensor(cv, x, hi):
    return clamp_tensor(cv, x, None, hi)


# -- masks: comparisons (bool values, U8 in the program) and masked_fill ---------------------------

COMPARE = {"lt": 0, "le": 1, "gt": 2, "ge": 3, "eq": 4, "ne": 5}
SWAPPED = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne"}  # b op a == a SWAPPED[op] b
NP_OF = {"F32": np.float32, "I32": np.int32, "U8": np.uint8}


def _compare(name: str):
    def convert(cv, a, b):
        op = name
        if not is_activation(a):
            a, b, op = b, a, SWAPPED[op]
        a = cv.act(a)
        dtype = cv.g.dtypes.get(a, "F32")
        if is_activation(b):
            if cv.g.dtypes.get(b, "F32") != dtype:
                raise cv.fail(f"comparison of a {dtype} and a {cv.g.dtypes.get(b, 'F32')} tensor")
            bshape = cv.shape(b)
        else:
            value = np.asarray(_value(b))
            if dtype != "F32" and np.any(value != np.round(value)):  # int < 2.5: the bound rounded so
                raise cv.fail(f"comparison of an integer tensor with a fraction ({value})")
            b = value.astype(NP_OF[dtype])
            bshape = b.shape
        out = cv.emit("compare", [a, b], dict(op=COMPARE[op]), shape=_broadcast(cv.shape(a), bshape))
        cv.g.dtypes[out] = "U8"
        return out
    return convert


for _name in COMPARE:
    F.rule(getattr(aten, _name).Scalar, getattr(aten, _name).Tensor)(_compare(_name))


def _mask(cv, m):
    """A boolean mask: a bool value of the graph, or a constant (as uint8)."""
    if is_activation(m):
        if cv.g.dtypes.get(m) == "I32":  # a bool model input (int32 in the program): != 0
            out = cv.emit("compare", [m, np.zeros((), np.int32)], dict(op=COMPARE["ne"]), shape=cv.shape(m))
            cv.g.dtypes[out] = "U8"
            return out
        if cv.g.dtypes.get(m) != "U8":
            raise cv.fail("the mask must be a boolean tensor")
        return m
    return np.asarray(const(m)).astype(bool).astype(np.uint8)


@F.rule(aten.logical_not.default, aten.bitwise_not.default)
def logical_not(cv, m):
    m = _mask(cv, cv.act(m))
    out = cv.emit("compare", [m, np.zeros((), np.uint8)], dict(op=COMPARE["eq"]), shape=cv.shape(m))
    cv.g.dtypes[out] = "U8"
    return out


@F.rule(aten.masked_fill.Scalar, aten.masked_fill.Tensor)
def masked_fill(cv, x, mask, value):
    """x.masked_fill(mask, value): one op reading x and the mask (a boolean
    constant, input or comparison), at x's quantization in an integer program."""
    m = _mask(cv, mask)
    if not is_activation(x):  # a constant filled where a computed mask says (a float attention mask)
        x = np.ascontiguousarray(np.broadcast_to(_value(x), _broadcast(cv.shape(x), cv.shape(m))), np.float32)
        if not is_activation(m):
            raise cv.fail("masked_fill of a constant by a constant mask")  # folded by the converter; never here
    shape = cv.shape(x)
    if _broadcast(shape, cv.shape(m)) != tuple(shape):
        raise cv.fail(f"masked_fill of a {tuple(shape)} tensor by a {tuple(cv.shape(m))} mask: the mask must "
                      "broadcast to the tensor")
    value = float(np.asarray(_value(value)).reshape(()))
    if not is_activation(m) and not m.any():
        return x
    return cv.emit("masked_fill", [x, m], dict(value=value))


@F.rule(aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther)
def where(cv, cond, a, b):
    """torch.where(cond, a, b) with one of a, b a scalar: a masked_fill."""
    scalar = [not is_activation(v) and np.asarray(_value(v)).size == 1 for v in (a, b)]
    if is_activation(b) and scalar[0]:
        return masked_fill(cv, b, cond, a)
    if is_activation(a) and scalar[1]:
        return masked_fill(cv, a, logical_not(cv, cond) if is_activation(cond) else
                           np.logical_not(const(cond)), b)
    raise cv.fail("torch.where of two tensors is not supported (one of them a scalar is: a masked_fill)")


def _add_sub(cv, op: str, a, b, alpha=1):
    """a + alpha * b (op "add") or a - alpha * b ("sub"): a constant b takes
    alpha (and sub's sign) into its values; two activations keep alpha."""
    if not is_activation(b):
        b = np.asarray(_value(b) * np.float32(alpha), np.float32)
        return cv.emit("add", [cv.act(a), -b if op == "sub" else b], dict(act=(-INF, INF)))
    if not is_activation(a) and op == "add" and alpha == 1:
        a, b = b, a
    a = a if is_activation(a) else _value(a)
    return cv.emit(op, [a, b], dict(act=(-INF, INF), alpha=float(alpha)))


@F.rule(aten.add.Tensor, aten.add.Scalar)
def add(cv, a, b, alpha=1):
    return _add_sub(cv, "add", a, b, alpha)


@F.rule(aten.sub.Tensor, aten.sub.Scalar)
def sub(cv, a, b, alpha=1):
    return _add_sub(cv, "sub", a, b, alpha)


@F.rule(aten.rsub.Scalar, aten.rsub.Tensor)
def rsub(cv, a, b, alpha=1):
    return _add_sub(cv, "sub", b, a, alpha)


@F.rule(aten.neg.default)
def neg(cv, x):
    return cv.emit("mul", [cv.act(x), np.asarray(-1.0, np.float32)], dict(act=(-INF, INF)))


@F.rule(aten.div.Tensor, aten.div.Scalar, aten.div.Tensor_mode)
def div(cv, a, b, rounding_mode=None):
    if rounding_mode is not None:
        raise cv.fail(f"division with rounding_mode={rounding_mode!r} is not supported (true division only)")
    if not is_activation(b):  # x / c: x * (1 / c), as PyTorch's compiled kernels do
        return cv.emit("mul", [cv.act(a), np.asarray(np.float32(1.0) / _value(b), np.float32)], dict(act=(-INF, INF)))
    return cv.emit("div", [a if is_activation(a) else _value(a), b], dict(act=(-INF, INF)))


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

def _float_constants(g: Graph, n: Node, in_q: list, out_q: tuple) -> bool:
    """Activations, or float constants (quantized when lowered, TFLite's way)."""
    return all(isinstance(i, (int, np.ndarray)) for i in n.inputs)


F.int8("add", "sub", "mul", "div")(_float_constants)
F.int16("add", "sub", "mul")(_float_constants)
F.int8("maximum", "minimum", shared=True)(_float_constants)  # a constant at the shared quantization
F.int8("clamp", shared=True)(always)
F.int8("masked_fill", shared=True)(always)  # the filled value quantized at x's quantization
F.int16("masked_fill", shared=True)(always)
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


def _alpha_code(n: Node) -> tuple[str, float]:
    """ADD or SUB, and the factor of the second operand (|alpha|): add with a
    negative alpha subtracts, sub with one adds."""
    alpha = float(n.attrs.get("alpha", 1.0))
    subtract = (n.op.lstrip("q") == "sub") != (alpha < 0)
    return ("SUB" if subtract else "ADD"), abs(alpha)


@F.lower("add", "sub", "mul", "div", "maximum", "minimum")
def _binary_f32(lay, n: Node) -> None:
    shape = lay.g.shapes[n.out]
    rank = len(shape)
    order = order_of(lay, n)
    ins = [operands.activation(lay, v, rank, order, n) if isinstance(v, int)
           else lay.const_operand(v, rank, order, f"{n.name}_c{k}") for k, v in enumerate(n.inputs)]
    code, params = n.op.upper(), ("BinaryParams", act_params(n.attrs["act"]))
    if n.op in ("add", "sub"):
        code, factor = _alpha_code(n)
        if factor != 1.0:  # a - alpha * b: the product first, as PyTorch
            mid = lay.activation(f"{n.name}_alpha", lay.p.tensors[ins[1]].dims)
            alpha = lay.const_operand(np.float32(factor), rank, order, f"{n.name}_alpha")
            lay.emit("MUL_F32", [ins[1], alpha], [mid], ("BinaryParams", act_params((-INF, INF))), n, "mul")
            ins[1] = mid
    out = lay.activation(n.name, tuple(shape[d] for d in order))
    lay.emit(f"{code}_F32", ins, [out], params, n, n.op)
    lay.val[n.out] = (out, order)


@F.lower("qadd", "qsub", "qmul", "qdiv", "qmaximum", "qminimum")
def _binary_s8(lay, n: Node) -> None:
    shape = lay.g.shapes[n.out]
    order = order_of(lay, n)
    s_out, zp_out = n.attrs["out_q"]
    op = n.op[1:]
    if op in ("maximum", "minimum"):  # one quantization in and out: the raw values (a constant at it)
        ain, bin_ = (operands.operand_at(lay, n, k, len(shape), order, (s_out, zp_out)) for k in (0, 1))
        out = lay.activation(n.name, tuple(shape[d] for d in order), like=n.out)
        lay.emit(f"{op.upper()}_S8", [ain, bin_], [out], None, n, op)
        lay.val[n.out] = (out, order)
        return
    (ain, s1, z1), (bin_, s2, z2) = (operands.operand_q(lay, n, k, len(shape), order, 8) for k in (0, 1))
    lo, hi = act_q(n.attrs["act"], s_out, zp_out)
    out = lay.activation(n.name, tuple(shape[d] for d in order), like=n.out)
    if op in ("add", "sub"):
        code, factor = _alpha_code(n)
        table = "QuantAddParams"
        make = reference.add_params if code == "ADD" else reference.sub_params
        params = make(s1, z1, s2 * factor, z2, s_out, zp_out, lo, hi)
    elif op == "mul":
        code, table = "MUL", "QuantMulParams"
        params = reference.mul_params(s1, z1, s2, z2, s_out, zp_out, lo, hi)
    else:
        code, table = "DIV", "QuantDivParams"
        params = reference.div_params(s1, z1, s2, z2, s_out, zp_out, lo, hi)
    lay.emit(f"{code}_S8", [ain, bin_], [out], (table, {k: int(v) for k, v in params.items()}), n, op)
    lay.val[n.out] = (out, order)


@F.lower("compare")
def _compare_op(lay, n: Node) -> None:
    shape = lay.g.shapes[n.out]
    rank, order = len(shape), order_of(lay, n)
    dtype = next(lay.g.dtypes.get(v, "F32") for v in n.inputs if isinstance(v, int))
    ins = [operands.activation(lay, v, rank, order, n) if isinstance(v, int) else
           lay.constant(f"{n.name}_c{k}", operands.at_rank(np.asarray(v, NP_OF[dtype]), rank, order), dtype)
           for k, v in enumerate(n.inputs)]
    out = lay.activation(n.name, tuple(shape[d] for d in order), like=n.out)
    lay.emit("COMPARE", ins, [out], ("CompareParams", {"op": int(n.attrs["op"])}), n, "compare")
    lay.val[n.out] = (out, order)


def _masked_fill_op(lay, n: Node, qvalue: int) -> None:
    x, m = n.inputs
    shape = lay.g.shapes[n.out]
    rank = len(shape)
    order = lay.val[x][1] if isinstance(x, int) else order_of(lay, n)
    xin = lay.get(x, order, n) if isinstance(x, int) else lay.constant(f"{n.name}_x", operands.at_rank(x, rank, order))
    mask = operands.activation(lay, m, rank, order, n) if isinstance(m, int) else \
        lay.constant(f"{n.name}_mask", operands.at_rank(m, rank, order), "U8")
    out = lay.activation(n.name, tuple(shape[d] for d in order), like=n.out)
    lay.emit("MASKED_FILL", [xin, mask], [out], ("MaskedFillParams", {"value": float(n.attrs["value"]),
                                                                      "qvalue": int(qvalue)}), n, "masked_fill")
    lay.val[n.out] = (out, order)


@F.lower("masked_fill")
def _masked_fill_f32(lay, n: Node) -> None:
    _masked_fill_op(lay, n, 0)


@F.lower("qmasked_fill")
def _masked_fill_s8(lay, n: Node) -> None:
    s, zp = n.attrs["out_q"]
    _masked_fill_op(lay, n, int(reference.quantize(np.float32(n.attrs["value"]), s, zp)))


@F.lower16("qmasked_fill")
def _masked_fill_s16(lay, n: Node) -> None:
    s, zp = n.attrs["out_q"]
    _masked_fill_op(lay, n, int(reference.quantize_s16(np.float32(n.attrs["value"]), s, zp)))


@F.lower16("qadd", "qsub", "qmul")
def _binary_s16(lay, n: Node) -> None:
    shape = lay.g.shapes[n.out]
    order = order_of(lay, n)
    (ain, s1, _), (bin_, s2, _) = (operands.operand_q(lay, n, k, len(shape), order, 16) for k in (0, 1))
    s_out, _ = n.attrs["out_q"]
    lo, hi = act_q16(n.attrs["act"], s_out)
    if n.op == "qmul":
        code, table = "MUL_S16", "QuantMulParams"
        params = reference.mul_params(s1, 0, s2, 0, s_out, 0, lo, hi)
    else:
        code, factor = _alpha_code(n)
        table = "QuantAddParams"
        params = (reference.add_params_s16(s1, s2 * factor, s_out, lo, hi) if code == "ADD" else
                  reference.sub_params(s1, 0, s2 * factor, 0, s_out, 0, lo, hi, bits=16))
        code += "_S16"
    out = lay.activation(n.name, tuple(shape[d] for d in order), like=n.out)
    lay.emit(code, [ain, bin_], [out], (table, {k: int(v) for k, v in params.items()}), n, n.op[1:])
    lay.val[n.out] = (out, order)


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
