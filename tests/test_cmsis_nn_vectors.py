"""Our int8 kernels on CMSIS-NN's own unit-test vectors (tests/_cmsis_vectors.py:
read from the user's CMSIS-NN tree, $TORCHMCU_CMSIS_NN_DIR, at test time;
skipped without it). The same integers CMSIS-NN's tests feed its kernels
(input, weights, biases, per-channel multipliers and shifts, offsets,
paddings, activation range) go to ours, which must give the expected outputs
TFLite's reference generated, bit for bit: the NumPy reference, the portable
kernels built for the host (tests/_kernel_lib_s8.py, test_recurrent.py's
shim; and all of them in the host runner) and, in QEMU, the fast paths (DSP
on the M4 mps2-an386, MVE on the M55 mps3-an547) and the generic kernels,
all sets in one hand-built program per board. int8 (conv, 1xN, 1x1,
grouped, depthwise, fully connected, softmax, LSTM), W4A8 (packed int4
weights: the same packing as ours) and a16w8 (int16 activations).

The arguments map one to one: CMSIS-NN's input_offset and output_offset are
our QuantConv2dParams' (added to the input, to the output); its pad_x and
pad_y our pad_left and pad_top (the output size gives the rest, as in
CMSIS-NN); its padded taps contribute 0, as ours; its weights are OHWI
([1, kh, kw, C * m] depthwise; [out, in] fully connected) as ours; a
grouped convolution's weights hold in_ch / groups channels, as CONV2D_S8's.
A fully connected set's per-tensor multiplier is our one-requant form; its
input offset is folded into the bias (the kernel sums, as the compiler does
for LINEAR_S8). NULL biases are zeros.

CMSIS-NN's LSTM sets (TFLite's UnidirectionalSequenceLSTM) are LSTM_S8 in
TFLite's per-gate scheme (no per-row table): see Case._lstm.

Out of scope, skipped with the reason: weight zero points (our weights are
symmetric: FILTER_OFFSET != 0) and int16 convolutions with an int32 bias
(TFLite's other 16x8 scheme: a 32-bit requantization; ours is int64).
Other CMSIS-NN kernels' sets (pools, elementwise, transpose conv, SVDF,
int16 softmax, ...) are not read here.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

import _kernel_lib_s8 as kernel_lib
import numpy as np
import pytest
from _cmsis_vectors import VectorSet, load, sets_of
from conftest import needs_arm_gcc, needs_qemu
from test_recurrent import build_lib as build_recurrent
from test_runtime_features import Builder, build_dir
from _kernel_lib_s8 import i32
from torchmcu.backends.cmsis_nn.build import CMSIS_NN_ENV
from torchmcu.backends.portable.scratch import scratch_bytes as portable_scratch
from torchmcu.builder.firmware import build_firmware
from torchmcu.program import serialize
from torchmcu.reference.quant import pack_int4, unpack_int4
from torchmcu.program.interpret import run_reference
from torchmcu.sim import runner

# CMSIS-NN's test programs (TestCases/test_arm_<kernel>/) whose vector sets we run, and our op for each.
KERNEL_TESTS = {
    "test_arm_convolve_s8": "CONV2D_S8",
    "test_arm_convolve_1_x_n_s8": "CONV2D_S8",
    "test_arm_convolve_1x1_s8_fast": "CONV2D_S8",
    "test_arm_grouped_convolve_s8": "CONV2D_S8",
    "test_arm_depthwise_conv_s8": "DEPTHWISE_CONV2D_S8",
    "test_arm_depthwise_conv_3x3_s8": "DEPTHWISE_CONV2D_S8",
    "test_arm_depthwise_conv_s8_opt": "DEPTHWISE_CONV2D_S8",
    "test_arm_fully_connected_s8": "LINEAR_S8",
    "test_arm_softmax_s8": "SOFTMAX_S8",
    "test_arm_lstm_unidirectional_s8": "LSTM_S8",
    # W4A8: packed int4 weights.
    "test_arm_convolve_s4": "CONV2D_S4",
    "test_arm_convolve_1x1_s4_fast": "CONV2D_S4",
    "test_arm_depthwise_conv_s4": "DEPTHWISE_CONV2D_S4",
    "test_arm_depthwise_conv_s4_opt": "DEPTHWISE_CONV2D_S4",
    "test_arm_fully_connected_s4": "LINEAR_S4",
    # a16w8: int16 activations, int8 weights, int64 biases.
    "test_arm_convolve_s16": "CONV2D_S16",
    "test_arm_depthwise_conv_s16": "DEPTHWISE_CONV2D_S16",
    "test_arm_depthwise_conv_fast_s16": "DEPTHWISE_CONV2D_S16",
    "test_arm_fully_connected_s16": "LINEAR_S16",
    "test_arm_lstm_unidirectional_s16": "LSTM_S16",
}

WIRE_DTYPE = {np.dtype(np.int8): "I8", np.dtype(np.int16): "I16", np.dtype(np.int32): "I32",
              np.dtype(np.int64): "I64"}

# The ops whose kernels tests/_kernel_lib_s8.py and test_recurrent.py build for the host by themselves
# (the others run on the host runner: test_vectors_on_the_host_runner).
HOST_KERNELS = {"CONV2D_S8", "DEPTHWISE_CONV2D_S8", "LINEAR_S8", "SOFTMAX_S8", "LSTM_S8"}

# QuantConvParams' fields in order (firmware/kernels/portable/conv/conv.h).
CONV_FIELDS = ("stride_h", "stride_w", "pad_top", "pad_left", "dilation_h", "dilation_w", "input_offset",
               "output_offset", "act_min", "act_max")

ROOT = Path(os.environ[CMSIS_NN_ENV]) if os.environ.get(CMSIS_NN_ENV) else None
needs_cmsis_nn = pytest.mark.skipif(
    ROOT is None, reason=f"{CMSIS_NN_ENV} is not set: point it at the root of a CMSIS-NN checkout; its "
                         "Tests/UnitTest/TestCases/TestData/ vectors are read from there (torchmcu ships none)")


def _ids() -> list[tuple[str, str]]:
    """(kernel test, vector set) pairs: one set may serve two kernels (stride2pad1: conv and depthwise)."""
    if ROOT is None:
        return []
    return [(test, name) for test in KERNEL_TESTS for name in sets_of(ROOT, test)]


class Case:
    """One vector set mapped to one op of ours: `code`, its operands (`x` and the
    constants `consts`, in the op's operand order; int4 weights unpacked,
    packed into the program), `params`, the output's dims and CMSIS-NN's
    expected output; `skip` the reason it is out of scope."""

    def __init__(self, test: str, v: VectorSet) -> None:
        self.name = f"{test.removeprefix('test_arm_')}/{v.name}"
        self.code = KERNEL_TESTS[test]
        self.skip: str | None = None
        self.consts: list[tuple[str, np.ndarray]] = []
        self.params: tuple[str, dict] | None = None
        self.extra: list[tuple[str, str, list[int]]] = []  # outputs beside y: (name, dtype, dims)
        # a16w8 (int16 activations, int64 bias, zero points 0) and W4A8 (packed int4 weights).
        self.act = np.int16 if self.code.endswith("S16") else np.int8
        self.int4 = self.code.endswith("S4")
        bias_dtype = np.int64 if self.act is np.int16 else np.int32
        a = v.arrays
        if self.code.startswith("LSTM"):
            self._lstm(v)
            return
        if self.code == "SOFTMAX_S8":
            rows, size = v.get("NUM_ROWS"), v.get("ROW_SIZE")
            self.x = a["input"].astype(np.int8).reshape(rows, size)
            self.y_dims = [rows, size]
            self.params = ("QuantSoftmaxParams", {"input_multiplier": v.get("INPUT_MULT"),
                                                  "input_left_shift": v.get("INPUT_LEFT_SHIFT"),
                                                  "diff_min": v.get("DIFF_MIN")})
            self.expected = a["output_ref"].astype(np.int8).reshape(self.y_dims)
            return
        act = {"act_min": v.get("OUT_ACTIVATION_MIN"), "act_max": v.get("OUT_ACTIVATION_MAX")}
        in_off, out_off = v.get("INPUT_OFFSET"), v.get("OUTPUT_OFFSET")
        if not np.iinfo(self.act).min <= out_off <= np.iinfo(self.act).max:
            self.skip = (f"output offset {out_off} outside {np.dtype(self.act)} (no zero point of the output's "
                         "type): our load-time checks refuse it")
            return
        bias = a.get("biases")
        if self.act is np.int16 and v.ctypes.get("biases") == "int32_t":
            # TFLite's 16x8 convolution with an int32 bias requantizes the int32 accumulator with the
            # 32-bit (double-rounding) multiply; our a16w8 ops take int64 biases, requantized in 64 bits
            # (TFLite's default 16x8 scheme): they differ by 1 on ties. Checked: the 32-bit
            # requantization of the same accumulators gives these sets' outputs exactly.
            self.skip = "int32 bias (TFLite's 16x8 with int32 bias, 32-bit requantization): ours is int64 only"
            return

        def weights(count: int) -> np.ndarray:
            w = a["weights"]
            return unpack_int4(w.astype(np.int8), count) if self.int4 else w.astype(np.int8)

        def requant(out_ch: int) -> list[tuple[str, np.ndarray]]:
            if "output_mult" in a:
                mult, shift = a["output_mult"], a["output_shift"]
            else:  # per tensor: one requantization
                mult, shift = np.array([v.get("OUTPUT_MULTIPLIER")]), np.array([v.get("OUTPUT_SHIFT")])
            return [("mult", mult.astype(np.int32)), ("shift", shift.astype(np.int32))]

        if self.code.startswith("LINEAR"):
            if v.get("FILTER_OFFSET", 0) != 0:
                self.skip = f"weight zero point {v.get('FILTER_OFFSET')}: our int8 weights are symmetric"
                return
            batch, depth, out_ch = v.get("INPUT_BATCHES"), v.get("ACCUMULATION_DEPTH"), v.get("OUT_CH")
            self.x = a["input"].astype(self.act).reshape(batch, depth)
            w = weights(out_ch * depth).reshape(out_ch, depth)
            bias = np.zeros(out_ch, np.int64) if bias is None else bias.astype(np.int64)
            folded = bias + in_off * w.astype(np.int64).sum(axis=1)  # int16: in_off is 0
            self.consts = [("w", w), ("bias", folded.astype(bias_dtype)), *requant(out_ch)]
            self.params = ("QuantLinearParams", {"input_offset": in_off, "output_offset": out_off, **act})
            self.y_dims = [batch, out_ch]
            self.expected = a["output_ref"].astype(self.act).reshape(self.y_dims)
            return
        batch, h, w_, in_ch, out_ch = (v.get(k) for k in ("INPUT_BATCHES", "INPUT_H", "INPUT_W", "IN_CH", "OUT_CH"))
        kh, kw = v.get("FILTER_Y"), v.get("FILTER_X")
        self.x = a["input"].astype(self.act).reshape(batch, h, w_, in_ch)
        params = {"stride_h": v.get("STRIDE_Y"), "stride_w": v.get("STRIDE_X"), "pad_top": v.get("PAD_Y"),
                  "pad_left": v.get("PAD_X"), "dilation_h": v.get("DILATION_Y", 1),
                  "dilation_w": v.get("DILATION_X", 1), "input_offset": in_off, "output_offset": out_off, **act}
        if self.code.startswith("DEPTHWISE"):
            params["multiplier"] = v.get("CH_MULT", out_ch // in_ch)  # conv sets run as depthwise: 1 channel
            w = weights(kh * kw * out_ch).reshape(1, kh, kw, out_ch)
        else:
            group_ch = v.get("FILTER_CH", in_ch)
            w = weights(out_ch * kh * kw * group_ch).reshape(out_ch, kh, kw, group_ch)
        self.consts = [("w", w), ("bias", np.zeros(out_ch, bias_dtype) if bias is None else bias.astype(bias_dtype)),
                       *requant(out_ch)]
        self.params = ("QuantConv2dParams", params)
        self.y_dims = [batch, v.get("OUTPUT_H"), v.get("OUTPUT_W"), out_ch]
        self.expected = a["output_ref"].astype(self.act).reshape(self.y_dims)

    def _lstm(self, v: VectorSet) -> None:
        """TFLite's integer LSTM (UnidirectionalSequenceLSTM), our LSTM_S8 without the per-row table:
        the gates' weights stacked in our order (i, f, g, o: CMSIS-NN's input, forget, cell, output);
        the bias [2, 4H] with the kernel sums folded in as CMSIS-NN's test folds them (the input
        side's INPUT_ZERO_POINT, which is the input offset, and the hidden side's -OUTPUT_ZERO_POINT);
        h0 the hidden zero point (CMSIS-NN's NULL hidden state: no hidden product) and c0 zeros.
        Batch-major sets are transposed to our time-major layout (the batches are independent)."""
        a = v.arrays
        T, B, I, H = (v.get(k) for k in ("TIME_STEPS", "BATCH_SIZE", "INPUT_SIZE", "HIDDEN_SIZE"))
        gates = ("INPUT", "FORGET", "CELL", "OUTPUT")
        w_ih = np.concatenate([a[f"{g.lower()}_gate_input_weights"].reshape(H, I) for g in gates]).astype(np.int8)
        w_hh = np.concatenate([a[f"{g.lower()}_gate_hidden_weights"].reshape(H, H) for g in gates]).astype(np.int8)
        bias = np.concatenate([a[f"{g.lower()}_gate_bias"] for g in gates]).astype(np.int64)
        x_off, zp_h = v.get("INPUT_ZERO_POINT"), v.get("OUTPUT_ZERO_POINT")
        folded = np.stack([bias + x_off * w_ih.astype(np.int64).sum(1), -zp_h * w_hh.astype(np.int64).sum(1)])

        def time_major(values: np.ndarray, size: int) -> np.ndarray:
            values = values.astype(self.act)
            if str(v.config["TIME_MAJOR"]) == "true":
                return values.reshape(T, B, size)
            return np.ascontiguousarray(values.reshape(B, T, size).transpose(1, 0, 2))

        self.x = time_major(a["input_tensor"], I)
        self.consts = [("w_ih", w_ih), ("w_hh", w_hh),
                       ("bias", folded.astype(np.int64 if self.act is np.int16 else np.int32)),
                       ("h0", np.full((B, H), zp_h, self.act)), ("c0", np.zeros((B, H), np.int16))]
        self.params = ("QuantLstmParams", {
            "x_multiplier": [v.get(f"{g}_GATE_INPUT_MULTIPLIER") for g in gates],
            "x_shift": [v.get(f"{g}_GATE_INPUT_SHIFT") for g in gates],
            "h_multiplier": [v.get(f"{g}_GATE_HIDDEN_MULTIPLIER") for g in gates],
            "h_shift": [v.get(f"{g}_GATE_HIDDEN_SHIFT") for g in gates],
            "forget_multiplier": v.get("FORGET_TO_CELL_MULTIPLIER"), "forget_shift": v.get("FORGET_TO_CELL_SHIFT"),
            "cell_multiplier": v.get("INPUT_TO_CELL_MULTIPLIER"), "cell_shift": v.get("INPUT_TO_CELL_SHIFT"),
            "output_multiplier": v.get("OUTPUT_MULTIPLIER"), "output_shift": v.get("OUTPUT_SHIFT"),
            "output_offset": zp_h, "input_offset": x_off, "cell_scale_power": v.get("CELL_SCALE_POWER"),
            "cell_clip": v.get("CELL_CLIP")})
        self.y_dims = [T, B, H]
        self.extra = [("c", "I16", [B, H])]
        self.expected = time_major(a["output"], H)


def cases() -> list[Case]:
    assert ROOT is not None
    return [Case(test, load(ROOT, name)) for test, name in _ids()]


def program(run: list[Case]) -> tuple[dict, bytes]:
    """One hand-built program (test_runtime_features.py's Builder) of every case's op, each on its own
    input, the arena tensors one after the other."""
    b = Builder(arena_bytes=0)

    def arena(name: str, dtype: str, dims: list[int], scale: float = 0.0, zp: int = 0) -> int:
        t = b.arena(name, dtype, dims, b.arena_bytes, scale, zp)
        b.arena_bytes = serialize._pad(b.arena_bytes + b.tensors[t]["nbytes"])
        return t

    def const(name: str, value: np.ndarray, int4: bool) -> int:
        if not int4:
            return b.const(name, WIRE_DTYPE[value.dtype], value)
        t = b.const(name, "I8", np.frombuffer(pack_int4(value), np.int8))  # the packed bytes, then their type
        b.tensors[t].update(dtype="I4", dims=list(value.shape))
        return t

    inputs, outputs = [], []
    for k, c in enumerate(run):
        dtype = WIRE_DTYPE[np.dtype(c.act)]
        x = arena(f"c{k}_x", dtype, list(c.x.shape), 1.0, 0)
        softmax = c.code == "SOFTMAX_S8"
        y = arena(f"c{k}_y", dtype, c.y_dims, 1.0 / 256 if softmax else 1.0, -128 if softmax else 0)
        ids = [x] + [const(f"c{k}_{n}", value, c.int4 and n == "w") for n, value in c.consts]
        extra = [arena(f"c{k}_{n}", dtype, dims) for n, dtype, dims in c.extra]
        w = dict(c.consts).get("w")
        nbytes = portable_scratch(c.code, c.x.shape, None if w is None else w.shape, c.y_dims, c.params[1])
        if nbytes:  # the fast paths' buffers, planned as the compiler plans them (one more input)
            ids.append(arena(f"c{k}_scratch", "I8", [nbytes]))
        if dtype == "I16":  # a program's I/O is int8 or float: int16 values at scale 1 in and out, exactly
            xf, yf = arena(f"c{k}_xf", "F32", list(c.x.shape)), arena(f"c{k}_yf", "F32", c.y_dims)
            b.op("QUANTIZE_S16", [xf], [x])
        b.op(c.code, ids, [y, *extra], c.params)
        if dtype == "I16":
            b.op("DEQUANTIZE_S16", [y], [yf])
            x, y = xf, yf
        inputs.append(x)
        outputs.append(y)
    tree = b.tree(inputs, outputs)
    return tree, serialize.to_pte(tree, bytes(b.segment))


def _feed(c: Case) -> np.ndarray:
    """c's input as the program takes it (int16 as float32: see program)."""
    return c.x.astype(np.float32) if c.act is np.int16 else c.x


def _mismatches(run: list[Case], got: list[np.ndarray]) -> list[str]:
    out = []
    for c, y in zip(run, got):
        y = np.asarray(y).reshape(c.expected.shape)
        if not np.array_equal(y, c.expected):
            bad = y != c.expected
            diff = np.abs(y.astype(np.int32) - c.expected)[bad]
            out.append(f"{c.name}: {int(bad.sum())} of {bad.size} outputs differ (max |diff| {int(diff.max())})")
    return out


def _host(libs, c: Case) -> np.ndarray:
    """The portable kernel of c's op, built for the host (UBSan on), on c's integers."""
    lib, recurrent = libs
    consts = dict(c.consts)
    out = np.zeros(c.y_dims, np.int8)
    if c.code == "LSTM_S8":
        p = c.params[1]
        T, B, H = c.y_dims
        q = i32([*p["x_multiplier"], *p["x_shift"], *p["h_multiplier"], *p["h_shift"], p["forget_multiplier"],
                 p["forget_shift"], p["cell_multiplier"], p["cell_shift"], p["output_multiplier"], p["output_shift"],
                 p["output_offset"], p["cell_scale_power"], p["cell_clip"]])
        cell = np.zeros((B, H), np.int16)
        ptr = [a.ctypes.data_as(ctypes.c_void_p) for a in (c.x, *consts.values(), out, cell)]
        shape = i32([T, B, c.x.shape[2], H, 0])
        recurrent.k_lstm_s8(*ptr, shape.ctypes.data_as(ctypes.c_void_p), q.ctypes.data_as(ctypes.c_void_p), None)
        return out
    if c.code == "SOFTMAX_S8":
        p = c.params[1]
        lib.k_softmax(c.x, *c.x.shape, p["input_multiplier"], p["input_left_shift"], p["diff_min"], out)
        return out
    w, bias, m, s = consts["w"], consts["bias"], consts["mult"], consts["shift"]
    p = c.params[1]
    if c.code == "LINEAR_S8":
        lib.k_linear(c.x, w, bias, m, s, m.size, out, *c.x.shape, w.shape[0], p["output_offset"], p["act_min"],
                     p["act_max"])
        return out
    q = i32([p[f] for f in CONV_FIELDS])
    if c.code == "DEPTHWISE_CONV2D_S8":
        lib.k_dwconv(c.x, i32(c.x.shape), w, w.shape[1], w.shape[2], p["multiplier"], bias, m, s, out,
                     i32(out.shape), q)
    else:  # conv2d_s8 is grouped_conv2d_s8's one-group case
        lib.k_grouped_conv(c.x, i32(c.x.shape), w, w.shape[1], w.shape[2], w.shape[3], bias, m, s, out,
                           i32(out.shape), q)
    return out


@pytest.fixture(scope="module")
def libs(tmp_path_factory):
    """The int8 kernels (tests/_kernel_lib_s8.py) and the recurrent ones (test_recurrent.py's shim)."""
    return kernel_lib.build(tmp_path_factory.mktemp("cmsis_vectors")), build_recurrent(tmp_path_factory.mktemp("rnn"))


@needs_cmsis_nn
@pytest.mark.parametrize("test,name", _ids(), ids=[f"{t.removeprefix('test_arm_')}/{n}" for t, n in _ids()])
def test_vectors_reference_and_host_kernels(test: str, name: str, libs) -> None:
    """Per set: the NumPy reference (the interpreter of a one-op program) and
    the host-built portable kernel give CMSIS-NN's expected output."""
    c = Case(test, load(ROOT, name))
    if c.skip:
        pytest.skip(c.skip)
    tree, pte = program([c])
    (ref,) = run_reference(pte, [[_feed(c)]])
    assert not _mismatches([c], [ref[0]]), "NumPy reference"
    if c.code in HOST_KERNELS:
        assert not _mismatches([c], [_host(libs, c)]), "host kernels"


def _run_all(out: Path, sim: str, run: list[Case], **kw):
    res = runner.run(out, [_feed(c)[None] for c in run], sim=sim, **kw)
    assert res.exit_code == 0, res.raw[-2000:]
    bad = _mismatches(run, [y[0] for y in res.outputs])
    assert not bad, "\n".join(bad)
    return res


@needs_cmsis_nn
def test_vectors_on_the_host_runner(tmp_path: Path) -> None:
    """Every set in scope (the int4 and int16 ones too) in one program on the
    host runner: the executor's load-time checks and every portable kernel,
    built for the host with the sanitizers."""
    run = [c for c in cases() if not c.skip]
    tree, pte = program(run)
    _run_all(build_dir(tmp_path, tree, pte, "mps3-an547"), "host", run)


@needs_cmsis_nn
@needs_qemu
@needs_arm_gcc
@pytest.mark.parametrize("board", ["mps2-an386", "mps3-an547"])
def test_vectors_fast_paths_in_qemu(board: str, tmp_path: Path) -> None:
    """Every set in scope in one program on the board, with the fast paths
    (DSP on the M4, MVE on the M55) and again with the generic kernels
    (-DTMCU_S8_GENERIC): CMSIS-NN's expected outputs each time."""
    all_cases = cases()
    run = [c for c in all_cases if not c.skip]
    tree, pte = program(run)
    out = build_dir(tmp_path, tree, pte, board)
    counts = []
    for opt in ("-Os", "-Os -DTMCU_S8_GENERIC"):
        build_firmware(out, opt=opt)
        counts.append(_run_all(out, "qemu", run, profile=True).kernel_instructions())
        print(f"{board} {opt}: all {len(run)} CMSIS-NN vector sets in scope equal, "
              f"{len(all_cases) - len(run)} skipped (out of scope)")
    # The fast paths took sets of every op (fewer instructions than the generic kernel's).
    fast = [c for c, f, g in zip(run, *counts) if f < g]
    print(f"{board}: the fast paths ran {len(fast)} sets: {', '.join(c.name for c in fast)}")
    assert {c.code for c in fast} >= {"CONV2D_S8", "DEPTHWISE_CONV2D_S8", "LINEAR_S8"}, [c.name for c in fast]
