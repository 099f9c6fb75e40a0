"""Pooling and resizing.

ATen: max_pool2d, avg_pool2d, adaptive_avg_pool2d (a global one is a mean:
reduce.py). Program ops: MAX_POOL2D / AVG_POOL2D at F32, S8 and S16; int8
and int16 pools share their input's quantization. Reference twin:
reference/pool_resize.py.
"""

from __future__ import annotations

import numpy as np
import torch

from ..graph import INF, Graph, Node, pair
from .family import Family
from .helpers import NHWC, act_params, act_q, act_q16

F = Family("pool_resize")
aten = torch.ops.aten


# -- ATen -> logical ---------------------------------------------------------------------------

@F.rule(aten.max_pool2d.default)
def max_pool2d(cv, x, kernel, stride=None, padding=0, dilation=1, ceil_mode=False):
    kh, kw = pair(kernel)
    stride = pair(stride) if stride else (kh, kw)
    return cv.emit("max_pool2d", [cv.act(x)], dict(
        kernel=(kh, kw), stride=stride, padding=pair(padding), dilation=pair(dilation),
        count_include_pad=False, divisor_override=0, act=(-INF, INF)))


@F.rule(aten.avg_pool2d.default)
def avg_pool2d(cv, x, kernel, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    kh, kw = pair(kernel)
    stride = pair(stride) if stride else (kh, kw)
    return cv.emit("avg_pool2d", [cv.act(x)], dict(
        kernel=(kh, kw), stride=stride, padding=pair(padding), dilation=(1, 1),
        count_include_pad=bool(count_include_pad), divisor_override=int(divisor_override or 0),
        act=(-INF, INF)))


@F.rule(aten.adaptive_avg_pool2d.default)
def adaptive_avg_pool2d(cv, x, output_size):
    n, c, h, w = cv.shape(x)
    oh, ow = pair(output_size)
    if (oh, ow) == (1, 1):
        return cv.emit("mean", [cv.act(x)], dict(dims=(2, 3)))
    if h % oh or w % ow:
        raise cv.fail(f"adaptive average pooling from {h}x{w} to {oh}x{ow} has uneven windows")
    return avg_pool2d(cv, x, (h // oh, w // ow))


# -- which instances have integer kernels ------------------------------------------------------

def no_partial_windows(g: Graph, n: Node) -> bool:
    """ceil_mode windows that start in the padding divide differently in PyTorch."""
    _, _, h, w = g.shapes[n.inputs[0]]  # type: ignore[index]
    _, _, oh, ow = g.shapes[n.out]
    (kh, kw), (sh, sw), (ph, pw) = n.attrs["kernel"], n.attrs["stride"], n.attrs["padding"]
    return oh == (h + 2 * ph - kh) // sh + 1 and ow == (w + 2 * pw - kw) // sw + 1


@F.int8("avg_pool2d", shared=True)
@F.int16("avg_pool2d", shared=True)
def _avg_pool_int(g: Graph, n: Node, in_q: list, out_q: tuple) -> bool:
    a = n.attrs
    no_pad = a["padding"] == (0, 0) or not a["count_include_pad"]
    return no_pad and not a["divisor_override"] and no_partial_windows(g, n)


@F.int8("max_pool2d", shared=True)
@F.int16("max_pool2d", shared=True)
def _max_pool_int(g: Graph, n: Node, in_q: list, out_q: tuple) -> bool:
    return n.attrs["dilation"] == (1, 1) and no_partial_windows(g, n)


# -- logical -> program ops --------------------------------------------------------------------

@F.lower("max_pool2d", "avg_pool2d")
def _pool_f32(lay, n: Node) -> None:
    x = n.inputs[0]
    a = n.attrs
    shape = lay.g.shapes[n.out]
    xin = lay.get(x, NHWC, n)
    out = lay.activation(n.name, tuple(shape[d] for d in NHWC))
    params = {
        "kernel_h": a["kernel"][0], "kernel_w": a["kernel"][1],
        "stride_h": a["stride"][0], "stride_w": a["stride"][1],
        "pad_top": a["padding"][0], "pad_left": a["padding"][1],
        "dilation_h": a["dilation"][0], "dilation_w": a["dilation"][1],
        "count_include_pad": a["count_include_pad"], "divisor_override": a["divisor_override"],
        **act_params(a["act"]),
    }
    code = "MAX_POOL2D_F32" if n.op == "max_pool2d" else "AVG_POOL2D_F32"
    lay.emit(code, [xin], [out], ("Pool2dParams", params), n, n.op)
    lay.val[n.out] = (out, NHWC)


@F.lower("qmax_pool2d", "qavg_pool2d", "qmean")
def pool_s8(lay, n: Node) -> None:
    """Also a global mean (qmean): an average pool whose window is the whole plane."""
    x = n.inputs[0]
    a = n.attrs
    s_out, zp_out = a["out_q"]
    xin = lay.get(x, NHWC, n)
    batch, channels, h, w = lay.g.shapes[x]
    lo, hi = act_q(a.get("act", (-np.inf, np.inf)), s_out, zp_out)
    if n.op == "qmean":
        params = {"kernel_h": h, "kernel_w": w, "stride_h": 1, "stride_w": 1, "pad_top": 0, "pad_left": 0}
        out_nhwc = (batch, 1, 1, channels)
        code = "AVG_POOL2D_S8"
    else:
        params = {"kernel_h": a["kernel"][0], "kernel_w": a["kernel"][1], "stride_h": a["stride"][0],
                  "stride_w": a["stride"][1], "pad_top": a["padding"][0], "pad_left": a["padding"][1]}
        shape = lay.g.shapes[n.out]
        out_nhwc = tuple(shape[d] for d in NHWC)
        code = "MAX_POOL2D_S8" if n.op == "qmax_pool2d" else "AVG_POOL2D_S8"
    out = lay.activation(n.name, out_nhwc, like=n.out)
    params.update(act_min=lo, act_max=hi)
    lay.emit(code, [xin], [out], ("QuantPool2dParams", params), n, n.op[1:])
    if n.op == "qmean" and len(lay.g.shapes[n.out]) == 2:  # keepdim=False: [n, 1, 1, c] holds [n, c]
        lay.val[n.out] = (lay.alias(out, lay.g.shapes[n.out]), (0, 1))
    else:
        lay.val[n.out] = (out, NHWC)


@F.lower16("qmax_pool2d", "qavg_pool2d", "qmean")
def _pool_s16(lay, n: Node) -> None:
    """The int8 pool retargeted: the same operands and params with int16
    codes and bounds."""
    pool_s8(lay, n)
    op = lay.p.ops[-1]
    op.code = op.code[:-2] + "S16"
    lo, hi = act_q16(n.attrs.get("act", (-np.inf, np.inf)), n.attrs["out_q"][0])
    op.params[1].update(act_min=lo, act_max=hi)
