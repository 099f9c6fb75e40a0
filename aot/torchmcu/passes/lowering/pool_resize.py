"""Pooling and resizing.

ATen: max_pool1d/2d (ceil_mode, dilation), avg_pool1d/2d (ceil_mode,
count_include_pad, divisor_override), adaptive_avg_pool1d/2d (a global one
is a mean: reduce.py; even windows an average pool; uneven ones PyTorch's
adaptive windows), upsample_nearest1d/2d (nearest and nearest-exact) and
upsample_linear1d / bilinear2d (align_corners either way). 1-D ops run as
the 2-D ones with H = 1 (helpers.nhwc_in). max pooling's indices are
refused. Program ops: MAX_POOL2D / AVG_POOL2D / ADAPTIVE_AVG_POOL2D and
RESIZE_BILINEAR at F32, S8 and S16, RESIZE_NEAREST for any dtype; the
integer ones share their input's quantization. Reference twin:
reference/pool_resize.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..graph import INF, Node, pair
from .family import Family, always
from .helpers import act_params, act_q, act_q16, nhwc_in, nhwc_out, spatial_hw

F = Family("pool_resize")
aten = torch.ops.aten


# -- ATen -> logical ---------------------------------------------------------------------------

def _rank_ok(cv, x, rank: int, what: str) -> Any:
    x = cv.act(x)
    if len(cv.shape(x)) != rank + 2:
        raise cv.fail(f"only batched {what} ({'NCL' if rank == 1 else 'NCHW'} input) is supported")
    return x


def _hw(v: Any, rank: int) -> tuple[int, int]:
    """A 1-D (rank 1: H = 1) or 2-D window argument as (H, W)."""
    if rank == 1:
        return (1, int(v[0] if isinstance(v, (list, tuple)) else v))
    return pair(v)


def _max_pool(cv, x, kernel, stride, padding, dilation, rank: int, shape: tuple[int, ...] | None = None):
    x = _rank_ok(cv, x, rank, "max pooling")
    k = _hw(kernel, rank)
    s = _hw(stride, rank) if stride else k
    pad = (0, _hw(padding, rank)[1]) if rank == 1 else pair(padding)
    d = _hw(dilation, rank)
    return cv.emit("max_pool2d", [x], dict(kernel=k, stride=s, padding=pad, dilation=d, count_include_pad=False,
                                           divisor_override=0, act=(-INF, INF)), shape)


@F.rule(aten.max_pool2d.default)
def max_pool2d(cv, x, kernel, stride=None, padding=0, dilation=1, ceil_mode=False):
    return _max_pool(cv, x, kernel, stride, padding, dilation, 2)


@F.rule(aten.max_pool1d.default)
def max_pool1d(cv, x, kernel, stride=None, padding=0, dilation=1, ceil_mode=False):
    return _max_pool(cv, x, kernel, stride, padding, dilation, 1)


class _PooledAndIndices(tuple):
    """max_pool2d_with_indices' (values, indices): reading the indices is
    refused (raises the error made when the op was converted)."""

    def __getitem__(self, i):  # type: ignore[override]
        if i == 1:
            raise tuple.__getitem__(self, 1)
        return tuple.__getitem__(self, i)


@F.rule(aten.max_pool2d_with_indices.default)
def max_pool2d_with_indices(cv, x, kernel, stride=None, padding=0, dilation=1, ceil_mode=False):
    shape = tuple(int(v) for v in cv.node.meta["val"][0].shape)  # (values, indices): the values' shape
    values = _max_pool(cv, x, kernel, stride, padding, dilation, 2, shape)
    return _PooledAndIndices((values, cv.fail("max pooling's indices (return_indices=True, e.g. for "
                                              "MaxUnpool2d) are not supported; use the pooled values only")))


def _avg_pool(cv, x, kernel, stride, padding, count_include_pad, divisor_override, rank: int):
    x = _rank_ok(cv, x, rank, "average pooling")
    k = _hw(kernel, rank)
    s = _hw(stride, rank) if stride else k
    pad = (0, _hw(padding, rank)[1]) if rank == 1 else pair(padding)
    return cv.emit("avg_pool2d", [x], dict(kernel=k, stride=s, padding=pad, dilation=(1, 1),
                                           count_include_pad=bool(count_include_pad),
                                           divisor_override=int(divisor_override or 0), act=(-INF, INF)))


@F.rule(aten.avg_pool2d.default)
def avg_pool2d(cv, x, kernel, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    return _avg_pool(cv, x, kernel, stride, padding, count_include_pad, divisor_override, 2)


@F.rule(aten.avg_pool1d.default)
def avg_pool1d(cv, x, kernel, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    return _avg_pool(cv, x, kernel, stride, padding, count_include_pad, None, 1)


def _adaptive(cv, x, output_size, rank: int):
    x = _rank_ok(cv, x, rank, "adaptive average pooling")
    h, w = spatial_hw(cv.shape(x))
    oh, ow = _hw(output_size, rank)
    if (oh, ow) == (1, 1) and rank == 2:
        return cv.emit("mean", [x], dict(dims=(2, 3)))
    if h % oh == 0 and w % ow == 0:  # even windows: an average pool (CMSIS-NN has one)
        return _avg_pool(cv, x, (h // oh, w // ow) if rank == 2 else w // ow, None, 0, True, None, rank)
    return cv.emit("adaptive_avg_pool2d", [x], dict(act=(-INF, INF)))


@F.rule(aten.adaptive_avg_pool2d.default, aten._adaptive_avg_pool2d.default)
def adaptive_avg_pool2d(cv, x, output_size):
    return _adaptive(cv, x, output_size, 2)


@F.rule(aten.adaptive_avg_pool1d.default)
def adaptive_avg_pool1d(cv, x, output_size):
    return _adaptive(cv, x, output_size, 1)


def _resize(cv, x, mode: str, scales: Any, align_corners: bool, rank: int):
    """PyTorch's interpolation as TFLite's RESIZE_*: nearest is
    half_pixel_centers False, nearest-exact True; bilinear without
    align_corners is half_pixel_centers True. Both sample at in / out steps
    only: a scale factor that is not out / in in float32 is refused."""
    x = _rank_ok(cv, x, rank, "interpolation")
    out = cv.out_shape()
    in_hw, out_hw = spatial_hw(cv.shape(x)), spatial_hw(out)
    if scales is not None and not (mode == "bilinear" and align_corners):
        factors = [float(f) for f in scales] if isinstance(scales, (list, tuple)) else [float(scales)] * rank
        factors = [1.0] * (2 - rank) + factors
        for i, o, f in zip(in_hw, out_hw, factors):
            if f > 0 and np.float32(1.0 / f) != np.float32(i) / np.float32(o):
                raise cv.fail(f"interpolation with scale_factor={f:g} from {i} to {o}: PyTorch samples at steps "
                              f"of 1/{f:g}, not {i}/{o}; give size=... (or recompute_scale_factor=True)")
    if mode == "bilinear":
        return cv.emit("resize", [x], dict(mode="bilinear", align_corners=bool(align_corners),
                                           half_pixel_centers=not align_corners))
    return cv.emit("resize", [x], dict(mode="nearest", align_corners=False, half_pixel_centers=mode == "exact"))


def _scales(output_size, scales):
    """The .vec overloads' scale factors, or the .default ones' per-dim scales."""
    return None if output_size is not None and scales is None else scales


@F.rule(aten.upsample_nearest2d.vec, aten.upsample_nearest1d.vec)
def upsample_nearest_vec(cv, x, output_size, scale_factors):
    return _resize(cv, x, "nearest", _scales(output_size, scale_factors), False, len(cv.shape(x)) - 2)


@F.rule(aten._upsample_nearest_exact2d.vec, aten._upsample_nearest_exact1d.vec)
def upsample_nearest_exact_vec(cv, x, output_size, scale_factors):
    return _resize(cv, x, "exact", _scales(output_size, scale_factors), False, len(cv.shape(x)) - 2)


@F.rule(aten.upsample_bilinear2d.vec, aten.upsample_linear1d.vec)
def upsample_bilinear_vec(cv, x, output_size, align_corners, scale_factors):
    return _resize(cv, x, "bilinear", _scales(output_size, scale_factors), align_corners, len(cv.shape(x)) - 2)


def _default_scales(scales: tuple) -> Any:
    return None if all(s is None for s in scales) else [s if s is not None else 0.0 for s in scales]


@F.rule(aten.upsample_nearest2d.default, aten.upsample_nearest1d.default)
def upsample_nearest(cv, x, output_size, *scales):
    return _resize(cv, x, "nearest", _default_scales(scales), False, len(cv.shape(x)) - 2)


@F.rule(aten._upsample_nearest_exact2d.default, aten._upsample_nearest_exact1d.default)
def upsample_nearest_exact(cv, x, output_size, *scales):
    return _resize(cv, x, "exact", _default_scales(scales), False, len(cv.shape(x)) - 2)


@F.rule(aten.upsample_bilinear2d.default, aten.upsample_linear1d.default)
def upsample_bilinear(cv, x, output_size, align_corners, *scales):
    return _resize(cv, x, "bilinear", _default_scales(scales), align_corners, len(cv.shape(x)) - 2)


# -- which instances have integer kernels: all, at their input's quantization ------------------

F.int8("max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "resize", shared=True)(always)
F.int16("max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "resize", shared=True)(always)


# -- logical -> program ops --------------------------------------------------------------------

def _pool_params(n: Node, shape: tuple[int, ...]) -> dict[str, Any]:
    """The window of a pool node (any dtype). count_include_pad without
    padding divides by the in-bounds taps (PyTorch clips windows at the
    padded input): it is dropped, so CMSIS-NN's pools take the op."""
    a = n.attrs
    include = bool(a["count_include_pad"]) and a["padding"] != (0, 0)
    return {"kernel_h": a["kernel"][0], "kernel_w": a["kernel"][1], "stride_h": a["stride"][0],
            "stride_w": a["stride"][1], "pad_top": a["padding"][0], "pad_left": a["padding"][1],
            "dilation_h": a["dilation"][0], "dilation_w": a["dilation"][1], "count_include_pad": include,
            "divisor_override": a["divisor_override"], "pad_bottom": a["padding"][0] if include else 0,
            "pad_right": a["padding"][1] if include else 0}


@F.lower("max_pool2d", "avg_pool2d")
def _pool_f32(lay, n: Node) -> None:
    xin = nhwc_in(lay, n.inputs[0], n)
    out = nhwc_out(lay, n)
    params = {**_pool_params(n, lay.g.shapes[n.out]), **act_params(n.attrs["act"])}
    params["count_include_pad"] = n.attrs["count_include_pad"]  # the float kernel clips windows itself
    for k in ("pad_bottom", "pad_right"):
        del params[k]
    code = "MAX_POOL2D_F32" if n.op == "max_pool2d" else "AVG_POOL2D_F32"
    lay.emit(code, [xin], [out], ("Pool2dParams", params), n, n.op)


@F.lower("qmax_pool2d", "qavg_pool2d", "qmean")
def pool_s8(lay, n: Node) -> None:
    """Also a global mean (qmean): an average pool whose window is the whole plane."""
    x = n.inputs[0]
    a = n.attrs
    s_out, zp_out = a["out_q"]
    lo, hi = act_q(a.get("act", (-np.inf, np.inf)), s_out, zp_out)
    if n.op == "qmean":
        xin = nhwc_in(lay, x, n)
        batch, channels, h, w = lay.g.shapes[x]
        params: dict[str, Any] = {"kernel_h": h, "kernel_w": w, "stride_h": 1, "stride_w": 1, "pad_top": 0,
                                  "pad_left": 0}
        out = lay.activation(n.name, (batch, 1, 1, channels), like=n.out)
        if len(lay.g.shapes[n.out]) == 2:  # keepdim=False: [n, 1, 1, c] holds [n, c]
            lay.val[n.out] = (lay.alias(out, lay.g.shapes[n.out]), (0, 1))
        else:
            lay.val[n.out] = (out, (0, 2, 3, 1))
        code = "AVG_POOL2D_S8"
    else:
        xin = nhwc_in(lay, x, n)
        out = nhwc_out(lay, n, like=n.out)
        params = _pool_params(n, lay.g.shapes[n.out])
        if n.op == "qavg_pool2d" and (params["count_include_pad"] or params["divisor_override"]):
            params["zero_point"] = int(zp_out)  # what PyTorch's padding (real 0) is in the shared quantization
        code = "MAX_POOL2D_S8" if n.op == "qmax_pool2d" else "AVG_POOL2D_S8"
    if code == "AVG_POOL2D_S8" and lay.avg_pool_rounding == "pytorch":
        # PyTorch's q/dq model rounds the real mean half to even (relative to the zero point), every
        # avg pool and mean alike; TFLite's AveragePool rounds the raw sum half away from zero.
        params.update(round_half_even=True, zero_point=int(zp_out))
    params.update(act_min=lo, act_max=hi)
    lay.emit(code, [xin], [out], ("QuantPool2dParams", params), n, n.op[1:])


@F.lower16("qmax_pool2d", "qavg_pool2d", "qmean")
def _pool_s16(lay, n: Node) -> None:
    """The int8 pool retargeted: the same operands and params with int16
    codes and bounds."""
    pool_s8(lay, n)
    _retarget16(lay, n)


def _retarget16(lay, n: Node) -> None:
    op = lay.p.ops[-1]
    op.code = op.code[:-2] + "S16"
    lo, hi = act_q16(n.attrs.get("act", (-np.inf, np.inf)), n.attrs["out_q"][0])
    op.params[1].update(act_min=lo, act_max=hi)


@F.lower("adaptive_avg_pool2d", "qadaptive_avg_pool2d")
def _adaptive_op(lay, n: Node) -> None:
    xin = nhwc_in(lay, n.inputs[0], n)
    out = nhwc_out(lay, n, like=n.out if n.op[0] == "q" else None)
    if n.op == "qadaptive_avg_pool2d":
        lo, hi = act_q(n.attrs["act"], *n.attrs["out_q"])
        lay.emit("ADAPTIVE_AVG_POOL2D_S8", [xin], [out], ("QuantPool2dParams", {"act_min": lo, "act_max": hi}),
                 n, "adaptive_avg_pool2d")
    else:
        lay.emit("ADAPTIVE_AVG_POOL2D_F32", [xin], [out], ("Pool2dParams", act_params(n.attrs["act"])), n,
                 "adaptive_avg_pool2d")


@F.lower16("qadaptive_avg_pool2d")
def _adaptive_s16(lay, n: Node) -> None:
    _adaptive_op(lay, n)
    _retarget16(lay, n)


@F.lower("resize", "qresize")
@F.lower16("qresize")
def _resize_op(lay, n: Node) -> None:
    """Nearest moves bytes of any dtype; bilinear has a kernel per dtype."""
    xin = nhwc_in(lay, n.inputs[0], n)
    out = nhwc_out(lay, n, like=n.out if n.op[0] == "q" else None)
    a = n.attrs
    if a["mode"] == "nearest":
        code = "RESIZE_NEAREST"
    else:
        code = {"F32": "RESIZE_BILINEAR_F32", "I8": "RESIZE_BILINEAR_S8",
                "I16": "RESIZE_BILINEAR_S16"}[lay.p.tensors[out].dtype]
    params = {"align_corners": a["align_corners"], "half_pixel_centers": a["half_pixel_centers"]}
    lay.emit(code, [xin], [out], ("ResizeParams", params), n, "resize")
