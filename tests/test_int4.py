"""W4A8 (`quant="int4"`): int4 weights, symmetric per output channel in
-7..7, packed two per byte (low nibble first, over the whole tensor, as
CMSIS-NN's s4 kernels read them), int8 activations, for conv, depthwise conv
and linear (CONV2D_S4, DEPTHWISE_CONV2D_S4, LINEAR_S4).

- The packing against bytes worked out by hand, odd counts included.
- The quantizer's int4 grid, the lowering to _S4 ops, and the weight flash
  in the report (ceil(n / 2) bytes against n at int8).
- The portable s4 kernels on the host runner (ASan/UBSan) bit-exact with the
  NumPy reference (interpret.py) on shapes where rows start mid-byte (odd
  kh * kw * C, odd in_features, odd depthwise channel counts, multipliers).
- Corrupted int4 operands refused at load with InvalidOp / InvalidTensor.
- In QEMU: the MLPerf Tiny models at int4 bit-exact on M55 (portable), and
  the CMSIS-NN s4 kernels bit-exact on M4, M33 and M55 when
  TORCHMCU_CMSIS_NN_DIR is set.
"""

from __future__ import annotations

import copy
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
from torchmcu.sim import runner

sys.path.insert(0, str(REPO / "examples"))
import mlperf_tiny as mt  # noqa: E402

needs_cmsis_nn = pytest.mark.skipif(
    not os.environ.get(CMSIS_NN_ENV),
    reason=f"{CMSIS_NN_ENV} is not set: point it at the root of a CMSIS-NN checkout to build the "
           "CMSIS-NN s4 kernels; torchmcu does not ship CMSIS-NN")

INVALID_TENSOR, INVALID_OP = 0x23, 0x24  # firmware/core/error.h


# ---------------------------------------------------------------------------------------------
# Packing


@pytest.mark.parametrize("values, packed", [
    ([1, 2], "21"),                  # element 0 low nibble, element 1 high nibble
    ([-8, 7, -1], "780f"),        # -8 = 0x8, 7 = 0x7, -1 = 0xf; odd count: high nibble 0
    ([0, -7, 3, -2, 5], "90e305"),
])
def test_pack_int4_against_hand_packed_bytes(values, packed) -> None:
    assert reference.pack_int4(np.array(values)).hex() == packed
    assert reference.unpack_int4(bytes.fromhex(packed), len(values)).tolist() == values


def test_pack_int4_round_trips_and_refuses_out_of_range() -> None:
    v = np.random.RandomState(0).randint(-8, 8, size=(3, 5, 7))
    assert len(reference.pack_int4(v)) == (v.size + 1) // 2
    assert np.array_equal(reference.unpack_int4(reference.pack_int4(v), v.size).reshape(v.shape), v)
    with pytest.raises(ValueError):
        reference.pack_int4(np.array([8]))


# ---------------------------------------------------------------------------------------------
# Small models whose weight rows start mid-byte


class Convs(nn.Module):
    """conv 3x3 (27 taps a channel: odd), depthwise x1 over 5 channels, depthwise x2
    over 5 (10 outputs), a strided dilated conv, 1x1, then a linear of odd width."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 5, 3, padding=1)
        self.dw = nn.Conv2d(5, 5, 3, padding=1, groups=5)
        self.dw2 = nn.Conv2d(5, 10, 3, stride=2, padding=1, groups=5)
        self.c2 = nn.Conv2d(10, 7, 3, padding=2, dilation=2)
        self.c3 = nn.Conv2d(7, 3, 1)
        self.fc = nn.Linear(3 * 5 * 5, 9)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.c1(x))
        x = nn.functional.relu6(self.dw(x))
        x = torch.relu(self.dw2(x))
        x = self.c3(torch.relu(self.c2(x)))
        return self.fc(x.flatten(1))


class Mlp(nn.Module):
    """Linear layers of odd and even widths, batch 3."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(13, 11)
        self.b = nn.Linear(11, 6)
        self.c = nn.Linear(6, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c(torch.relu(self.b(torch.relu(self.a(x)))))


SMALL = {"convs": (Convs, (1, 3, 9, 9)), "mlp": (Mlp, (3, 13))}


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
        d = tmp_path_factory.mktemp(f"int4-{name}")
        c = compile(model, example, "mps3-an547", d, quant="int4", calibration=cal, progress=False, tile=False)
        out[name] = (d, c, example)
    return out


def test_quantizer_puts_weights_on_the_int4_grid() -> None:
    model, example, cal = _small("convs")
    gm = quantize(model, example, cal, progress=False, weights="int4")
    ranges = [(n.args[4], n.args[5]) for n in gm.graph.nodes if "dequantize_per_channel" in str(n.target)]
    assert ranges and all(r == (-7, 7) for r in ranges)


def test_int4_lowers_weighted_ops_to_s4_and_halves_weight_flash(small_programs, tmp_path: Path) -> None:
    d, c, _ = small_programs["convs"]
    codes = [op.code for op in c.graph.ops]
    assert codes.count("CONV2D_S4") == 3 and codes.count("DEPTHWISE_CONV2D_S4") == 2 and "LINEAR_S4" in codes
    assert not any(code.endswith(("_S8", "_F32")) and "CONV" in code for code in codes)
    tree = schema.decode(c.pte)
    for t in tree["tensors"]:
        if t["dtype"] == "I4":
            assert t["nbytes"] == (int(np.prod(t["dims"])) + 1) // 2, t["name"]
    model, example, cal = _small("convs")
    c8 = compile(model, example, "mps3-an547", tmp_path, quant="int8", calibration=cal, progress=False, tile=False)
    w4, w8 = c.report["flash"]["weights"], c8.report["flash"]["weights"]
    n = sum(int(np.prod(p.shape)) for name, p in model.named_parameters() if name.endswith("weight"))
    assert w8["bytes"] == w8["int8_bytes"] == w4["int8_bytes"] == n
    per_layer = [int(np.prod(p.shape)) for name, p in model.named_parameters() if name.endswith("weight")]
    assert w4["bytes"] == sum((k + 1) // 2 for k in per_layer) and w4["int4_layers"] == 6
    assert "int4 layers" in (d / "report.txt").read_text()


@pytest.mark.parametrize("name", list(SMALL))
def test_portable_s4_kernels_bit_exact_on_host(name: str, small_programs, host_runner: Path) -> None:
    d, _, example = small_programs[name]
    xs = [np.random.RandomState(k).randn(*example[0].shape).astype(np.float32) for k in range(3)]
    res = runner.run(d, [np.stack(xs)], sim="host")
    assert res.exit_code == 0, res.raw[-2000:]
    expected, tol = runner.expected(d, runner.split_samples(runner.load_meta(d), [np.stack(xs)]))
    assert tol is None
    mismatch, _ = runner.compare(res.outputs, expected, None)
    assert mismatch is None, str(mismatch)


def _tflite_tensor_types(tflite: bytes) -> dict[str, int]:
    from tflite.Model import Model

    g = Model.GetRootAsModel(tflite, 0).Subgraphs(0)
    return {g.Tensors(i).Name().decode(): g.Tensors(i).Type() for i in range(g.TensorsLength())}


def _tflite_micro_bit_exact(pte: bytes, sample: list[np.ndarray]) -> None:
    """Every op's output, exported to .tflite and run in TensorFlow Lite
    Micro, equals the NumPy reference's (the first difference names the op)."""
    from torchmcu.export.tflite import export_tflite, run_tflite_micro, trace

    tensor_map: dict[int, int] = {}
    tflite = export_tflite(pte, tensor_map=tensor_map)
    ops = schema.decode(pte)["ops"]
    outs = len(schema.decode(pte)["outputs"])
    got = run_tflite_micro(tflite, sample, tensors=[tensor_map[op["outputs"][0]] for op in ops])[outs:]
    for i, (value, (_, exp)) in enumerate(zip(got, trace(pte, sample))):
        assert np.array_equal(value.reshape(exp.shape), exp), f"op {i} {ops[i]['code']} ({ops[i]['name']})"


@pytest.mark.parametrize("name", list(SMALL))
def test_int4_programs_bit_exact_in_tflite_micro(name: str, small_programs) -> None:
    """The .tflite export writes conv and depthwise weights as TFLite's packed
    INT4 tensors (the program's bytes as they are), and TensorFlow Lite Micro,
    which unpacks them, computes the reference's bits. LINEAR_S4 goes in with
    its int4 values widened to int8: TFLite Micro refuses INT4 filters in a
    per-channel FULLY_CONNECTED (fully_connected_common.cc)."""
    from tflite.TensorType import TensorType
    from torchmcu.export.tflite import export_tflite

    d, c, example = small_programs[name]
    prog = schema.decode(c.pte)
    types = _tflite_tensor_types(export_tflite(c.pte))
    for op in prog["ops"]:
        if op["code"].endswith("_S4"):
            w = prog["tensors"][op["inputs"][1]]["name"]
            want = TensorType.INT8 if op["code"] == "LINEAR_S4" else TensorType.INT4
            assert types[w] == want, (op["code"], w, types[w])
    meta = runner.load_meta(d)
    for k in range(3):
        x = np.random.RandomState(k).randn(*example[0].shape).astype(np.float32)
        _tflite_micro_bit_exact(c.pte, runner.program_samples(meta, runner.split_samples(meta, [x]))[0])


def test_ds_cnn_int4_bit_exact_in_tflite_micro(tmp_path: Path) -> None:
    model, example = mt.MODELS["ds_cnn"]()
    c = compile(model, example, "mps3-an547", tmp_path, quant="int4", calibration=list(mt.CALIBRATION["ds_cnn"](8, 0)),
                progress=False, tile=False, avg_pool_rounding="tflite")
    meta = runner.load_meta(tmp_path)
    x = np.asarray(mt.CALIBRATION["ds_cnn"](1, 3))[0]
    _tflite_micro_bit_exact(c.pte, runner.program_samples(meta, runner.split_samples(meta, [x]))[0])


def _variant(tree: dict, segment: bytes, edit) -> bytes:
    t = copy.deepcopy(tree)
    edit(t)
    return serialize.to_pte(t, segment)


def test_corrupted_int4_operands_are_refused(small_programs, host_runner: Path, tmp_path: Path) -> None:
    _, c, example = small_programs["convs"]
    tree = schema.decode(c.pte)
    segment = c.pte[tree["constant_offset"]:]
    conv = next(op for op in tree["ops"] if op["code"] == "CONV2D_S4")
    w = conv["inputs"][1]

    def nbytes(delta):
        return lambda t: t["tensors"][w].update(nbytes=t["tensors"][w]["nbytes"] + delta)

    def as_i8(t):
        t["tensors"][w].update(dtype="I8")

    def s8_code(t):
        next(op for op in t["ops"] if op["code"] == "CONV2D_S4")["code"] = "CONV2D_S8"

    io = tmp_path / "io.bin"
    io.write_bytes(runner.io_blob([[example[0].numpy()]]))
    for name, edit, status in [("short", nbytes(-1), INVALID_TENSOR), ("long", nbytes(1), INVALID_TENSOR),
                               ("int8 dtype", as_i8, INVALID_OP), ("s8 op on packed weights", s8_code, INVALID_OP)]:
        path = tmp_path / "v.pte"
        path.write_bytes(_variant(tree, segment, edit))
        proc = subprocess.run([str(host_runner), str(path), str(io)], capture_output=True, text=True,
                              errors="replace", timeout=60)
        assert "runtime error" not in proc.stderr and "AddressSanitizer" not in proc.stderr, proc.stderr[-2000:]
        assert proc.returncode == status, f"{name}: exit {proc.returncode:#x}\n{proc.stdout[-500:]}"


# ---------------------------------------------------------------------------------------------
# QEMU


@needs_qemu
@needs_arm_gcc
@pytest.mark.parametrize("name", list(mt.MODELS))
def test_mlperf_tiny_int4_bit_exact_in_qemu(name: str, tmp_path: Path) -> None:
    model, example = mt.MODELS[name]()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every op quantized: no float fallback
        c = compile(model, example, "mps3-an547", tmp_path, quant="int4",
                    calibration=list(mt.CALIBRATION[name](16, 0)), progress=False, tile=False, io="int8")
    assert any(op.code.endswith("_S4") for op in c.graph.ops)
    build_firmware(tmp_path)
    x = mt.CALIBRATION[name](1, 3)
    res = runner.run(tmp_path, [x], sim="qemu")
    assert res.exit_code == 0, res.raw[-1000:]
    expected, tol = runner.expected(tmp_path, runner.split_samples(runner.load_meta(tmp_path), [x]))
    assert tol is None
    mismatch, _ = runner.compare(res.outputs, expected, tol)
    assert mismatch is None, str(mismatch)


@needs_cmsis_nn
@needs_qemu
@needs_arm_gcc
@pytest.mark.parametrize("board", ["mps2-an386", "mps2-an505", "mps3-an547"])
def test_cmsis_nn_s4_bit_exact_in_qemu(board: str, tmp_path: Path) -> None:
    """Both small models in one firmware per board would need two programs:
    the conv model carries every s4 op code (and the odd shapes)."""
    model, example, cal = _small("convs")
    c = compile(model, example, board, tmp_path, quant="int4", calibration=cal, progress=False, tile=False)
    build_firmware(tmp_path, kernels="cmsis-nn")
    used = kernel_set(tmp_path)
    assert {used[k] for k in ("CONV2D_S4", "DEPTHWISE_CONV2D_S4", "LINEAR_S4")} == {"cmsis-nn"}, used
    xs = np.stack([np.random.RandomState(k).randn(*example[0].shape[1:]).astype(np.float32)[None]
                   for k in range(2)])
    res = runner.run(tmp_path, [xs], sim="qemu")
    assert res.exit_code == 0, res.raw[-1500:]
    expected, tol = runner.expected(tmp_path, runner.split_samples(runner.load_meta(tmp_path), [xs]))
    assert tol is None
    mismatch, _ = runner.compare(res.outputs, expected, None)
    assert mismatch is None, f"{board}: {mismatch}"
    assert c.report["flash"]["weights"]["int4_layers"] == 6


# ---------------------------------------------------------------------------------------------
# QAT at int4 on the digits MLP (prepare_qat_pt2e with the W4A8 quantizer)

QAT_EPOCHS = 20  # full-batch steps from the trained float model, at a small learning rate


def _digits_accuracy(pte: bytes, x: np.ndarray, y: np.ndarray) -> float:
    """Accuracy of the program as the firmware computes it (the bit-exact reference)."""
    from torchmcu.program import interpret

    interp = interpret.Interpreter(pte)
    pred = np.array([int(np.argmax(interp.run([x[i:i + 1]])[0])) for i in range(len(x))])
    return float((pred == y).mean())


@needs_qemu
@needs_arm_gcc
def test_digits_qat_int4_against_ptq_int4(tmp_path: Path) -> None:
    """PTQ int4 and QAT int4 both within 3 points of float on the held-out
    digits; the QAT program keeps the int4 grid and runs bit-exact in QEMU (M33)."""
    import digits
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_qat_pt2e
    from torchmcu.frontend.quantize import quantizer

    x_train, y_train = digits.train_set()
    x_test, y_test = digits.test_set()
    example = (torch.from_numpy(x_test[:1]),)
    model = digits.train()
    with torch.no_grad():
        float_acc = float((model(torch.from_numpy(x_test)).argmax(1).numpy() == y_test).mean())
    cal = [x_train[i:i + 1] for i in range(0, len(x_train), 8)]
    ptq = compile(model, example, "mps2-an505", tmp_path / "ptq", quant="int4", calibration=cal, progress=False, tile=False)
    ptq_acc = _digits_accuracy(ptq.pte, x_test, y_test)

    torch.manual_seed(0)
    batch = torch.export.Dim("batch")
    gm = torch.export.export(digits.train().train(), (torch.from_numpy(x_train),), dynamic_shapes=({0: batch},),
                             strict=False).module()
    prepared = prepare_qat_pt2e(gm, quantizer(weights="int4"))
    opt = torch.optim.Adam(prepared.parameters(), lr=1e-3)
    x, y = torch.from_numpy(x_train), torch.from_numpy(y_train)
    for _ in range(QAT_EPOCHS):
        opt.zero_grad()
        nn.functional.cross_entropy(prepared(x), y).backward()
        opt.step()
    qat = compile(convert_pt2e(prepared), example, "mps2-an505", tmp_path / "qat", quant="int4", progress=False, tile=False)
    assert [op.code for op in qat.graph.ops].count("LINEAR_S4") == 3
    qat_acc = _digits_accuracy(qat.pte, x_test, y_test)
    print(f"digits accuracy: float {float_acc:.4f}, PTQ int4 {ptq_acc:.4f}, QAT int4 ({QAT_EPOCHS} epochs) {qat_acc:.4f}")
    assert ptq_acc >= float_acc - 0.03 and qat_acc >= float_acc - 0.03

    build_firmware(tmp_path / "qat")
    xs = x_test[:4][:, None]
    res = runner.run(tmp_path / "qat", [xs], sim="qemu")
    assert res.exit_code == 0, res.raw[-1000:]
    expected, _ = runner.expected(tmp_path / "qat", runner.split_samples(runner.load_meta(tmp_path / "qat"), [xs]))
    mismatch, _ = runner.compare(res.outputs, expected, None)
    assert mismatch is None, str(mismatch)
