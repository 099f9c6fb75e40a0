"""Activations beyond clamp, as lookup tables at int8 and int16.

ATen: gelu (erf and tanh), silu, hardsigmoid, elu, exp, rsqrt, sqrt, reciprocal (one
"activation" node each), leaky_relu and prelu ("prelu", alpha a constant),
glu ("glu"); and the int16 forms of sigmoid, tanh and hardswish (their int8
tables are elementwise.py's). Program ops: ACTIVATION_F32; LUT_S8 (256
entries, TFLite's LUTPopulate<int8_t>) and LUT_S16 (513 interpolated
entries, TFLite's LUTPopulate<int16_t>) of the same float function, so every
activation runs at int8 and at a16w8 without a float fallback; PRELU at F32,
S8 and S16 (TFLite's PRELU, alpha int8 per tensor); GLU at F32, S8 and S16
(the sigmoid table, then MUL). Reference twin: reference/activations.py.
"""

from __future__ import annotations

import numpy as np
import torch

from ... import reference
from ..graph import Node, const, dim, is_activation
from .family import Family, always
from .helpers import act_q16
from .operands import at_rank, const_q

F = Family("activations")
aten = torch.ops.aten


# -- ATen -> logical ---------------------------------------------------------------------------

def _activation(fn: str):
    def convert(cv, x, *rest, **kw):
        return cv.emit("activation", [cv.act(x)], dict(fn=fn, alpha=1.0))
    return convert


F.rule(aten.silu.default)(_activation("silu"))
F.rule(aten.hardsigmoid.default)(_activation("hardsigmoid"))
F.rule(aten.exp.default)(_activation("exp"))
F.rule(aten.rsqrt.default)(_activation("rsqrt"))
F.rule(aten.sqrt.default)(_activation("sqrt"))
F.rule(aten.reciprocal.default)(_activation("reciprocal"))


@F.rule(aten.gelu.default)
def gelu(cv, x, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise cv.fail(f"GELU with approximate={approximate!r} (PyTorch knows 'none' and 'tanh')")
    return cv.emit("activation", [cv.act(x)], dict(fn="gelu" if approximate == "none" else "gelu_tanh",
                                                    alpha=1.0))


@F.rule(aten.elu.default)
def elu(cv, x, alpha=1.0, scale=1.0, input_scale=1.0):
    if scale != 1 or input_scale != 1:
        raise cv.fail(f"ELU with scale {scale} and input_scale {input_scale} (SELU/CELU) is not supported")
    return cv.emit("activation", [cv.act(x)], dict(fn="elu", alpha=float(alpha)))


@F.rule(aten.leaky_relu.default)
def leaky_relu(cv, x, negative_slope=0.01):
    return cv.emit("prelu", [cv.act(x), np.full((1,), negative_slope, np.float32)])


@F.rule(aten.prelu.default, aten._prelu_kernel.default)
def prelu(cv, x, weight):
    x = cv.act(x)
    if is_activation(weight):
        raise cv.fail("PReLU weights must be constants (parameters)")
    w = const(weight).reshape(-1)
    rank = len(cv.shape(x))
    if w.size != 1:  # one slope per channel (dim 1), as nn.PReLU(num_parameters=C)
        if rank < 2 or cv.shape(x)[1] != w.size:
            raise cv.fail(f"PReLU with {w.size} slopes for an input of shape {list(cv.shape(x))}")
        w = w.reshape((1, -1) + (1,) * (rank - 2))
    return cv.emit("prelu", [x, w.astype(np.float32)])


@F.rule(aten.glu.default)
def glu(cv, x, d=-1):
    x = cv.act(x)
    rank = len(cv.shape(x))
    d = dim(int(d), rank)
    if cv.shape(x)[d] % 2:
        raise cv.fail(f"GLU halves dim {d} of {list(cv.shape(x))}: its size must be even")
    return cv.emit("glu", [x], dict(dim=d))


# -- which instances have integer kernels ------------------------------------------------------

F.int8("activation", "prelu", "glu")(always)
F.int16("activation", "prelu", "glu", "sigmoid", "tanh", "hardswish")(always)


# -- logical -> program ops --------------------------------------------------------------------

def _fn(n: Node) -> str:
    return n.attrs["fn"] if n.op.lstrip("q") == "activation" else n.op.lstrip("q")


@F.lower("activation")
def _activation_f32(lay, n: Node) -> None:
    tid, perm = lay.val[n.inputs[0]]
    out = lay.activation(n.name, lay.p.tensors[tid].dims)
    params = {"fn": reference.ACTIVATION_FN[n.attrs["fn"]], "alpha": float(n.attrs["alpha"])}
    lay.emit("ACTIVATION_F32", [tid], [out], ("ActivationParams", params), n, n.attrs["fn"])
    lay.val[n.out] = (out, perm)


@F.lower("qactivation")
def _activation_s8(lay, n: Node) -> None:
    tid, perm = lay.val[n.inputs[0]]
    (s_in, zp_in), = n.attrs["in_q"]
    s_out, zp_out = n.attrs["out_q"]
    table = reference.table_s8(_fn(n), s_in, zp_in, s_out, zp_out, n.attrs.get("alpha", 1.0))
    out = lay.activation(n.name, lay.p.tensors[tid].dims, like=n.out)
    lay.emit("LUT_S8", [tid, lay.constant(f"{n.name}_table", table, "I8")], [out], None, n, _fn(n))
    lay.val[n.out] = (out, perm)


@F.lower16("qactivation", "qsigmoid", "qtanh", "qhardswish")
def _activation_s16(lay, n: Node) -> None:
    tid, perm = lay.val[n.inputs[0]]
    (s_in, _), = n.attrs["in_q"]
    s_out, _ = n.attrs["out_q"]
    table = reference.table_s16(_fn(n), s_in, s_out, n.attrs.get("alpha", 1.0))
    out = lay.activation(n.name, lay.p.tensors[tid].dims, like=n.out)
    lay.emit("LUT_S16", [tid, lay.constant(f"{n.name}_table", table, "I16")], [out], None, n, _fn(n))
    lay.val[n.out] = (out, perm)


@F.lower("prelu")
def _prelu_f32(lay, n: Node) -> None:
    x, w = n.inputs
    shape = lay.g.shapes[n.out]
    tid, order = lay.val[x]
    out = lay.activation(n.name, lay.p.tensors[tid].dims)
    alpha = lay.const_operand(w, len(shape), order, f"{n.name}_alpha")
    lay.emit("PRELU_F32", [tid, alpha], [out], ("BinaryParams", {}), n, "prelu")
    lay.val[n.out] = (out, order)


def _prelu_q(lay, n: Node, bits: int) -> None:
    """TFLite's PRELU: alpha int8 per tensor (symmetric when all slopes share
    a sign, else over their range), whatever the activations' width."""
    x, w = n.inputs
    shape = lay.g.shapes[n.out]
    tid, order = lay.val[x]
    (s_in, zp_in), = n.attrs["in_q"]
    s_out, zp_out = n.attrs["out_q"]
    q, s_a, zp_a = const_q(w, 8)
    alpha = lay.constant(f"{n.name}_alpha", at_rank(q, len(shape), order), "I8")
    lay.p.tensors[alpha].scale, lay.p.tensors[alpha].zero_point = s_a, zp_a
    lo, hi = (-128, 127) if bits == 8 else act_q16((-np.inf, np.inf), s_out)
    params = reference.prelu_params(s_in, zp_in, s_a, zp_a, s_out, zp_out, lo, hi)
    out = lay.activation(n.name, lay.p.tensors[tid].dims, like=n.out)
    lay.emit(f"PRELU_S{bits}", [tid, alpha], [out], ("QuantPreluParams", {k: int(v) for k, v in params.items()}),
             n, "prelu")
    lay.val[n.out] = (out, order)


F.lower("qprelu")(lambda lay, n: _prelu_q(lay, n, 8))
F.lower16("qprelu")(lambda lay, n: _prelu_q(lay, n, 16))


def _glu_input(lay, n: Node) -> tuple[int, tuple[int, ...], int]:
    """x in an order where GLU's dim is whole (any order keeps it whole: the
    halves are slices of that physical axis); (tensor, order, physical axis)."""
    tid, order = lay.val[n.inputs[0]]
    return tid, order, order.index(n.attrs["dim"])


@F.lower("glu")
def _glu_f32(lay, n: Node) -> None:
    tid, order, axis = _glu_input(lay, n)
    shape = lay.g.shapes[n.out]
    out = lay.activation(n.name, tuple(shape[d] for d in order))
    lay.emit("GLU_F32", [tid], [out], ("GluParams", {"axis": axis}), n, "glu")
    lay.val[n.out] = (out, order)


def _glu_q(lay, n: Node, bits: int) -> None:
    tid, order, axis = _glu_input(lay, n)
    shape = lay.g.shapes[n.out]
    (s_in, zp_in), = n.attrs["in_q"]
    s_out, zp_out = n.attrs["out_q"]
    table = reference.glu_table(s_in, zp_in, bits)
    params = {k: int(v) for k, v in reference.glu_params(s_in, zp_in, s_out, zp_out, bits).items()}
    out = lay.activation(n.name, tuple(shape[d] for d in order), like=n.out)
    ins = [tid, lay.constant(f"{n.name}_sigmoid", table, "I8" if bits == 8 else "I16")]
    lay.emit(f"GLU_S{bits}", ins, [out], ("QuantGluParams", {"axis": axis, **params}), n, "glu")
    lay.val[n.out] = (out, order)


F.lower("qglu")(lambda lay, n: _glu_q(lay, n, 8))
F.lower16("qglu")(lambda lay, n: _glu_q(lay, n, 16))

