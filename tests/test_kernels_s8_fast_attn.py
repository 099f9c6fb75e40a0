"""The int8 fast paths of BATCH_MATMUL_S8 (b transposed), SOFTMAX_S8,
SOFTMAX_MASKED_S8 and LAYER_NORM_S8 (firmware/kernels/fast/attention_norm/,
reduce/softmax_s8.h) bit for bit against the NumPy reference and a
-DTMCU_S8_GENERIC build, in QEMU on the M4 (mps2-an386: the DSP paths, the
layer norm's single-precision root), the M33 (mps2-an505) and the M55
(mps3-an547: MVE, the double-precision root).

Programs built by hand (tests/test_runtime_features.py's Builder), so that
parameters a compiled model never has are tested too. Batched matmul: the
attention's shapes (k 16 and 32, n 32), k with every tail of 16 and 4 (5,
37, 70) and beyond the DSP path's 320-input chunk (700), n over the
32-column blocks (33, 70) and n of 1-3, broadcast batch dims, offsets at
both ends of their range (-127, 128), a ReLU range, multipliers above 1
(positive shifts: saturated outputs) and small multipliers with positive
shifts (MVE: linear_s8's generic kernel), and a product with b not
transposed (the generic kernel). Softmax: rows of 1 to 600 (every tail of
16 and 4; 600 values equal: the sum reaches 2^28, all -128), the
attention's parameters and an input scale at which most differences fall
below diff_min, the compiler's exp table and one with a negative entry
(the generic kernel), masks broadcast over rows, a row whose entries are
all masked, masked entries above the row's maximum. Layer norm: 64, 1, 5,
17 and 100 columns, zero points -128 and 127, constant rows with and
without eps (V = 0: every n 0), an eps that dominates the variance (h >
32), a ReLU range, and an output multiplier below 512 with a positive
shift (the generic kernel). Random int8 inputs. And LAYER_NORM_S16 (MVE)
in a compiled a16w8 model.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import needs_arm_gcc, needs_qemu
from fast_s8_runs import fast_and_generic
from test_kernels_s8_fast_fcadd import Arena
from test_runtime_features import Builder, build_dir
from torch import nn
from torchmcu import reference as ref
from torchmcu.builder.firmware import build_firmware
from torchmcu.compiler import compile
from torchmcu.program import serialize
from torchmcu.program.interpret import run_reference
from torchmcu.sim import runner

BOARDS = ["mps2-an386", pytest.param("mps2-an505", marks=pytest.mark.zoo), "mps3-an547"]
SAMPLES = 2

# (name, a dims, b dims (as stored), adj_y, (zp_a, zp_b, zp_out), requant (multiplier, shift) or None, act)
BMM = [
    ("attn_qk", [4, 32, 16], [4, 32, 16], True, (3, 3, -2), None, None),
    ("attn_pv", [4, 32, 32], [4, 16, 32], True, (-128, 3, 0), None, None),
    ("k5_n3", [2, 3, 5], [2, 3, 5], True, (0, 0, 0), None, None),
    ("k37_n33_bcast", [2, 1, 7, 37], [1, 3, 33, 37], True, (127, -128, 5), None, None),
    ("k70_n70", [1, 9, 70], [1, 70, 70], True, (-7, 11, 1), None, (-20, 30)),
    ("k700_n2", [1, 3, 700], [1, 2, 700], True, (1, -1, 0), None, None),
    ("k16_n1", [1, 5, 16], [1, 1, 16], True, (-128, -128, -128), None, "relu"),
    ("k24_n9_big", [1, 4, 24], [1, 9, 24], True, (0, 2, 0), (1518500250, 4), None),
    ("k20_n8_small_up", [1, 3, 20], [1, 8, 20], True, (5, -3, 0), "small", None),
    ("k12_n10_plain", [2, 6, 12], [2, 12, 10], False, (3, -4, 2), None, None),
]

# (name, dims, input scale, table ("table", "negative" or None), mask rows (0: none))
SOFTMAX = [
    ("attn_4x32x32", [1, 4, 32, 32], 0.07, "table", 0),
    ("row1", [3, 1], 0.05, "table", 0),
    ("row21", [5, 21], 0.05, "table", 0),
    ("row100_coarse", [2, 100], 0.3, "table", 0),  # most differences below diff_min
    ("row600_flat", [2, 600], 0.02, "table", 0),
    ("row17_fine", [4, 17], 0.0005, "table", 0),
    ("row32_negative_table", [2, 32], 0.05, "negative", 0),
    ("row32_no_table", [2, 32], 0.05, None, 0),
    ("many_sums", [700, 6], 0.04, "table", 0),  # 1400 rows: the reciprocal of many sums
    ("masked_bcast", [1, 2, 8, 19], 0.06, "table", 8),
    ("masked_rows", [6, 33], 0.08, "table", 6),
]

# (name, rows, cols, zp_in, eps, kind ("random", "constant", "mixed"), requant override, act)
LAYER_NORM = [
    ("ln_32x64", 32, 64, 9, 1e-5, "random", None, None),
    ("ln_cols1", 3, 1, 0, 1e-5, "random", None, None),
    ("ln_cols5", 4, 5, -128, 1e-5, "random", None, None),
    ("ln_cols17", 3, 17, 127, 1e-5, "random", None, "relu"),
    ("ln_cols100", 2, 100, 3, 1e-5, "random", None, None),
    ("ln_constant_no_eps", 2, 16, 4, 0.0, "constant", None, None),
    ("ln_constant_eps", 2, 16, 4, 1e-3, "constant", None, None),
    ("ln_big_eps", 3, 24, 0, 1e6, "random", None, None),
    ("ln_small_up", 2, 20, 1, 1e-5, "random", "small", None),
]


def _requant(p: dict, requant) -> None:
    """requant: (multiplier, shift), or "small": multiplier 300 at the shift
    that keeps p's scale (a positive shift)."""
    if requant == "small":
        requant = (300, int(round(np.log2(p["output_multiplier"] * 2.0 ** p["output_shift"] / 300))))
        assert requant[1] > 0
    if requant:
        p.update(output_multiplier=requant[0], output_shift=requant[1])


def _act(act, zp_out: int) -> tuple[int, int]:
    if act == "relu":
        return zp_out, 127
    return act if act else (-128, 127)


def add_bmm(b: Builder, a: Arena, case) -> tuple[list[int], int]:
    name, da, db, adj_y, (za, zb, zo), requant, act = case
    # The output scale and zero point of the accumulators' spread and mean
    # for random int8 inputs (74 their deviation; the zero points move the
    # means: the offsets' extremes give accumulators of one sign).
    k = da[-1]
    mean = k * (0.5 + za) * (0.5 + zb)
    unit = np.sqrt(k * (74.0**2 + (za + 0.5) ** 2) * (74.0**2 + (zb + 0.5) ** 2) + mean**2) / 60
    zo = int(np.clip(zo - round(mean / unit), -100, 100))
    x = a.tensor(f"{name}_a", da, 0.05, za)
    y = a.tensor(f"{name}_b", db, 0.04, zb)
    n = db[-2] if adj_y else db[-1]
    batch = list(np.broadcast_shapes(tuple(da[:-2]), tuple(db[:-2])))
    out = a.tensor(f"{name}_y", batch + [da[-2], n], 0.1, zo)
    lo, hi = _act(act, zo)
    p = ref.batch_matmul_params(0.05, za, 0.04, zb, 0.002 * unit, zo, lo, hi, adj_y)
    _requant(p, requant)
    b.op("BATCH_MATMUL_S8", [x, y], [out], ("QuantBatchMatmulParams", {k: (bool(v) if k == "adj_y" else int(v))
                                                                        for k, v in p.items()}))
    return [x, y], out


def add_softmax(b: Builder, a: Arena, case, rng: np.random.Generator) -> tuple[list[int], int]:
    name, dims, scale, table, mask_rows = case
    x = a.tensor(f"{name}_x", dims, scale, 0)
    y = a.tensor(f"{name}_y", dims, 1 / 256, -128)
    p = {k: int(v) for k, v in ref.softmax_params(scale).items()}
    ins = [x]
    if mask_rows:
        mask = (rng.random((mask_rows, dims[-1])) < 0.4).astype(np.uint8)
        mask[1 % mask_rows] = 1  # a row with every entry masked
        ins.append(b.const(f"{name}_mask", "U8", mask))
    if table:
        t = ref.reduce.softmax_exp_table(p["input_multiplier"], p["input_left_shift"], p["diff_min"])
        if table == "negative":
            t[200] = -t[200]
        ins.append(b.const(f"{name}_exp", "I32", t))
    b.op("SOFTMAX_MASKED_S8" if mask_rows else "SOFTMAX_S8", ins, [y], ("QuantSoftmaxParams", p))
    return [x], y


def add_layer_norm(b: Builder, a: Arena, case, rng: np.random.Generator) -> tuple[list[int], int]:
    name, rows, cols, zp, eps, kind, requant, act = case
    x = a.tensor(f"{name}_x", [rows, cols], 0.05, zp)
    y = a.tensor(f"{name}_y", [rows, cols], 0.03, -3)
    g, be, s_gamma = ref.attention_norm.layer_norm_constants(rng.uniform(-2, 2, cols), rng.uniform(-1, 1, cols), cols)
    lo, hi = _act(act, -3)
    p = ref.attention_norm.layer_norm_params(0.05, zp, s_gamma, 0.03, -3, cols, eps, lo, hi)
    _requant(p, requant)
    ins = [x, b.const(f"{name}_gamma", "I8", g), b.const(f"{name}_beta", "I32", be)]
    b.op("LAYER_NORM_S8", ins, [y], ("QuantLayerNormParams", p))
    return [x], y


def program() -> tuple[dict, bytes, dict[str, str]]:
    rng = np.random.default_rng(23)
    b = Builder(arena_bytes=0)
    a = Arena(b)
    inputs, outputs, kinds = [], [], {}
    for case in BMM:
        xs, y = add_bmm(b, a, case)
        inputs += xs
        outputs.append(y)
    for case in SOFTMAX:
        xs, y = add_softmax(b, a, case, rng)
        inputs += xs
        outputs.append(y)
    for case in LAYER_NORM:
        xs, y = add_layer_norm(b, a, case, rng)
        inputs += xs
        outputs.append(y)
        kinds[case[0]] = case[5]
    tree = b.tree(inputs, outputs)
    return tree, serialize.to_pte(tree, bytes(b.segment)), kinds


NAMES = [c[0] for c in BMM] + [c[0] for c in SOFTMAX] + [c[0] for c in LAYER_NORM]


def samples(tree: dict, kinds: dict[str, str]) -> list[list[np.ndarray]]:
    """Random int8 inputs, one generator per input and sample; the constant
    layer-norm cases' and the flat softmax's rows constant."""
    def one(t: int, sample: int) -> np.ndarray:
        d = tree["tensors"][t]
        x = np.random.default_rng([13, t, sample]).integers(-128, 128, d["dims"], dtype=np.int8)
        name = d["name"][:-2]
        if kinds.get(name) == "constant":
            x[:] = 37
        if name == "row600_flat":
            x[:] = 90
        return x

    return [[one(t, i) for t in tree["inputs"]] for i in range(SAMPLES)]


def test_the_reference_outputs_are_not_trivial() -> None:
    tree, pte, kinds = program()
    outs = run_reference(pte, samples(tree, kinds))
    for name, y in zip(NAMES, outs):
        if name.startswith("ln_constant"):  # n = 0 throughout: every row beta's
            assert (y == y[:, :1]).all(), name
        elif name in ("row600_flat", "row1", "ln_cols1"):  # one value
            assert len(np.unique(y)) == 1, name
        elif name == "row17_fine":  # nearly uniform: a few values
            assert len(np.unique(y)) >= 2, name
        elif "big" in name and name.startswith("k"):
            assert (np.abs(y.astype(np.int32)) >= 127).mean() > 0.3, name
        else:
            assert len(np.unique(y)) > min(6, y.size // 3), (name, np.unique(y))
    by = dict(zip(NAMES, outs))
    assert (by["masked_bcast"] == -128).mean() > 0.4  # masked entries and the all-masked row
    assert (by["row100_coarse"] == -128).mean() > 0.5  # below diff_min


@needs_qemu
@needs_arm_gcc
@pytest.mark.parametrize("board", BOARDS)
def test_attention_fast_paths_bit_exact_in_qemu(board: str, tmp_path) -> None:
    tree, pte, kinds = program()
    out = build_dir(tmp_path, tree, pte, board)
    xs = samples(tree, kinds)
    stacked = [np.stack([s[k] for s in xs]) for k in range(len(tree["inputs"]))]
    expected = run_reference(pte, xs)
    build_firmware(out)
    res = runner.run(out, stacked, sim="qemu", profile=True)
    assert res.exit_code == 0, res.raw[-2000:]
    for name, got, want in zip(NAMES, res.outputs, expected):
        np.testing.assert_array_equal(got, want, err_msg=name)
    build_firmware(out, opt="-Os -DTMCU_S8_GENERIC")
    generic = runner.run(out, stacked, sim="qemu", profile=True)
    assert generic.exit_code == 0, generic.raw[-2000:]
    for name, got, want in zip(NAMES, generic.outputs, expected):
        np.testing.assert_array_equal(got, want, err_msg=name)
    fast, slow = res.kernel_instructions(), generic.kernel_instructions()
    # The fast paths ran: the attention's shapes cost less than the generic kernels.
    checks = [NAMES.index(n) for n in ("attn_qk", "attn_pv", "attn_4x32x32")]
    if board == "mps3-an547":
        checks += [NAMES.index("masked_bcast"), NAMES.index("ln_32x64")]
    for i in checks:
        print(f"{board} {NAMES[i]}: {fast[i]:,} instructions fast, {slow[i]:,} generic")
        assert fast[i] < 0.5 * slow[i], (board, NAMES[i], fast[i], slow[i])
    ln = NAMES.index("ln_32x64")
    assert fast[ln] < 0.6 * slow[ln], (board, fast[ln], slow[ln])


class TwoNorms(nn.Module):
    """LAYER_NORM_S16 at a16w8: 37 columns (an MVE tail of 1), then 64."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(5)
        self.ln1 = nn.LayerNorm(37)
        self.fc = nn.Linear(37, 64)
        self.ln2 = nn.LayerNorm(64)
        with torch.no_grad():
            for ln in (self.ln1, self.ln2):
                ln.weight.uniform_(-2, 2)
                ln.bias.uniform_(-1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln2(self.fc(self.ln1(x)))


@needs_qemu
@needs_arm_gcc
def test_layer_norm_s16_fast_path_bit_exact_in_qemu(tmp_path) -> None:
    """The int16 layer norm's MVE path (M55) against the reference and the
    generic build; inputs beyond the calibration range."""
    g = np.random.default_rng(3)
    calib = [(torch.from_numpy(g.normal(0, 1, (1, 9, 37)).astype(np.float32)),) for _ in range(8)]
    c = compile(TwoNorms().eval(), calib[0], "mps3-an547", tmp_path, quant="a16w8", calibration=calib, progress=False)
    lns = [i for i, op in enumerate(c.graph.ops) if op.code == "LAYER_NORM_S16"]
    assert len(lns) == 2, [op.code for op in c.graph.ops]
    x = g.normal(0, 2, (3, 1, 9, 37)).astype(np.float32)
    _, fast, slow, _ = fast_and_generic(tmp_path, x)
    for i in lns:
        assert fast[i] < 0.5 * slow[i], (i, fast[i], slow[i])
