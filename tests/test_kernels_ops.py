"""The element-wise, reduction, normalisation and attention kernels, bit for
bit: the C math (firmware/kernels/portable/activations/activations.cc,
elementwise/arith.cc, reduce/reductions.cc, attention_norm/attention_norm.cc,
reduce/softmax_s8.cc; built with UBSan, see
_kernel_lib_ops.py) against its NumPy twin in aot/torchmcu/reference/, on
seeded random data and realistic random quantization parameters, and the
reference's own properties (the layer-norm scheme against float, the masked
softmax against the unmasked one on the rows a mask leaves)."""

import math
import zlib

import numpy as np
import pytest
from _kernel_lib_ops import (
    ADD_FIELDS,
    BMM_FIELDS,
    DIV_FIELDS,
    LAYER_NORM_FIELDS,
    LOG_SOFTMAX_FIELDS,
    MEAN_FIELDS,
    MUL_FIELDS,
    PRELU_FIELDS,
    build,
    fields,
)
from torchmcu import reference as ref
from torchmcu.reference import activations as act_ref
from torchmcu.reference import reduce as reduce_ref


@pytest.fixture(scope="session")
def lib(tmp_path_factory):
    return build(tmp_path_factory.mktemp("portable_ops"))


def rng(case):
    return np.random.default_rng(zlib.crc32(repr(case).encode()))


def logu(g, lo, hi):
    return float(np.exp(g.uniform(math.log(lo), math.log(hi))))


def i8(g, shape):
    return g.integers(-128, 128, size=shape).astype(np.int8)


def i16(g, shape):
    return g.integers(-32768, 32768, size=shape).astype(np.int16)


def dims6(shape):
    return np.array(list(shape) + [0] * (6 - len(shape)), np.int32)


# ------------------------------------------------------------------ activations


@pytest.mark.parametrize("fn", sorted(ref.ACTIVATION_FN))
def test_activation_f32_matches_pytorch(lib, fn):
    x = np.linspace(-6, 6, 997, dtype=np.float32)
    if fn in ("rsqrt", "sqrt"):
        x = np.abs(x) + np.float32(0.01)
    if fn == "reciprocal":
        x = np.where(np.abs(x) < 0.01, np.float32(0.5), x).astype(np.float32)
    out = np.zeros_like(x)
    lib.k_activation(x, out, x.size, ref.ACTIVATION_FN[fn], 0.7)
    expected = act_ref.float_fn(fn, 0.7)(x)
    np.testing.assert_allclose(out, expected, rtol=2e-6, atol=2e-6 * max(1.0, float(np.abs(expected).max())))


@pytest.mark.parametrize("fn", ["gelu", "silu", "sigmoid", "tanh", "exp", "hardsigmoid", "elu"])
@pytest.mark.parametrize("case", range(3))
def test_lut_s16_on_every_input(lib, fn, case):
    g = rng((fn, case))
    x = np.arange(-32768, 32768, dtype=np.int16)
    s_in = logu(g, 1e-5, 3e-4)  # inputs up to +-0.3 .. +-10
    real = act_ref.float_fn(fn)(x.astype(np.float32) * np.float32(s_in))
    s_out = float(np.abs(real).max()) / 32767 * logu(g, 1, 3)  # a calibrated output range, or wider
    table = ref.table_s16(fn, s_in, s_out)
    out = np.zeros_like(x)
    lib.k_lut_s16(x, out, x.size, table)
    np.testing.assert_array_equal(out, ref.lut_s16(x, table))
    # The interpolated table tracks the float function within a few output steps, plus what linear
    # interpolation over a segment (128 inputs) misses where the function curves (f'' h^2 / 8, doubled:
    # the table entries are nudged by half the midpoint error and scaled by 65536 / 65535).
    import torch

    edges = torch.linspace(-32768 * s_in, 32767 * s_in, 4097, dtype=torch.float64)
    f = act_ref._torch_fn(fn)(edges)
    step = float(edges[1] - edges[0])
    curvature = float((f[2:] - 2 * f[1:-1] + f[:-2]).abs().max()) / step ** 2
    assert np.abs(out * s_out - real).max() <= 4 * s_out + curvature * (128 * s_in) ** 2 / 4


@pytest.mark.parametrize("bits", [8, 16])
@pytest.mark.parametrize("case", range(4))
def test_prelu(lib, bits, case):
    g = rng(("prelu", bits, case))
    shape, a_shape = (2, 5, 3, 4), (1, 1, 1, 4) if case % 2 else (1,)
    x = i8(g, shape) if bits == 8 else i16(g, shape)
    alpha_f = g.uniform(-0.5, 0.5, a_shape).astype(np.float32)
    from torchmcu.passes.lowering.operands import const_q

    alpha, s_a, z_a = const_q(alpha_f, 8)
    zp_in, zp_out = (int(g.integers(-20, 20)), int(g.integers(-20, 20))) if bits == 8 else (0, 0)
    lo, hi = (-128, 127) if bits == 8 else (-32768, 32767)
    p = ref.prelu_params(logu(g, 1e-3, 0.1), zp_in, s_a, z_a, logu(g, 1e-3, 0.1), zp_out, lo, hi)
    ad = (1, 1, 1, a_shape[-1]) if len(a_shape) == 4 else (1, 1, 1, 1)
    out = np.zeros(shape, x.dtype)
    fn = lib.k_prelu_s8 if bits == 8 else lib.k_prelu_s16
    fn(x, dims6(shape), alpha, dims6(ad), out, dims6(shape), 4, fields(p, PRELU_FIELDS))
    np.testing.assert_array_equal(out, ref.prelu(x, alpha.reshape(ad), p, x.dtype))


@pytest.mark.parametrize("bits", [8, 16])
def test_glu(lib, bits):
    g = rng(("glu", bits))
    outer, half, inner = 3, 5, 4
    x = (i8 if bits == 8 else i16)(g, (outer, 2 * half, inner))
    s_in, zp_in = logu(g, 1e-3, 0.1), (int(g.integers(-30, 30)) if bits == 8 else 0)
    s_out, zp_out = logu(g, 1e-3, 0.1), (int(g.integers(-30, 30)) if bits == 8 else 0)
    table = ref.glu_table(s_in, zp_in, bits)
    p = ref.glu_params(s_in, zp_in, s_out, zp_out, bits)
    out = np.zeros((outer, half, inner), x.dtype)
    (lib.k_glu_s8 if bits == 8 else lib.k_glu_s16)(x, table, out, outer, half, inner, fields(p, MUL_FIELDS))
    np.testing.assert_array_equal(out, ref.glu(x, table, 1, p, bits))


# ------------------------------------------------------------------ sub, div


@pytest.mark.parametrize("bits", [8, 16])
@pytest.mark.parametrize("case", range(4))
def test_sub_broadcast(lib, bits, case):
    g = rng(("sub", bits, case))
    a_shape, b_shape, y_shape = (2, 3, 4), ((1, 3, 1) if case % 2 else (2, 3, 4)), (2, 3, 4)
    gen = i8 if bits == 8 else i16
    a, b = gen(g, a_shape), gen(g, b_shape)
    zps = [int(g.integers(-50, 50)) for _ in range(3)] if bits == 8 else [0, 0, 0]
    lo, hi = (-128, 127) if bits == 8 else (-32768, 32767)
    p = ref.sub_params(logu(g, 1e-3, 0.1), zps[0], logu(g, 1e-3, 0.1), zps[1], logu(g, 1e-3, 0.1), zps[2], lo, hi,
                       bits)
    out = np.zeros(y_shape, a.dtype)
    (lib.k_sub_s8 if bits == 8 else lib.k_sub_s16)(a, dims6(a_shape), b, dims6(b_shape), out, dims6(y_shape), 3,
                                                   fields(p, ADD_FIELDS))
    np.testing.assert_array_equal(out, ref.sub(a, b, p, a.dtype))


@pytest.mark.parametrize("case", range(4))
def test_div_on_every_pair(lib, case):
    g = rng(("div", case))
    a = np.repeat(np.arange(-128, 128, dtype=np.int8), 256)
    b = np.tile(np.arange(-128, 128, dtype=np.int8), 256)
    s1, s2 = logu(g, 1e-3, 0.1), logu(g, 1e-3, 0.1)
    s_out = s1 / s2 * logu(g, 0.01, 0.5)  # the quotient's range, as calibration would give
    p = ref.div_params(s1, int(g.integers(-128, 128)), s2, int(g.integers(-128, 128)), s_out,
                       int(g.integers(-128, 128)))
    out = np.zeros_like(a)
    shape = dims6(a.shape)
    lib.k_div_s8(a, shape, b, shape, out, shape, 1, fields(p, DIV_FIELDS))
    np.testing.assert_array_equal(out, ref.div(a, b, p))
    # Within one output step of the exact quotient (clamped), where the divisor is not 0.
    v1, v2 = a.astype(np.int64) + p["input1_offset"], b.astype(np.int64) + p["input2_offset"]
    ok = v2 != 0
    exact = np.clip(np.round(s1 * v1[ok] / (s2 * v2[ok]) / s_out) + p["output_offset"], -128, 127)
    assert np.abs(out[ok] - exact).max() <= 1


# ------------------------------------------------------------------ reductions


@pytest.mark.parametrize("case", range(6))
def test_log_softmax(lib, case):
    g = rng(("log_softmax", case))
    rows, cols = int(g.integers(1, 6)), int(g.choice([1, 3, 10, 100, 1000]))
    x = i8(g, (rows, cols))
    s_in = logu(g, 1e-3, 0.5)
    p = ref.log_softmax_params(s_in)
    out = np.zeros_like(x)
    lib.k_log_softmax_s8(x, rows, cols, fields(p, LOG_SOFTMAX_FIELDS), out)
    got = ref.log_softmax(x, p)
    np.testing.assert_array_equal(out, got)
    real = x.astype(np.float64) * s_in
    exact = real - real.max(1, keepdims=True) - np.log(np.exp(real - real.max(1, keepdims=True)).sum(1, keepdims=True))
    q = np.clip(np.round(exact / (16 / 256)) + 127, -128, 127)
    assert np.abs(got.astype(int) - q).max() <= 1


@pytest.mark.parametrize("bits", [8, 16])
@pytest.mark.parametrize("case", range(5))
def test_mean_any_axes(lib, bits, case):
    g = rng(("mean", bits, case))
    rank = int(g.integers(1, 5))
    shape = tuple(int(d) for d in g.integers(1, 6, size=rank))
    mask = int(g.integers(1, 1 << rank))
    x = (i8 if bits == 8 else i16)(g, shape)
    count = int(np.prod([shape[d] for d in range(rank) if mask >> d & 1]))
    zps = (int(g.integers(-100, 100)), int(g.integers(-100, 100))) if bits == 8 else (0, 0)
    lo, hi = (-128, 127) if bits == 8 else (-32768, 32767)
    p = ref.mean_params(logu(g, 1e-3, 0.1), zps[0], logu(g, 1e-3, 0.1), zps[1], count, lo, hi)
    expected = ref.mean_q(x, mask, p, x.dtype)
    out = np.zeros(expected.size, x.dtype)
    (lib.k_mean_s8 if bits == 8 else lib.k_mean_s16)(np.ascontiguousarray(x), dims6(shape), rank, mask,
                                                     fields(p, MEAN_FIELDS), out)
    np.testing.assert_array_equal(out, expected.reshape(-1))


@pytest.mark.parametrize("case", range(4))
def test_masked_softmax_s8(lib, case):
    g = rng(("masked8", case))
    rows, cols, mask_rows = 6, int(g.choice([4, 17, 64])), int(g.choice([1, 2, 3, 6]))
    x = i8(g, (rows, cols))
    mask = (g.random((mask_rows, cols)) < 0.4).astype(np.uint8)
    mask[0] = 1  # a row with every entry masked
    p = ref.softmax_params(logu(g, 1e-3, 0.2), 0.25)
    table = reduce_ref.softmax_exp_table(p["input_multiplier"], p["input_left_shift"], p["diff_min"])
    got = ref.softmax(x, p["input_multiplier"], p["input_left_shift"], p["diff_min"], mask)
    for t in (None, table):  # the exponentials computed, or looked up: the same bits
        out = np.zeros_like(x)
        lib.k_softmax_rows_s8(x, rows, cols, p["input_multiplier"], p["input_left_shift"], p["diff_min"], mask,
                              mask_rows, out, t)
        np.testing.assert_array_equal(out, got)
    np.testing.assert_array_equal(got, ref.softmax(x, p["input_multiplier"], p["input_left_shift"], p["diff_min"],
                                                   mask, table))
    # The unmasked entries of a row are the softmax of those entries alone; masked ones are -128.
    full = reduce_ref.masked_rows(mask, rows)
    for r in range(rows):
        keep = ~full[r]
        assert np.all(got[r][~keep] == -128)
        if keep.any():
            alone = ref.softmax(x[r][keep][None], p["input_multiplier"], p["input_left_shift"], p["diff_min"])[0]
            np.testing.assert_array_equal(got[r][keep], alone)


def test_masked_softmax_s16(lib):
    g = rng("masked16")
    rows, cols, mask_rows = 4, 33, 2
    x = i16(g, (rows, cols))
    mask = (g.random((mask_rows, cols)) < 0.3).astype(np.uint8)
    exp_lut, one_lut = ref.softmax_luts_s16()
    p = ref.softmax_params_s16(3e-4, 0.5)
    out = np.zeros_like(x)
    lib.k_softmax_rows_s16(x, rows, cols, p["input_multiplier"], p["input_left_shift"], exp_lut, one_lut, mask,
                           mask_rows, out)
    got = ref.softmax_s16(x, p["input_multiplier"], p["input_left_shift"], exp_lut, one_lut, mask)
    np.testing.assert_array_equal(out, got)
    full = reduce_ref.masked_rows(mask, rows)
    assert np.all(got[full] == 0)
    for r in range(rows):
        alone = ref.softmax_s16(x[r][~full[r]][None], p["input_multiplier"], p["input_left_shift"], exp_lut,
                                one_lut)[0]
        np.testing.assert_array_equal(got[r][~full[r]], alone)


@pytest.mark.parametrize("case", range(4))
def test_softmax_exp_table_gives_the_same_bits(lib, case):
    """SOFTMAX_S8 with its exp table against the computed exponentials, on
    rows spanning the whole int8 range (differences down to -255)."""
    g = rng(("exp_table", case))
    rows, cols = 8, int(g.choice([2, 31, 300]))
    x = i8(g, (rows, cols))
    p = ref.softmax_params(logu(g, 1e-3, 0.5), float(g.choice([1.0, 0.125])))
    table = reduce_ref.softmax_exp_table(p["input_multiplier"], p["input_left_shift"], p["diff_min"])
    out = np.zeros_like(x)
    lib.k_softmax_rows_s8(x, rows, cols, p["input_multiplier"], p["input_left_shift"], p["diff_min"], None, 1, out,
                          table)
    np.testing.assert_array_equal(out, ref.softmax(x, p["input_multiplier"], p["input_left_shift"], p["diff_min"]))


# ------------------------------------------------------------------ layer norm, matmul


@pytest.mark.parametrize("bits", [8, 16])
@pytest.mark.parametrize("case", range(5))
def test_layer_norm(lib, bits, case):
    g = rng(("layer_norm", bits, case))
    rows, cols = int(g.integers(1, 5)), int(g.choice([1, 2, 7, 64, 768, 4096]))
    spread = int(g.choice([1, 3, 40, 127])) if bits == 8 else int(g.choice([1, 50, 3000, 32767]))
    centre = int(g.integers(-128 + spread, 128 - spread)) if bits == 8 else 0
    x = g.integers(centre - spread, centre + spread + 1, size=(rows, cols)).astype(np.int8 if bits == 8 else np.int16)
    if case == 0:
        x[0] = x[0, 0]  # a constant row
    gamma, beta = g.normal(1, 0.3, cols), g.normal(0, 0.5, cols)
    gq, bq, s_g = ref.layer_norm_constants(gamma, beta, cols)
    s_in, zp_in = logu(g, 1e-4, 0.1), (int(g.integers(-20, 20)) if bits == 8 else 0)
    s_out, zp_out = (4.0 / 127, int(g.integers(-10, 10))) if bits == 8 else (4.0 / 32767, 0)
    lo, hi = (-128, 127) if bits == 8 else (-32768, 32767)
    eps = float(g.choice([0.0, 1e-5, 1e-2]))
    p = ref.layer_norm_params(s_in, zp_in, s_g, s_out, zp_out, cols, eps, lo, hi)
    out = np.zeros_like(x)
    (lib.k_layer_norm_s8 if bits == 8 else lib.k_layer_norm_s16)(x, gq, bq, out, rows, cols,
                                                                 fields(p, LAYER_NORM_FIELDS))
    got = ref.layer_norm_q(x, gq, bq, p, x.dtype)
    np.testing.assert_array_equal(out, got)
    # Against float layer norm of the dequantized input, with the quantized gamma and beta: one output step.
    real = (x.astype(np.float64) - zp_in) * s_in
    mean, var = real.mean(1, keepdims=True), real.var(1, keepdims=True)
    y = (real - mean) / np.sqrt(var + eps) * (gq * s_g) + bq * s_g / 65536
    q = np.clip(np.round(y / s_out) + zp_out, lo, hi)
    assert np.abs(got.astype(np.int64) - q).max() <= 1


@pytest.mark.parametrize("case", range(4))
def test_matmul_transposed_s8(lib, case):
    g = rng(("bmm_t", case))
    m, k, n = (int(v) for v in g.integers(1, 20, size=3))
    a, bt = i8(g, (m, k)), i8(g, (n, k))
    p = ref.batch_matmul_params(logu(g, 1e-3, 0.1), int(g.integers(-128, 128)), logu(g, 1e-3, 0.1),
                                int(g.integers(-128, 128)), logu(g, 0.05, 1), int(g.integers(-128, 128)), adj_y=True)
    out = np.zeros((m, n), np.int8)
    lib.k_matmul_t_s8(a, bt, out, m, k, n, fields(p, BMM_FIELDS))
    np.testing.assert_array_equal(out, ref.batch_matmul(a, bt, p))
    np.testing.assert_array_equal(out, ref.batch_matmul(a, np.ascontiguousarray(bt.T), dict(p, adj_y=False)))


@pytest.mark.parametrize("transposed", [False, True])
def test_matmul_s16(lib, transposed):
    g = rng(("bmm16", transposed))
    m, k, n = 7, 33, 5
    a = i16(g, (m, k))
    b = i16(g, (n, k) if transposed else (k, n))
    p = ref.batch_matmul_params(1e-4, 0, 2e-4, 0, 0.05, 0, -32768, 32767, transposed)
    out = np.zeros((m, n), np.int16)
    lib.k_matmul_s16(a, b, out, m, k, n, int(transposed), p["output_multiplier"], p["output_shift"], -32768, 32767)
    np.testing.assert_array_equal(out, ref.batch_matmul_s16(a, b, p))
