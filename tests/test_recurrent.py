"""Recurrent layers (LSTM, GRU, RNN and their cells): the fast checks.

Chains of evidence, as for the other op families:
  a. the reference's integer LSTM (aot/torchmcu/reference/recurrent.py)
     against TensorFlow Lite Micro's UNIDIRECTIONAL_SEQUENCE_LSTM (the
     tflite-micro wheel), int8 and int16 activations, state kept across
     invocations; and a whole compiled program exported to .tflite;
  b. the portable C kernels (firmware/kernels/portable/recurrent/recurrent_s8.cc, built
     with UBSan into a host library) against the reference on random
     parameters, saturation, clipping, reversed directions and initial states
     included;
  c. whole models on the host runner (sanitizers on): float programs against
     PyTorch for every module option, int8 / a16w8 programs bit for bit
     against the reference;
  d. what is refused, with one clear line.
"""

from __future__ import annotations

import ctypes
import re
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import REPO
from torch import nn
from torchmcu.compiler import compile
from torchmcu.errors import CompileError
from torchmcu.reference import recurrent as R
from torchmcu.sim import runner

KERNELS = REPO / "firmware" / "kernels" / "portable" / "recurrent"
BOARD = "mps3-an547"


# ---------------------------------------------------------------------------------------------
# a. The reference against TensorFlow Lite Micro


def _lstm_tflite(qi, qh, swx, swh, bias_q, s_x, zp_x, s_h, zp_h, power, T, B, I, H, wide):
    from torchmcu.export.tflite.writer import TFLiteWriter

    w = TFLiteWriter()
    adt = "int16" if wide else "int8"
    x = w.add_tensor("x", (T, B, I), adt, s_x, zp_x)
    ins = [x]
    for q, s in ((qi, swx), (qh, swh)):
        ins += [w.add_tensor(f"w{len(ins)}", (H, q.shape[1]), "int8", float(s[g]), 0, data=q[g * H:(g + 1) * H])
                for g in range(4)]
    ins += [-1, -1, -1]
    ins += [w.add_tensor(f"b{g}", (H,), "int64" if wide else "int32", float(np.float32(s_x) * np.float32(swx[g])), 0,
                         data=bias_q[g * H:(g + 1) * H]) for g in range(4)]
    ins += [-1, -1, w.add_tensor("h", (B, H), adt, s_h, zp_h, variable=True),
            w.add_tensor("c", (B, H), "int16", 2.0 ** power, 0, variable=True), -1, -1, -1, -1]
    y = w.add_tensor("y", (T, B, H), adt, s_h, zp_h)
    w.add_op("UNIDIRECTIONAL_SEQUENCE_LSTM", ins, [y], dict(fused_activation_function="TANH", cell_clip=0.0,
                                                            proj_clip=0.0, time_major=True))
    w.set_io([x], [y])
    return w.finish()


@pytest.mark.parametrize("wide", [False, True], ids=["int8", "int16"])
@pytest.mark.parametrize("power", [-15, -13, -11, -9])
@pytest.mark.parametrize("seed", [0, 1])
def test_lstm_reference_is_tflm_bit_for_bit(wide, power, seed):
    """Random weights and inputs over the whole range, two invocations: the
    second starts from the state the first left in TFLM's variable tensors."""
    runtime = pytest.importorskip("tflite_micro.python.tflite_micro.runtime")
    g = np.random.default_rng(seed)
    T, B, I, H = 6, 2, 5, 8
    w_ih, w_hh = g.normal(0, 0.4, (4 * H, I)), g.normal(0, 0.4, (4 * H, H))
    qi, swx = R.quantize_gates(w_ih, 4)
    qh, swh = R.quantize_gates(w_hh, 4)
    s_x, zp_x, s_h, zp_h = (4 / 32767, 0, 1 / 32767, 0) if wide else (0.03, 7, 1 / 128, -2)
    bias_q = R.quantize_bias(g.normal(0, 0.6, 4 * H), s_x, swx, H, 64 if wide else 32)
    p = R.lstm_params(s_x, zp_x, swx, s_h, zp_h, swh, power)
    bias = np.stack([bias_q - zp_x * qi.astype(np.int64).sum(1), -zp_h * qh.astype(np.int64).sum(1)])
    it = runtime.Interpreter.from_bytes(_lstm_tflite(qi, qh, swx, swh, bias_q, s_x, zp_x, s_h, zp_h, power,
                                                     T, B, I, H, wide), arena_size=1 << 20)
    lim = (-32768, 32768) if wide else (-128, 128)
    h = c = None
    for _ in range(2):
        x = g.integers(*lim, (T, B, I)).astype(np.int16 if wide else np.int8)
        it.set_input(x, 0)
        it.invoke()
        y, c = R.lstm_int(x, qi, qh, bias, h, c, p, wide=wide)
        h = y[-1]
        np.testing.assert_array_equal(y, it.get_output(0))


def test_sigmoid_table_is_the_kernels():
    """The C kernels' table is the one the reference computes (TFLite's,
    which the LSTM comparison with TFLM exercises)."""
    text = (KERNELS / "recurrent_s8.cc").read_text()
    body = text[text.index("kSigmoidTable[256] = {"):]
    values = [int(v) for v in re.findall(r"\d+", body[body.index("{"):body.index("}")])]
    assert values == list(R.sigmoid_table_u16())
    assert values[0] == 32768 and values[-1] == 65535


def test_program_exported_to_tflite_is_tflm_bit_for_bit(tmp_path):
    """A compiled int8 LSTM model end to end: the program as a .tflite in TFLM
    gives the reference's bits (TFLite derives every multiplier itself)."""
    pytest.importorskip("tflite_micro.python.tflite_micro.runtime")
    from torchmcu.export.tflite import export_tflite, run_tflite_micro
    from torchmcu.program.interpret import run_reference

    torch.manual_seed(3)
    model = _Seq(nn.LSTM(6, 16), 16).eval()
    calib = [(torch.randn(9, 1, 6),) for _ in range(6)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = compile(model, calib[0], BOARD, tmp_path, quant="int8", calibration=calib, progress=False, tile=False,
                    recurrent_weights="per-gate")  # TFLite's scheme
    assert "LSTM_S8" in {op.code for op in c.graph.ops}
    tfl = export_tflite(c.pte)
    for (x,) in calib[:3]:
        ours = run_reference(c.pte, [[x.numpy()]])[0][0]
        np.testing.assert_array_equal(ours, run_tflite_micro(tfl, [x.numpy()])[0].reshape(ours.shape))


# ---------------------------------------------------------------------------------------------
# b. The C kernels against the reference

_SHIM = r"""
#include <cstring>
#include "kernels/portable/recurrent/recurrent.h"
using namespace torchmcu::portable;
#define X extern "C"

static RecurrentShape shape(const int32_t* s) { return RecurrentShape{s[0], s[1], s[2], s[3], s[4] != 0}; }
// q: per gate, G x multipliers, x shifts, h multipliers, h shifts; or, with
// a table (int32 [4, G*H]), per row.
static GateQuant gates(const int32_t* q, int32_t G, const int32_t* t, int32_t H) {
  if (t != nullptr) return GateQuant{t, t + G * H, t + 2 * G * H, t + 3 * G * H, H, true};
  return GateQuant{q, q + G, q + 2 * G, q + 3 * G, H, false};
}
// q: the 16 gate values, then forget, cell, output (multiplier, shift), output_offset, power, clip.
static LstmQuant lstm_q(const int32_t* q, const int32_t* t, int32_t H) {
  LstmQuant l{};
  l.gates = gates(q, 4, t, H);
  l.forget_multiplier = q[16]; l.forget_shift = q[17]; l.cell_multiplier = q[18]; l.cell_shift = q[19];
  l.output_multiplier = q[20]; l.output_shift = q[21]; l.output_offset = q[22]; l.cell_scale_power = q[23];
  l.cell_clip = q[24];
  return l;
}
X void k_lstm_s8(const int8_t* x, const int8_t* wi, const int8_t* wh, const int32_t* b, const int8_t* h0,
                 const int16_t* c0, int8_t* y, int16_t* c, const int32_t* s, const int32_t* q, const int32_t* t) {
  lstm_s8(x, wi, wh, b, h0, c0, y, c, shape(s), lstm_q(q, t, s[3]));
}
X void k_lstm_s16(const int16_t* x, const int8_t* wi, const int8_t* wh, const int64_t* b, const int16_t* h0,
                  const int16_t* c0, int16_t* y, int16_t* c, const int32_t* s, const int32_t* q,
                  const int32_t* t) {
  lstm_s16(x, wi, wh, b, h0, c0, y, c, shape(s), lstm_q(q, t, s[3]));
}
// q: the 12 gate values, then rh, blend_n, blend_h (multiplier, shift), output_offset.
static GruQuant gru_q(const int32_t* q, const int32_t* t, int32_t H) {
  GruQuant g{};
  g.gates = gates(q, 3, t, H);
  g.rh_multiplier = q[12]; g.rh_shift = q[13]; g.blend_n_multiplier = q[14]; g.blend_n_shift = q[15];
  g.blend_h_multiplier = q[16]; g.blend_h_shift = q[17]; g.output_offset = q[18];
  return g;
}
X void k_gru_s8(const int8_t* x, const int8_t* wi, const int8_t* wh, const int32_t* b, const int8_t* h0,
                int8_t* y, const int32_t* s, const int32_t* q, const int32_t* t) {
  gru_s8(x, wi, wh, b, h0, y, shape(s), gru_q(q, t, s[3]));
}
X void k_gru_s16(const int16_t* x, const int8_t* wi, const int8_t* wh, const int64_t* b, const int16_t* h0,
                 int16_t* y, const int32_t* s, const int32_t* q, const int32_t* t) {
  gru_s16(x, wi, wh, b, h0, y, shape(s), gru_q(q, t, s[3]));
}
X void k_rnn_s8(const int8_t* x, const int8_t* wi, const int8_t* wh, const int32_t* b, const int8_t* h0,
                int8_t* y, const int32_t* s, const int32_t* q) {
  rnn_s8(x, wi, wh, b, h0, y, shape(s), RnnQuant{q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7] != 0});
}
X void k_rnn_s16(const int16_t* x, const int8_t* wi, const int8_t* wh, const int64_t* b, const int16_t* h0,
                 int16_t* y, const int32_t* s, const int32_t* q) {
  rnn_s16(x, wi, wh, b, h0, y, shape(s), RnnQuant{q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7] != 0});
}
X int16_t k_sigmoid(int32_t x, int32_t shift) { return sigmoid_s16(x, shift); }
X int16_t k_tanh(int32_t x, int32_t shift) { return tanh_s16(x, shift); }
"""


def build_lib(d: Path) -> ctypes.CDLL:
    """The integer recurrent kernels built for the host (UBSan on) in `d`, with the shim's k_* functions."""
    (d / "shim.cc").write_text(_SHIM)
    out = d / "librecurrent.so"
    cmd = ["g++", "-std=c++17", "-O2", "-Wall", "-Wextra", "-Werror", "-fno-rtti", "-fno-exceptions", "-shared",
           "-fPIC", "-fsanitize=undefined", "-fno-sanitize-recover=all", f"-I{REPO / 'firmware'}",
           "-o", str(out), str(d / "shim.cc"), str(KERNELS / "recurrent_s8.cc")]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    lib = ctypes.CDLL(str(out))
    lib.k_sigmoid.restype = lib.k_tanh.restype = ctypes.c_int16
    return lib


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    return build_lib(tmp_path_factory.mktemp("recurrent"))


def _p(a: np.ndarray | None) -> ctypes.c_void_p:
    return ctypes.c_void_p(0) if a is None else a.ctypes.data_as(ctypes.c_void_p)


def _random_case(g, kind: str, wide: bool = False, loud: bool = False, per_row: bool = False):
    """Random weights and scales; `loud` multipliers drive the gates into
    saturation; per_row: one requantization per weight row (torchmcu's
    scheme: the gate_q vectors hold G * H entries)."""
    G = {"lstm": 4, "gru": 3, "rnn": 1}[kind]
    T, B, I, H = int(g.integers(1, 5)), int(g.integers(1, 4)), int(g.integers(1, 9)), int(g.integers(1, 9))
    qi = g.integers(-127, 128, (G * H, I)).astype(np.int8)
    qh = g.integers(-127, 128, (G * H, H)).astype(np.int8)
    lim = (-32768, 32768) if wide else (-128, 128)
    x = g.integers(*lim, (T, B, I)).astype(np.int16 if wide else np.int8)
    h0 = None if g.random() < 0.4 else g.integers(*lim, (B, H)).astype(x.dtype)
    zp = 0 if wide else int(g.integers(-128, 128))
    span = 2 ** 40 if wide else 2 ** 20
    bias = g.integers(-span, span, (2, G * H)).astype(np.int64)
    scale = 1e-1 if loud else 1e-3 if wide else 1e-2
    n = G * H if per_row else G
    mult = [R.quantize_multiplier(v) for v in np.exp(g.uniform(np.log(scale / 30), np.log(scale), 2 * n))]
    gate_q = dict(x_multiplier=[m for m, _ in mult[:n]], x_shift=[s for _, s in mult[:n]],
                  h_multiplier=[m for m, _ in mult[n:]], h_shift=[s for _, s in mult[n:]])
    return T, B, I, H, qi, qh, x, h0, zp, bias, gate_q


@pytest.mark.parametrize("per_row", [False, True], ids=["per-gate", "per-row"])
@pytest.mark.parametrize("wide", [False, True], ids=["s8", "s16"])
@pytest.mark.parametrize("seed", range(12))
def test_lstm_kernel_is_the_reference(lib, seed, wide, per_row):
    g = np.random.default_rng(seed + 1000 * per_row)
    T, B, I, H, qi, qh, x, h0, zp, bias, gq = _random_case(g, "lstm", wide, loud=seed % 3 == 0, per_row=per_row)
    power = int(g.integers(-15, 3 if per_row else -7))
    p = R.lstm_params(1.0, 0, np.ones(4), 2.0 ** -7, zp, np.ones(4), power, reverse=bool(seed % 2))
    p.update(gq, cell_clip=int(g.integers(100, 30000)) if seed % 4 == 1 else 0)
    t = R.gate_table(p) if per_row else None
    c0 = None if seed % 5 == 0 else g.integers(-32768, 32768, (B, H)).astype(np.int16)
    if not wide:
        bias = np.clip(bias, -2 ** 24, 2 ** 24)
    y_ref, c_ref = R.lstm_int(x, qi, qh, bias, h0, c0, p, wide=wide, table=t)
    y, c = np.zeros_like(y_ref), np.zeros((B, H), np.int16)
    gv = [0] * 16 if per_row else [*p["x_multiplier"], *p["x_shift"], *p["h_multiplier"], *p["h_shift"]]
    q = np.array([*gv, p["forget_multiplier"],
                  p["forget_shift"], p["cell_multiplier"], p["cell_shift"], p["output_multiplier"],
                  p["output_shift"], zp, power, p["cell_clip"]], np.int32)
    s = np.array([T, B, I, H, int(p["reverse"])], np.int32)
    b = bias.astype(np.int64 if wide else np.int32)
    fn = lib.k_lstm_s16 if wide else lib.k_lstm_s8
    fn(_p(x), _p(qi), _p(qh), _p(b), _p(h0), _p(c0), _p(y), _p(c), _p(s), _p(q), _p(t))
    np.testing.assert_array_equal(y, y_ref)
    np.testing.assert_array_equal(c, c_ref)


@pytest.mark.parametrize("wide", [False, True], ids=["s8", "s16"])
@pytest.mark.parametrize("seed", range(10))
def test_gru_and_rnn_kernels_are_the_reference(lib, seed, wide):
    g = np.random.default_rng(100 + seed)
    per_row = seed % 2 == 1
    T, B, I, H, qi, qh, x, h0, zp, bias, gq = _random_case(g, "gru", wide, loud=seed % 3 == 0, per_row=per_row)
    bias = bias if wide else np.clip(bias, -2 ** 24, 2 ** 24)
    p = R.gru_params(1.0, 0, np.ones(3), 2.0 ** -7, zp, np.ones(3), reverse=bool(seed % 4 >= 2))
    p.update(gq)
    t = R.gate_table(p) if per_row else None
    y_ref = R.gru_int(x, qi, qh, bias, h0, p, wide=wide, table=t)
    y = np.zeros_like(y_ref)
    gv = [0] * 12 if per_row else [*p["x_multiplier"], *p["x_shift"], *p["h_multiplier"], *p["h_shift"]]
    q = np.array([*gv, p["rh_multiplier"],
                  p["rh_shift"], p["blend_n_multiplier"], p["blend_n_shift"], p["blend_h_multiplier"],
                  p["blend_h_shift"], zp], np.int32)
    s = np.array([T, B, I, H, int(p["reverse"])], np.int32)
    b = bias.astype(np.int64 if wide else np.int32)
    (lib.k_gru_s16 if wide else lib.k_gru_s8)(_p(x), _p(qi), _p(qh), _p(b), _p(h0), _p(y), _p(s), _p(q), _p(t))
    np.testing.assert_array_equal(y, y_ref)

    T, B, I, H, qi, qh, x, h0, zp, bias, gq = _random_case(g, "rnn", wide, loud=seed % 3 == 0)
    bias = bias if wide else np.clip(bias, -2 ** 24, 2 ** 24)
    act = seed % 2
    p = R.rnn_params(1.0, 0, 1.0, 2.0 ** -7, zp, 1.0, act, reverse=seed % 4 >= 2, wide=wide)
    p.update(x_multiplier=gq["x_multiplier"][0], x_shift=gq["x_shift"][0], h_multiplier=gq["h_multiplier"][0],
             h_shift=gq["h_shift"][0])
    y_ref = R.rnn_int(x, qi, qh, bias, h0, p, wide=wide)
    y = np.zeros_like(y_ref)
    q = np.array([p["x_multiplier"], p["x_shift"], p["h_multiplier"], p["h_shift"], p["output_multiplier"],
                  p["output_shift"], zp, act], np.int32)
    s = np.array([T, B, I, H, int(p["reverse"])], np.int32)
    b = bias.astype(np.int64 if wide else np.int32)
    (lib.k_rnn_s16 if wide else lib.k_rnn_s8)(_p(x), _p(qi), _p(qh), _p(b), _p(h0), _p(y), _p(s), _p(q))
    np.testing.assert_array_equal(y, y_ref)


def test_activations_are_the_reference_everywhere(lib):
    """Every int16 input, at the gates' shift and at the cell's shifts."""
    xs = np.arange(-32768, 32768, 7)
    for shift in (0, -3, 2):
        np.testing.assert_array_equal([lib.k_sigmoid(int(v), shift) for v in xs], R.sigmoid_s16(xs, shift))
        np.testing.assert_array_equal([lib.k_tanh(int(v), shift) for v in xs], R.tanh_s16(xs, shift))


# ---------------------------------------------------------------------------------------------
# c. Whole models on the host runner


class _Seq(nn.Module):
    """A recurrent layer and a linear head on every step (or on h_n)."""

    def __init__(self, rnn: nn.Module, features: int, on_state: bool = False) -> None:
        super().__init__()
        self.rnn, self.fc, self.on_state = rnn, nn.Linear(features, 5), on_state

    def forward(self, x):
        r = self.rnn(x)
        if self.on_state:
            h = r[1][0] if isinstance(r[1], tuple) else r[1]
            return self.fc(h.squeeze(0))
        return self.fc(r[0] if isinstance(r, tuple) else r)


class _All(nn.Module):
    """Every output of the module, as PyTorch returns them."""

    def __init__(self, m: nn.Module) -> None:
        super().__init__()
        self.m = m

    def forward(self, *x):
        return self.m(*x)


class _WithState(nn.Module):
    def __init__(self, m: nn.Module) -> None:
        super().__init__()
        self.m = m

    def forward(self, x, h, c):
        return self.m(x, (h, c))


FLOAT_CASES = {
    "lstm": (lambda: _All(nn.LSTM(6, 8)), [(5, 1, 6)]),
    "lstm_batch_first_b3": (lambda: _All(nn.LSTM(6, 8, batch_first=True)), [(3, 5, 6)]),
    "lstm_2layer_bidirectional_nobias": (lambda: _All(nn.LSTM(6, 8, 2, bias=False, bidirectional=True)),
                                         [(5, 2, 6)]),
    "lstm_given_state": (lambda: _WithState(nn.LSTM(6, 8, 2)), [(5, 1, 6), (2, 1, 8), (2, 1, 8)]),
    "gru_2layer_bidirectional": (lambda: _All(nn.GRU(6, 8, 2, batch_first=True, bidirectional=True)), [(1, 5, 6)]),
    "rnn_tanh": (lambda: _All(nn.RNN(6, 8)), [(5, 1, 6)]),
    "rnn_relu_bidirectional": (lambda: _All(nn.RNN(6, 8, nonlinearity="relu", bidirectional=True)), [(5, 2, 6)]),
    "lstm_cell": (lambda: _All(nn.LSTMCell(6, 8)), [(2, 6)]),
    "gru_cell_given_state": (lambda: _All(nn.GRUCell(6, 8)), [(1, 6), (1, 8)]),
    "rnn_relu_cell": (lambda: _All(nn.RNNCell(6, 8, nonlinearity="relu")), [(2, 6)]),
}


def _check(out: Path, inputs: list[np.ndarray]) -> None:
    res = runner.run(out, inputs, sim="host")
    assert res.exit_code == 0, res.raw[-2000:]
    expected, tol = runner.expected(out, runner.split_samples(runner.load_meta(out), inputs))
    mismatch, worst = runner.compare(res.outputs, expected, tol)
    assert mismatch is None, f"{mismatch} (max abs error {worst})"


@pytest.mark.parametrize("name", list(FLOAT_CASES))
def test_float_models_match_pytorch(name, host_runner, tmp_path):
    make, shapes = FLOAT_CASES[name]
    torch.manual_seed(1)
    model = make().eval()
    x = tuple(torch.randn(*s) for s in shapes)
    compile(model, x, BOARD, tmp_path, progress=False, tile=False)
    _check(tmp_path, [t.numpy() for t in x])


INT_CASES = {
    "lstm_kws": (lambda: _Seq(nn.LSTM(10, 16, batch_first=True), 16, on_state=True), (1, 12, 10)),
    "lstm_2layer": (lambda: _Seq(nn.LSTM(10, 16, 2), 16), (8, 1, 10)),
    "lstm_bidirectional_b2": (lambda: _Seq(nn.LSTM(10, 8, bidirectional=True), 16), (8, 2, 10)),
    "gru": (lambda: _Seq(nn.GRU(10, 16, batch_first=True), 16, on_state=True), (1, 12, 10)),
    "gru_2layer_bidirectional": (lambda: _Seq(nn.GRU(10, 8, 2, bidirectional=True), 16), (8, 1, 10)),
    "rnn_tanh": (lambda: _Seq(nn.RNN(10, 16), 16), (8, 1, 10)),
    "rnn_relu": (lambda: _Seq(nn.RNN(10, 16, nonlinearity="relu"), 16), (8, 1, 10)),
}


@pytest.mark.parametrize("quant", ["int8", "a16w8"])
@pytest.mark.parametrize("name", list(INT_CASES))
def test_integer_models_are_the_reference_bit_for_bit(name, quant, host_runner, tmp_path):
    make, shape = INT_CASES[name]
    torch.manual_seed(2)
    model = make().eval()
    calib = [(torch.randn(*shape),) for _ in range(6)]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        c = compile(model, calib[0], BOARD, tmp_path, quant=quant, calibration=calib, progress=False, tile=False)
    assert not [w for w in seen if str(w.message).startswith("torchmcu")], "a float fallback"
    kind = name.split("_")[0].upper()
    assert f"{kind}_{'S16' if quant == 'a16w8' else 'S8'}" in {op.code for op in c.graph.ops}
    _check(tmp_path, [np.stack([t.numpy() for (t,) in calib[:3]])])


# ---------------------------------------------------------------------------------------------
# d. Refused, with one clear line


def test_projections_and_training_mode_are_refused(tmp_path):
    with pytest.raises(CompileError, match="proj_size"):
        compile(_All(nn.LSTM(6, 8, proj_size=4)), (torch.randn(5, 1, 6),), BOARD, tmp_path, progress=False, tile=False)
    model = _All(nn.LSTM(6, 8, dropout=0.0))
    ep = torch.export.export(model.train(), (torch.randn(5, 1, 6),), strict=False)
    from torchmcu.passes import lower

    with pytest.raises(CompileError, match="training mode"):
        lower(ep)
