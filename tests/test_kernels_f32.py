"""Float32 portable kernels (firmware/kernels/portable) against PyTorch.

The kernel sources are compiled once per session into a host shared library
(see _kernel_lib.py) and called through ctypes. Activations go in as NHWC,
conv weights as OHWI and depthwise weights as [kh][kw][c], converted here
from PyTorch's NCHW / OIHW.

Tolerance, used for every float comparison:

    np.testing.assert_allclose(got, ref, rtol=1e-5,
                               atol=1e-5 * max(1, abs(ref).max()))

The kernels accumulate in float32 in a different order than PyTorch, so
bit-exactness is not expected; the absolute term scales with the output's
magnitude so long dot products are held to the same relative standard.
Integer/byte kernels (permute, concat) must match exactly.
"""

import ctypes
import math
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from _kernel_lib import ARM_FLAGS, HOST_WARN_FLAGS, KERNEL_DIR, KERNEL_FILES, build, f32, i32

INF = float("inf")
NO_ACT = (-INF, INF)


@pytest.fixture(scope="session")
def lib(tmp_path_factory):
    return build(tmp_path_factory.mktemp("portable_f32"))


def check(got, ref):
    ref = np.asarray(ref, dtype=np.float32)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    atol = 1e-5 * max(1.0, float(np.abs(ref).max(initial=0.0)))
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=atol)


def randn(*shape, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g) * scale


def nhwc(t):
    return f32(t.permute(0, 2, 3, 1).numpy())


# --------------------------------------------------------------------- linear

@pytest.mark.parametrize("batch,in_f,out_f,bias,act", [
    (1, 1, 1, True, NO_ACT),
    (1, 16, 10, True, NO_ACT),
    (3, 7, 5, False, NO_ACT),
    (2, 256, 33, True, (0.0, INF)),
    (4, 64, 12, True, (0.0, 6.0)),
])
def test_linear(lib, batch, in_f, out_f, bias, act):
    x = randn(batch, in_f, seed=1)
    w = randn(out_f, in_f, seed=2, scale=0.3)
    b = randn(out_f, seed=3) if bias else None
    ref = F.linear(x, w, b).clamp(act[0], act[1]).numpy()
    out = np.full((batch, out_f), np.nan, np.float32)
    lib.k_linear(f32(x), f32(w), None if b is None else f32(b),
                 out, batch, in_f, out_f, *act)
    check(out, ref)


# --------------------------------------------------------------------- conv2d

def run_conv(lib, x, w, b, stride, padding, dilation, groups, act, ref):
    """Calls conv2d_f32; `padding` is (top, left); ref gives the out shape."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    out = np.full((ref.shape[0], ref.shape[2], ref.shape[3], o), np.nan,
                  np.float32)
    q = i32([stride[0], stride[1], padding[0], padding[1], dilation[0],
             dilation[1], groups])
    wk = f32(w.permute(0, 2, 3, 1).numpy())  # OIHW -> OHWI
    lib.k_conv2d(nhwc(x), i32([n, h, wd, c]), wk, kh, kw,
                 None if b is None else f32(b), out,
                 i32(out.shape), q, *act)
    return out


CONV_CASES = [
    # n, c, h, w, o, k, stride, pad, dilation, groups, bias, act
    (1, 1, 5, 5, 1, (3, 3), (1, 1), (0, 0), (1, 1), 1, False, NO_ACT),
    (1, 3, 8, 8, 4, (3, 3), (1, 1), (1, 1), (1, 1), 1, True, NO_ACT),
    (2, 3, 9, 7, 5, (3, 2), (2, 1), (1, 0), (1, 1), 1, True, (0.0, INF)),
    (1, 8, 10, 10, 6, (3, 3), (2, 2), (2, 2), (2, 2), 2, True, (0.0, 6.0)),
    (1, 6, 7, 9, 6, (1, 1), (1, 1), (0, 0), (1, 1), 3, False, NO_ACT),
    (1, 4, 11, 6, 8, (5, 3), (3, 2), (2, 1), (1, 2), 4, True, NO_ACT),
    (1, 16, 6, 6, 32, (3, 3), (1, 1), (1, 1), (1, 1), 1, True, NO_ACT),
    # Padding wider than the kernel reach: whole windows fall in the padding.
    (1, 2, 3, 3, 3, (2, 2), (1, 1), (3, 3), (1, 1), 1, True, NO_ACT),
]


@pytest.mark.parametrize("n,c,h,w,o,k,stride,pad,dil,groups,bias,act",
                         CONV_CASES)
def test_conv2d(lib, n, c, h, w, o, k, stride, pad, dil, groups, bias, act):
    x = randn(n, c, h, w, seed=4)
    wt = randn(o, c // groups, *k, seed=5, scale=0.5)
    b = randn(o, seed=6) if bias else None
    ref = F.conv2d(x, wt, b, stride, pad, dil, groups).clamp(*act).numpy()
    out = run_conv(lib, x, wt, b, stride, pad, dil, groups, act, ref)
    check(out, nhwc(torch.from_numpy(ref)))


@pytest.mark.parametrize("pads", [(0, 1, 1, 2), (1, 0, 2, 0), (2, 1, 0, 1)])
def test_conv2d_asymmetric_padding(lib, pads):
    # Bottom/right padding follows from the output shape, so pad explicitly
    # (left, right, top, bottom) and convolve the padded tensor as reference.
    left, right, top, bottom = pads
    x = randn(1, 3, 6, 7, seed=7)
    wt = randn(4, 3, 3, 3, seed=8)
    ref = F.conv2d(F.pad(x, pads), wt, stride=2).numpy()
    out = run_conv(lib, x, wt, None, (2, 2), (top, left), (1, 1), 1, NO_ACT,
                   ref)
    check(out, nhwc(torch.from_numpy(ref)))


def test_conv2d_wrong_weight_layout_fails(lib):
    # Guards the harness itself: OIHW weights handed over as-is must not pass.
    x = randn(1, 3, 6, 6, seed=9)
    wt = randn(4, 3, 3, 3, seed=10)
    ref = F.conv2d(x, wt, padding=1).numpy()
    n, c, h, w = x.shape
    out = np.zeros((1, 6, 6, 4), np.float32)
    lib.k_conv2d(nhwc(x), i32([n, h, w, c]), f32(wt.numpy()),
                 3, 3, None, out, i32(out.shape),
                 i32([1, 1, 1, 1, 1, 1, 1]), *NO_ACT)
    with pytest.raises(AssertionError):
        check(out, nhwc(torch.from_numpy(ref)))


DW_CASES = [
    # n, c, mult, h, w, k, stride, pad, dilation, bias, act
    (1, 1, 1, 5, 5, (3, 3), (1, 1), (1, 1), (1, 1), False, NO_ACT),
    (1, 8, 1, 9, 9, (3, 3), (1, 1), (1, 1), (1, 1), True, (0.0, 6.0)),
    (2, 5, 1, 10, 7, (3, 3), (2, 2), (1, 1), (1, 1), True, NO_ACT),
    (1, 4, 2, 8, 8, (3, 3), (1, 1), (1, 1), (1, 1), True, NO_ACT),
    (1, 3, 2, 11, 9, (5, 3), (2, 1), (2, 0), (1, 2), False, (0.0, INF)),
    (1, 6, 3, 7, 7, (2, 2), (2, 3), (1, 1), (2, 1), True, NO_ACT),
]


@pytest.mark.parametrize("n,c,mult,h,w,k,stride,pad,dil,bias,act", DW_CASES)
def test_depthwise_conv2d(lib, n, c, mult, h, w, k, stride, pad, dil, bias,
                          act):
    x = randn(n, c, h, w, seed=11)
    wt = randn(c * mult, 1, *k, seed=12)
    b = randn(c * mult, seed=13) if bias else None
    ref = F.conv2d(x, wt, b, stride, pad, dil, groups=c).clamp(*act).numpy()
    out = np.full((n, ref.shape[2], ref.shape[3], c * mult), np.nan,
                  np.float32)
    wk = f32(wt[:, 0].permute(1, 2, 0).numpy())  # [CM,1,kh,kw] -> [kh][kw][CM]
    # groups is deliberately bogus: the kernel must ignore it.
    q = i32([stride[0], stride[1], pad[0], pad[1], dil[0], dil[1], 99])
    lib.k_dwconv(nhwc(x), i32([n, h, w, c]), wk, k[0], k[1],
                 mult, None if b is None else f32(b), out,
                 i32(out.shape), q, *act)
    check(out, nhwc(torch.from_numpy(ref)))


# ---------------------------------------------------------------------- unary

def unary_input(n):
    x = randn(n, seed=14, scale=6.0)
    # Extremes exercise the overflow-prone corners of sigmoid/tanh.
    extremes = torch.tensor([0.0, -0.0, 1e-8, -1e-8, 20.0, -20.0, 88.0, -88.0,
                             100.0, -100.0, 1e4, -1e4, 3.0e38, -3.0e38])
    return torch.cat([x, extremes])


@pytest.mark.parametrize("name,lo,hi,fn", [
    ("relu", 0.0, INF, F.relu),
    ("relu6", 0.0, 6.0, F.relu6),
    ("hardtanh", -1.0, 1.0, F.hardtanh),
    ("hardtanh_wide", -2.5, 0.5, lambda t: F.hardtanh(t, -2.5, 0.5)),
])
@pytest.mark.parametrize("n", [1, 37, 1000])
def test_clamp(lib, name, lo, hi, fn, n):
    x = unary_input(n)
    got = np.full(x.numel(), np.nan, np.float32)
    lib.k_clamp(f32(x), got, x.numel(), lo, hi)
    check(got, fn(x).numpy())


@pytest.mark.parametrize("op,fn", [("sigmoid", torch.sigmoid),
                                   ("tanh", torch.tanh)])
@pytest.mark.parametrize("n", [1, 100, 4097])
@pytest.mark.parametrize("in_place", [False, True])
def test_sigmoid_tanh(lib, op, fn, n, in_place):
    x = unary_input(n)
    buf = f32(x)
    got = buf if in_place else np.full(buf.shape, np.nan, np.float32)
    getattr(lib, "k_" + op)(buf, got, buf.size)
    assert np.all(np.isfinite(got))
    check(got, fn(x).numpy())


def test_sigmoid_tail_precision(lib):
    # 1 - 1/(1+e^x) would round the negative tail to 0; PyTorch does not.
    x = f32(np.array([-20.0, -50.0, -80.0, -87.0]))
    got = np.empty_like(x)
    lib.k_sigmoid(x, got, x.size)
    ref = torch.sigmoid(torch.from_numpy(x)).numpy()
    assert np.all(got > 0)
    np.testing.assert_allclose(got, ref, rtol=1e-5)


# --------------------------------------------------------------------- binary

BINARY_SHAPES = [
    ((7,), (7,)),
    ((5,), (1,)),
    ((2, 3, 4, 5), (2, 3, 4, 5)),
    ((2, 3, 4, 5), (1, 3, 1, 1)),
    ((1, 3, 1, 1), (2, 3, 4, 5)),
    ((2, 3, 4, 5), (1, 1, 1, 1)),
    ((1, 1, 1, 1), (2, 3, 4, 5)),
    ((2, 1, 4, 1), (1, 3, 1, 5)),
    ((1, 6, 6, 8), (1, 1, 1, 8)),   # NHWC per-channel
    ((1, 6, 6, 8), (1, 6, 6, 1)),
    ((3, 1, 2, 1, 4, 2), (1, 5, 2, 3, 1, 2)),
    ((1, 1, 1), (1, 1, 1)),
]


@pytest.mark.parametrize("op", ["add", "mul"])
@pytest.mark.parametrize("a_shape,b_shape", BINARY_SHAPES)
@pytest.mark.parametrize("act", [NO_ACT, (0.0, INF), (-0.5, 0.5)])
def test_binary(lib, op, a_shape, b_shape, act):
    a = randn(*a_shape, seed=15)
    b = randn(*b_shape, seed=16)
    ref = getattr(torch, op)(a, b).clamp(*act).numpy()
    out = np.full(ref.shape, np.nan, np.float32)
    getattr(lib, "k_" + op)(f32(a), i32(a_shape), f32(b),
                            i32(b_shape), out, i32(ref.shape),
                            len(ref.shape), *act)
    check(out, ref)


@pytest.mark.parametrize("op", ["add", "mul"])
@pytest.mark.parametrize("alias", ["a", "b"])
def test_binary_in_place(lib, op, alias):
    full, bcast = (2, 3, 4, 5), (1, 3, 1, 5)
    a_shape, b_shape = (full, bcast) if alias == "a" else (bcast, full)
    a, b = randn(*a_shape, seed=17), randn(*b_shape, seed=18)
    ref = getattr(torch, op)(a, b).numpy()
    an, bn = f32(a), f32(b)
    out = an if alias == "a" else bn
    getattr(lib, "k_" + op)(an, i32(a_shape), bn,
                            i32(b_shape), out, i32(full), 4,
                            *NO_ACT)
    check(out, ref)


# ---------------------------------------------------------------------- pools

def pool_call(lib, fn, x, ref, k, stride, pad, dil=(1, 1), cip=True, div=0,
              act=NO_ACT):
    n, c, h, w = x.shape
    out = np.full((n, ref.shape[2], ref.shape[3], c), np.nan, np.float32)
    q = i32([k[0], k[1], stride[0], stride[1], pad[0], pad[1], dil[0], dil[1],
             int(cip), div])
    fn(nhwc(x), i32([n, h, w, c]), out, i32(out.shape),
       q, *act)
    return out


MAX_POOL_CASES = [
    # n, c, h, w, k, stride, pad, dilation, ceil_mode
    (1, 1, 4, 4, (2, 2), (2, 2), (0, 0), (1, 1), False),
    (2, 3, 8, 8, (3, 3), (2, 2), (1, 1), (1, 1), False),
    (1, 5, 7, 7, (3, 3), (2, 2), (1, 1), (1, 1), True),
    (1, 4, 6, 6, (3, 3), (2, 2), (0, 0), (1, 1), True),
    (1, 2, 9, 11, (3, 2), (2, 3), (1, 1), (2, 2), False),
    (1, 3, 10, 9, (3, 3), (3, 2), (1, 1), (2, 3), True),
    (1, 8, 5, 5, (5, 5), (1, 1), (2, 2), (1, 1), False),
    (1, 3, 13, 13, (3, 3), (1, 1), (0, 0), (1, 1), False),
]


@pytest.mark.parametrize("n,c,h,w,k,stride,pad,dil,ceil", MAX_POOL_CASES)
@pytest.mark.parametrize("act", [NO_ACT, (0.0, 6.0)])
def test_max_pool2d(lib, n, c, h, w, k, stride, pad, dil, ceil, act):
    # Negative inputs make a padded tap that leaked in as 0 visible.
    x = randn(n, c, h, w, seed=19) - 2.0
    ref = F.max_pool2d(x, k, stride, pad, dil, ceil_mode=ceil)
    ref = ref.clamp(*act).numpy()
    out = pool_call(lib, lib.k_maxpool, x, ref, k, stride, pad, dil, act=act)
    check(out, nhwc(torch.from_numpy(ref)))


AVG_POOL_CASES = [
    # n, c, h, w, k, stride, pad, ceil_mode
    (1, 1, 4, 4, (2, 2), (2, 2), (0, 0), False),
    (2, 3, 8, 8, (3, 3), (2, 2), (1, 1), False),
    (1, 5, 7, 7, (3, 3), (2, 2), (1, 1), True),
    (1, 4, 6, 6, (3, 3), (2, 2), (0, 0), True),   # last window past the edge
    (1, 2, 5, 8, (3, 2), (2, 3), (1, 1), True),
    (1, 3, 9, 10, (4, 4), (3, 3), (2, 1), True),
    (1, 6, 7, 7, (7, 7), (1, 1), (0, 0), False),  # global
    (1, 3, 6, 5, (5, 3), (1, 2), (2, 1), False),
]


@pytest.mark.parametrize("n,c,h,w,k,stride,pad,ceil", AVG_POOL_CASES)
@pytest.mark.parametrize("cip", [True, False])
@pytest.mark.parametrize("div", [0, 3])
def test_avg_pool2d(lib, n, c, h, w, k, stride, pad, ceil, cip, div):
    x = randn(n, c, h, w, seed=20) + 1.0
    ref = F.avg_pool2d(x, k, stride, pad, ceil_mode=ceil, count_include_pad=cip,
                       divisor_override=div or None).numpy()
    out = pool_call(lib, lib.k_avgpool, x, ref, k, stride, pad, cip=cip,
                    div=div)
    check(out, nhwc(torch.from_numpy(ref)))


def test_avg_pool2d_act(lib):
    x = randn(1, 4, 6, 6, seed=21, scale=4.0)
    ref = F.avg_pool2d(x, 2).clamp(0.0, 1.0).numpy()
    out = pool_call(lib, lib.k_avgpool, x, ref, (2, 2), (2, 2), (0, 0),
                    act=(0.0, 1.0))
    check(out, nhwc(torch.from_numpy(ref)))


# ----------------------------------------------------------------------- mean

MEAN_CASES = [
    ((10,), (0,)),
    ((4, 5), (1,)),
    ((4, 5), (0,)),
    ((4, 5), (0, 1)),
    ((1, 7, 7, 16), (1, 2)),          # NHWC global average pool
    ((2, 3, 4, 5), (3,)),
    ((2, 3, 4, 5), (0, 2)),
    ((2, 3, 4, 5), (1, 3)),
    ((2, 3, 4, 5), (0, 1, 2, 3)),
    ((2, 1, 4, 1), (1, 2)),
    ((3, 2, 4, 2, 3, 2), (0, 2, 5)),
    ((2, 64, 33), (1,)),
]


@pytest.mark.parametrize("shape,axes", MEAN_CASES)
@pytest.mark.parametrize("keepdim", [False, True])
def test_mean(lib, shape, axes, keepdim):
    x = randn(*shape, seed=22)
    ref = torch.mean(x, dim=axes, keepdim=keepdim).numpy()
    mask = sum(1 << a for a in axes)
    out = np.full(max(ref.size, 1), np.nan, np.float32)
    lib.k_mean(f32(x), i32(shape), len(shape), mask, out)
    check(out.reshape(ref.shape), ref)


# -------------------------------------------------------------------- softmax

@pytest.mark.parametrize("shape,dim", [
    ((10,), 0),
    ((4, 10), 1),
    ((4, 10), 0),
    ((2, 3, 4, 5), 3),
    ((2, 3, 4, 5), 1),
    ((2, 3, 4, 5), 2),
    ((3, 1000), 1),
    ((2, 1, 6), 1),
])
@pytest.mark.parametrize("scale", [1.0, 100.0])
def test_softmax(lib, shape, dim, scale):
    # scale=100 overflows expf without the max subtraction.
    x = randn(*shape, seed=23, scale=scale)
    ref = F.softmax(x, dim=dim).numpy()
    outer = math.prod(shape[:dim])
    inner = math.prod(shape[dim + 1:])
    out = np.full(shape, np.nan, np.float32)
    lib.k_softmax(f32(x), out, outer, shape[dim], inner)
    check(out, ref)


# -------------------------------------------------------------------- permute

PERMUTE_CASES = [
    ((3, 5), (1, 0)),
    ((3, 5), (0, 1)),
    ((2, 3, 4), (2, 0, 1)),
    ((2, 3, 4), (0, 2, 1)),
    ((1, 4, 5, 6), (0, 2, 3, 1)),   # NCHW -> NHWC
    ((2, 5, 6, 3), (0, 3, 1, 2)),   # NHWC -> NCHW
    ((2, 3, 4, 5), (3, 2, 1, 0)),
    ((2, 3, 4, 5), (1, 0, 2, 3)),   # merges into row copies
    ((2, 1, 3, 1, 4), (4, 3, 2, 1, 0)),
    ((2, 3, 2, 4, 3), (0, 3, 1, 4, 2)),
    ((1, 1, 1), (2, 1, 0)),
]


@pytest.mark.parametrize("shape,perm", PERMUTE_CASES)
@pytest.mark.parametrize("dtype", [np.int8, np.float32, np.int16, np.float64,
                                   np.dtype("V3")])
def test_permute(lib, shape, perm, dtype):
    rng = np.random.default_rng(24)
    dtype = np.dtype(dtype)
    raw = rng.integers(0, 256, size=(*shape, dtype.itemsize), dtype=np.uint8)
    x = np.ascontiguousarray(raw).view(dtype).reshape(shape)
    ref = np.ascontiguousarray(np.transpose(x, perm))
    out = np.zeros_like(ref)
    lib.k_permute(x, i32(shape), len(shape), i32(perm), out,
                  dtype.itemsize)
    assert out.tobytes() == ref.tobytes()


def test_permute_float_values_match_torch(lib):
    x = randn(2, 3, 4, 5, seed=25)
    ref = x.permute(0, 2, 3, 1).contiguous().numpy()
    out = np.empty_like(ref)
    lib.k_permute(f32(x), i32(x.shape), 4, i32([0, 2, 3, 1]),
                  out, 4)
    np.testing.assert_array_equal(out, ref)


# --------------------------------------------------------------------- concat

CONCAT_CASES = [
    ([(3,), (5,)], 0),
    ([(2, 3), (2, 4), (2, 1)], 1),
    ([(2, 3), (4, 3)], 0),
    ([(1, 4, 4, 3), (1, 4, 4, 5)], 3),      # NHWC channel concat
    ([(1, 4, 4, 3), (1, 2, 4, 3), (1, 1, 4, 3)], 1),
    ([(2, 3, 4, 5), (2, 3, 2, 5)], 2),
    ([(2, 3, 4, 5), (2, 3, 4, 5), (2, 3, 4, 5)], 0),
]


@pytest.mark.parametrize("shapes,axis", CONCAT_CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.int8])
def test_concat(lib, shapes, axis, dtype):
    rng = np.random.default_rng(26)
    xs = [np.ascontiguousarray(rng.standard_normal(s) * 50).astype(dtype)
          for s in shapes]
    ref = torch.cat([torch.from_numpy(x) for x in xs], dim=axis).numpy()
    outer = math.prod(shapes[0][:axis])
    itemsize = np.dtype(dtype).itemsize
    inner = [math.prod(s[axis:]) * itemsize for s in shapes]
    ptrs = (ctypes.c_void_p * len(xs))(*[x.ctypes.data for x in xs])
    sizes = (ctypes.c_size_t * len(xs))(*inner)
    out = np.zeros(ref.shape, dtype)
    lib.k_concat(ctypes.cast(ptrs, ctypes.c_void_p),
                 ctypes.cast(sizes, ctypes.c_void_p), len(xs), outer, out)
    np.testing.assert_array_equal(out, ref)


# ------------------------------------------------- maximum / minimum, hardswish

@pytest.mark.parametrize("op", ["maximum", "minimum"])
@pytest.mark.parametrize("a_shape,b_shape", BINARY_SHAPES)
@pytest.mark.parametrize("act", [NO_ACT, (-0.5, 0.5)])
def test_maximum_minimum(lib, op, a_shape, b_shape, act):
    a = randn(*a_shape, seed=40)
    b = randn(*b_shape, seed=41)
    ref = getattr(torch, op)(a, b).clamp(*act).numpy()
    out = np.full(ref.shape, np.nan, np.float32)
    getattr(lib, "k_" + op)(f32(a), i32(a_shape), f32(b), i32(b_shape), out, i32(ref.shape),
                            len(ref.shape), *act)
    np.testing.assert_array_equal(out, ref)  # a selection: exact


@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_maximum_minimum_nan_propagates(lib, op):
    a = np.array([np.nan, 1.0, np.nan, -2.0], np.float32)
    b = np.array([0.0, np.nan, np.nan, 3.0], np.float32)
    ref = getattr(torch, op)(torch.from_numpy(a), torch.from_numpy(b)).numpy()
    out = np.zeros(4, np.float32)
    getattr(lib, "k_" + op)(a, i32([4]), b, i32([4]), out, i32([4]), 1, -INF, INF)
    np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize("in_place", [False, True])
def test_hardswish(lib, in_place):
    x = torch.cat([torch.linspace(-5, 5, 1001), randn(300, seed=42, scale=4),
                   torch.tensor([-3.0, 3.0, 0.0, -INF, INF])])
    ref = F.hardswish(x).numpy()
    xin = f32(x)
    out = xin if in_place else np.zeros_like(xin)
    lib.k_hardswish(xin, out, xin.size)
    check(np.nan_to_num(out, nan=7.0), np.nan_to_num(ref, nan=7.0))


# ------------------------------------------------------------------ batch matmul

@pytest.mark.parametrize("batch,m,k,n", [(1, 1, 1, 1), (2, 3, 5, 4), (3, 7, 16, 9), (1, 4, 70, 2),
                                         (4, 1, 8, 1)])
def test_batch_matmul(lib, batch, m, k, n):
    a = randn(batch, m, k, seed=43)
    b = randn(batch, k, n, seed=44)
    ref = torch.bmm(a, b).numpy()
    out = np.full(ref.shape, np.nan, np.float32)
    lib.k_batch_matmul(f32(a), f32(b), out, batch, m, k, n)
    check(out, ref)


# ------------------------------------------------------------------------- pad

PAD_CASES = [
    ((5,), (2,), (3,)),
    ((3, 4), (0, 1), (2, 0)),
    ((1, 4, 5, 3), (0, 1, 2, 0), (0, 3, 0, 0)),    # NHWC H/W
    ((2, 3, 4, 5), (1, 0, 2, 1), (0, 2, 0, 1)),
    ((2, 1, 3, 1, 2), (0, 1, 0, 2, 0), (1, 0, 1, 0, 1)),
    ((2, 3), (0, 0), (0, 0)),
    ((2, 0, 3), (1, 1, 1), (0, 2, 0)),               # an empty input: all padding
]


@pytest.mark.parametrize("shape,before,after", PAD_CASES)
@pytest.mark.parametrize("dtype,value", [(np.float32, -1.5), (np.int8, -7), (np.int16, 300)])
def test_pad(lib, shape, before, after, dtype, value):
    rng = np.random.default_rng(45)
    x = np.ascontiguousarray((rng.standard_normal(shape) * 50).astype(dtype))
    ref = np.pad(x, list(zip(before, after)), constant_values=dtype(value))
    out = np.zeros(ref.shape, dtype)
    v = np.array([value], dtype)
    lib.k_pad(x, i32(shape), len(shape), i32(before), i32(after), v, out, np.dtype(dtype).itemsize)
    np.testing.assert_array_equal(out, ref)


# ---------------------------------------------------------------- build hygiene

def _compile(compiler, flags, src, obj):
    return subprocess.run([compiler, *flags, f"-I{KERNEL_DIR.parents[1]}", "-c", str(src),
                           "-o", str(obj)], capture_output=True, text=True)


def _compile_all(compiler, flags, out_dir):
    objs = [out_dir / (f.stem + ".o") for f in KERNEL_FILES]
    with ThreadPoolExecutor() as pool:
        results = list(pool.map(lambda so: _compile(compiler, flags, *so),
                                zip(KERNEL_FILES, objs)))
    failures = [f"{src.name}:\n{r.stderr}" for src, r in
                zip(KERNEL_FILES, results) if r.returncode or r.stderr]
    assert not failures, "\n".join(failures)
    return objs


def test_host_compile_warning_free(tmp_path):
    _compile_all("g++", HOST_WARN_FLAGS, tmp_path)


# Heap, exceptions, stdio and static constructors have no place in the
# kernels, nor has double math (soft-float on a single-precision FPU); any of
# these as an undefined symbol means one slipped in.
_FORBIDDEN = re.compile(
    r"^(malloc|calloc|realloc|free|_Znw\w*|_Zna\w*|_Zdl\w*|_Zda\w*|"
    r"__cxa_\w+|__gxx_personality\w*|_Unwind\w*|\w*printf|puts|"
    r"atexit|__aeabi_atexit|__aeabi_d\w+|__aeabi_f2d|"
    r"exp|tanh|log|pow|sqrt|fabs)$")


def test_arm_compile_no_heap(tmp_path):
    cxx = shutil.which("arm-none-eabi-g++")
    nm = shutil.which("arm-none-eabi-nm")
    objdump = shutil.which("arm-none-eabi-objdump")
    if cxx is None or nm is None or objdump is None:
        pytest.skip("arm-none-eabi-g++/nm/objdump not on PATH; "
                    "cannot cross-compile the kernels")
    objs = _compile_all(cxx, ARM_FLAGS, tmp_path)
    for obj in objs:
        undefined = subprocess.run([nm, "-u", str(obj)], capture_output=True,
                                   text=True, check=True).stdout.split()
        bad = [s for s in undefined if _FORBIDDEN.match(s)]
        assert not bad, f"{obj.name} references {bad}"
        # A static object with a constructor would leave an init_array entry.
        sections = subprocess.run([objdump, "-h", str(obj)],
                                  capture_output=True, text=True,
                                  check=True).stdout
        assert ".init_array" not in sections, obj.name
