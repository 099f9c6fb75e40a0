"""Int8 kernels, bit for bit.

Two chains of evidence:
  a. the C kernels (firmware/kernels/portable/*_s8.cc, built once per session
     into a UBSan-checked host library, see _kernel_lib_s8.py) against the
     NumPy reference aot/torchmcu/reference/, with np.testing.assert_array_equal;
  b. reference.py against the independent oracle, TensorFlow Lite Micro's
     interpreter: test_kernels_s8_tflm.py.

Data is seeded random int8; quantization parameters are realistic random
scales turned into multipliers by reference.quantize_multiplier & co.
"""

import math
import shutil
import subprocess
import zlib
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from _kernel_lib_s8 import (
    ADD_FIELDS,
    ARM_FLAGS,
    BMM_FIELDS,
    HOST_WARN_FLAGS,
    INCLUDES,
    KERNEL_FILES_S8,
    MUL_FIELDS,
    build,
    i8,
    i32,
)
from torchmcu import reference as ref
from torchmcu.reference import reduce as reduce_ref


@pytest.fixture(scope="session")
def lib(tmp_path_factory):
    return build(tmp_path_factory.mktemp("portable_s8"))


def rng(seed):
    return np.random.default_rng(seed)


def seed_of(case):
    """A stable seed per table row (hash() of strings varies per process)."""
    return zlib.crc32(repr(case).encode())


def rand_i8(g, shape):
    return g.integers(-128, 128, size=shape, dtype=np.int64).astype(np.int8)


def logu(g, lo, hi, size=None):
    return np.exp(g.uniform(math.log(lo), math.log(hi), size=size))


def f32s(x):
    """Scales as a .tflite file stores them."""
    return np.float32(x).item() if np.ndim(x) == 0 else np.asarray(x, np.float32)


# ------------------------------------------------------------- requantize

def _tflm_requantize(x, m, s):
    """TFLite's MultiplyByQuantizedMultiplier transcribed with its own int32
    steps (gemmlowp's nudge + truncating division, RoundingDivideByPOT), for
    inputs where x * 2^left fits int32."""
    left, right = max(s, 0), max(-s, 0)
    a = x * (1 << left)
    assert -2**31 <= a < 2**31
    ab = a * m
    nudge = (1 << 30) if ab >= 0 else 1 - (1 << 30)
    num = ab + nudge
    hi = abs(num) // (1 << 31) * (1 if num >= 0 else -1)  # C truncation
    if a == m == -2**31:
        hi = 2**31 - 1
    mask = (1 << right) - 1
    rem = hi & mask
    threshold = (mask >> 1) + (1 if hi < 0 else 0)
    return (hi >> right) + (1 if rem > threshold else 0)


def _requant_cases(seed, n):
    g = rng(seed)
    x = g.integers(-2**31, 2**31, size=n, dtype=np.int64)
    x[: n // 4] = g.integers(-2**16, 2**16, size=n // 4)  # accumulator-sized
    x[:8] = [-2**31, 2**31 - 1, 0, 1, -1, 2**30, -2**30, 12345]
    m = g.integers(2**30, 2**31, size=n, dtype=np.int64)
    m[:3] = [2**30, 2**31 - 1, 0]
    s = g.integers(-31, 31, size=n, dtype=np.int64)
    return x, m, s


def test_requantize_ties():
    # Exact halves: the doubling high multiply rounds them up, the power of
    # two division away from zero.
    half = 1 << 30  # multiplier 0.5
    got = [int(ref.requantize(x, half, 0)) for x in (1, -1, 3, -3)]
    assert got == [1, 0, 2, -1]
    got = [int(ref.requantize(x, 1 << 30, -1)) for x in (2, -2, 6, -6, 1, -1)]
    # x * 0.5 / 2: 0.5 -> 1, -0.5 -> -1, 1.5 -> 2, -1.5 -> -2. Double rounding:
    # 1 * 0.5 = 0.5 -> 1 first, then 1 / 2 -> 1; -1 * 0.5 -> 0 -> 0.
    assert got == [1, -1, 2, -2, 1, 0]


def test_requantize_reference_vs_tflite_formula():
    x, m, s = _requant_cases(1, 4000)
    fits = np.abs(x * (np.int64(1) << np.maximum(s, 0))) < 2**31
    got = ref.requantize(x, m, s)
    exp = [_tflm_requantize(int(a), int(b), int(c)) for a, b, c in zip(x[fits], m[fits], s[fits])]
    assert fits.sum() > 2000
    np.testing.assert_array_equal(got[fits], np.array(exp, dtype=np.int64))
    # Where TFLite's x * 2^left would wrap, the reference saturates.
    big = ~fits & (s > 0) & (m > 0)
    assert big.any()
    assert np.all(np.abs(got[big]) >= 2**29)


def test_requantize_c_vs_reference(lib):
    x, m, s = _requant_cases(2, 20000)
    out = np.zeros(len(x), np.int32)
    lib.k_requantize(i32(x), i32(m), i32(s), out, len(x))
    np.testing.assert_array_equal(out, ref.requantize(x, m, s))


def test_quantize_multiplier():
    assert ref.quantize_multiplier(0.0) == (0, 0)
    assert ref.quantize_multiplier(0.5) == (1 << 30, 0)
    assert ref.quantize_multiplier(1.0) == (1 << 30, 1)
    assert ref.quantize_multiplier(0.75) == (3 << 29, 0)
    # Mantissa rounding up to 2^31 moves into the next binade.
    assert ref.quantize_multiplier(1.0 - 2.0**-40) == (1 << 30, 1)
    assert ref.quantize_multiplier(2.0**-40) == (0, 0)
    for real in logu(rng(3), 1e-6, 100.0, 200):
        m, s = ref.quantize_multiplier(real)
        assert 2**30 <= m < 2**31
        assert abs(m * 2.0**(s - 31) - real) <= 2.0**(s - 32)


def test_conv_requant_uses_double_products():
    # TFLite multiplies the float32 scales in double; rounding the product to
    # float32 first gives different multipliers, which the test must tell apart.
    g = rng(4)
    s_in, s_out = np.float32(0.0123), np.float32(0.0456)
    s_w = logu(g, 0.001, 0.05, 64).astype(np.float32)
    m, s = ref.conv_requant(s_in, s_w, s_out)
    exp = [ref.quantize_multiplier(float(s_in) * float(w) / float(s_out)) for w in s_w]
    assert [tuple(v) for v in zip(m.tolist(), s.tolist())] == exp
    via_f32 = [ref.quantize_multiplier(float(np.float32(s_in * w / s_out))) for w in s_w]
    assert exp != via_f32
    assert m.dtype == s.dtype == np.int32


# ------------------------------------------------------------------- conv

def conv_out(size, k, stride, pad, dil):
    return (size + 2 * pad - dil * (k - 1) - 1) // stride + 1


def act_range(g, zp_out):
    choice = g.integers(0, 3)
    if choice == 0:
        return -128, 127
    if choice == 1:
        return max(-128, zp_out), 127  # ReLU
    return max(-128, zp_out), min(127, zp_out + int(g.integers(20, 100)))


def conv_quant(g, out_c):
    s_in = logu(g, 0.005, 0.1)
    s_w = logu(g, 0.001, 0.05, out_c)
    s_out = logu(g, 0.01, 0.5)
    m, s = ref.conv_requant(s_in, s_w, s_out)
    zp_in = int(g.integers(-30, 30))
    zp_out = int(g.integers(-30, 30))
    lo, hi = act_range(g, zp_out)
    return m, s, zp_in, zp_out, lo, hi


# (N, H, W, C, O, kh, kw, stride, pad, dilation)
CONV_CASES = [
    (1, 8, 8, 3, 4, 3, 3, (1, 1), (1, 1), (1, 1)),
    (2, 9, 7, 5, 6, 3, 3, (2, 2), (1, 1), (1, 1)),
    (1, 10, 10, 4, 3, 3, 3, (1, 1), (2, 2), (2, 2)),
    (1, 6, 6, 16, 8, 1, 1, (1, 1), (0, 0), (1, 1)),
    (1, 1, 20, 8, 4, 1, 5, (1, 1), (0, 2), (1, 1)),
    (1, 7, 9, 3, 5, 3, 2, (2, 1), (0, 1), (1, 2)),
    (1, 3, 3, 2, 2, 2, 2, (1, 1), (2, 2), (1, 1)),
    (1, 12, 12, 7, 9, 5, 5, (3, 2), (2, 2), (1, 1)),
]


@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: "x".join(map(str, c[:7])))
def test_conv2d_c_vs_reference(lib, case):
    n, h, w, c, o, kh, kw, stride, pad, dil = case
    g = rng(seed_of(case))
    x = rand_i8(g, (n, h, w, c))
    wt = rand_i8(g, (o, kh, kw, c))
    bias = i32(g.integers(-5000, 5000, o))
    m, s, zp_in, zp_out, lo, hi = conv_quant(g, o)
    oh, ow = conv_out(h, kh, stride[0], pad[0], dil[0]), conv_out(w, kw, stride[1], pad[1], dil[1])
    for b in (bias, None):
        exp = ref.conv2d(x, wt, b, m, s, stride=stride, pad=pad, dilation=dil,
                         input_offset=-zp_in, output_offset=zp_out, act_min=lo, act_max=hi)
        assert exp.shape == (n, oh, ow, o)
        out = np.zeros(exp.shape, np.int8)
        q = i32([*stride, *pad, *dil, -zp_in, zp_out, lo, hi])
        lib.k_conv(x, i32(x.shape), wt, kh, kw, b, m, s, out, i32(out.shape), q)
        np.testing.assert_array_equal(out, exp)


# (N, H, W, C, mult, kh, kw, stride, pad, dilation)
DW_CASES = [
    (1, 8, 8, 8, 1, 3, 3, (1, 1), (1, 1), (1, 1)),
    (2, 7, 9, 6, 2, 3, 3, (2, 2), (1, 1), (1, 1)),
    (1, 9, 9, 70, 1, 3, 3, (2, 1), (1, 0), (1, 1)),
    (1, 6, 6, 30, 3, 2, 2, (1, 1), (0, 1), (1, 1)),
    (1, 10, 8, 4, 2, 3, 3, (1, 1), (2, 2), (2, 2)),
    (1, 5, 5, 1, 70, 3, 3, (1, 1), (1, 1), (1, 1)),
]


@pytest.mark.parametrize("case", DW_CASES, ids=lambda c: "x".join(map(str, c[:7])))
def test_depthwise_c_vs_reference(lib, case):
    n, h, w, c, mult, kh, kw, stride, pad, dil = case
    oc = c * mult
    g = rng(seed_of(case))
    x = rand_i8(g, (n, h, w, c))
    wt = rand_i8(g, (1, kh, kw, oc))
    bias = i32(g.integers(-5000, 5000, oc))
    m, s, zp_in, zp_out, lo, hi = conv_quant(g, oc)
    for b in (bias, None):
        exp = ref.depthwise_conv2d(x, wt, b, m, s, depth_multiplier=mult, stride=stride, pad=pad,
                                   dilation=dil, input_offset=-zp_in, output_offset=zp_out,
                                   act_min=lo, act_max=hi)
        out = np.zeros(exp.shape, np.int8)
        q = i32([*stride, *pad, *dil, -zp_in, zp_out, lo, hi])
        lib.k_dwconv(x, i32(x.shape), wt, kh, kw, mult, b, m, s, out, i32(out.shape), q)
        np.testing.assert_array_equal(out, exp)


# (batch, in, out, per_channel)
LINEAR_CASES = [(1, 16, 8, False), (3, 33, 7, True), (2, 200, 10, False), (4, 1, 5, True),
                (1, 64, 1, True)]


@pytest.mark.parametrize("case", LINEAR_CASES, ids=str)
def test_linear_c_vs_reference(lib, case):
    batch, fin, fout, per_channel = case
    g = rng(seed_of(case))
    x = rand_i8(g, (batch, fin))
    wt = rand_i8(g, (fout, fin))
    m, s, zp_in, zp_out, lo, hi = conv_quant(g, fout if per_channel else 1)
    bias = ref.fold_linear_bias(g.integers(-5000, 5000, fout), wt, -zp_in)
    for b in (bias, None):
        exp = ref.linear(x, wt, b, m, s, output_offset=zp_out, act_min=lo, act_max=hi)
        out = np.zeros(exp.shape, np.int8)
        lib.k_linear(x, wt, b, m, s, len(m), out, batch, fin, fout, zp_out, lo, hi)
        np.testing.assert_array_equal(out, exp)


def test_linear_folded_bias_matches_offset_form():
    g = rng(5)
    x = rand_i8(g, (3, 20))
    wt = rand_i8(g, (6, 20))
    bias = g.integers(-1000, 1000, 6)
    m, s = ref.conv_requant(0.02, 0.01, 0.1)
    got = ref.linear(x, wt, ref.fold_linear_bias(bias, wt, 7), m, s, output_offset=3)
    acc = (x.astype(np.int64) + 7) @ wt.astype(np.int64).T + bias
    exp = np.clip(ref.requantize(acc, m, s) + 3, -128, 127)
    np.testing.assert_array_equal(got, exp)


# ------------------------------------------------------------- add / mul

# (a shape, b shape)
BINARY_CASES = [
    ((1, 4, 4, 8), (1, 4, 4, 8)),
    ((2, 3, 4, 5), (1, 1, 1, 5)),
    ((2, 3, 4, 5), (2, 1, 4, 1)),
    ((17,), (1,)),
    ((1,), (9,)),
    ((3, 1, 7), (1, 6, 1)),
    ((2, 1, 3, 1, 2, 3), (1, 4, 3, 2, 1, 3)),
]


def binary_quant(g):
    s1, s2, so = logu(g, 0.01, 0.2, 3)
    zps = [int(v) for v in g.integers(-40, 40, 3)]
    lo, hi = act_range(g, zps[2])
    return s1, zps[0], s2, zps[1], so, zps[2], lo, hi


def _binary_c(lib, fn, a, b, q):
    shape = np.broadcast_shapes(a.shape, b.shape)
    out = np.zeros(shape, np.int8)
    fn(a, i32(a.shape), b, i32(b.shape), out, i32(shape), len(shape), q)
    return out


@pytest.mark.parametrize("shapes", BINARY_CASES, ids=str)
def test_add_mul_c_vs_reference(lib, shapes):
    g = rng(seed_of(shapes))
    a, b = rand_i8(g, shapes[0]), rand_i8(g, shapes[1])
    for _ in range(3):
        qp = binary_quant(g)
        p = ref.add_params(*qp)
        np.testing.assert_array_equal(
            _binary_c(lib, lib.k_add, a, b, i32([p[k] for k in ADD_FIELDS])), ref.add(a, b, p))
        p = ref.mul_params(*qp)
        np.testing.assert_array_equal(
            _binary_c(lib, lib.k_mul, a, b, i32([p[k] for k in MUL_FIELDS])), ref.mul(a, b, p))


@pytest.mark.parametrize("shapes", BINARY_CASES, ids=str)
def test_maximum_minimum_c_vs_reference(lib, shapes):
    g = rng(seed_of(("maxmin", shapes)))
    a, b = rand_i8(g, shapes[0]), rand_i8(g, shapes[1])
    shape = np.broadcast_shapes(a.shape, b.shape)
    for c_fn, r_fn in ((lib.k_maximum, ref.maximum), (lib.k_minimum, ref.minimum)):
        out = np.zeros(shape, np.int8)
        c_fn(a, i32(a.shape), b, i32(b.shape), out, i32(shape), len(shape))
        np.testing.assert_array_equal(out, r_fn(a, b))


# (batch, M, K, N)
BMM_CASES = [(1, 1, 1, 1), (2, 3, 6, 5), (3, 4, 17, 70), (1, 2, 200, 130), (4, 1, 8, 1)]


def bmm_quant(g):
    s1, s2 = logu(g, 0.005, 0.1, 2)
    so = logu(g, 0.05, 1.0)
    z1, z2, zo = [int(v) for v in g.integers(-60, 60, 3)]
    lo, hi = act_range(g, zo)
    return ref.batch_matmul_params(s1, z1, s2, z2, so, zo, lo, hi)


@pytest.mark.parametrize("case", BMM_CASES, ids=str)
def test_batch_matmul_c_vs_reference(lib, case):
    batch, m, k, n = case
    g = rng(seed_of(("bmm", case)))
    a, b = rand_i8(g, (batch, m, k)), rand_i8(g, (batch, k, n))
    for _ in range(3):
        p = bmm_quant(g)
        out = np.zeros((batch, m, n), np.int8)
        lib.k_batch_matmul(a, b, out, batch, m, k, n, i32([p[f] for f in BMM_FIELDS]))
        np.testing.assert_array_equal(out, ref.batch_matmul(a, b, p))


def test_batch_matmul_largest_accumulator(lib):
    """K at the load-time limit (K * 255 * 255 <= INT32_MAX) with every term
    at its largest magnitude: no int32 overflow (UBSan is on)."""
    k = (2**31 - 1) // (255 * 255)
    a = np.full((1, 1, k), -128, np.int8)
    b = np.full((1, k, 2), -128, np.int8)
    p = dict(lhs_offset=-127, rhs_offset=-127, output_multiplier=1 << 30, output_shift=-31, output_offset=3,
             act_min=-128, act_max=127)
    out = np.zeros((1, 1, 2), np.int8)
    lib.k_batch_matmul(a, b, out, 1, 1, k, 2, i32([p[f] for f in BMM_FIELDS]))
    np.testing.assert_array_equal(out, ref.batch_matmul(a, b, p))


def test_add_params_shapes():
    p = ref.add_params(0.1, 3, 0.05, -2, 0.2, 1)
    assert p["left_shift"] == 20
    assert p["input1_multiplier"] == 1 << 30 and p["input1_shift"] == 0  # 0.1 / 0.2
    assert p["input2_shift"] <= 0 and p["output_shift"] <= 0
    assert p["input1_offset"] == -3 and p["input2_offset"] == 2 and p["output_offset"] == 1


# ---------------------------------------------------------------- pools

# (N, H, W, C, kernel, stride, pad)
POOL_CASES = [
    (1, 8, 8, 4, (2, 2), (2, 2), (0, 0)),
    (2, 7, 7, 3, (3, 3), (2, 2), (1, 1)),
    (1, 9, 6, 80, (3, 2), (1, 2), (1, 0)),
    (1, 5, 5, 5, (5, 5), (1, 1), (2, 2)),
    (1, 4, 4, 2, (2, 2), (1, 1), (2, 2)),  # windows entirely in the padding
]


@pytest.mark.parametrize("case", POOL_CASES, ids=lambda c: str(c[:5]))
def test_pools_c_vs_reference(lib, case):
    n, h, w, c, k, st, pad = case
    g = rng(seed_of(case))
    x = rand_i8(g, (n, h, w, c))
    for lo, hi in ((-128, 127), (-5, 127), (-20, 30)):
        q = i32([*k, *st, *pad, lo, hi])
        for c_fn, r_fn in ((lib.k_maxpool, ref.max_pool2d), (lib.k_avgpool, ref.avg_pool2d)):
            exp = r_fn(x, k, st, pad, act_min=lo, act_max=hi)
            out = np.zeros(exp.shape, np.int8)
            c_fn(x, i32(x.shape), out, i32(out.shape), q)
            np.testing.assert_array_equal(out, exp)


def test_avg_pool_rounding():
    # Sums of -3 and 3 over two taps: -1.5 -> -2, 1.5 -> 2; -1 / 2 -> -1.
    x = np.array([-1, -2, 1, 2, 0, -1], np.int8).reshape(1, 1, 6, 1)
    got = ref.avg_pool2d(x, (1, 2), (1, 2))
    np.testing.assert_array_equal(got.ravel(), [-2, 2, -1])


# -------------------------------------------------------------- softmax

SOFTMAX_CASES = [(0.01, 10), (0.05, 1), (0.1, 37), (0.25, 1000), (1.0, 16), (0.0625, 1500),
                 (0.003, 64)]


@pytest.mark.parametrize("scale,row", SOFTMAX_CASES)
def test_softmax_c_vs_reference(lib, scale, row):
    g = rng(int(scale * 1e4) + row)
    x = rand_i8(g, (3, row))
    p = ref.softmax_params(scale)
    out = np.zeros_like(x)
    lib.k_softmax(x, 3, row, p["input_multiplier"], p["input_left_shift"], p["diff_min"], out)
    exp = ref.softmax(x, **p)
    np.testing.assert_array_equal(out, exp)
    if row > 1:  # sanity: close to the float softmax (1/256 steps)
        xs = scale * x.astype(np.float64)
        sm = np.exp(xs - xs.max(1, keepdims=True))
        sm /= sm.sum(1, keepdims=True)
        assert np.abs((exp.astype(np.float64) + 128) / 256 - sm).max() < 3 / 256


def test_softmax_many_rows_c_vs_reference(lib):
    # 100k outputs over varied scales and spreads: enough to expose an
    # approximation error in the fixed-point reciprocal or exponential.
    g = rng(21)
    for scale in (0.02, 0.07, 0.15, 0.4):
        spread = g.integers(1, 256, size=(2000, 1))
        x = np.clip(127 - (g.random((2000, 50)) * spread).astype(np.int64), -128, 127)
        x = i8(x)
        p = ref.softmax_params(scale)
        out = np.zeros_like(x)
        lib.k_softmax(x, 2000, 50, p["input_multiplier"], p["input_left_shift"], p["diff_min"],
                      out)
        np.testing.assert_array_equal(out, ref.softmax(x, **p))


def test_softmax_saturated_sum(lib):
    # 600 equal values: the sum of exponentials passes 2^28, so every output
    # rounds to -128 (CMSIS-NN/TFLM would shift by 32 here).
    x = np.full((1, 600), 5, np.int8)
    p = ref.softmax_params(0.1)
    out = np.zeros_like(x)
    lib.k_softmax(x, 1, 600, p["input_multiplier"], p["input_left_shift"], p["diff_min"], out)
    np.testing.assert_array_equal(out, ref.softmax(x, **p))
    assert (out == -128).all()
    x = np.full((1, 200), 5, np.int8)  # 256 / 200 rounds to 1
    assert (ref.softmax(x, **p) == -127).all()


@pytest.mark.parametrize("scale,beta", [(0.003, 1.0), (0.05, 1.0), (0.1, 0.5), (1.0, 1.0),
                                        (0.25, 2.0)])
def test_softmax_params(scale, beta):
    p = ref.softmax_params(scale, beta)
    m, ls, dmin = p["input_multiplier"], p["input_left_shift"], p["diff_min"]
    real = float(np.float32(beta)) * float(np.float32(scale)) * 2**26
    assert abs(m * 2.0**(ls - 31) - real) <= 2.0**(ls - 32)
    # diff_min: the most negative difference whose rescaling, d * 2^ls, still
    # fits the 5 integer bits (CalculateInputRadius).
    assert -dmin * 2**ls <= 31 * 2**26 < (-dmin + 1) * 2**ls


def test_softmax_fixed_point_helpers():
    q = np.linspace(-31.9, 0, 4001)
    raw = np.round(q * 2**26).astype(np.int64)
    got = reduce_ref._exp_on_negative_values(raw) / 2**31
    np.testing.assert_allclose(got, np.exp(raw / 2**26), rtol=0, atol=5e-7)
    assert reduce_ref._exp_on_negative_values(0) == 2**31 - 1
    x = np.linspace(0, 1, 4001, endpoint=False)
    raw = np.round(x * 2**31).astype(np.int64)
    got = reduce_ref._one_over_one_plus_x(raw) / 2**31
    np.testing.assert_allclose(got, 1 / (1 + raw / 2**31), rtol=0, atol=4e-9)


# ------------------------------------------------------- quantize & co

def quantize_inputs(g, scale, zp):
    ties = (np.arange(-140, 140) + 0.5).astype(np.float32) * np.float32(scale)
    x = np.concatenate([
        g.normal(0, 100 * scale, 2000).astype(np.float32),
        ties,
        np.array([1e6, -1e6, 3e38, -3e38, np.inf, -np.inf, 0.0, -0.0], np.float32),
    ])
    return x.astype(np.float32)


@pytest.mark.parametrize("scale,zp", [(0.25, 0), (0.125, -7), (0.0173, 12), (1.0, -128)])
def test_quantize_c_vs_reference(lib, scale, zp):
    g = rng(int(scale * 1000))
    x = np.concatenate([quantize_inputs(g, scale, zp), np.array([np.nan], np.float32)])
    out = np.zeros(len(x), np.int8)
    lib.k_quantize(x, out, len(x), scale, zp)
    exp = ref.quantize(x, scale, zp)
    np.testing.assert_array_equal(out, exp)
    if scale in (0.25, 0.125):  # exact ties, x / scale = k + 0.5: away from zero
        k = np.arange(-140, 140)
        tie_q = np.clip(np.where(k >= 0, k + 1, k) + zp, -128, 127)
        np.testing.assert_array_equal(exp[2000:2280], tie_q)
    assert exp[-9] == 127 and exp[-8] == -128 and exp[-1] == -128  # saturation, NaN


@pytest.mark.parametrize("scale,zp", [(0.25, 0), (0.0173, 12)])
def test_dequantize_clamp_lut_c_vs_reference(lib, scale, zp):
    q = np.arange(-128, 128, dtype=np.int8)
    out = np.zeros(256, np.float32)
    lib.k_dequantize(q, out, 256, scale, zp)
    exp = ref.dequantize(q, scale, zp)
    np.testing.assert_array_equal(out, exp)
    np.testing.assert_array_equal(exp, (q.astype(np.float32) - np.float32(zp)) * np.float32(scale))
    c = q.copy()
    lib.k_clamp(c, c, 256, -3, 50)  # in place
    np.testing.assert_array_equal(c, ref.clamp(q, -3, 50))
    table = ref.lut_table(np.tanh, scale, zp, 1 / 128, 0)
    x = rand_i8(rng(9), 1000)
    out = np.zeros_like(x)
    lib.k_lut(x, out, 1000, table)
    np.testing.assert_array_equal(out, ref.lut(x, table))


def _lut_scalar(fn, s_in, zp_in, s_out, zp_out, q):
    """LUTPopulateInt8 one value at a time with numpy float32 scalars."""
    deq = np.float32(s_in) * np.float32(q - zp_in)
    y = np.float32(fn(deq))
    r = np.float32(y * (np.float32(1) / np.float32(s_out)))
    r = math.floor(abs(float(r)) + 0.5) * (1 if r >= 0 else -1)
    return int(np.clip(r + zp_out, -128, 127))


@pytest.mark.parametrize("fn,s_in,zp_in,s_out,zp_out", [
    (np.tanh, 0.05, 3, 1 / 128, 0),
    (lambda v: 1 / (1 + np.exp(-v)), 0.1, -10, 1 / 256, -128),
    (lambda v: v, 0.02, 0, 0.02, 0),
    (lambda v: np.maximum(v, 0) * 1.5, 0.03, 5, 0.02, -20),
    (ref.hardswish, 0.04, -10, 0.03, -90),
])
def test_lut_table(fn, s_in, zp_in, s_out, zp_out):
    table = ref.lut_table(fn, s_in, zp_in, s_out, zp_out)
    assert table.dtype == np.int8 and table.shape == (256,)
    exp = [_lut_scalar(fn, s_in, zp_in, s_out, zp_out, q) for q in range(-128, 128)]
    np.testing.assert_array_equal(table, exp)
    if s_in == s_out and zp_in == zp_out == 0:
        np.testing.assert_array_equal(table, np.arange(-128, 128))


# ------------------------------------------------------------ build hygiene

def _compile_all(compiler, flags, out_dir):
    objs = [out_dir / (f.stem + ".o") for f in KERNEL_FILES_S8]

    def one(src_obj):
        src, obj = src_obj
        return subprocess.run([compiler, *flags, *INCLUDES, "-c", str(src), "-o", str(obj)],
                              capture_output=True, text=True)

    with ThreadPoolExecutor() as pool:
        results = list(pool.map(one, zip(KERNEL_FILES_S8, objs)))
    failures = [f"{s.name}:\n{r.stderr}" for s, r in zip(KERNEL_FILES_S8, results)
                if r.returncode or r.stderr]
    assert not failures, "\n".join(failures)
    return objs


def test_s8_sources_present():
    assert all(f.is_file() for f in KERNEL_FILES_S8)
    names = {f.relative_to(f.parents[1]).as_posix() for f in KERNEL_FILES_S8}
    assert {"common/requantize.cc", "conv/conv2d_s8.cc", "conv/linear_s8.cc", "elementwise/binary_s8.cc",
            "pool_resize/pool2d_s8.cc", "reduce/softmax_s8.cc", "elementwise/quantize.cc",
            "attention_norm/batch_matmul_s8.cc"} <= names


def test_host_compile_warning_free(tmp_path):
    _compile_all("g++", HOST_WARN_FLAGS, tmp_path)


def test_arm_compile_no_heap(tmp_path):
    cxx, nm, objdump = (shutil.which(t) for t in
                        ("arm-none-eabi-g++", "arm-none-eabi-nm", "arm-none-eabi-objdump"))
    if cxx is None or nm is None or objdump is None:
        pytest.skip("arm-none-eabi toolchain not on PATH")
    allowed = {"memset", "memcpy"}
    for obj in _compile_all(cxx, ARM_FLAGS, tmp_path):
        undefined = subprocess.run([nm, "-u", str(obj)], capture_output=True, text=True,
                                   check=True).stdout.split()
        bad = [s for s in undefined[1::2] if s not in allowed]
        assert not bad, f"{obj.name} references {bad}"
        sections = subprocess.run([objdump, "-h", str(obj)], capture_output=True, text=True,
                                  check=True).stdout
        assert ".init_array" not in sections, obj.name
