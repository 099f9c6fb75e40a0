"""The int8 fast paths of LINEAR_S8, ADD_S8, AVG_POOL2D_S8 and MAX_POOL2D_S8
(firmware/kernels/fast/conv/linear_s8.h, elementwise/binary_s8.h,
pool_resize/pool2d_s8.h) bit for bit against the NumPy reference, in QEMU on
the M4 (mps2-an386), the M33 (mps2-an505) and the M55 (mps3-an547).

The programs are built by hand (tests/test_runtime_features.py's Builder),
so that parameters a compiled model never has are tested as well: per-tensor
requantization (one multiplier), multipliers above 1 (positive shifts, the
outputs saturating), multipliers below 512 with positive shifts (MVE falls
back to the generic kernel), a zero multiplier, shift -31, weights whose rows are not 4-byte aligned, rows longer than the DSP
path's expanded chunk (320 inputs), and every remainder of the unrolled
loops (K % 32 in 8s and 4s, K % 4, K % 16 for MVE; output rows % 4 and % 2).
For ADD: the TFLite parameters of inputs with a larger, a smaller and an
equal scale (one rescaled input is then a shift: the tabulated path;
neither: the generic one), zero points -128 and 127, a ReLU range, many
exact rounding ties, the output over its first input (in place), element
counts with a tail, below the table threshold, and broadcasting (the generic
kernel). For AVG_POOL2D: DS-CNN's and ResNet-8's global pools, padding with
and without count_include_pad, divisor_override, channel counts with tails,
the extreme sums of 256 taps, windows of more than 256 taps (int16 sums per
block of rows: 272 taps, EfficientNet's 32 x 32 global pool, its extreme
sums) and rows of 260 taps (the generic kernel); and PyTorch's rounding
(round_half_even: the real mean half to even) at zero points -128, 0 and 5,
with ties in every window (a checkerboard input), odd and even divisors no
power of 2, blocks, padding, divisor_override and a divisor too large for
MVE's vector division. For
MAX_POOL2D: ResNet's 3x3 stride 2 pad 1, dilation, a ReLU6-like clamp (both
bounds), channel counts with MVE and DSP tails (3, 21, 67). Every op
reads its own inputs and writes its own output; random int8 inputs.
"""

from __future__ import annotations


import numpy as np
import pytest
from conftest import needs_arm_gcc, needs_qemu
from test_runtime_features import Builder, build_dir
from torchmcu import reference as ref
from torchmcu.builder.firmware import build_firmware
from torchmcu.program import serialize
from torchmcu.program.interpret import run_reference
from torchmcu.sim import runner

# The M33 runs the M4's DSP paths: in `make zoo` (CI runs it), to keep `make test` short.
BOARDS = ["mps2-an386", pytest.param("mps2-an505", marks=pytest.mark.zoo), "mps3-an547"]
SAMPLES = 2


class Arena:
    """Builder arena tensors placed one after the other, 16-byte aligned."""

    def __init__(self, b: Builder) -> None:
        self.b = b
        self.top = 0

    def tensor(self, name: str, dims: list[int], scale: float, zp: int) -> int:
        t = self.b.arena(name, "I8", dims, self.top, scale, zp)
        self.top = serialize._pad(self.top + int(np.prod(dims)))
        self.b.arena_bytes = self.top
        return t


def misaligned_const(b: Builder, name: str, value: np.ndarray) -> int:
    """An int8 constant one byte past a 16-byte boundary."""
    t = b.const(name, "I8", np.concatenate([np.zeros(1, np.int8), value.reshape(-1)]))
    b.tensors[t].update(offset=b.tensors[t]["offset"] + 1, nbytes=value.size, dims=list(value.shape))
    return t


# (name, batch, K, N, per_channel, bias, zp_in, zp_out, act, requant, misaligned)
# requant: "calib" (conv_requant of plausible scales), "big" (multipliers > 1),
# "odd" (hand-picked multipliers and shifts).
LINEAR = [
    ("ae_640x128_relu", 1, 640, 128, True, True, 3, -128, "relu", "calib", False),
    ("k37_n13_tensor", 3, 37, 13, False, True, -128, 5, None, "calib", False),
    ("k700_n7_chunked", 2, 700, 7, True, True, 127, -3, None, "calib", False),
    ("k1303_n6_chunked_odd", 1, 1303, 6, False, False, 0, 0, None, "calib", False),
    ("k8_n10", 1, 8, 10, True, True, 11, 20, None, "calib", False),
    ("k28_n5_big", 2, 28, 5, True, True, 0, 0, None, "big", False),
    ("k60_n9_odd", 1, 60, 9, True, True, -7, 2, None, "odd", False),  # MVE: the generic kernel (m < 512, s > 0)
    ("k44_n8_odd_vector", 2, 44, 8, True, True, 3, -1, None, "odd_vector", False),
    ("k96_n4_tensor_big", 1, 96, 4, False, True, 0, 1, "relu", "big", False),
    ("k64_n11_misaligned", 2, 64, 11, True, True, 9, -1, None, "calib", True),
    ("k256_n2_few_rows", 1, 256, 2, True, True, -128, 0, None, "calib", False),  # MobileNet's classifier
    ("k13_n1_few_rows", 3, 13, 1, False, False, 7, 4, None, "calib", False),
    ("k33_n3", 4, 33, 3, True, True, 0, 0, (-20, 30), "calib", False),
    # Small weights and multiplier 0.5 >> 2 (shift -3): many exact ties of
    # the rounding shift, on both signs (half away from zero).
    ("k20_n12_ties", 3, 20, 12, True, True, 0, 0, None, "ties", False),
    ("k36_n8_tensor_ties", 2, 36, 8, False, True, 5, -2, None, "ties", False),
]


def _requant(kind: str, n: int, K: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    if kind == "calib":  # outputs spread over the int8 range for random int8 inputs and weights
        return ref.conv_requant(1.0, rng.uniform(0.5, 1.5, n) * 60 / (np.sqrt(K) * 110 * 74), 1.0)
    if kind == "ties":
        return np.full(n, 1 << 30, np.int32), np.full(n, -2, np.int32)
    if kind == "big":  # real multipliers 2 .. 2000
        return ref.conv_requant(0.05, rng.uniform(0.04, 40.0, n), 0.001)
    if kind == "odd_vector":  # extreme multipliers and shifts the MVE vector requantization takes
        m = np.resize(np.array([0, 512, 2**31 - 1, 1 << 30, 1518500250, 600, 1, 300], np.int64), n)
        s = np.resize(np.array([5, 30, -31, 0, -1, 12, -3, 0], np.int64), n)
        return m.astype(np.int32), s.astype(np.int32)
    m = np.array([0, 1, 300, 511, 512, 1 << 30, 2**31 - 1, 1518500250, 1 << 30, 77], np.int64)[:n]
    s = np.array([3, 5, 1, 30, 2, -31, -1, 0, -18, 4], np.int64)[:n]
    m = np.resize(m, n)
    s = np.resize(s, n)
    return m.astype(np.int32), s.astype(np.int32)


def _act(act, zp_out: int) -> tuple[int, int]:
    if act == "relu":
        return zp_out, 127
    return act if act else (-128, 127)


def add_linear(b: Builder, a: Arena, case, rng: np.random.Generator) -> tuple[int, int]:
    name, batch, K, N, per_channel, has_bias, zp_in, zp_out, act, kind, misaligned = case
    x = a.tensor(f"{name}_x", [batch, K], 0.05, zp_in)
    y = a.tensor(f"{name}_y", [batch, N], 0.1, zp_out)
    w = rng.integers(-2, 3, (N, K), dtype=np.int8) if kind == "ties" else rng.integers(-127, 128, (N, K), dtype=np.int8)
    reach = 50 if kind == "ties" else 2000
    bias = rng.integers(-reach, reach, N) if has_bias else None
    mult, shift = _requant(kind, N if per_channel else 1, K, rng)
    wid = misaligned_const(b, f"{name}_w", w) if misaligned else b.const(f"{name}_w", "I8", w)
    ids = [x, wid, b.const(f"{name}_bias", "I32", ref.fold_linear_bias(bias, w, -zp_in)),
           b.const(f"{name}_mult", "I32", mult), b.const(f"{name}_shift", "I32", shift)]
    lo, hi = _act(act, zp_out)
    b.op("LINEAR_S8", ids, [y], ("QuantLinearParams", {"input_offset": -zp_in, "output_offset": zp_out,
                                                       "act_min": lo, "act_max": hi}))
    return x, y


# (name, a dims, b dims, (s1, zp1), (s2, zp2), (s_out, zp_out), act, params override)
ADD = [
    ("resnet_like", [1, 16, 16, 16], [1, 16, 16, 16], (0.05, -3), (0.08, 10), (0.1, -128), "relu", None),
    ("smaller_first_tail", [1, 1003], [1, 1003], (0.02, 127), (0.07, -128), (0.09, 4), None, None),
    ("equal_scales", [2, 300], [2, 300], (0.04, 0), (0.04, -128), (0.05, 0), None, None),
    ("below_threshold", [1, 77], [1, 77], (0.05, 1), (0.03, 2), (0.06, -5), None, None),
    ("broadcast", [1, 4, 4, 16], [1, 1, 1, 16], (0.05, 0), (0.02, 3), (0.07, 1), None, None),
    # Neither rescale is a plain shift: both inputs tabulated.
    ("two_tables", [1, 700], [1, 700], (0.05, 5), (0.03, -9), (0.04, 0), (-100, 90),
     {"input1_multiplier": 1518500250, "input1_shift": -1}),
    # Output multiplier with shift 0 and one with a positive shift: the generic path.
    ("out_shift_0", [1, 300], [1, 300], (0.05, 5), (0.03, -9), (0.04, 0), None,
     {"output_multiplier": 1 << 30, "output_shift": 0, "left_shift": 8}),
    ("out_shift_up", [1, 300], [1, 300], (0.05, 5), (0.03, -9), (0.04, 0), None,
     {"output_multiplier": 1 << 30, "output_shift": 2, "left_shift": 4}),
    # Small sums and output multiplier 0.5 >> 1 (and >> 2): many exact ties
    # of the output's rounding shift, on both signs.
    ("ties_e1", [1, 517], [1, 517], (0.05, 3), (0.03, -7), (0.04, 0), None,
     {"left_shift": 1, "input1_multiplier": 1 << 30, "input1_shift": 0, "input2_multiplier": 1518500250,
      "input2_shift": 0, "output_multiplier": 1 << 30, "output_shift": -1}),
    # The output over its first input (an in-place residual add).
    ("in_place", [1, 2001], [1, 2001], (0.06, -2), (0.05, 9), (0.08, -128), "relu", {"in_place": True}),
    ("ties_e2", [1, 300], [1, 300], (0.05, 3), (0.03, -7), (0.04, 2), None,
     {"left_shift": 2, "input1_multiplier": 1288490189, "input1_shift": -1, "input2_multiplier": 1 << 30,
      "input2_shift": 0, "output_multiplier": 1 << 30, "output_shift": -2}),
]


def add_add(b: Builder, a: Arena, case) -> tuple[list[int], int]:
    name, da, db, (s1, z1), (s2, z2), (so, zo), act, override = case
    dy = list(np.broadcast_shapes(tuple(da), tuple(db)))
    override = dict(override or {})
    in_place = override.pop("in_place", False)
    x = a.tensor(f"{name}_a", da, s1, z1)
    y = a.tensor(f"{name}_b", db, s2, z2)
    if in_place:
        out = b.arena(f"{name}_out", "I8", dy, b.tensors[x]["offset"], so, zo)
    else:
        out = a.tensor(f"{name}_out", dy, so, zo)
    lo, hi = _act(act, zo)
    p = ref.add_params(s1, z1, s2, z2, so, zo, lo, hi)
    p.update(override)
    b.op("ADD_S8", [x, y], [out], ("QuantAddParams", p))
    return [x, y], out




def _even(zp: int, **options) -> dict:
    """A pool's options with PyTorch's rounding at zero point zp."""
    return {"round_half_even": True, "zero_point": zp, **options}


# (name, x dims NHWC, kernel, stride, pad (top, left, bottom, right), options, act)
POOL = [
    ("ds_cnn_global", [1, 25, 5, 64], (25, 5), (1, 1), (0, 0, 0, 0), {}, None),
    ("resnet_global", [1, 8, 8, 64], (8, 8), (1, 1), (0, 0, 0, 0), {}, None),
    ("c21_s2_pad", [2, 7, 9, 21], (3, 3), (2, 2), (1, 1, 1, 1), {}, "relu"),
    ("c21_s2_pad_incl", [1, 7, 9, 21], (3, 3), (2, 2), (1, 1, 1, 1), {"count_include_pad": True}, None),
    ("c3_override", [1, 6, 6, 3], (2, 3), (2, 1), (0, 1, 0, 1), {"divisor_override": 5}, (-50, 60)),
    ("c40_256_taps_allmin", [1, 16, 16, 40], (16, 16), (1, 1), (0, 0, 0, 0), {}, None),
    ("c24_256_taps_allmax", [1, 16, 16, 24], (16, 16), (1, 1), (0, 0, 0, 0), {}, None),
    ("c16_272_taps", [1, 17, 16, 16], (17, 16), (1, 1), (0, 0, 0, 0), {}, None),  # blocks of 16 rows and 1
    ("c32_1024_taps", [1, 32, 32, 32], (32, 32), (1, 1), (0, 0, 0, 0), {}, None),  # EfficientNet's SE pool
    ("c19_1024_taps_allmin", [1, 32, 32, 19], (32, 32), (1, 1), (0, 0, 0, 0), {}, None),
    ("c8_row_260_taps", [2, 1, 260, 8], (1, 260), (1, 1), (0, 0, 0, 0), {}, None),  # the generic kernel
    # PyTorch's rounding (round_half_even: the real mean half to even): zero points -128, 0 and 5, sums
    # of both signs, divisors odd, even and no power of 2, channel tails (MVE 16, DSP 8), block sums,
    # padding, divisor_override (MVE: the scalar division), a divisor too large for MVE's multiply.
    ("even_g6x6_c72_zpm128", [1, 6, 6, 72], (6, 6), (1, 1), (0, 0, 0, 0), _even(-128), None),
    ("even_g2x3_c21_zp0_ties", [2, 2, 3, 21], (2, 3), (1, 1), (0, 0, 0, 0), _even(0), None),
    ("even_g5x5_c19_zp5", [1, 5, 5, 19], (5, 5), (1, 1), (0, 0, 0, 0), _even(5), None),
    ("even_g14x14_c24_relu", [1, 14, 14, 24], (14, 14), (1, 1), (0, 0, 0, 0), _even(-128), "relu"),
    ("even_g28x28_c32_zp5_ties", [1, 28, 28, 32], (28, 28), (1, 1), (0, 0, 0, 0), _even(5), None),  # 784 taps
    ("even_c24_256_taps_zp5_allmin", [1, 16, 16, 24], (16, 16), (1, 1), (0, 0, 0, 0), _even(5), None),
    ("even_c40_256_taps_zpm128_allmax", [1, 16, 16, 40], (16, 16), (1, 1), (0, 0, 0, 0), _even(-128), None),
    ("even_g66x64_c8_zpm128_ties", [1, 66, 64, 8], (66, 64), (1, 1), (0, 0, 0, 0), _even(-128), None),
    ("even_2x2_s2_c13_zpm128_ties", [1, 8, 9, 13], (2, 2), (2, 2), (0, 0, 0, 0), _even(-128), None),
    ("even_3x3_pad_c10_zp0", [1, 7, 7, 10], (3, 3), (1, 1), (1, 1, 1, 1), _even(0), None),
    ("even_3x3_s2_pad_incl_c21_zp5", [1, 7, 9, 21], (3, 3), (2, 2), (1, 1, 1, 1),
     _even(5, count_include_pad=True), None),
    ("even_c3_override_zpm128", [1, 6, 6, 3], (2, 3), (2, 1), (0, 1, 0, 1), _even(-128, divisor_override=4),
     (-100, 60)),
]

# MAX_POOL2D_S8, as POOL.
MAX_POOL = [
    ("max_resnet_stem", [1, 16, 16, 64], (3, 3), (2, 2), (1, 1, 1, 1), {}, None),
    ("max_c21_dil_relu", [2, 9, 11, 21], (3, 2), (1, 2), (1, 0, 1, 0), {"dilation_h": 2, "dilation_w": 3}, "relu"),
    ("max_c67_clamp", [1, 6, 7, 67], (2, 2), (2, 2), (0, 0, 0, 0), {}, (-50, 60)),
    ("max_c3_pad", [1, 5, 5, 3], (3, 3), (1, 1), (1, 1, 1, 1), {}, None),
]


def add_pool(b: Builder, a: Arena, case, code: str = "AVG_POOL2D_S8") -> tuple[int, int]:
    name, dx, (kh, kw), (sh, sw), (pt, pl, pb, pr), options, act = case
    dh, dw = options.get("dilation_h", 1), options.get("dilation_w", 1)
    oh = (dx[1] + pt + pb - dh * (kh - 1) - 1) // sh + 1
    ow = (dx[2] + pl + pr - dw * (kw - 1) - 1) // sw + 1
    zp = options.get("zero_point", -128 if act == "relu" else 3)
    x = a.tensor(f"{name}_x", dx, 0.05, zp)
    y = a.tensor(f"{name}_y", [dx[0], oh, ow, dx[3]], 0.05, zp)
    lo, hi = _act(act, zp)
    params = {"kernel_h": kh, "kernel_w": kw, "stride_h": sh, "stride_w": sw, "pad_top": pt, "pad_left": pl,
              "pad_bottom": pb, "pad_right": pr, "zero_point": zp, "act_min": lo, "act_max": hi, **options}
    b.op(code, [x], [y], ("QuantPool2dParams", params))
    return x, y


def program(tflite_rounding: bool = False) -> tuple[dict, bytes]:
    """tflite_rounding: the round_half_even pools without it."""
    rng = np.random.default_rng(19)
    b = Builder(arena_bytes=0)
    a = Arena(b)
    inputs, outputs = [], []
    for case in LINEAR:
        x, y = add_linear(b, a, case, rng)
        inputs.append(x)
        outputs.append(y)
    for case in ADD:
        xs, y = add_add(b, a, case)
        inputs += xs
        outputs.append(y)
    for case in POOL:
        x, y = add_pool(b, a, case)
        inputs.append(x)
        outputs.append(y)
    for case in MAX_POOL:
        x, y = add_pool(b, a, case, "MAX_POOL2D_S8")
        inputs.append(x)
        outputs.append(y)
    if tflite_rounding:
        for op in b.ops:
            op["params"][1].pop("round_half_even", None)
    tree = b.tree(inputs, outputs)
    return tree, serialize.to_pte(tree, bytes(b.segment))


def samples(tree: dict) -> list[list[np.ndarray]]:
    """Random int8 inputs; the pools' allmin / allmax inputs constant (the
    extreme sums of 256 taps: -32768, 32512)."""
    # One generator per input (and sample): a case added does not change the others' inputs.
    def one(t: int, sample: int) -> np.ndarray:
        d = tree["tensors"][t]
        x = np.random.default_rng([11, t, sample]).integers(-128, 128, d["dims"], dtype=np.int8)
        if d["name"].endswith("allmin_x"):
            x[:] = -128
        if d["name"].endswith("allmax_x"):
            x[:] = 127
        if d["name"].startswith("even_") and d["name"].endswith("ties_x"):  # ties: the zero point + 0..3, in sample 0 a checkerboard of 0
            n, h, w, c = d["dims"]  # and c % 4: means of c % 4 / 2 in every window of an even tap count
            board = (np.arange(h)[:, None] + np.arange(w)[None, :]) % 2
            step = board[None, :, :, None] * (np.arange(c) % 4) if sample == 0 else (x & 3)
            x = (np.broadcast_to(step, x.shape) + d["zero_point"]).astype(np.int8)
        return x

    return [[one(t, i) for t in tree["inputs"]] for i in range(SAMPLES)]


NAMES = [c[0] for c in LINEAR] + [c[0] for c in ADD] + [c[0] for c in POOL] + [c[0] for c in MAX_POOL]


def test_the_reference_outputs_are_not_trivial() -> None:
    """The cases reach what they are there for: saturated outputs for the
    multipliers above 1, outputs other than the clamp bounds elsewhere."""
    tree, pte = program()
    outs = run_reference(pte, samples(tree))
    for name, y in zip(NAMES, outs):
        if "big" in name:
            assert (np.abs(y.astype(np.int32)) >= 127).mean() > 0.3 or (y == y.min()).mean() > 0.3, name
        elif name.endswith(("_allmin", "_allmax")):  # constant inputs: one value
            assert len(np.unique(y)) == 1, name
        elif name.startswith("even_") and name.endswith("_ties"):  # inputs of four values: means of few values
            assert len(np.unique(y)) >= 3, name
        elif "odd" in name or "out_shift" in name:  # saturated outputs, zero-point outputs, others
            assert len(np.unique(y)) >= 3, name
        else:
            assert len(np.unique(y)) > min(8, y.size // 2), name


@needs_qemu
@needs_arm_gcc
@pytest.mark.parametrize("board", BOARDS)
def test_linear_and_add_fast_paths_bit_exact_in_qemu(board: str, tmp_path) -> None:
    tree, pte = program()
    out = build_dir(tmp_path, tree, pte, board)
    build_firmware(out)
    xs = samples(tree)
    res = runner.run(out, [np.stack([s[k] for s in xs]) for k in range(len(tree["inputs"]))], sim="qemu",
                     profile=True)
    assert res.exit_code == 0, res.raw[-2000:]
    expected = run_reference(pte, xs)
    for name, got, want in zip(NAMES, res.outputs, expected):
        np.testing.assert_array_equal(got, want, err_msg=name)
    # The fast paths ran: the generic build is slower on the big ops.
    build_firmware(out, opt="-Os -DTMCU_S8_GENERIC")
    generic = runner.run(out, [np.stack([s[k] for s in xs]) for k in range(len(tree["inputs"]))], sim="qemu",
                         profile=True)
    assert generic.exit_code == 0, generic.raw[-2000:]
    for name, got, want in zip(NAMES, generic.outputs, expected):
        np.testing.assert_array_equal(got, want, err_msg=name)
    fast, slow = res.kernel_instructions(), generic.kernel_instructions()
    ops = [op["name"] for op in tree["ops"]]
    # The first of each: the autoencoder's, ResNet-8's, DS-CNN's and ResNet-18's shapes.
    # And EfficientNet's global pool of 1024 taps, and global means rounded as PyTorch (MVE: its vector division).
    for i in (ops.index("linear_s8"), ops.index("add_s8"), ops.index("avg_pool2d_s8"), ops.index("max_pool2d_s8"),
              NAMES.index("c32_1024_taps"), NAMES.index("even_g6x6_c72_zpm128"), NAMES.index("even_g28x28_c32_zp5_ties")):
        assert fast[i] < 0.5 * slow[i], (board, ops[i], fast[i], slow[i])


def test_the_even_cases_round_ties_unlike_tflite() -> None:
    """The round_half_even cases reach ties where PyTorch's rounding and
    TFLite's differ (their even divisors: the odd ones have no ties), so the
    QEMU test above can tell the two apart."""
    tree, pte = program()
    xs = samples(tree)
    ours = run_reference(pte, xs)
    theirs = run_reference(program(tflite_rounding=True)[1], xs)
    differs = {name for name, a, b in zip(NAMES, ours, theirs) if (a != b).any()}
    no_ties = {"even_g5x5_c19_zp5", "even_c24_256_taps_zp5_allmin", "even_c40_256_taps_zpm128_allmax",
               "even_g14x14_c24_relu", "even_3x3_s2_pad_incl_c21_zp5"}  # odd divisors, constant or few ties
    expect = {name for name in NAMES if name.startswith("even_")} - no_ties
    assert expect <= differs, sorted(expect - differs)
