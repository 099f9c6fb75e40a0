"""Recurrent layers: LSTM, GRU and RNN, float and integer, and the
interpreter's runners for their op codes.

Every op is one layer and one direction over a time-major sequence (x [T,
B, I] -> y [T, B, H]); the final hidden state is y's last step (its first
when reversed). Gates are in PyTorch's order (LSTM i, f, g, o; GRU r, z,
n). Float ops run through PyTorch (torch.lstm & co. on one layer), so they
are PyTorch's numerics.

**LSTM at int8 and a16w8** comes in two schemes. torchmcu's (the default,
`--recurrent-weights per-channel`) is TFLite's below with three changes,
each worth decibels on trained weights (silero-vad's LSTM: 3 dB on h and 5
dB on c against float; tests/test_trained_lstm.py):

- each weight row has its own scale (per output channel), so its own
  multiplier into Q3.12 (an int32 [4, G*H] operand: gate_table);
- a gate's input-side and hidden-side products are added before they are
  saturated to int16 (TFLite saturates each first: a large product the
  other side cancels was clipped);
- the cell update sums f * c and i * g at 2^min(p, -12) and rounds once
  into the int16 state; tanh reads the sum in Q3.12 before that rounding
  (fine_cell).

The GRU takes the same three (its n gate's sum xn + r * hn saturated once).
CMSIS-NN's LSTM and the .tflite export take TFLite's scheme only
(`--recurrent-weights per-gate`), which is TensorFlow Lite's integer LSTM,
as TFLite Micro's UNIDIRECTIONAL_SEQUENCE_LSTM evaluates it (lstm_eval.h) and
CMSIS-NN's arm_lstm_unidirectional_s8/_s16 do:

- x and h int8 (asymmetric; a16w8: int16, zero point 0), each gate's input
  and hidden weights int8, symmetric per tensor; the bias int32 (a16w8:
  int64) at s_x * s_w, b_ih + b_hh;
- per gate, the input and hidden products are requantized to int16 at the
  fixed scale 2^-12 (Q3.12) on their own, saturated, added with saturation,
  and put through the int16 sigmoid (or tanh for g), whose output is Q0.15;
- the cell state is int16 at a power-of-two scale 2^-k from calibration: c =
  sat(sat(f * c) + sat(i * g)) (requantized by 2^-15 and 2^-30 / 2^-k);
- h = o * tanh(c), requantized by 2^-30 / s_h, plus the hidden zero point,
  saturated to int8 (int16).

The int16 sigmoid and tanh are TFLite's: a 256-entry table of sigmoid(i /
24) in 0.16 fixed point, linearly interpolated (tanh(x) = 2 sigmoid(2x) -
1). The table is computed here (sigmoid_table_u16) and the whole op is
checked against TFLM's kernel (tests/test_recurrent.py).

**GRU and RNN at int8 and a16w8** are torchmcu's own kernels in the same
scheme (TFLite has no GRU op):

- GRU: r and z as the LSTM's gates; xn and hn (the n gate's input and
  hidden products, b_hn in the hidden one) in Q3.12; n = tanh(sat(xn +
  r * hn)) with r * hn requantized by 2^-15 (back to Q3.12); then h' = (1 -
  z) n + z h as two products, (32768 - z) * n at 2^-30 and z * (h - zp_h)
  at 2^-15 s_h, each requantized to s_h and summed with the zero point,
  saturated to int8.
- RNN (tanh): the pre-activation as a gate's, tanh, then requantized by
  2^-15 / s_h; RNN (relu): the pre-activation in int16 at s_h / 128 (a16w8:
  at s_h), then max(pre, 0) requantized by 2^-7 (a16w8: 1).

With int16 activations (a16w8) the products accumulate in 64 bits with an
int64 bias and requantize as LSTM_S16's; zero points are 0.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ._torch import t
from .quant import INT16_MAX, INT16_MIN, _f32, quantize_multiplier, requantize, requantize_s64

GATE_SCALE = 2.0 ** -12  # the gates' pre-activations: Q3.12
ACT_SCALE = 2.0 ** -15  # sigmoid and tanh outputs: Q0.15
LSTM_GATES, GRU_GATES = 4, 3


def _sat16(v: np.ndarray) -> np.ndarray:
    return np.clip(v, INT16_MIN, INT16_MAX)


# ---- TFLite's int16 sigmoid and tanh


def sigmoid_table_u16() -> np.ndarray:
    """TFLite's sigmoid_table_uint16: sigmoid(i / 24) in 0.16 fixed point for
    i = 0..255, each sample nudged by half the error that linear
    interpolation makes at the middle of its step (so the interpolation's
    error is balanced), rounded; the last entry is 0xFFFF."""
    i = np.arange(256, dtype=np.float64)

    def f(v: np.ndarray) -> np.ndarray:
        return 65536.0 / (1.0 + np.exp(-v))

    x0, x1 = i / 24.0, (i + 1) / 24.0
    err = (f(x0) + f(x1)) / 2.0 - f((x0 + x1) / 2.0)
    table = np.minimum(np.round(f(x0) - err / 2.0), 65535.0).astype(np.int64)
    table[255] = 65535
    return table


SIGMOID_TABLE = sigmoid_table_u16()


def _scaled(x: np.ndarray, left_shift: int) -> np.ndarray:
    """x * 3 * 2^left_shift, or (x * 3 + rounding) >> -left_shift when the
    shift is negative: the input as TFLite's int16 sigmoid/tanh read it (the
    3 widens the table's [-8, 8) to [-10.7, 10.7))."""
    x = np.asarray(x, dtype=np.int64)
    if left_shift >= 0:
        return x * (3 << left_shift)
    right = -left_shift
    return (x * 3 + (1 << (right - 1))) >> right


def sigmoid_s16(x: np.ndarray, left_shift: int = 0) -> np.ndarray:
    """TFLite's int16 LOGISTIC (reference_integer_ops::Logistic, CMSIS-NN's
    arm_nn_activation_s16 ARM_SIGMOID): Q3.12 in (for left_shift 0), Q0.15
    out."""
    v = _scaled(x, left_shift)
    a = np.abs(v)
    uh = a >> 9
    idx = np.minimum(uh, 254)
    ua, ub = SIGMOID_TABLE[idx], SIGMOID_TABLE[idx + 1]
    r = np.where(uh >= 255, 0x7FFF << 10, (ua << 9) + (a & 0x1FF) * (ub - ua))
    r = np.where(v >= 0, r + (1 << 9), (1 << 25) - r + (1 << 9) - 1)
    return (r >> 10).astype(np.int16)


def tanh_s16(x: np.ndarray, left_shift: int = 0) -> np.ndarray:
    """TFLite's int16 TANH (reference_integer_ops::Tanh, CMSIS-NN's
    arm_nn_activation_s16 ARM_TANH): for left_shift 0, Q3.12 in; Q0.15 out.
    The cell state at scale 2^p goes in with left_shift = p + 12."""
    v = _scaled(x, left_shift)
    a = np.abs(v)
    uh = a >> 8
    idx = np.minimum(uh, 254)
    ua, ub = SIGMOID_TABLE[idx], SIGMOID_TABLE[idx + 1]
    r = np.where(uh >= 255, 0xFFFF << 8, (ua << 8) + (a & 0xFF) * (ub - ua))
    r = np.where(v >= 0, r - (1 << 23) + (1 << 7), -r + (1 << 23) + (1 << 7) - 1)
    return (r >> 8).astype(np.int64).astype(np.int16)  # the low 16 bits, as the C conversion


# ---- quantization parameters


def pot_cell_power(absmax: float) -> int:
    """The cell state's scale 2^p: the smallest power of two whose int16
    range holds absmax, never below +-1 (p >= -15), so that i * g, whose
    magnitude is at most 1, cannot leave int16 on its own."""
    absmax = max(float(absmax), 1.0)
    return int(np.ceil(np.log2(absmax))) - 15


def _mult(real: float) -> tuple[int, int]:
    return quantize_multiplier(real)


def gate_multipliers(s_in: float, s_w: np.ndarray) -> tuple[list[int], list[int]]:
    """Per gate (or per row), QuantizeMultiplier(s_in * s_w / 2^-12): TFLM's
    CalculateOpDataFullyConnected of a gate's product into Q3.12."""
    pairs = [_mult(_f32(s_in) * _f32(s) / GATE_SCALE) for s in np.atleast_1d(s_w)]
    return [m for m, _ in pairs], [s for _, s in pairs]


def _inter(s1: float, s2: float, s_out: float) -> tuple[int, int]:
    """TFLM's CreateInterGateMulParams: QuantizeMultiplier(s1 * s2 / s_out)."""
    return _mult(_f32(s1) * _f32(s2) / _f32(s_out))


def lstm_params(s_x: float, zp_x: int, s_wx: np.ndarray, s_h: float, zp_h: int, s_wh: np.ndarray,
                cell_power: int, reverse: bool = False) -> dict[str, Any]:
    """QuantLstmParams (schema/program.fbs) as TFLM's
    PrepareGateParametersInteger computes them from the tensors' scales
    (per-row scales give per-row multipliers: see gate_table)."""
    xm, xs = gate_multipliers(s_x, s_wx)
    hm, hs = gate_multipliers(s_h, s_wh)
    s_c = 2.0 ** cell_power
    fm, fs = _inter(ACT_SCALE, s_c, s_c)
    cm, cs = _inter(ACT_SCALE, ACT_SCALE, s_c)
    om, os_ = _inter(ACT_SCALE, ACT_SCALE, s_h)
    return dict(reverse=bool(reverse), x_multiplier=xm, x_shift=xs, h_multiplier=hm, h_shift=hs,
                forget_multiplier=fm, forget_shift=fs, cell_multiplier=cm, cell_shift=cs, output_multiplier=om,
                output_shift=os_, output_offset=int(zp_h), input_offset=-int(zp_x), cell_scale_power=int(cell_power),
                cell_clip=0)


def gru_params(s_x: float, zp_x: int, s_wx: np.ndarray, s_h: float, zp_h: int, s_wh: np.ndarray,
               reverse: bool = False) -> dict[str, Any]:
    """QuantGruParams: the gates' products into Q3.12 as the LSTM's, r * hn
    by 2^-15, the blend's products into s_h."""
    xm, xs = gate_multipliers(s_x, s_wx)
    hm, hs = gate_multipliers(s_h, s_wh)
    rm, rs = _inter(ACT_SCALE, GATE_SCALE, GATE_SCALE)
    nm, ns = _inter(ACT_SCALE, ACT_SCALE, s_h)
    bm, bs = _inter(ACT_SCALE, s_h, s_h)
    return dict(reverse=bool(reverse), x_multiplier=xm, x_shift=xs, h_multiplier=hm, h_shift=hs,
                rh_multiplier=rm, rh_shift=rs, blend_n_multiplier=nm, blend_n_shift=ns, blend_h_multiplier=bm,
                blend_h_shift=bs, output_offset=int(zp_h), input_offset=-int(zp_x))


def rnn_pre_scale(s_h: float, activation: int, wide: bool = False) -> float:
    """The RNN's pre-activation scale: Q3.12 for tanh; for relu, s_h / 128
    (the int8 hidden state's range with 7 bits more) or, with int16
    activations, s_h itself."""
    return GATE_SCALE if activation == 0 else _f32(s_h) / (1.0 if wide else 128.0)


def rnn_params(s_x: float, zp_x: int, s_wx: float, s_h: float, zp_h: int, s_wh: float, activation: int,
               reverse: bool = False, wide: bool = False) -> dict[str, Any]:
    pre = rnn_pre_scale(s_h, activation, wide)
    xm, xs = _mult(_f32(s_x) * _f32(s_wx) / pre)
    hm, hs = _mult(_f32(s_h) * _f32(s_wh) / pre)
    om, os_ = _inter(ACT_SCALE, 1.0, s_h) if activation == 0 else _mult(1.0 if wide else 2.0 ** -7)
    return dict(reverse=bool(reverse), activation=int(activation), x_multiplier=xm, x_shift=xs, h_multiplier=hm,
                h_shift=hs, output_multiplier=om, output_shift=os_, output_offset=int(zp_h), input_offset=-int(zp_x))


def quantize_gates(w: np.ndarray, gates: int, per_row: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Weights [gates * H, K] as int8, symmetric (-127..127) per gate (as
    TFLite's converter quantizes an LSTM's weight tensors) or, per_row, per
    row (per output channel): (values, scales: one per gate or per row)."""
    w = np.asarray(w, dtype=np.float32)
    blocks = np.split(w, w.shape[0] if per_row else gates, axis=0)
    scales = np.array([max(float(np.abs(b).max(initial=0.0)), 1e-8) / 127.0 for b in blocks], np.float64)
    q = [np.clip(np.round(b.astype(np.float64) / np.float32(s)), -127, 127) for b, s in zip(blocks, scales)]
    return np.concatenate(q).astype(np.int8), scales.astype(np.float32).astype(np.float64)


def quantize_bias(b: np.ndarray | None, s_in: float, s_w: np.ndarray, hidden: int, bits: int = 32) -> np.ndarray:
    """A bias [gates * H] at s_in * s_w[gate] (int64 values; int32 range at
    bits 32, as TFLite's converter; a16w8's bias is int64). Per-row scales
    (s_w of gates * H entries) with hidden 1."""
    gates = len(s_w)
    if b is None:
        return np.zeros(gates * hidden, np.int64)
    scale = np.repeat(_f32(s_in) * np.asarray(s_w, np.float64), hidden)
    lim = 2 ** (bits - 1) - 1 if bits == 32 else 2 ** 47 - 1
    return np.clip(np.round(np.asarray(b, np.float64) / scale), -lim - 1, lim).astype(np.int64)


# ---- integer kernels


def gate_table(p: dict[str, Any]) -> np.ndarray:
    """The per-row requantization operand (int32 [4, G*H]: x multipliers, x
    shifts, h multipliers, h shifts) of params whose gate vectors hold one
    entry per row; the params' vectors are emptied (the kernel's layout:
    firmware/kernels/portable/recurrent/ops_recurrent.cc gates_ok)."""
    keys = ("x_multiplier", "x_shift", "h_multiplier", "h_shift")
    table = np.array([p[k] for k in keys], np.int64).astype(np.int32)
    for k in keys:
        p[k] = []
    return table


def _gate_q(p: dict[str, Any], table: np.ndarray | None, which: str, g: int, H: int) -> tuple[Any, Any]:
    """Gate g's multiplier and shift for the input ("x") or hidden ("h")
    side: scalars (per gate), or [H] vectors from the per-row table."""
    if table is None:
        return p[f"{which}_multiplier"][g], p[f"{which}_shift"][g]
    k = 0 if which == "x" else 2
    t = np.asarray(table, np.int64).reshape(4, -1)
    return t[k, g * H:(g + 1) * H], t[k + 1, g * H:(g + 1) * H]


def _fc(v: np.ndarray, w: np.ndarray, bias: np.ndarray, m: int, s: int, wide: bool, sat: bool = True) -> np.ndarray:
    """One gate's product v [B, K] @ w [H, K]^T + bias, requantized to int16
    (saturated): TFLite's FullyConnected into an int16 output; not
    saturated with sat False (torchmcu's scheme saturates the gate's sum)."""
    acc = np.asarray(v, np.int64) @ np.asarray(w, np.int64).T + bias
    r = requantize_s64(acc, m, s) if wide else requantize(_check32(acc), m, s)
    return _sat16(r) if sat else r


def _check32(acc: np.ndarray) -> np.ndarray:
    if acc.size and (acc.min() < -(2 ** 31) or acc.max() > 2 ** 31 - 1):
        raise OverflowError("int32 accumulator overflow")
    return acc


def _steps(time_steps: int, reverse: bool) -> range:
    return range(time_steps - 1, -1, -1) if reverse else range(time_steps)


def _round_shift(v: np.ndarray, s: int) -> np.ndarray:
    """(v + 2^(s-1)) >> s for s > 0, v for s <= 0."""
    v = np.asarray(v, np.int64)
    return (v + (np.int64(1) << (s - 1))) >> s if s > 0 else v


def fine_cell(f: np.ndarray, c: np.ndarray, i: np.ndarray, g: np.ndarray, power: int,
              clip: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """torchmcu's LSTM cell update (per-row weights): c' = f c + i g summed at
    2^e, the finer of the state's scale 2^power and Q3.12 (e = min(power,
    -12)), then rounded once into the int16 state; tanh reads c' in Q3.12
    before that rounding. (new state, c' in Q3.12). f, i, g: Q0.15."""
    e = min(power, -12)
    v = _round_shift(np.asarray(f, np.int64) * c, 15 + e - power) + _round_shift(np.asarray(i, np.int64) * g, 30 + e)
    if clip > 0:
        lim = clip << (power - e)
        v = np.clip(v, -lim, lim)
    return _sat16(_round_shift(v, power - e)), _sat16(_round_shift(v, -12 - e))


def lstm_int(x: np.ndarray, w_ih: np.ndarray, w_hh: np.ndarray, bias: np.ndarray, h0: np.ndarray | None,
             c0: np.ndarray | None, p: dict[str, Any], wide: bool = False,
             table: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """LSTM_S8 (wide: LSTM_S16): y [T, B, H] and the final cell state c [B,
    H]. bias: [2, 4H] (input side, hidden side), offsets folded in; table:
    the per-row requantization (gate_table), or None (per gate)."""
    x = np.asarray(x, np.int64)
    T, B, _ = x.shape
    H = w_hh.shape[1]
    lo, hi, dt = (INT16_MIN, INT16_MAX, np.int16) if wide else (-128, 127, np.int8)
    zp_h = int(p["output_offset"])
    h = np.full((B, H), zp_h, np.int64) if h0 is None else np.asarray(h0, np.int64).reshape(B, H)
    c = np.zeros((B, H), np.int64) if c0 is None else np.asarray(c0, np.int64).reshape(B, H)
    bias = np.asarray(bias, np.int64).reshape(2, 4 * H)
    y = np.zeros((T, B, H), dt)

    def gate(g: int, xt: np.ndarray, act: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        rows = slice(g * H, (g + 1) * H)
        per_gate = table is None  # TFLite's scheme: each side saturated (see _gate_q)
        gx = _fc(xt, w_ih[rows], bias[0, rows], *_gate_q(p, table, "x", g, H), wide, per_gate)
        gh = _fc(h, w_hh[rows], bias[1, rows], *_gate_q(p, table, "h", g, H), wide, per_gate)
        return act(_sat16(gx + gh)).astype(np.int64)

    clip = int(p.get("cell_clip", 0))
    power = int(p["cell_scale_power"])
    for step in _steps(T, p.get("reverse", False)):
        xt = x[step]
        f = gate(1, xt, sigmoid_s16)
        i = gate(0, xt, sigmoid_s16)
        g = gate(2, xt, tanh_s16)
        if table is not None:  # torchmcu's scheme: fine_cell
            c, c312 = fine_cell(f, c, i, g, power, clip)
            tc = tanh_s16(c312).astype(np.int64)
        else:  # TFLite's
            c = _sat16(requantize(f * c, p["forget_multiplier"], p["forget_shift"]))
            c = _sat16(c + _sat16(requantize(i * g, p["cell_multiplier"], p["cell_shift"])))
            if clip > 0:
                c = np.clip(c, -clip, clip)
            tc = tanh_s16(c, power + 12).astype(np.int64)
        o = gate(3, xt, sigmoid_s16)
        h = np.clip(zp_h + requantize(tc * o, p["output_multiplier"], p["output_shift"]), lo, hi)
        y[step] = h
    return y, c.astype(np.int16)


def gru_int(x: np.ndarray, w_ih: np.ndarray, w_hh: np.ndarray, bias: np.ndarray, h0: np.ndarray | None,
            p: dict[str, Any], wide: bool = False, table: np.ndarray | None = None) -> np.ndarray:
    """GRU_S8 (wide: GRU_S16): y [T, B, H]. bias: [2, 3H] (input side;
    hidden side with the n gate's b_hn), offsets folded in."""
    x = np.asarray(x, np.int64)
    T, B, _ = x.shape
    H = w_hh.shape[1]
    lo, hi, dt = (INT16_MIN, INT16_MAX, np.int16) if wide else (-128, 127, np.int8)
    zp_h = int(p["output_offset"])
    h = np.full((B, H), zp_h, np.int64) if h0 is None else np.asarray(h0, np.int64).reshape(B, H)
    bias = np.asarray(bias, np.int64).reshape(2, 3 * H)
    y = np.zeros((T, B, H), dt)

    def side(g: int, v: np.ndarray, w: np.ndarray, row: int, which: str) -> np.ndarray:
        rows = slice(g * H, (g + 1) * H)
        return _fc(v, w[rows], bias[row, rows], *_gate_q(p, table, which, g, H), wide, table is None)

    for step in _steps(T, p.get("reverse", False)):
        xt = x[step]
        r = sigmoid_s16(_sat16(side(0, xt, w_ih, 0, "x") + side(0, h, w_hh, 1, "h"))).astype(np.int64)
        z = sigmoid_s16(_sat16(side(1, xt, w_ih, 0, "x") + side(1, h, w_hh, 1, "h"))).astype(np.int64)
        hn = _sat16(side(2, h, w_hh, 1, "h"))
        rhn = _sat16(requantize(r * hn, p["rh_multiplier"], p["rh_shift"]))
        n = tanh_s16(_sat16(side(2, xt, w_ih, 0, "x") + rhn)).astype(np.int64)
        blend = (requantize((32768 - z) * n, p["blend_n_multiplier"], p["blend_n_shift"])
                 + requantize(z * (h - zp_h), p["blend_h_multiplier"], p["blend_h_shift"]))
        h = np.clip(zp_h + blend, lo, hi)
        y[step] = h
    return y


def rnn_int(x: np.ndarray, w_ih: np.ndarray, w_hh: np.ndarray, bias: np.ndarray, h0: np.ndarray | None,
            p: dict[str, Any], wide: bool = False) -> np.ndarray:
    """RNN_S8 (wide: RNN_S16): y [T, B, H]. bias: [2, H], offsets folded in."""
    x = np.asarray(x, np.int64)
    T, B, _ = x.shape
    H = w_hh.shape[1]
    lo, hi, dt = (INT16_MIN, INT16_MAX, np.int16) if wide else (-128, 127, np.int8)
    zp_h = int(p["output_offset"])
    h = np.full((B, H), zp_h, np.int64) if h0 is None else np.asarray(h0, np.int64).reshape(B, H)
    bias = np.asarray(bias, np.int64).reshape(2, H)
    y = np.zeros((T, B, H), dt)
    for step in _steps(T, p.get("reverse", False)):
        pre = _sat16(_fc(x[step], w_ih, bias[0], p["x_multiplier"], p["x_shift"], wide)
                     + _fc(h, w_hh, bias[1], p["h_multiplier"], p["h_shift"], wide))
        v = tanh_s16(pre).astype(np.int64) if p["activation"] == 0 else np.maximum(pre, 0)
        h = np.clip(zp_h + requantize(v, p["output_multiplier"], p["output_shift"]), lo, hi)
        y[step] = h
    return y


# ---- float (PyTorch's own one-layer kernels)


def _flip(v: Any, reverse: bool) -> Any:
    return v.flip(0) if reverse else v


def lstm_f32(x, w_ih, w_hh, bias, h0, c0, reverse: bool = False) -> tuple[np.ndarray, np.ndarray]:
    import torch

    xt = t(x)
    T, B, _ = xt.shape
    H = w_hh.shape[1]
    h = torch.zeros(1, B, H) if h0 is None else t(h0).reshape(1, B, H)
    c = torch.zeros(1, B, H) if c0 is None else t(c0).reshape(1, B, H)
    params = [t(w_ih), t(w_hh)] + ([t(bias), torch.zeros(4 * H)] if bias is not None else [])
    y, _, cn = torch.lstm(_flip(xt, reverse), [h, c], params, bias is not None, 1, 0.0, False, False, False)
    return _flip(y, reverse).numpy(), cn[0].numpy()


def gru_f32(x, w_ih, w_hh, bias, h0, reverse: bool = False) -> np.ndarray:
    import torch

    xt = t(x)
    _, B, _ = xt.shape
    H = w_hh.shape[1]
    h = torch.zeros(1, B, H) if h0 is None else t(h0).reshape(1, B, H)
    params = [t(w_ih), t(w_hh)] + ([t(bias[0]), t(bias[1])] if bias is not None else [])
    y, _ = torch.gru(_flip(xt, reverse), h, params, bias is not None, 1, 0.0, False, False, False)
    return _flip(y, reverse).numpy()


def rnn_f32(x, w_ih, w_hh, bias, h0, activation: int = 0, reverse: bool = False) -> np.ndarray:
    import torch

    xt = t(x)
    _, B, _ = xt.shape
    H = w_hh.shape[1]
    h = torch.zeros(1, B, H) if h0 is None else t(h0).reshape(1, B, H)
    params = [t(w_ih), t(w_hh)] + ([t(bias), torch.zeros(H)] if bias is not None else [])
    fn = torch.rnn_tanh if activation == 0 else torch.rnn_relu
    y, _ = fn(_flip(xt, reverse), h, params, bias is not None, 1, 0.0, False, False, False)
    return _flip(y, reverse).numpy()


# ---- the interpreter's runners: (args, params, output tensors) -> outputs


def _opt(a: list, k: int) -> Any:
    return a[k] if len(a) > k else None


def _gru_bias(a: list) -> Any:
    return None if _opt(a, 3) is None else np.asarray(a[3]).reshape(2, -1)


OPS: dict[str, Callable[[list, dict, list], Any]] = {
    "LSTM_F32": lambda a, p, outs: tuple(lstm_f32(a[0], a[1], a[2], _opt(a, 3), _opt(a, 4), _opt(a, 5),
                                                 p.get("reverse", False))),
    "GRU_F32": lambda a, p, outs: gru_f32(a[0], a[1], a[2], _gru_bias(a), _opt(a, 4), p.get("reverse", False)),
    "RNN_F32": lambda a, p, outs: rnn_f32(a[0], a[1], a[2], _opt(a, 3), _opt(a, 4), p.get("activation", 0),
                                          p.get("reverse", False)),
    "LSTM_S8": lambda a, p, outs: lstm_int(a[0], a[1], a[2], a[3], a[4], a[5], p, table=_opt(a, 7)),
    "LSTM_S16": lambda a, p, outs: lstm_int(a[0], a[1], a[2], a[3], a[4], a[5], p, wide=True, table=_opt(a, 7)),
    "GRU_S8": lambda a, p, outs: gru_int(a[0], a[1], a[2], a[3], a[4], p, table=_opt(a, 6)),
    "RNN_S8": lambda a, p, outs: rnn_int(a[0], a[1], a[2], a[3], a[4], p),
    "GRU_S16": lambda a, p, outs: gru_int(a[0], a[1], a[2], a[3], a[4], p, wide=True, table=_opt(a, 6)),
    "RNN_S16": lambda a, p, outs: rnn_int(a[0], a[1], a[2], a[3], a[4], p, wide=True),
}
# The runners of ops with two outputs (the LSTMs: y and c) return a tuple.
