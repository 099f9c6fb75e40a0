"""The fast paths of LSTM_S8 and GRU_S8 and of LSTM_S16 and GRU_S16 (a16w8)
(firmware/kernels/fast/recurrent/recurrent_s8.h) bit for bit against the
NumPy reference and the generic kernel (-DTMCU_S8_GENERIC), in QEMU on the
M4 (mps2-an386), the M33 (mps2-an505) and the M55 (mps3-an547).

The programs are built by hand (tests/test_runtime_features.py's Builder),
so that parameters a compiled model never has are tested too. Both weight
schemes (per gate: TFLite's; per row: torchmcu's, with its requantization
operand); hidden sizes with every remainder of the 4-unit blocks (1, 5, 7,
13, 66, 70) and above the 64 units of one pass (66, 70: a second pass);
input sizes below, at and above the 16 lanes of one vector (1, 10, 16, 37)
and above the DSP path's 128 expanded inputs (131);
batches of 1 to 3; reverse; h0 and c0 present and absent (the hidden state
at its zero point); a cell clip; multipliers above 1 (positive shifts) with
biases near 2^29, so that some accumulators shifted up leave int32 (the
per-lane requantization) and the gates saturate; and parameters the fast
path leaves to the generic kernel (an LSTM output shift above 0, a GRU
blend shift of 0). The outputs: every case's y and the LSTMs' final cell
state c (int16: one LSB of a gate shows there, rarely in y).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import needs_arm_gcc, needs_qemu
from test_kernels_s8_fast_fcadd import Arena
from test_runtime_features import Builder, build_dir
from torchmcu.builder.firmware import build_firmware
from torchmcu.program import serialize
from torchmcu.program.interpret import run_reference
from torchmcu.reference import recurrent as R
from torchmcu.sim import runner

BOARDS = ["mps2-an386", pytest.param("mps2-an505", marks=pytest.mark.zoo), "mps3-an547"]
SAMPLES = 2

# (name, kind, T, B, I, H, per_row, h0, c0, reverse, quant)
# quant: "calib" (gates spread over their range), "loud" (gates driven into
# saturation), "up" (multipliers 2..8 and biases near 2^29: accumulators
# shifted up leave int32), "generic" (parameters the fast path refuses).
CASES = [
    ("lstm_kws", "lstm", 4, 1, 10, 64, True, True, True, False, "calib"),
    ("lstm_tail_per_gate", "lstm", 3, 2, 37, 13, False, False, False, True, "calib"),
    ("lstm_h70_clip", "lstm", 2, 1, 16, 70, True, True, False, False, "clip"),
    ("lstm_h7_loud", "lstm", 3, 3, 5, 7, True, False, True, True, "loud"),
    ("lstm_h5_up", "lstm", 3, 1, 33, 5, True, True, True, False, "up"),
    ("lstm_h6_up_per_gate", "lstm", 2, 2, 9, 6, False, True, True, False, "up"),
    ("lstm_h1_i1", "lstm", 3, 1, 1, 1, False, True, True, False, "calib"),
    # an input above the DSP path's 128 expanded inputs (its rows by dot_s8 as they are)
    ("lstm_i131", "lstm", 2, 1, 131, 9, True, True, True, False, "calib"),
    ("lstm_generic", "lstm", 2, 1, 8, 9, True, True, True, False, "generic"),
    ("gru_kws", "gru", 4, 1, 10, 48, True, True, False, False, "calib"),
    ("gru_tail_per_gate", "gru", 3, 3, 20, 7, False, False, False, True, "calib"),
    ("gru_h66_loud", "gru", 2, 1, 16, 66, True, True, False, False, "loud"),
    ("gru_h5_up", "gru", 3, 2, 12, 5, True, True, False, True, "up"),
    ("gru_generic", "gru", 2, 1, 8, 9, True, True, False, False, "generic"),
    # a16w8 (LSTM_S16, GRU_S16: by VMLALDAVA on MVE, SMLAD on the DSP).
    ("lstm16_kws", "lstm16", 4, 1, 10, 64, True, True, True, False, "calib"),
    ("lstm16_tail_per_gate", "lstm16", 3, 2, 37, 13, False, False, False, True, "calib"),
    ("lstm16_h70_loud", "lstm16", 2, 1, 16, 70, True, True, True, False, "loud"),
    ("gru16_kws", "gru16", 4, 1, 10, 48, True, True, False, False, "calib"),
    ("gru16_h5_per_gate", "gru16", 3, 3, 20, 5, False, False, False, True, "loud"),
]
# The program's outputs: each case's y, and the LSTMs' final cell state c.
NAMES = [n for c in CASES for n in ([c[0], f"{c[0]}_c"] if c[1].startswith("lstm") else [c[0]])]


def _mults(g: np.random.Generator, n: int, lo: float, hi: float) -> tuple[list[int], list[int]]:
    pairs = [R.quantize_multiplier(v) for v in np.exp(g.uniform(np.log(lo), np.log(hi), n))]
    return [m for m, _ in pairs], [s for _, s in pairs]


def add_case(b: Builder, a: Arena, case, g: np.random.Generator) -> tuple[int, list[int]]:
    name, kind, T, B, I, H, per_row, has_h0, has_c0, reverse, quant = case
    G = 4 if kind.startswith("lstm") else 3
    wide = kind.endswith("16")  # a16w8: int16 activations at zero point 0, int64 bias
    act, span = ("I16", 32768) if wide else ("I8", 128)
    zp = 0 if wide else int(g.integers(-20, 21))

    def tensor(tname: str, dims: list[int], scale: float, tzp: int) -> int:
        t = b.arena(tname, act, dims, a.top, scale, tzp)
        a.top = serialize._pad(a.top + b.tensors[t]["nbytes"])
        b.arena_bytes = a.top
        return t

    x = tensor(f"{name}_x", [T, B, I], 0.05, 0 if wide else int(g.integers(-128, 128)))
    y = tensor(f"{name}_y", [T, B, H], 2.0 ** -7, zp)
    reach = 3 if quant == "up" else 128  # "up": small products, which multipliers above 1 leave in range
    qi = g.integers(-reach + 1, reach, (G * H, I)).astype(np.int8)
    qh = g.integers(-reach + 1, reach, (G * H, H)).astype(np.int8)
    bias = g.integers(-2 ** 18, 2 ** 18, (2, G * H))
    if quant == "up":  # a third of the rows' biases near +-2^29 (shifted up: beyond int32), the rest small
        far = g.random((2, G * H)) < 1 / 3
        bias = np.where(far, g.choice([-1, 1], (2, G * H)) * g.integers(2 ** 28, 2 ** 29, (2, G * H)),
                        g.integers(-300, 300, (2, G * H)))
    bias = (bias * 256).astype(np.int64) if wide else bias.astype(np.int32)
    n = G * H if per_row else G
    # Real multipliers: into Q3.12 for products of up to K * 127 * 128.
    scale = {"calib": 4.0, "clip": 4.0, "generic": 4.0, "loud": 60.0}.get(quant)
    if quant == "up":
        xm, xs = _mults(g, n, 2.0, 8.0)
        hm, hs = _mults(g, n, 2.0, 8.0)
    else:
        xm, xs = _mults(g, n, scale / (30 * np.sqrt(I) * span), scale / (np.sqrt(I) * span))
        hm, hs = _mults(g, n, scale / (30 * np.sqrt(H) * span), scale / (np.sqrt(H) * span))
    if G == 4:
        power = -12 if quant == "clip" else int(g.integers(-15, 3 if per_row else -7))
        p = R.lstm_params(1.0, 0, np.ones(4), 2.0 ** -7, zp, np.ones(4), power, reverse=reverse)
        if quant == "clip":
            p["cell_clip"] = 3000
        if quant == "generic":
            p["output_multiplier"], p["output_shift"] = 1 << 6, 2  # 2^-23 (the compiled value) by a positive shift
        code, pt = "LSTM_S16" if wide else "LSTM_S8", "QuantLstmParams"
    else:
        p = R.gru_params(1.0, 0, np.ones(3), 2.0 ** -7, zp, np.ones(3), reverse=reverse)
        if quant == "generic":
            p["blend_h_multiplier"], p["blend_h_shift"] = 1 << 16, 0  # 2^-15 (the compiled value) by shift 0
        code, pt = "GRU_S16" if wide else "GRU_S8", "QuantGruParams"
    p.update(x_multiplier=xm, x_shift=xs, h_multiplier=hm, h_shift=hs, input_offset=-b.tensors[x]["zero_point"])
    ins = [x, b.const(f"{name}_wi", "I8", qi), b.const(f"{name}_wh", "I8", qh),
           b.const(f"{name}_b", "I64" if wide else "I32", bias)]
    ins.append(b.const(f"{name}_h0", act, g.integers(-span, span, (B, H)).astype(np.int16 if wide else np.int8))
               if has_h0 else -1)
    outs = [y]
    if G == 4:
        ins.append(b.const(f"{name}_c0", "I16", g.integers(-32768, 32768, (B, H)).astype(np.int16))
                   if has_c0 else -1)
        outs.append(b.arena(f"{name}_c", "I16", [B, H], a.top, 2.0 ** power, 0))
        a.top = serialize._pad(a.top + 2 * B * H)
        b.arena_bytes = a.top
    if per_row:
        ins += [-1, b.const(f"{name}_requant", "I32", R.gate_table(p))]
    b.op(code, ins, outs, (pt, p))
    return x, outs


def program() -> tuple[dict, bytes]:
    g = np.random.default_rng(27)
    b = Builder(arena_bytes=0)
    a = Arena(b)
    inputs, outputs = [], []
    for case in CASES:
        x, ys = add_case(b, a, case, g)
        inputs.append(x)
        outputs += ys
    tree = b.tree(inputs, outputs)
    return tree, serialize.to_pte(tree, bytes(b.segment))


def samples(tree: dict) -> list[list[np.ndarray]]:
    def one(t: int, sample: int) -> np.ndarray:
        d = tree["tensors"][t]
        dt, span = (np.int16, 32768) if d["dtype"] == "I16" else (np.int8, 128)
        return np.random.default_rng([27, t, sample]).integers(-span, span, d["dims"], dtype=dt)

    return [[one(t, i) for t in tree["inputs"]] for i in range(SAMPLES)]


def test_the_reference_outputs_are_not_trivial() -> None:
    """Outputs spread over many values; the loud and up cases saturate some
    (their gates do: h = o * tanh(c) at the extremes)."""
    tree, pte = program()
    outs = run_reference(pte, samples(tree))
    for name, y in zip(NAMES, outs):
        assert len(np.unique(y)) >= min(6, y.size // 2), name


@needs_qemu
@needs_arm_gcc
@pytest.mark.parametrize("board", BOARDS)
def test_recurrent_fast_paths_bit_exact_in_qemu(board: str, tmp_path) -> None:
    tree, pte = program()
    out = build_dir(tmp_path, tree, pte, board)
    xs = samples(tree)
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
    # The fast paths ran: MVE's 4 units per vector, DSP's SMLAD products.
    fast, slow = res.kernel_instructions(), generic.kernel_instructions()
    ops = [c[0] for c in CASES]
    bound = 0.5 if board == "mps3-an547" else 0.7
    for name in ("lstm_kws", "gru_kws") + (("lstm16_kws", "gru16_kws") if board == "mps3-an547" else ()):
        i = ops.index(name)
        assert fast[i] < bound * slow[i], (board, name, fast[i], slow[i])
