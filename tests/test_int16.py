"""a16w8 (`quant="a16w8"`): int16 activations (symmetric, zero point 0), int8
weights per output channel, int64 biases, for conv, depthwise conv, linear,
add, mul, max/avg pool, global mean and softmax (CONV2D_S16 ... SOFTMAX_S16);
other ops run in float between DEQUANTIZE_S16 and QUANTIZE_S16. Mixed
precision per layer (int4 / int8 / int16), chosen by hand or for a flash
budget, with REQUANTIZE where precisions meet.

- requantize_s64 (CMSIS-NN's arm_nn_requantize_s64) against values worked
  out by hand and against TFLite's 64-bit MultiplyByQuantizedMultiplier
  written out with Python integers.
- The quantizer's int16 grid and the lowering to _S16 ops with I16
  activations and I64 biases.
- The portable s16 kernels on the host runner (ASan/UBSan) bit-exact with the
  NumPy reference (interpret.py) on convolutions (strided, dilated,
  depthwise x1 and x2), residual add, mul, pools, mean, linear layers and
  softmax; also with biases, multipliers and shifts overwritten by extreme
  values (values are data: the kernels must stay defined and still agree).
- Corrupted s16 operands and arguments refused at load.
- TensorFlow Lite Micro (the tflite-micro wheel) as the oracle: every s16 op
  alone, softmax on random rows over the whole int16 range (TFLM builds its
  own tables), REQUANTIZE, and whole a16w8 programs through the .tflite export.
- In QEMU: MLPerf Tiny models at a16w8 bit-exact (M55, portable).
- SQNR: a16w8 above int8 against float, and far above it against the same
  network with float activations (what the activations' precision costs).
- The CMSIS-NN s16 kernels bit-exact on M4, M33 and M55 when
  TORCHMCU_CMSIS_NN_DIR is set.
- Mixed precision: per-layer overrides (API, CLI, file), REQUANTIZE at the
  boundaries (host bit-exact, TFLM bit-exact), the automatic choice for a
  flash budget (bytes counted = bytes in the program, an impossible budget
  refused).
"""

from __future__ import annotations

import copy
import importlib.util
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import REPO, needs_arm_gcc, needs_qemu
from torch import nn
from torchmcu import reference
from torchmcu.backends.cmsis_nn.build import CMSIS_NN_ENV
from torchmcu.builder.firmware import build_firmware, kernel_set
from torchmcu.compiler import compile
from torchmcu.frontend.quantize import quantize
from torchmcu.program import schema, serialize
from torchmcu.program.interpret import run_reference
from torchmcu.sim import runner

sys.path.insert(0, str(REPO / "examples"))
import mlperf_tiny as mt

needs_cmsis_nn = pytest.mark.skipif(
    not os.environ.get(CMSIS_NN_ENV),
    reason=f"{CMSIS_NN_ENV} is not set: point it at the root of a CMSIS-NN checkout to build the "
           "CMSIS-NN s16 kernels; torchmcu does not ship CMSIS-NN")

INVALID_TENSOR, INVALID_OP = 0x23, 0x24  # firmware/core/error.h
S16_CODES = {"CONV2D_S16", "DEPTHWISE_CONV2D_S16", "LINEAR_S16", "ADD_S16", "MUL_S16", "MAX_POOL2D_S16",
             "AVG_POOL2D_S16", "QUANTIZE_S16", "DEQUANTIZE_S16"}


# ---------------------------------------------------------------------------------------------
# requantize_s64


def _tflm_multiply_by_quantized_multiplier_64(x: int, m: int, shift: int) -> int:
    """TFLite's MultiplyByQuantizedMultiplier(int64_t, int32_t, int) with Python integers."""
    reduced = (m + (1 << 15)) >> 16 if m < 0x7FFF0000 else 0x7FFF
    total = 15 - shift
    return (x * reduced + (1 << (total - 1))) >> total


@pytest.mark.parametrize("acc, mult, shift, expected", [
    (3, 1 << 30, 0, 2),       # 3 * 0.5 = 1.5: ties round up
    (-3, 1 << 30, 0, -1),     # -1.5 -> -1 (up, not away from zero)
    (5, 1 << 30, 1, 5),       # 5 * 0.5 * 2
    (1000, 0x7FFFFFFF, -3, 125),  # multiplier ~1 (reduced to 0x7FFF): 1000 / 8
    (7, 0, 0, 0),
])
def test_requantize_s64_hand_values(acc, mult, shift, expected) -> None:
    assert int(reference.requantize_s64(acc, mult, shift)) == expected


def test_requantize_s64_matches_tflite_formula() -> None:
    rs = np.random.RandomState(0)
    acc = rs.randint(-(1 << 40), 1 << 40, size=4000, dtype=np.int64)
    mult = rs.randint(1 << 30, (1 << 31) - 1, size=4000, dtype=np.int64)
    shift = rs.randint(-20, 3, size=4000)
    got = reference.requantize_s64(acc, mult, shift)
    want = [_tflm_multiply_by_quantized_multiplier_64(int(a), int(m), int(s)) for a, m, s in zip(acc, mult, shift)]
    # Where the result fits int32 (CMSIS-NN truncates to 32 bits before the last shift).
    fits = np.abs(np.array(want, dtype=object)) < (1 << 30)
    assert fits.mean() > 0.5
    assert [int(g) for g, f in zip(got, fits) if f] == [w for w, f in zip(want, fits) if f]


# ---------------------------------------------------------------------------------------------
# Small models


class Blocks(nn.Module):
    """conv 3x3, depthwise x1 and x2 (strided), a dilated conv, a residual add,
    a product of two activations, max and average pools, a global mean, and
    two linear layers."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 6, 3, padding=1)
        self.dw = nn.Conv2d(6, 6, 3, padding=1, groups=6)
        self.dw2 = nn.Conv2d(6, 12, 3, stride=2, padding=1, groups=6)
        self.c2 = nn.Conv2d(12, 12, 3, padding=2, dilation=2)
        self.c3 = nn.Conv2d(12, 12, 1)
        self.fc1 = nn.Linear(12, 10)
        self.fc2 = nn.Linear(10, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.c1(x))
        x = nn.functional.relu6(self.dw(x))
        x = torch.relu(self.dw2(x))
        y = self.c2(x) + x                       # ADD_S16
        y = y * self.c3(y)                       # MUL_S16
        y = nn.functional.max_pool2d(y, 2)
        y = nn.functional.avg_pool2d(y, 3, stride=1)
        y = y.mean((2, 3))
        return self.fc2(torch.relu(self.fc1(y)))


class Mlp(nn.Module):
    """Linear layers of odd and even widths, batch 3, and a softmax."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(13, 11)
        self.b = nn.Linear(11, 6)
        self.c = nn.Linear(6, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.c(torch.relu(self.b(torch.relu(self.a(x))))), -1)


SMALL = {"blocks": (Blocks, (1, 3, 12, 12)), "mlp": (Mlp, (3, 13))}


def _small(name: str):
    torch.manual_seed(1)
    cls, shape = SMALL[name]
    model = cls().eval()
    cal = [(torch.randn(shape),) for _ in range(8)]
    return model, (torch.randn(shape),), cal


@pytest.fixture(scope="module")
def small_programs(tmp_path_factory):
    out = {}
    for name in SMALL:
        model, example, cal = _small(name)
        d = tmp_path_factory.mktemp(f"a16w8-{name}")
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # every op has an int16 kernel: no float fallback
            c = compile(model, example, "mps3-an547", d, quant="a16w8", calibration=cal, progress=False, tile=False,
                        reparam=False,  # the blocks' parallel convolutions stay two, and their ADD_S16
                        avg_pool_rounding="tflite")  # TFLite's rounding: the programs are exported
        out[name] = (d, c, example)
    return out


def test_quantizer_int16_grid_is_symmetric_with_int8_per_channel_weights() -> None:
    model, example, cal = _small("blocks")
    gm = quantize(model, example, cal, progress=False, activations="int16")
    qd = torch.ops.quantized_decomposed
    nodes = list(gm.graph.nodes)
    acts = [n for n in nodes if n.target == qd.quantize_per_tensor.default]
    assert len(acts) >= 12 and all(tuple(n.args[2:]) == (0, -32767, 32767, torch.int16) for n in acts)
    # Weights int8 per output channel (five convolutions, two linear layers), as at int8.
    per_channel = [n for n in nodes if n.target == qd.dequantize_per_channel.default]
    assert len(per_channel) == 7 and all(tuple(n.args[4:]) == (-127, 127, torch.int8) for n in per_channel)
    assert not [n for n in nodes if n.target == qd.dequantize_per_tensor.default and n.args[5] == torch.int8]


def test_a16w8_lowers_to_s16_ops_with_int16_tensors_and_int64_bias(small_programs) -> None:
    _, c, _ = small_programs["blocks"]
    codes = [op.code for op in c.graph.ops]
    assert S16_CODES <= set(codes), set(codes)
    assert not [k for k in codes if k.endswith(("_S8", "_F32"))], codes
    for op in c.graph.ops:
        if op.code in ("CONV2D_S16", "DEPTHWISE_CONV2D_S16", "LINEAR_S16"):
            x, w, b = (c.graph.tensors[i] for i in op.inputs[:3])
            assert (x.dtype, w.dtype, b.dtype) == ("I16", "I8", "I64")
            assert c.graph.tensors[op.outputs[0]].zero_point == 0
    assert c.report["quant"] == "a16w8"
    tree = schema.decode(c.pte)  # flatc reads what the runtime reads: dtypes by name
    assert {"I16", "I64"} <= {t["dtype"] for t in tree["tensors"]}


@pytest.mark.parametrize("name", list(SMALL))
def test_portable_s16_kernels_bit_exact_on_host(name: str, small_programs, host_runner: Path) -> None:
    d, _, example = small_programs[name]
    xs = np.stack([np.random.RandomState(k).randn(*example[0].shape).astype(np.float32) * (1 + k)
                   for k in range(3)])  # the third sample saturates some activations
    res = runner.run(d, [xs], sim="host")
    assert res.exit_code == 0, res.raw[-2000:]
    expected, tol = runner.expected(d, runner.split_samples(runner.load_meta(d), [xs]))
    assert tol is None
    mismatch, _ = runner.compare(res.outputs, expected, None)
    assert mismatch is None, str(mismatch)


def _segment_edit(tree: dict, pte: bytes, tensor: int, values: np.ndarray) -> bytes:
    """The program with one constant tensor's bytes replaced (same size)."""
    segment = bytearray(pte[tree["constant_offset"]:])
    t = tree["tensors"][tensor]
    data = np.ascontiguousarray(values).tobytes()
    assert len(data) == t["nbytes"]
    segment[t["offset"]:t["offset"] + len(data)] = data
    return serialize.to_pte(tree, bytes(segment))


def test_s16_kernels_are_defined_for_any_bias_multiplier_and_shift(small_programs, host_runner: Path,
                                                                   tmp_path: Path) -> None:
    """Biases near the int64 limits, multipliers of any sign, shifts far out of
    range: values are data. The host runner (UBSan: signed overflow and bad
    shifts abort) must agree with the reference bit for bit."""
    _, c, example = small_programs["blocks"]
    tree = schema.decode(c.pte)
    pte = c.pte
    rs = np.random.RandomState(3)
    for op in tree["ops"]:
        if op["code"] not in ("CONV2D_S16", "DEPTHWISE_CONV2D_S16", "LINEAR_S16"):
            continue
        b, m, s = op["inputs"][2:5]
        n = tree["tensors"][m]["nbytes"] // 4
        bias = rs.choice(np.array([2 ** 63 - 1, -2 ** 63, 2 ** 47, -1, 0], dtype=np.int64),
                         tree["tensors"][b]["nbytes"] // 8)
        mult = rs.choice(np.array([-2 ** 31, -1, 0, 0x7FFF0000, 2 ** 31 - 1, 1 << 30], dtype=np.int64), n)
        shift = rs.choice(np.array([-2 ** 31, -100, -31, 14, 15, 40, 2 ** 31 - 1], dtype=np.int64), n)
        for tid, values in ((b, bias), (m, mult.astype(np.int32)), (s, shift.astype(np.int32))):
            pte = _segment_edit(tree, pte, tid, values)
            tree = schema.decode(pte)
    d, _, _ = small_programs["blocks"]
    for f in ("model.json", "example_inputs.npz"):
        (tmp_path / f).write_bytes((d / f).read_bytes())
    (tmp_path / "model.pte").write_bytes(pte)
    xs = np.stack([example[0].numpy(), 4 * example[0].numpy()])
    res = runner.run(tmp_path, [xs], sim="host")
    assert "runtime error" not in res.raw and "AddressSanitizer" not in res.raw, res.raw[-2000:]
    assert res.exit_code == 0, res.raw[-1000:]
    expected, _ = runner.expected(tmp_path, runner.split_samples(runner.load_meta(tmp_path), [xs]))
    mismatch, _ = runner.compare(res.outputs, expected, None)
    assert mismatch is None, str(mismatch)


def _variant(tree: dict, segment: bytes, edit) -> bytes:
    t = copy.deepcopy(tree)
    edit(t)
    return serialize.to_pte(t, segment)


def test_corrupted_s16_operands_are_refused(small_programs, host_runner: Path, tmp_path: Path) -> None:
    _, c, example = small_programs["blocks"]
    tree = schema.decode(c.pte)
    segment = c.pte[tree["constant_offset"]:]

    def first(t, code):
        return next(op for op in t["ops"] if op["code"] == code)

    def tensor_of(code, k):
        return lambda t: t["tensors"][first(t, code)["inputs"][k]]

    def bias_i32(t):  # the int8 kernels' bias type: half the bytes per channel
        b = tensor_of("CONV2D_S16", 2)(t)
        b.update(dtype="I32", dims=[b["dims"][0] * 2])

    def params(code, **kw):
        return lambda t: first(t, code)["params"][1].update(kw)

    def short_x(t):
        x = tensor_of("CONV2D_S16", 0)(t)
        x.update(nbytes=x["nbytes"] - 2)

    def s8_code(t):
        first(t, "CONV2D_S16")["code"] = "CONV2D_S8"

    def quant_zp(t):
        q = first(t, "QUANTIZE_S16")
        t["tensors"][q["outputs"][0]]["zero_point"] = 3

    io = tmp_path / "io.bin"
    io.write_bytes(runner.io_blob([[example[0].numpy()]]))
    cases = [
        ("int32 bias", bias_i32, INVALID_OP),
        ("input offset", params("CONV2D_S16", input_offset=5), INVALID_OP),
        ("int8 activation range", params("CONV2D_S16", act_min=-40000), INVALID_OP),
        ("short input", short_x, INVALID_TENSOR),
        ("s8 kernel on int16 data", s8_code, INVALID_OP),
        ("add left shift 16", params("ADD_S16", left_shift=16), INVALID_OP),
        ("mul offset", params("MUL_S16", input2_offset=1), INVALID_OP),
        ("quantize zero point", quant_zp, INVALID_OP),
    ]
    for name, edit, status in cases:
        path = tmp_path / "v.pte"
        path.write_bytes(_variant(tree, segment, edit))
        proc = subprocess.run([str(host_runner), str(path), str(io)], capture_output=True, text=True, check=False,
                              errors="replace", timeout=60)
        assert "runtime error" not in proc.stderr and "AddressSanitizer" not in proc.stderr, proc.stderr[-2000:]
        assert proc.returncode == status, f"{name}: exit {proc.returncode:#x}\n{proc.stdout[-500:]}"


def test_corrupted_softmax_s16_is_refused(small_programs, host_runner: Path, tmp_path: Path) -> None:
    _, c, example = small_programs["mlp"]
    tree = schema.decode(c.pte)
    segment = c.pte[tree["constant_offset"]:]
    sm = next(op for op in tree["ops"] if op["code"] == "SOFTMAX_S16")

    def short_table(t):
        lut = t["tensors"][sm["inputs"][1]]
        lut.update(dims=[512], nbytes=1024)

    io = tmp_path / "io.bin"
    io.write_bytes(runner.io_blob([[example[0].numpy()]]))
    for name, edit in [("512-entry table", short_table),
                       ("shift 40", lambda t: next(o for o in t["ops"] if o["code"] == "SOFTMAX_S16")["params"][1]
                        .update(input_left_shift=40)),
                       ("int8 table", lambda t: t["tensors"][sm["inputs"][2]].update(dtype="I8", dims=[1026]))]:
        path = tmp_path / "v.pte"
        path.write_bytes(_variant(tree, segment, edit))
        proc = subprocess.run([str(host_runner), str(path), str(io)], capture_output=True, text=True, check=False,
                              errors="replace", timeout=60)
        assert "runtime error" not in proc.stderr and "AddressSanitizer" not in proc.stderr, proc.stderr[-2000:]
        assert proc.returncode == INVALID_OP, f"{name}: exit {proc.returncode:#x}\n{proc.stdout[-500:]}"


# ---------------------------------------------------------------------------------------------
# MLPerf Tiny models: QEMU, SQNR

QEMU_MODELS = ["ds_cnn", "resnet8", "autoencoder"]


def _sqnr(ref: np.ndarray, got: np.ndarray) -> float:
    ref = ref.astype(np.float64)
    noise = ((ref - got.astype(np.float64)) ** 2).sum()
    return float(10 * np.log10((ref ** 2).sum() / max(noise, 1e-30)))


def _float_activations(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """The q/dq model with every activation quantize -> dequantize pair
    removed: float activations, the weights still on their int8 grid."""
    gm = copy.deepcopy(gm)
    qd = torch.ops.quantized_decomposed
    for n in list(gm.graph.nodes):
        if n.target == qd.dequantize_per_tensor.default and getattr(n.args[0], "target", None) == \
                qd.quantize_per_tensor.default:
            n.replace_all_uses_with(n.args[0].args[0])
            gm.graph.erase_node(n)
    for n in list(gm.graph.nodes):
        if n.target == qd.quantize_per_tensor.default and not n.users:
            gm.graph.erase_node(n)
    gm.recompile()
    return gm


@pytest.fixture(scope="module")
def mlperf_programs(tmp_path_factory):
    """Each model at int8 and at a16w8, calibrated on the same 16 samples;
    with the q/dq model each program came from."""
    out = {}
    for name in QEMU_MODELS:
        model, example = mt.MODELS[name]()
        cal = list(mt.CALIBRATION[name](16, 0))
        for quant in ("int8", "a16w8"):
            d = tmp_path_factory.mktemp(f"{name}-{quant}")
            gm = quantize(model, example, cal, progress=False, activations="int16" if quant == "a16w8" else "int8")
            with warnings.catch_warnings():
                warnings.filterwarnings("error", message="torchmcu:")  # every op has an integer kernel
                c = compile(copy.deepcopy(gm), example, "mps3-an547", d, quant=quant, progress=False, tile=False,
                            avg_pool_rounding="tflite")  # exported to .tflite
            out[name, quant] = (d, c, model, gm)
    return out


@needs_qemu
@needs_arm_gcc
@pytest.mark.parametrize("name", QEMU_MODELS)
def test_mlperf_tiny_a16w8_bit_exact_in_qemu(name: str, mlperf_programs) -> None:
    d, c, _, _ = mlperf_programs[name, "a16w8"]
    assert any(op.code.endswith("_S16") for op in c.graph.ops)
    build_firmware(d)
    x = mt.CALIBRATION[name](1, 3)
    res = runner.run(d, [x], sim="qemu")
    assert res.exit_code == 0, res.raw[-1000:]
    expected, tol = runner.expected(d, runner.split_samples(runner.load_meta(d), [x]))
    assert tol is None
    mismatch, _ = runner.compare(res.outputs, expected, tol)
    assert mismatch is None, str(mismatch)


@pytest.mark.parametrize("name", QEMU_MODELS)
def test_mlperf_tiny_a16w8_tflite_export_bit_exact_in_tflite_micro(name: str, mlperf_programs) -> None:
    """The whole a16w8 program as a .tflite model (int16x8 operators) in
    TFLM's interpreter: the same output bits as the reference (and so as
    the firmware, above)."""
    pytest.importorskip("tflite_micro", reason="the tflite-micro wheel (TFLM's Python interpreter) is not installed")
    from torchmcu.export.tflite import export_tflite, run_tflite_micro, summary

    _, c, _, _ = mlperf_programs[name, "a16w8"]
    tflite = export_tflite(c.pte)
    assert "DEQUANTIZE" in summary(tflite)["op_counts"]
    x = mt.CALIBRATION[name](1, 5)[0]
    got = run_tflite_micro(tflite, [x])[0]
    want = run_reference(c.pte, [[x]])[0][0]
    assert np.array_equal(got.reshape(want.shape), want)


# What int16 activations must gain over int8 against the float-activation
# network (measured: ds_cnn +36 dB, resnet8 +36 dB, autoencoder +5 dB). The
# bundled autoencoder is untrained: folded random batch-norm statistics make
# its 8-wide bottleneck amplify any perturbation (removing the quantization of
# that one activation alone moves the output by 26 dB at int8 and at int16),
# so no activation precision gets it far above its float32 chaos.
MIN_ACTIVATION_GAIN_DB = {"ds_cnn": 20.0, "resnet8": 20.0, "autoencoder": 3.0}


@pytest.mark.parametrize("name", QEMU_MODELS)
def test_a16w8_sqnr_clearly_above_int8(name: str, mlperf_programs) -> None:
    """SQNR of each program's output over 8 held-out samples (the reference
    interpreter: bit-exact with the firmware, above), against (a) the float
    model and (b) the same network with float activations and the
    program's int8 weights. Both schemes share the weights' int8 grid, so
    (b), measured on calibration samples (no clipping), is what the
    activations' precision costs: int16 must take away most of int8's noise;
    end to end (a), held out, where int8 weights bound both, a16w8 must still
    come out ahead."""
    held_out = mt.CALIBRATION[name](8, 7)
    seen = mt.CALIBRATION[name](16, 0)[:8]  # within the calibrated ranges: no clipping
    sqnr = {}
    for quant in ("int8", "a16w8"):
        _, c, model, gm = mlperf_programs[name, quant]
        ref_w = _float_activations(gm)
        with torch.no_grad():
            ref = np.concatenate([model(torch.from_numpy(x)).numpy() for x in held_out])
            ref_weights = np.concatenate([ref_w(torch.from_numpy(x)).numpy() for x in seen])
        got = np.concatenate([run_reference(c.pte, [[x]])[0][0] for x in held_out])
        got_seen = np.concatenate([run_reference(c.pte, [[x]])[0][0] for x in seen])
        sqnr[quant] = (_sqnr(ref, got), _sqnr(ref_weights, got_seen))
    (e2e8, act8), (e2e16, act16) = sqnr["int8"], sqnr["a16w8"]
    assert act16 >= act8 + MIN_ACTIVATION_GAIN_DB[name], sqnr
    assert e2e16 > e2e8, sqnr


# ---------------------------------------------------------------------------------------------
# CMSIS-NN


@needs_cmsis_nn
@needs_qemu
@needs_arm_gcc
@pytest.mark.parametrize("board", ["mps2-an386", "mps2-an505", "mps3-an547"])
def test_cmsis_nn_s16_bit_exact_in_qemu(board: str, tmp_path: Path) -> None:
    model, example, cal = _small("blocks")
    compile(model, example, board, tmp_path, quant="a16w8", calibration=cal, progress=False, tile=False,
            reparam=False)  # the blocks' parallel convolutions stay two, and their ADD_S16
    build_firmware(tmp_path, kernels="cmsis-nn")
    used = kernel_set(tmp_path)
    cmsis = {k for k, v in used.items() if v == "cmsis-nn"}
    assert {"CONV2D_S16", "DEPTHWISE_CONV2D_S16", "LINEAR_S16", "ADD_S16", "MUL_S16", "MAX_POOL2D_S16",
            "AVG_POOL2D_S16"} <= cmsis, used
    xs = np.stack([np.random.RandomState(k).randn(*example[0].shape[1:]).astype(np.float32)[None] * (1 + k)
                   for k in range(2)])
    res = runner.run(tmp_path, [xs], sim="qemu")
    assert res.exit_code == 0, res.raw[-1500:]
    expected, tol = runner.expected(tmp_path, runner.split_samples(runner.load_meta(tmp_path), [xs]))
    assert tol is None
    mismatch, _ = runner.compare(res.outputs, expected, None)
    assert mismatch is None, f"{board}: {mismatch}"


# ---------------------------------------------------------------------------------------------
# TensorFlow Lite Micro as an oracle (int16x8 reference kernels)

TFLM_S16 = ["CONV2D_S16", "DEPTHWISE_CONV2D_S16", "LINEAR_S16", "ADD_S16", "MUL_S16", "MAX_POOL2D_S16",
            "AVG_POOL2D_S16", "QUANTIZE_S16", "DEQUANTIZE_S16", "SOFTMAX_S16"]


@pytest.mark.parametrize("name", list(SMALL))
def test_every_s16_op_alone_bit_exact_with_tflite_micro(name: str, small_programs) -> None:
    """Each op of the a16w8 program as a one-op .tflite model in TFLM's
    interpreter (its int16x8 reference kernels), fed the values the NumPy
    reference computed for the op's inputs: the same bits out."""
    pytest.importorskip("tflite_micro", reason="the tflite-micro wheel (TFLM's Python interpreter) is not installed")
    from torchmcu.export.tflite import export_op, run_tflite_micro, trace, verify_derived

    _, c, example = small_programs[name]
    assert verify_derived(c.pte) == []
    sample = [np.random.RandomState(5).randn(*example[0].shape).astype(np.float32) * 2]
    steps = trace(c.pte, sample)
    prog = schema.decode(c.pte)
    seen = set()
    for i, op in enumerate(prog["ops"]):
        if op["code"] not in TFLM_S16:
            continue
        tflite, values = export_op(c.pte, i, sample, steps)
        got = run_tflite_micro(tflite, values)[0]
        want = steps[i][1]
        assert got.dtype == want.dtype and np.array_equal(got.reshape(want.shape), want), \
            f"op {i} {op['code']} {op['name']}: max diff {np.abs(got.reshape(want.shape).astype(float) - want).max()}"
        seen.add(op["code"])
    assert seen == (set(TFLM_S16) - {"SOFTMAX_S16"} if name == "blocks" else
                    {"QUANTIZE_S16", "LINEAR_S16", "SOFTMAX_S16", "DEQUANTIZE_S16"}), seen


def test_softmax_s16_bit_exact_with_tflite_micro_on_random_rows(small_programs) -> None:
    """The softmax alone on int16 rows drawn over the whole range (and
    narrow ones, where most differences are small): TFLM builds its own
    exp and 1/(1+x) tables, so this also checks reference.softmax_luts_s16."""
    pytest.importorskip("tflite_micro", reason="the tflite-micro wheel (TFLM's Python interpreter) is not installed")
    from torchmcu.export.tflite import export_op, run_tflite_micro, trace

    _, c, example = small_programs["mlp"]
    sample = [example[0].numpy()]
    steps = trace(c.pte, sample)
    prog = schema.decode(c.pte)
    k = next(i for i, op in enumerate(prog["ops"]) if op["code"] == "SOFTMAX_S16")
    op = prog["ops"][k]
    p = op["params"][1]
    tflite, (x,) = export_op(c.pte, k, sample, steps)
    exp_lut, one_lut = reference.softmax_luts_s16()
    rs = np.random.RandomState(11)
    for trial in range(60):
        spread = [32767, 3000, 300][trial % 3]
        xs = rs.randint(-spread, spread + 1, size=x.shape).astype(np.int16)
        got = run_tflite_micro(tflite, [xs])[0].reshape(x.shape)
        want = reference.softmax_s16(xs, p["input_multiplier"], p["input_left_shift"], exp_lut, one_lut)
        assert np.array_equal(got, want), (trial, xs, got, want)


def test_whole_a16w8_program_exports_and_runs_in_tflite_micro(small_programs) -> None:
    pytest.importorskip("tflite_micro", reason="the tflite-micro wheel (TFLM's Python interpreter) is not installed")
    from torchmcu.export.tflite import export_tflite, run_tflite_micro

    _, c, example = small_programs["blocks"]
    x = example[0].numpy()
    got = run_tflite_micro(export_tflite(c.pte), [x])[0]
    want = run_reference(c.pte, [[x]])[0][0]
    assert np.array_equal(got.reshape(want.shape), want)


# ---------------------------------------------------------------------------------------------
# Mixed precision: per-layer overrides

MIXED = {"c1": "int16", "dw2": "int16", "c3": "int4", "fc1": "int16"}


def test_mixed_precision_per_layer_bit_exact_on_host(host_runner: Path, tmp_path: Path) -> None:
    """int8 by default, the named layers int16 (a16w8) or int4 (W4A8); where
    precisions meet, one REQUANTIZE op (integer, TFLite's QUANTIZE from an
    integer input)."""
    model, example, cal = _small("blocks")
    c = compile(model, example, "mps3-an547", tmp_path, quant="int8", calibration=cal, progress=False, tile=False,
                precision=MIXED)
    by_name = {}
    for op in c.graph.ops:
        by_name.setdefault(op.name, []).append(op.code)
    assert by_name["conv2d"][-1] == "CONV2D_S16"           # c1
    assert by_name["conv2d_1"] == ["DEPTHWISE_CONV2D_S8"]  # dw: the default
    assert by_name["conv2d_2"] == ["DEPTHWISE_CONV2D_S16"]  # dw2
    assert by_name["conv2d_4"] == ["CONV2D_S4"]            # c3
    assert by_name["linear"] == ["LINEAR_S16"] and by_name["linear_1"] == ["LINEAR_S8"]
    codes = [op.code for op in c.graph.ops]
    # Boundaries: one integer REQUANTIZE (int8 <-> int16) at each change of precision, no float between.
    assert codes.count("REQUANTIZE") == 5 and "DEQUANTIZE_S16" not in codes and "QUANTIZE_S8" not in codes
    assert c.report["quant"] == "mixed"
    xs = np.stack([np.random.RandomState(k).randn(*example[0].shape).astype(np.float32) for k in range(2)])
    res = runner.run(tmp_path, [xs], sim="host")
    assert res.exit_code == 0, res.raw[-2000:]
    expected, tol = runner.expected(tmp_path, runner.split_samples(runner.load_meta(tmp_path), [xs]))
    assert tol is None
    mismatch, _ = runner.compare(res.outputs, expected, None)
    assert mismatch is None, str(mismatch)
    # A REQUANTIZE whose int16 side claims a zero point, or whose sizes disagree, is refused at load.
    tree = schema.decode(c.pte)
    segment = c.pte[tree["constant_offset"]:]
    req = next(op for op in tree["ops"] if op["code"] == "REQUANTIZE" and
               tree["tensors"][op["outputs"][0]]["dtype"] == "I16")
    io = tmp_path / "io.bin"
    io.write_bytes(runner.io_blob([[xs[0]]]))
    for name, edit in [("int16 zero point", lambda t: t["tensors"][req["outputs"][0]].update(zero_point=1)),
                       ("int8 output, int16 bytes", lambda t: t["tensors"][req["outputs"][0]].update(dtype="I8"))]:
        path = tmp_path / "v.pte"
        path.write_bytes(_variant(tree, segment, edit))
        proc = subprocess.run([str(host_runner), str(path), str(io)], capture_output=True, text=True, check=False,
                              errors="replace", timeout=60)
        assert proc.returncode in (INVALID_OP, INVALID_TENSOR), f"{name}: exit {proc.returncode:#x}"
    # Each REQUANTIZE alone is TFLite's QUANTIZE from an integer input: TFLM gives the same bits.
    if importlib.util.find_spec("tflite_micro") is None:
        return
    from torchmcu.export.tflite import export_op, run_tflite_micro, trace

    sample = [xs[0]]
    steps = trace(c.pte, sample)
    prog = schema.decode(c.pte)
    kinds = set()
    for i, op in enumerate(prog["ops"]):
        if op["code"] == "REQUANTIZE":
            tflite, values = export_op(c.pte, i, sample, steps)
            got = run_tflite_micro(tflite, values)[0]
            assert np.array_equal(got.reshape(steps[i][1].shape), steps[i][1]), (i, op["name"])
            kinds.add((prog["tensors"][op["inputs"][0]]["dtype"], prog["tensors"][op["outputs"][0]]["dtype"]))
    assert kinds == {("I8", "I16"), ("I16", "I8")}


def test_precision_names_must_match_a_layer(tmp_path: Path) -> None:
    from torchmcu.errors import TorchMCUError

    model, example, cal = _small("blocks")
    with pytest.raises(TorchMCUError, match="precision names conv9"):
        compile(model, example, "mps3-an547", tmp_path, quant="int8", calibration=cal, progress=False, tile=False,
                precision={"conv9": "int16"})
    with pytest.raises(TorchMCUError, match="int4, int8, int16"):
        compile(model, example, "mps3-an547", tmp_path, quant="int8", calibration=cal, progress=False, tile=False,
                precision={"c1": "int12"})


def test_cli_precision_flag_and_file(tmp_path: Path) -> None:
    from torchmcu.cli import _precision

    f = tmp_path / "precision.txt"
    f.write_text("# layer=precision\nc1=int16\nfc = int4  # the classifier\n")
    assert _precision(["c1=int16,c3=int4", "fc1=int8"]) == {"c1": "int16", "c3": "int4", "fc1": "int8"}
    assert _precision([f"@{f}"]) == {"c1": "int16", "fc": "int4"}
    assert _precision(["auto:40K"]) == 40 * 1024


# ---------------------------------------------------------------------------------------------
# Mixed precision: chosen automatically for a flash budget


def test_automatic_precision_meets_the_budget_and_says_why(tmp_path: Path) -> None:
    from torchmcu.frontend.precision import _layers, layer_bytes

    model, example, cal = _small("blocks")
    layers = _layers(model)
    int8 = sum(layer_bytes(n, c, "int8") for n, c in layers.values())
    budget = int(0.8 * int8)  # below int8 everywhere: some layer must go to int4
    c = compile(model, example, "mps3-an547", tmp_path, quant="int8", calibration=cal, progress=False, tile=False,
                precision=budget)
    p = c.report["precision"]
    assert p["bytes"] <= budget and set(p["chosen"]) == set(layers)
    assert "int4" in p["chosen"].values() and p["steps"]
    # The bytes it counted are the program's: weights and biases of the weighted ops.
    weighted = [op for op in c.graph.ops if op.kind in ("conv2d", "linear")]
    stored = sum(c.graph.tensors[op.inputs[1]].nbytes + c.graph.tensors[op.inputs[2]].nbytes for op in weighted)
    assert stored == p["bytes"]
    codes = {op.code for op in weighted}
    assert any(k.endswith("_S4") for k in codes)
    assert "precision for a budget" in (tmp_path / "report.txt").read_text()
    # And the mixed program still runs bit-exact with the reference.
    xs = np.stack([np.random.RandomState(k).randn(*example[0].shape).astype(np.float32) for k in range(2)])
    res = runner.run(tmp_path, [xs], sim="host")
    assert res.exit_code == 0, res.raw[-2000:]
    expected, _ = runner.expected(tmp_path, runner.split_samples(runner.load_meta(tmp_path), [xs]))
    assert runner.compare(res.outputs, expected, None)[0] is None


def test_automatic_precision_refuses_an_impossible_budget(tmp_path: Path) -> None:
    from torchmcu.errors import CompileError

    model, example, cal = _small("mlp")
    with pytest.raises(CompileError, match="at int4 everywhere exceed the budget of 10 B"):
        compile(model, example, "mps3-an547", tmp_path, quant="int8", calibration=cal, progress=False, tile=False, precision=10)
