"""The integer kernels of transposed convolution, grouped convolution,
resizing, adaptive pooling and PyTorch's pool options, bit for bit with
their NumPy twins (reference/conv.py, reference/pool_resize.py) over random
geometries: the C math (firmware/kernels/portable/) built once into a
UBSan-checked host library, as tests/_kernel_lib_s8.py does, called through
ctypes. (The whole programs run in tests/test_ops_conv_pool.py; TFLite Micro
checks the twins in tests/test_oracle_conv_pool.py.)
"""

from __future__ import annotations

import ctypes
import subprocess
import zlib

import numpy as np
import pytest
from _kernel_lib import HOST_WARN_FLAGS, KERNEL_DIR, _Buffer
from _kernel_lib_s8 import INCLUDES, i8, i32
from torchmcu.reference import conv as rc
from torchmcu.reference import pool_resize as rp
from torchmcu.reference import quant

FILES = [KERNEL_DIR / n for n in ("common/requantize.cc", "conv/conv2d_s8.cc", "conv/conv2d_s16.cc",
                                  "pool_resize/pool2d_s8.cc", "conv/transpose_conv.cc", "pool_resize/resize.cc")]

_SHIM = r"""
#include <cstddef>
#include <cstring>
#include "kernels/portable/conv/conv.h"
#include "kernels/portable/pool_resize/pool_resize.h"
using namespace torchmcu::portable;
#define X extern "C"
static Shape4 shape(const int32_t* s) { return Shape4{s[0], s[1], s[2], s[3]}; }
template <typename T> static T fields(const int32_t* q) { T p; std::memcpy(&p, q, sizeof(T)); return p; }
// Its int32 fields; the scratch operand after them stays null (the generic loop).
template <> QuantConvParams fields(const int32_t* q) {
  QuantConvParams p{};
  std::memcpy(static_cast<void*>(&p), q, offsetof(QuantConvParams, scratch));
  return p;
}

// q: QuantConvParams / QuantConvS16Params fields in order.
X void k_tconv_s8(const int8_t* x, const int32_t* xs, const int8_t* w, int32_t kh, int32_t kw, int32_t gc,
                  const int32_t* b, const int32_t* m, const int32_t* s, int8_t* y, const int32_t* ys, const int32_t* q) {
  transpose_conv2d_s8(x, shape(xs), w, kh, kw, gc, b, m, s, y, shape(ys), fields<QuantConvParams>(q));
}
X void k_tconv_s16(const int16_t* x, const int32_t* xs, const int8_t* w, int32_t kh, int32_t kw, int32_t gc,
                   const int64_t* b, const int32_t* m, const int32_t* s, int16_t* y, const int32_t* ys,
                   const int32_t* q) {
  transpose_conv2d_s16(x, shape(xs), w, kh, kw, gc, b, m, s, y, shape(ys), fields<QuantConvS16Params>(q));
}
X void k_gconv_s8(const int8_t* x, const int32_t* xs, const int8_t* w, int32_t kh, int32_t kw, int32_t gin,
                  const int32_t* b, const int32_t* m, const int32_t* s, int8_t* y, const int32_t* ys, const int32_t* q) {
  grouped_conv2d_s8(x, shape(xs), w, kh, kw, gin, b, m, s, y, shape(ys), fields<QuantConvParams>(q));
}
X void k_gconv_s16(const int16_t* x, const int32_t* xs, const int8_t* w, int32_t kh, int32_t kw, int32_t gin,
                   const int64_t* b, const int32_t* m, const int32_t* s, int16_t* y, const int32_t* ys, const int32_t* q) {
  grouped_conv2d_s16(x, shape(xs), w, kh, kw, gin, b, m, s, y, shape(ys), fields<QuantConvS16Params>(q));
}
X void k_nearest(const void* x, const int32_t* xs, void* y, const int32_t* ys, int32_t elem, int32_t hp) {
  resize_nearest(x, shape(xs), y, shape(ys), size_t(elem), hp != 0);
}
X void k_bilinear_s8(const int8_t* x, const int32_t* xs, int8_t* y, const int32_t* ys, int32_t ac, int32_t hp) {
  resize_bilinear_s8(x, shape(xs), y, shape(ys), ac != 0, hp != 0);
}
X void k_bilinear_s16(const int16_t* x, const int32_t* xs, int16_t* y, const int32_t* ys, int32_t ac, int32_t hp) {
  resize_bilinear_s16(x, shape(xs), y, shape(ys), ac != 0, hp != 0);
}
X void k_adaptive_s8(const int8_t* x, const int32_t* xs, int8_t* y, const int32_t* ys, int32_t lo, int32_t hi) {
  adaptive_avg_pool2d_s8(x, shape(xs), y, shape(ys), lo, hi);
}
X void k_adaptive_s16(const int16_t* x, const int32_t* xs, int16_t* y, const int32_t* ys, int32_t lo, int32_t hi) {
  adaptive_avg_pool2d_s16(x, shape(xs), y, shape(ys), lo, hi);
}
// q: QuantPoolParams fields; o: PoolOptions fields.
X void k_pool_s8(int32_t max, const int8_t* x, const int32_t* xs, int8_t* y, const int32_t* ys, const int32_t* q,
                 const int32_t* o) {
  PoolOptions opts;
  opts.dilation_h = o[0], opts.dilation_w = o[1], opts.count_include_pad = o[2], opts.divisor_override = o[3];
  opts.pad_bottom = o[4], opts.pad_right = o[5], opts.zero_point = o[6];
  if (max) {
    max_pool2d_s8(x, shape(xs), y, shape(ys), fields<QuantPoolParams>(q), opts);
  } else {
    avg_pool2d_s8(x, shape(xs), y, shape(ys), fields<QuantPoolParams>(q), opts);
  }
}
"""

_P, _I = _Buffer, ctypes.c_int32
_SIGNATURES = {
    "k_tconv_s8": [_P, _P, _P, _I, _I, _I, _P, _P, _P, _P, _P, _P],
    "k_tconv_s16": [_P, _P, _P, _I, _I, _I, _P, _P, _P, _P, _P, _P],
    "k_gconv_s8": [_P, _P, _P, _I, _I, _I, _P, _P, _P, _P, _P, _P],
    "k_gconv_s16": [_P, _P, _P, _I, _I, _I, _P, _P, _P, _P, _P, _P],
    "k_nearest": [_P, _P, _P, _P, _I, _I],
    "k_bilinear_s8": [_P, _P, _P, _P, _I, _I],
    "k_bilinear_s16": [_P, _P, _P, _P, _I, _I],
    "k_adaptive_s8": [_P, _P, _P, _P, _I, _I],
    "k_adaptive_s16": [_P, _P, _P, _P, _I, _I],
    "k_pool_s8": [_I, _P, _P, _P, _P, _P, _P],
}


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    d = tmp_path_factory.mktemp("conv_pool_kernels")
    (d / "shim.cc").write_text(_SHIM)
    so = d / "libconvpool.so"
    res = subprocess.run(["g++", *HOST_WARN_FLAGS, "-shared", "-fPIC", "-fsanitize=undefined",
                          "-fno-sanitize-recover=all", *INCLUDES, "-o", str(so), str(d / "shim.cc"), *map(str, FILES)],
                         capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stderr
    library = ctypes.CDLL(str(so))
    for name, args in _SIGNATURES.items():
        getattr(library, name).argtypes = args
        getattr(library, name).restype = None
    return library


def _rng(*case) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(case).encode()))


def _requant(g: np.random.Generator, cout: int) -> tuple[np.ndarray, np.ndarray]:
    s_w = np.exp(g.uniform(np.log(1e-3), np.log(5e-2), cout))
    return quant.conv_requant(float(np.exp(g.uniform(-5, -2))), s_w, float(np.exp(g.uniform(-4, -1))))


# (h, w, k, stride, pad, output_padding, in_c, out_c, groups)
TRANSPOSED = [
    (4, 5, 3, 2, 1, 1, 5, 3, 1), (3, 3, 4, 2, 1, 0, 7, 2, 1), (5, 4, 3, 1, 1, 0, 3, 4, 1), (4, 4, 2, 2, 0, 0, 6, 5, 1),
    (3, 5, 5, 3, 2, 2, 4, 3, 1), (2, 3, 1, 2, 0, 1, 9, 2, 1), (4, 2, 4, 3, 0, 1, 2, 6, 1), (1, 6, 3, 2, 1, 1, 17, 3, 1),
    (5, 5, 3, 2, 2, 0, 3, 3, 1), (3, 4, 6, 4, 1, 3, 2, 2, 1),
    # grouped (PyTorch's groups): depthwise-like, two groups, three
    (4, 5, 3, 2, 1, 1, 4, 8, 4), (3, 4, 4, 2, 1, 0, 6, 4, 2), (5, 3, 3, 1, 1, 0, 9, 6, 3), (1, 7, 3, 2, 0, 1, 4, 4, 4)]


@pytest.mark.parametrize("case", TRANSPOSED,
                         ids=[f"h{c[0]}w{c[1]}k{c[2]}s{c[3]}p{c[4]}op{c[5]}g{c[8]}" for c in TRANSPOSED])
def test_transposed_conv_s8_and_s16(lib, case) -> None:
    h, w, k, s, p, op, cin, cout, groups = case
    g = _rng("tconv", case[:8] if groups == 1 else case)
    oh, ow = (h - 1) * s - 2 * p + k + op, (w - 1) * s - 2 * p + k + op
    x = i8(g.integers(-128, 128, (2, h, w, cin)))
    wt = i8(g.integers(-127, 128, (cout, k, k, cin // groups)))
    bias = i32(g.integers(-5000, 5000, cout))
    m, sh = _requant(g, cout)
    zp_in, zp_out = int(g.integers(-128, 128)), int(g.integers(-128, 128))
    lo, hi = sorted(int(v) for v in g.integers(-128, 128, 2))
    y = np.zeros((2, oh, ow, cout), np.int8)
    lib.k_tconv_s8(x, i32(x.shape), wt, k, k, cin // groups, bias, m, sh, y, i32(y.shape), i32([s, s, p, p, 1, 1, -zp_in, zp_out, lo, hi]))
    exp = rc.transpose_conv2d(x, wt, bias, m, sh, stride=(s, s), pad=(p, p), input_offset=-zp_in, output_offset=zp_out,
                              act_min=lo, act_max=hi, out_hw=(oh, ow))
    np.testing.assert_array_equal(y, exp)
    x16 = np.ascontiguousarray(g.integers(-32767, 32768, (2, h, w, cin)), np.int16)
    b64 = np.ascontiguousarray(g.integers(-2 ** 40, 2 ** 40, cout), np.int64)
    y16 = np.zeros((2, oh, ow, cout), np.int16)
    lib.k_tconv_s16(x16, i32(x16.shape), wt, k, k, cin // groups, b64, m, sh, y16, i32(y16.shape), i32([s, s, p, p, 1, 1, -30000, 30000]))
    exp16 = rc.transpose_conv2d_s16(x16, wt, b64, m, sh, stride=(s, s), pad=(p, p), act_min=-30000, act_max=30000,
                                    out_hw=(oh, ow))
    np.testing.assert_array_equal(y16, exp16)


GROUPED = [(6, 3, 9, 3, 1, 1, 1), (8, 4, 4, 1, 2, 0, 1), (12, 3, 6, 3, 1, 2, 2), (4, 2, 6, 5, 2, 2, 1),
           (9, 3, 3, 2, 1, 0, 3)]


@pytest.mark.parametrize("case", GROUPED, ids=[f"c{c[0]}g{c[1]}o{c[2]}k{c[3]}" for c in GROUPED])
def test_grouped_conv_s8_and_s16(lib, case) -> None:
    cin, groups, cout, k, s, p, d = case
    g = _rng("grouped", case)
    h, w = 7, 6
    out_hw = tuple((n + 2 * p - d * (k - 1) - 1) // s + 1 for n in (h, w))
    x = i8(g.integers(-128, 128, (1, h, w, cin)))
    wt = i8(g.integers(-127, 128, (cout, k, k, cin // groups)))
    bias = i32(g.integers(-5000, 5000, cout))
    m, sh = _requant(g, cout)
    q = [s, s, p, p, d, d, 7, -3, -128, 127]
    y = np.zeros((1, *out_hw, cout), np.int8)
    lib.k_gconv_s8(x, i32(x.shape), wt, k, k, cin // groups, bias, m, sh, y, i32(y.shape), i32(q))
    np.testing.assert_array_equal(y, rc.conv2d(x, wt, bias, m, sh, stride=(s, s), pad=(p, p), dilation=(d, d),
                                               input_offset=7, output_offset=-3, out_hw=out_hw))
    x16 = np.ascontiguousarray(g.integers(-32767, 32768, (1, h, w, cin)), np.int16)
    b64 = np.ascontiguousarray(g.integers(-2 ** 30, 2 ** 30, cout), np.int64)
    y16 = np.zeros((1, *out_hw, cout), np.int16)
    lib.k_gconv_s16(x16, i32(x16.shape), wt, k, k, cin // groups, b64, m, sh, y16, i32(y16.shape),
                    i32([s, s, p, p, d, d, -32768, 32767]))
    np.testing.assert_array_equal(y16, rc.conv2d_s16(x16, wt, b64, m, sh, stride=(s, s), pad=(p, p), dilation=(d, d),
                                                     out_hw=out_hw))


SIZES = [((4, 5), (8, 10)), ((4, 5), (7, 9)), ((6, 5), (3, 2)), ((1, 6), (1, 12)), ((5, 3), (11, 13)), ((3, 3), (1, 1)),
         ((7, 2), (7, 2)), ((2, 9), (5, 4))]


@pytest.mark.parametrize("sizes", SIZES, ids=[f"{a[0]}x{a[1]}to{b[0]}x{b[1]}" for a, b in SIZES])
def test_resize_kernels(lib, sizes) -> None:
    (h, w), (oh, ow) = sizes
    g = _rng("resize", sizes)
    x8 = i8(g.integers(-128, 128, (2, h, w, 3)))
    x16 = np.ascontiguousarray(g.integers(-32768, 32768, (2, h, w, 3)), np.int16)
    xf = np.ascontiguousarray(g.standard_normal((2, h, w, 3)), np.float32)
    for hp in (0, 1):
        for x in (x8, x16, xf):
            y = np.zeros((2, oh, ow, 3), x.dtype)
            lib.k_nearest(x, i32(x.shape), y, i32(y.shape), x.itemsize, hp)
            np.testing.assert_array_equal(y, rp.resize_nearest(x, (oh, ow), bool(hp)))
    for ac, hp in ((0, 0), (0, 1), (1, 0)):
        y = np.zeros((2, oh, ow, 3), np.int8)
        lib.k_bilinear_s8(x8, i32(x8.shape), y, i32(y.shape), ac, hp)
        np.testing.assert_array_equal(y, rp.resize_bilinear(x8, (oh, ow), bool(ac), bool(hp)))
        y16 = np.zeros((2, oh, ow, 3), np.int16)
        lib.k_bilinear_s16(x16, i32(x16.shape), y16, i32(y16.shape), ac, hp)
        np.testing.assert_array_equal(y16, rp.resize_bilinear_s16(x16, (oh, ow), bool(ac), bool(hp)))


@pytest.mark.parametrize("sizes", [((7, 10), (3, 4)), ((5, 5), (5, 5)), ((3, 8), (5, 3)), ((13, 1), (4, 1)),
                                   ((9, 9), (2, 7))])
def test_adaptive_avg_pool(lib, sizes) -> None:
    (h, w), (oh, ow) = sizes
    g = _rng("adaptive", sizes)
    x = i8(g.integers(-128, 128, (1, h, w, 70)))  # more channels than one accumulator chunk
    y = np.zeros((1, oh, ow, 70), np.int8)
    lib.k_adaptive_s8(x, i32(x.shape), y, i32(y.shape), -100, 90)
    np.testing.assert_array_equal(y, rp.adaptive_avg_pool2d(x, (oh, ow), act_min=-100, act_max=90))
    x16 = np.ascontiguousarray(g.integers(-32768, 32768, (1, h, w, 5)), np.int16)
    y16 = np.zeros((1, oh, ow, 5), np.int16)
    lib.k_adaptive_s16(x16, i32(x16.shape), y16, i32(y16.shape), -32768, 32767)
    np.testing.assert_array_equal(y16, rp.adaptive_avg_pool2d(x16, (oh, ow), act_min=-32768, act_max=32767,
                                                              dtype=np.int16))


# (H, W, k, s, p, dilation, ceil_mode, count_include_pad, divisor_override)
POOLS = [(10, 9, 3, 2, 1, 1, True, True, 0), (10, 9, 3, 2, 1, 1, True, False, 0), (7, 7, 3, 1, 1, 1, False, True, 0),
         (8, 8, 2, 2, 0, 1, False, False, 3), (9, 10, 3, 2, 1, 2, True, False, 0), (6, 7, 2, 3, 1, 1, True, True, 5),
         (5, 5, 5, 2, 2, 1, True, True, 0)]


@pytest.mark.parametrize("case", POOLS, ids=[str(i) for i in range(len(POOLS))])
def test_pools_with_pytorch_options(lib, case) -> None:
    h, w, k, s, p, d, ceil, cip, override = case
    g = _rng("pool", case)
    x = i8(g.integers(-128, 128, (1, h, w, 67)))

    def out(n: int) -> int:
        span = n + 2 * p - d * (k - 1) - 1
        o = -(-span // s) + 1 if ceil else span // s + 1
        return o - 1 if ceil and (o - 1) * s >= n + p else o

    oh, ow = out(h), out(w)
    zp = int(g.integers(-128, 128))
    q = i32([k, k, s, s, p, p, -120, 125])
    for kind in (0, 1):  # avg, max
        if kind == 0 and d != 1:
            continue
        opts = [d, d, 0, 0, 0, 0, 0] if kind else [1, 1, int(cip), override, p if cip else 0, p if cip else 0, zp]
        y = np.zeros((1, oh, ow, 67), np.int8)
        lib.k_pool_s8(kind, x, i32(x.shape), y, i32(y.shape), q, i32(opts))
        if kind:
            exp = rp.max_pool2d(x, (k, k), (s, s), (p, p), act_min=-120, act_max=125, out_hw=(oh, ow), dilation=(d, d))
        else:
            exp = rp.avg_pool2d(x, (k, k), (s, s), (p, p), act_min=-120, act_max=125, out_hw=(oh, ow),
                                count_include_pad=cip, divisor_override=override, zero_point=zp)
        np.testing.assert_array_equal(y, exp)
