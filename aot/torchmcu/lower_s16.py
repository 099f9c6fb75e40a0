"""a16w8 lowering: int16 activations (symmetric, zero point 0) with int8
weights, on the ops CMSIS-NN has s16 kernels for.

lower.fold_qdq folds dequantize -> op -> quantize at int16 into one op (the
node's attrs carry bits=16) when `int16_supported` says the op has an int16
kernel; layout.py hands those nodes, and the int16 quantize / dequantize
nodes, to `emit`.

Which ops run in int16:
  conv2d (groups 1)          CONV2D_S16            arm_convolve_wrapper_s16
  depthwise conv2d           DEPTHWISE_CONV2D_S16  arm_depthwise_conv_wrapper_s16
  linear                      LINEAR_S16            arm_fully_connected_s16 (row by row)
  add, mul (two activations)  ADD_S16, MUL_S16      arm_elementwise_add_s16 / mul_s16
  max / avg pool, global mean MAX_POOL2D_S16, AVG_POOL2D_S16  arm_max_pool_s16 / arm_avgpool_s16
  reshape, permute            aliases / PERMUTE (any dtype)
  softmax (last axis)         SOFTMAX_S16           TFLM's int16 softmax (portable only: see ops_s16.cc)
Where precisions meet (mixed precision), dequantize -> quantize between an
int8 and an int16 value becomes one REQUANTIZE (TFLite's QUANTIZE from an
integer input): integer arithmetic, no float buffer.
Everything else (sigmoid, tanh, hardswish, standalone clamp, cat,
pad, maximum/minimum, batch matmul) stays as the quantizer left it:
DEQUANTIZE_S16 -> the float kernel -> QUANTIZE_S16, so every model that
compiles at int8 compiles at a16w8 (compile() warns about each such op).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import reference
from .lower import Graph, Node, QConst, _int8_supported

INT16_OPS = {"conv2d", "linear", "add", "mul", "max_pool2d", "avg_pool2d", "mean", "reshape", "permute", "softmax"}
NHWC = (0, 2, 3, 1)


def int16_supported(g: Graph, n: Node, in_q: list[tuple[float, int]], out_q: tuple[float, int]) -> bool:
    """Whether an int16 kernel implements this instance (else it runs in float)."""
    if n.op not in INT16_OPS or any(zp != 0 for _, zp in in_q) or out_q[1] != 0:
        return False
    if n.op == "softmax":  # TFLite's int16 softmax: output at 1/32768, rows of at most 2^15
        return n.attrs["dim"] == len(g.shapes[n.out]) - 1 and out_q == (1 / 32768, 0) and \
            g.shapes[n.out][-1] <= 32768
    if n.op in ("conv2d", "linear"):
        w = n.inputs[1]
        if not isinstance(w, QConst) or w.bits != 8:
            return False
    return _int8_supported(g, n, in_q, out_q)


def fold_requantize(g: Graph) -> None:
    """quantize(dequantize(x)) where x and the result differ in width (int8
    and int16): one "requantize" node reading x."""
    producer = {n.out: n for n in g.nodes}
    for k, n in enumerate(g.nodes):
        if n.op != "quantize":
            continue
        p = producer.get(n.inputs[0])  # type: ignore[arg-type]
        if p is None or p.op != "dequantize" or p.attrs.get("bits", 8) == n.attrs.get("bits", 8):
            continue
        g.nodes[k] = Node("requantize", [p.inputs[0]], {"bits": 16}, n.out, n.name, n.source)


def _act_q16(act: tuple[float, float], scale: float) -> tuple[int, int]:
    """A float activation range as int16 bounds (zero point 0), as TFLite's
    CalculateActivationRangeQuantized."""
    def q(v: float) -> int:
        return int(np.sign(v) * np.floor(abs(v) / scale + 0.5))
    lo = reference.INT16_MIN if act[0] == -np.inf else max(reference.INT16_MIN, q(act[0]))
    hi = reference.INT16_MAX if act[1] == np.inf else min(reference.INT16_MAX, q(act[1]))
    return lo, hi


def _bias_q64(b: np.ndarray | None, s_in: float, s_w: np.ndarray, cout: int) -> np.ndarray:
    """Float bias at scale s_in * s_w[c], as int64 (TFLite's int16x8 bias)."""
    if b is None:
        return np.zeros(cout, np.int64)
    q = np.round(b.astype(np.float64) / (s_in * s_w.astype(np.float64)))
    return np.clip(q, -(2 ** 47), 2 ** 47 - 1).astype(np.int64)


def _conv2d(lay: Any, n: Node) -> None:
    x, w, b = n.inputs
    assert isinstance(w, QConst)
    (s_in, _), = n.attrs["in_q"]
    s_out, _ = n.attrs["out_q"]
    out_shape = lay.g.shapes[n.out]
    xin = lay.get(x, NHWC, n)
    out = lay.activation(n.name, tuple(out_shape[d] for d in NHWC), like=n.out)
    cout, _, kh, kw = w.shape
    s_w = np.broadcast_to(np.asarray(w.scale, np.float64), (cout,))
    mult, shift = reference.conv_requant(s_in, s_w, s_out)
    lo, hi = _act_q16(n.attrs["act"], s_out)
    a = n.attrs
    params = {
        "stride_h": a["stride"][0], "stride_w": a["stride"][1], "pad_top": a["padding"][0],
        "pad_left": a["padding"][1], "dilation_h": a["dilation"][0], "dilation_w": a["dilation"][1],
        "input_offset": 0, "output_offset": 0, "act_min": lo, "act_max": hi,
    }
    cin = lay.g.shapes[x][1]
    if a["groups"] > 1:
        code, wt = "DEPTHWISE_CONV2D_S16", np.transpose(w.data, (1, 2, 3, 0))
        params["multiplier"] = cout // cin
    else:
        code, wt = "CONV2D_S16", np.transpose(w.data, (0, 2, 3, 1))
    wid = lay.constant(f"{n.name}_weight", wt, "I8")
    lay.p.tensors[wid].channel_scales = tuple(float(v) for v in s_w)
    lay.p.tensors[wid].channel_axis = 3 if a["groups"] > 1 else 0
    ins = [xin, wid, lay.constant(f"{n.name}_bias", _bias_q64(b, s_in, s_w, cout), "I64"),
           lay.constant(f"{n.name}_multiplier", mult, "I32"), lay.constant(f"{n.name}_shift", shift, "I32")]
    nbytes = scratch_bytes(code, wt.shape, lay.p.tensors[xin].dims)
    if nbytes:  # CMSIS-NN's im2col buffer (int16), planned RAM live during this op
        ins.append(lay.activation(f"{n.name}_scratch", (nbytes // 2,), like=n.out))
    macs = int(np.prod(out_shape)) * int(w.shape[1]) * kh * kw
    lay.emit(code, ins, [out], ("QuantConv2dParams", params), n, "conv2d", macs)
    lay.val[n.out] = (out, NHWC)


def scratch_bytes(code: str, w_dims: tuple[int, ...], x_dims: tuple[int, ...]) -> int:
    """Bytes of CMSIS-NN's buffer for the s16 convolutions, the largest any
    ISA asks (arm_convolve_wrapper_s16_get_buffer_size: im2col of two output
    columns of kh * kw * cin int16 values, four rounded up to 8 values with
    MVE; the depthwise fast path: kh * kw * cin int16 values, four with
    MVE plus 8 bytes). The portable kernels ignore it; planning it always
    keeps one program for every kernel set."""
    if code == "CONV2D_S16":
        _, kh, kw, cin = w_dims
        return 4 * ((kh * kw * cin + 7) // 8 * 8) * 2
    if code == "DEPTHWISE_CONV2D_S16":
        _, kh, kw, _ = w_dims
        return 4 * kh * kw * x_dims[3] * 2 + 8
    return 0


def _linear(lay: Any, n: Node) -> None:
    x, w, b = n.inputs
    assert isinstance(w, QConst)
    (s_in, _), = n.attrs["in_q"]
    s_out, _ = n.attrs["out_q"]
    shape = lay.g.shapes[n.out]
    xin = lay.get(x, tuple(range(len(lay.g.shapes[x]))), n)
    out = lay.activation(n.name, shape, like=n.out)
    cout = w.shape[0]
    s_w = np.broadcast_to(np.asarray(w.scale, np.float64), (cout,))
    mult, shift = reference.conv_requant(s_in, s_w, s_out)
    bias = _bias_q64(b, s_in, s_w, cout)
    lo, hi = _act_q16(n.attrs["act"], s_out)
    wid = lay.constant(f"{n.name}_weight", w.data, "I8")
    lay.p.tensors[wid].channel_scales = tuple(float(v) for v in s_w)
    lay.p.tensors[wid].channel_axis = 0
    ins = [xin, wid, lay.constant(f"{n.name}_bias", bias, "I64"),
           lay.constant(f"{n.name}_multiplier", mult, "I32"), lay.constant(f"{n.name}_shift", shift, "I32")]
    params = {"input_offset": 0, "output_offset": 0, "act_min": lo, "act_max": hi}
    lay.emit("LINEAR_S16", ins, [out], ("QuantLinearParams", params), n, "linear",
             int(np.prod(shape)) * int(w.shape[1]))
    lay.val[n.out] = (out, tuple(range(len(shape))))


def _binary(lay: Any, n: Node) -> None:
    a, b = n.inputs
    shape = lay.g.shapes[n.out]
    rank = len(shape)
    if len(lay.g.shapes[a]) != rank or len(lay.g.shapes[b]) != rank:
        raise lay.fail(n, "broadcasting an activation of lower rank is not supported")
    ain, perm = lay.val[a]
    bin_ = lay.get(b, perm, n)
    (s1, _), (s2, _) = n.attrs["in_q"]
    s_out, _ = n.attrs["out_q"]
    lo, hi = _act_q16(n.attrs["act"], s_out)
    if n.op == "qadd":
        code, table = "ADD_S16", "QuantAddParams"
        params = reference.add_params_s16(s1, s2, s_out, lo, hi)
    else:
        code, table = "MUL_S16", "QuantMulParams"
        params = reference.mul_params(s1, 0, s2, 0, s_out, 0, lo, hi)
    out = lay.activation(n.name, tuple(shape[d] for d in perm), like=n.out)
    lay.emit(code, [ain, bin_], [out], (table, {k: int(v) for k, v in params.items()}), n, n.op[1:])
    lay.val[n.out] = (out, perm)


def _pool(lay: Any, n: Node) -> None:
    """layout's int8 pool, retargeted: the same operands and params with
    int16 codes and bounds."""
    lay.qpool(n)
    op = lay.p.ops[-1]
    op.code = op.code[:-2] + "S16"
    lo, hi = _act_q16(n.attrs.get("act", (-np.inf, np.inf)), n.attrs["out_q"][0])
    op.params[1].update(act_min=lo, act_max=hi)


def _retarget(method: str, code: str):
    """layout's quantize / dequantize (the last op they emit), at int16."""
    def run(lay: Any, n: Node) -> None:
        getattr(lay, method)(n)
        lay.p.ops[-1].code = code
    return run


def _softmax(lay: Any, n: Node) -> None:
    x = n.inputs[0]
    rank = len(lay.g.shapes[x])
    tid = lay.get(x, tuple(range(rank)), n)
    (s_in, _), = n.attrs["in_q"]
    out = lay.activation(n.name, lay.p.tensors[tid].dims, like=n.out)
    exp_lut, one_lut = reference.softmax_luts_s16()
    params = {k: int(v) for k, v in reference.softmax_params_s16(s_in).items()}
    ins = [tid, lay.constant(f"{n.name}_exp_lut", exp_lut, "I16"), lay.constant(f"{n.name}_one_lut", one_lut, "I16")]
    lay.emit("SOFTMAX_S16", ins, [out], ("QuantSoftmaxParams", params), n, "softmax")
    lay.val[n.out] = (out, tuple(range(rank)))


def _requantize(lay: Any, n: Node) -> None:
    x = n.inputs[0]
    tid, perm = lay.val[x]
    out = lay.activation(n.name, lay.p.tensors[tid].dims, like=n.out)
    lay.emit("REQUANTIZE", [tid], [out], None, n, "requantize")
    lay.val[n.out] = (out, perm)


HANDLERS = {
    "qsoftmax": _softmax,
    "requantize": _requantize,
    "qconv2d": _conv2d, "qlinear": _linear, "qadd": _binary, "qmul": _binary,
    "qmax_pool2d": _pool, "qavg_pool2d": _pool, "qmean": _pool,
    "qreshape": lambda lay, n: lay.reshape(n), "qpermute": lambda lay, n: lay.permute(n),
    "quantize": _retarget("quantize", "QUANTIZE_S16"), "dequantize": _retarget("dequantize", "DEQUANTIZE_S16"),
}


def emit(lay: Any, n: Node) -> None:
    HANDLERS[n.op](lay, n)
