"""TensorFlow Lite Micro as the independent oracle of whole int8 programs.

A compiled program (model.pte) is exported as a .tflite model
(torchmcu.export.tflite) and run in TFLM's interpreter (the tflite-micro
wheel, reference kernels); the project's NumPy reference (interpret.py) must
give the same bits:

  a. end to end: the program's outputs (float, after DEQUANTIZE) bit for bit,
     and every op's output tensor along the way (TFLM keeps all tensors);
  b. per op: each op alone as a .tflite model, fed the values its operands
     take in the reference, bit for bit with the reference's output (and, for
     the elementwise int8 ops, on all 256 input values).

Only the integers and scales of the program go into the .tflite file: TFLite
derives every requantization multiplier, ADD/MUL/SOFTMAX parameter and table
itself, so agreement checks the compiler's parameter math as well as the
kernels. The models: every case of tests/test_quant.py, a few more that reach
the exporter's other paths (CLAMP_S8, padded pools, float fallbacks), and the
MLPerf Tiny models of examples/mlperf_tiny.py.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import REPO
from test_ops_host import Fn
from test_quant import CASES, calib
from torch import nn
from torchmcu import reference as ref
from torchmcu.compiler import compile
from torchmcu.program import schema
from torchmcu.program.interpret import OPS, run_reference
from torchmcu.program.serialize import to_pte

pytest.importorskip("tflite_micro.python.tflite_micro.runtime", reason="tflite-micro wheel not installed")

from torchmcu.export.tflite import (
    ExportError,
    export_op,
    export_tflite,
    run_tflite_micro,
    summary,
    trace,
    verify_derived,
)
from torchmcu.export.tflite.program import _Program, weight_scales

sys.path.insert(0, str(REPO / "examples"))
import mlperf_tiny  # noqa: E402

BOARD = "mps3-an547"
# TFLite's rounding of average pools and means: the programs are exported (PyTorch's has no TFLite form).
TFLITE_ROUNDING = {"avg_pool_rounding": "tflite"}

# Models beyond test_quant's, for the exporter's other paths: CLAMP_S8 as RELU6, RELU and MAXIMUM/MINIMUM,
# max pooling padded with PADV2, a padded stride-2 conv (PAD + VALID), an int8 sigmoid alone, a 3-D
# permute before a linear, and an avg pool with count_include_pad padding (PAD with the zero point, then
# a VALID AVERAGE_POOL_2D).
def _loud_conv() -> nn.Conv2d:
    """A conv whose outputs span tens: its ReLU6 bound falls inside int8."""
    conv = nn.Conv2d(2, 4, 3)
    with torch.no_grad():
        conv.weight.mul_(30)
    return conv


EXTRA = {
    "relu6_bounded_after_maxpool": (lambda: Fn(lambda m, x: F.relu6(F.max_pool2d(m[0](x), 2)), _loud_conv()),
                                    [(1, 2, 10, 10)], {"CLAMP_S8"}),
    "relu6_after_maxpool": (lambda: Fn(lambda m, x: F.relu6(F.max_pool2d(m[0](x), 2)), nn.Conv2d(2, 4, 3)),
                            [(1, 2, 10, 10)], {"CLAMP_S8"}),
    "hardtanh_input": (lambda: Fn(lambda m, x: m[0](F.hardtanh(x, -0.5, 0.7)), nn.Linear(8, 4)), [(1, 8)],
                       {"CLAMP_S8"}),
    "relu_after_cat": (lambda: Fn(lambda m, x: F.relu(torch.cat([m[0](x), x], 1)), nn.Conv2d(2, 3, 1)),
                       [(1, 2, 5, 5)], {"CLAMP_S8", "CONCAT"}),
    "maxpool_padded": (lambda: Fn(lambda m, x: F.max_pool2d(m[0](x), 3, 2, 1), nn.Conv2d(2, 4, 3)),
                       [(1, 2, 10, 10)], {"MAX_POOL2D_S8"}),
    "conv_pad2_stride2": (lambda: Fn(lambda m, x: m[0](x), nn.Conv2d(3, 4, 5, stride=2, padding=2)),
                          [(1, 3, 8, 8)], {"CONV2D_S8"}),
    "sigmoid_only": (lambda: Fn(lambda m, x: torch.sigmoid(x)), [(1, 30)], {"LUT_S8"}),
    "permute_3d_linear": (lambda: Fn(lambda m, x: m[0](x.permute(0, 2, 1)), nn.Linear(4, 3)), [(2, 4, 5)],
                          {"PERMUTE", "LINEAR_S8"}),
    "avgpool_padded_count_include_pad": (lambda: Fn(lambda m, x: F.avg_pool2d(m[0](x), 3, 2, 1), nn.Conv2d(2, 4, 3)),
                                         [(1, 2, 10, 10)], {"AVG_POOL2D_S8"}),
    "zero_pad_then_maxpool": (lambda: Fn(lambda m, x: F.max_pool2d(F.pad(m[0](x), (1, 1, 2, 0)), 2), nn.Conv2d(2, 4, 1)),
                              [(1, 2, 6, 6)], {"PAD", "MAX_POOL2D_S8"}),
    "bmm_then_relu6": (lambda: Fn(lambda m, x, y: F.relu6(torch.bmm(x, y))), [(2, 3, 6), (2, 6, 5)],
                       {"BATCH_MATMUL_S8", "CLAMP_S8"}),
}

# The TFLite operator each extra model is here for.
EXTRA_TFLITE_OP = {"relu6_bounded_after_maxpool": "RELU6", "relu6_after_maxpool": "RELU", "hardtanh_input": "MINIMUM",
                   "relu_after_cat": "CONCATENATION", "maxpool_padded": "PADV2", "conv_pad2_stride2": "PAD",
                   "sigmoid_only": "LOGISTIC", "permute_3d_linear": "TRANSPOSE",
                   "avgpool_padded_count_include_pad": "AVERAGE_POOL_2D", "zero_pad_then_maxpool": "PAD",
                   "bmm_then_relu6": "BATCH_MATMUL"}

MLPERF = ["ds_cnn", "resnet8", "autoencoder", "mobilenet_v1", "mobilenet_v2"]
MLPERF_CALIBRATION = 8  # samples; MobileNetV2 compiles in ~13 s with 8

# test_quant cases known to have no TFLite form (asserted to raise ExportError). TFLite's int8
# HARD_SWISH is a fixed-point approximation: it differs from torchmcu's float hardswish table
# (reference.lut_table of reference.hardswish) by 1 LSB on some inputs, so the table is not exported.
UNEXPORTABLE: dict[str, str] = {"hardswish_after_conv": r"LUT_S8 \(hardswish\): a hardswish table"}

NAMES = [f"quant:{n}" for n in sorted(CASES) if n not in UNEXPORTABLE] + \
    [f"extra:{n}" for n in EXTRA] + [f"mlperf:{n}" for n in MLPERF] + \
    ["int8io:quant:global_avgpool_linear_softmax", "int8io:quant:add_inputs", "int8io:mlperf:ds_cnn"]


# ----------------------------------------------------------------------------- programs


class _Programs:
    """Compiles each model once per session, on first use."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.cache: dict[str, tuple[bytes, list[list[np.ndarray]]]] = {}

    def __call__(self, name: str) -> tuple[bytes, list[list[np.ndarray]]]:
        """(model.pte bytes, three test samples: one list of input arrays
        each). Names: quant:<test_quant case>, extra:<EXTRA>, mlperf:<model>,
        and int8io:<any of those> for the program compiled with io="int8"
        (int8 inputs and outputs, no QUANTIZE/DEQUANTIZE at the edges)."""
        if name not in self.cache:
            kind, model_name = name.split(":", 1)
            io = "float"
            if kind == "int8io":
                io = "int8"
                kind, model_name = model_name.split(":")
            out = self.root / f"{model_name}_{io}"
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if kind == "mlperf":
                    model, example = mlperf_tiny.MODELS[model_name]()
                    data = mlperf_tiny.CALIBRATION[model_name]
                    compile(model, example, BOARD, out, quant="int8", progress=False, tile=False, io=io,
                            calibration=[(x,) for x in data(MLPERF_CALIBRATION, 100)], **TFLITE_ROUNDING)
                    samples = [[x] for x in data(3, 7)]
                else:
                    factory, shapes, _ = (CASES if kind == "quant" else EXTRA)[model_name]
                    torch.manual_seed(sum(map(ord, model_name)))
                    example = tuple(torch.randn(*s) for s in shapes)
                    compile(factory().eval(), example, BOARD, out, quant="int8", calibration=calib(shapes),
                            progress=False, tile=False, io=io, **TFLITE_ROUNDING)
                    samples = [list(s) for s in calib(shapes, n=3, seed=1)]
            pte = (out / "model.pte").read_bytes()
            if io == "int8":  # quantized as the device's caller would
                prog = schema.decode(pte)
                qs = [(prog["tensors"][t]["scale"], prog["tensors"][t]["zero_point"]) for t in prog["inputs"]]
                samples = [[ref.quantize(x, *q) for x, q in zip(s, qs)] for s in samples]
            self.cache[name] = (pte, samples)
        return self.cache[name]


@pytest.fixture(scope="session")
def programs(tmp_path_factory) -> _Programs:
    return _Programs(tmp_path_factory.mktemp("oracle"))


def _ops(pte: bytes) -> list[dict]:
    return schema.decode(pte)["ops"]


def _rewrite(pte: bytes, tensors=None, patch=None) -> bytes:
    """The program re-encoded after tensors(list of tensor dicts) edits the
    tensor table and patch(tensor dicts, bytearray segment) the constants."""
    prog = schema.decode(pte)
    seg = bytearray(pte[prog["constant_offset"]:prog["constant_offset"] + prog["constant_size"]])
    if tensors:
        tensors(prog["tensors"])
    if patch:
        patch(prog["tensors"], seg)
    return to_pte(prog, bytes(seg))


def _exact(got: np.ndarray, exp: np.ndarray) -> bool:
    return got.dtype == exp.dtype and got.size == exp.size and np.array_equal(got.reshape(exp.shape), exp)


def _same(code: str, got: np.ndarray, exp: np.ndarray) -> bool:
    """Bit for bit, except float fallback ops (PyTorch in the reference, so
    float rounding differences only; the int8 ops after them are still
    compared bit for bit)."""
    if code.endswith("_F32"):
        return got.dtype == exp.dtype and np.allclose(got.reshape(exp.shape), exp, rtol=1e-5, atol=1e-6)
    return _exact(got, exp)


# --------------------------------------------------------------------- a. end to end


@pytest.mark.parametrize("name", NAMES)
def test_end_to_end_bit_exact(name: str, programs) -> None:
    pte, samples = programs(name)
    codes = {op["code"] for op in _ops(pte)}
    if name.startswith("extra:"):
        assert EXTRA[name.split(":")[1]][2] <= codes, codes  # the path it is here for
    if name.startswith("int8io:"):
        assert not codes & {"QUANTIZE_S8", "DEQUANTIZE_S8"}, codes
    tensor_map: dict[int, int] = {}
    tflite = export_tflite(pte, tensor_map=tensor_map)
    if name.startswith("extra:"):
        assert EXTRA_TFLITE_OP[name.split(":")[1]] in summary(tflite)["op_counts"]
    ops = _ops(pte)
    produced = [op["outputs"][0] for op in ops]
    expected = run_reference(pte, samples)  # per output: [samples, ...]
    for k, sample in enumerate(samples):
        got = run_tflite_micro(tflite, sample, tensors=[tensor_map[t] for t in produced])
        outs, inner = got[:len(expected)], got[len(expected):]
        steps = trace(pte, sample)
        # Every op's output along the way: the first difference names the op.
        for i, (value, (_, exp)) in enumerate(zip(inner, steps)):
            assert _same(ops[i]["code"], value, exp), (
                f"sample {k}: op {i} {ops[i]['code']} ({ops[i]['name']}): "
                f"{np.sum(value.reshape(exp.shape) != exp)} of {exp.size} values differ")
        for j, exp in enumerate(expected):
            assert _exact(outs[j], exp[k]), f"sample {k} output {j}"


# -------------------------------------------------------------------------- b. per op


def _const(pte: bytes, prog: dict, t: int) -> np.ndarray:
    d = prog["tensors"][t]
    dtype = {"I8": np.int8, "I32": np.int32, "F32": np.float32}[d["dtype"]]
    return np.frombuffer(pte, dtype, count=d["nbytes"] // np.dtype(dtype).itemsize,
                         offset=prog["constant_offset"] + d["offset"]).reshape(d["dims"])


def _elementwise_exhaustive(pte: bytes, index: int, steps) -> None:
    """An elementwise int8 op on all 256 int8 values, through TFLM and the
    reference (interpret.py's op function)."""
    prog = schema.decode(pte)
    op = prog["ops"][index]
    tflite, values = export_op(pte, index, [], steps)
    shape = values[0].shape
    size = int(np.prod(shape))
    allq = np.arange(-128, 128, dtype=np.int64)
    allq = np.concatenate([allq, np.full(-len(allq) % size, -128)]).astype(np.int8)
    consts = [_const(pte, prog, t) for t in op["inputs"][1:]]
    params = op["params"][1] if op["params"] else {}
    for chunk in allq.reshape(-1, *shape):
        if op["code"] == "DEQUANTIZE_S8":
            src = prog["tensors"][op["inputs"][0]]
            exp = ref.dequantize(chunk, src["scale"], src["zero_point"])
        else:
            exp = np.asarray(OPS[op["code"]]([chunk, *consts], params, [prog["tensors"][op["outputs"][0]]]))
        got = run_tflite_micro(tflite, [chunk])[0]
        assert _exact(got, exp), f"op {index} {op['code']} on inputs {chunk.ravel().tolist()}"


ELEMENTWISE = {"LUT_S8", "CLAMP_S8", "DEQUANTIZE_S8"}


@pytest.mark.parametrize("name", NAMES)
def test_every_op_alone_bit_exact(name: str, programs) -> None:
    pte, samples = programs(name)
    ops = _ops(pte)
    failures = []
    for sample in samples[:2]:
        steps = trace(pte, sample)
        for i, op in enumerate(ops):
            tflite, values = export_op(pte, i, sample, steps)
            got = run_tflite_micro(tflite, values)[0]
            exp = steps[i][1]
            if not _same(op["code"], got, exp):
                failures.append(f"op {i} {op['code']} ({op['name']}): "
                                f"{np.sum(got.reshape(exp.shape) != exp)} of {exp.size} values differ")
    assert not failures, "\n".join(failures)
    steps = trace(pte, samples[0])
    for i, op in enumerate(ops):
        if op["code"] in ELEMENTWISE:
            _elementwise_exhaustive(pte, i, steps)


# ------------------------------------------------------------- derived data and scales


@pytest.mark.parametrize("name", NAMES)
def test_tflite_derives_the_programs_parameters(name: str, programs) -> None:
    """Multipliers/shifts, ADD/MUL/SOFTMAX parameters and offsets as TFLite
    computes them from the exported scales; per-channel weight scales
    recovered from the multipliers equal the stored ones."""
    pte, _ = programs(name)
    assert verify_derived(pte) == []
    stripped = _rewrite(pte, tensors=lambda ts: [t.pop("channel_scales", None) for t in ts])
    for i, op in enumerate(_ops(pte)):
        if op["code"] in ("CONV2D_S8", "DEPTHWISE_CONV2D_S8", "LINEAR_S8"):
            stored = schema.decode(pte)["tensors"][op["inputs"][1]]["channel_scales"]
            assert stored, f"op {i}: no channel_scales in the program"
            recovered = weight_scales(_Program(stripped), i)
            np.testing.assert_array_equal(recovered, np.asarray(stored, np.float32), err_msg=f"op {i}")


@pytest.mark.parametrize("name", ["quant:depthwise_mult2", "mlperf:resnet8"])
def test_programs_without_channel_scales_export_from_the_multipliers(name: str, programs) -> None:
    pte, samples = programs(name)
    stripped = _rewrite(pte, tensors=lambda ts: [t.pop("channel_scales", None) for t in ts])
    assert not any(t.get("channel_scales") for t in schema.decode(stripped)["tensors"])
    assert verify_derived(stripped) == []
    tflite = export_tflite(stripped)
    expected = run_reference(stripped, samples)
    for k, sample in enumerate(samples):
        for j, out in enumerate(run_tflite_micro(tflite, sample)):
            assert _exact(out, expected[j][k])


# ------------------------------------------------------------------ the oracle can fail


def _first(pte: bytes, code: str) -> int:
    return next(i for i, op in enumerate(_ops(pte)) if op["code"] == code)


def test_a_wrong_multiplier_is_caught(programs) -> None:
    """The compiler's requantization multipliers are checked by TFLM, which
    recomputes them: a program with one conv's multipliers off is refused by
    the strict export, and exported anyway differs from TFLM per op and end to end."""
    pte, samples = programs("quant:conv_bn_relu")
    conv = _first(pte, "CONV2D_S8")
    mult_tensor = _ops(pte)[conv]["inputs"][3]

    def patch(tensors, seg):
        t = tensors[mult_tensor]
        m = np.frombuffer(bytes(seg[t["offset"]:t["offset"] + t["nbytes"]]), np.int32)
        seg[t["offset"]:t["offset"] + t["nbytes"]] = (m // 4 * 3).astype(np.int32).tobytes()

    bad = _rewrite(pte, patch=patch)
    problems = verify_derived(bad)
    assert len(problems) == 1 and f"op {conv} CONV2D_S8" in problems[0], problems
    with pytest.raises(ExportError, match="multipliers differ"):
        export_tflite(bad)
    steps = trace(bad, samples[0])
    tflite, values = export_op(bad, conv, samples[0], steps)
    assert not _exact(run_tflite_micro(tflite, values)[0], steps[conv][1])
    got = run_tflite_micro(export_tflite(bad, strict=False), samples[0])[0]
    assert not _exact(got, run_reference(bad, [samples[0]])[0][0])


def test_a_wrong_weight_scale_is_caught(programs) -> None:
    """channel_scales are what TFLite sees: a scale off by one float32 ulp
    changes the multiplier TFLite derives."""
    pte, _ = programs("quant:linear")
    lin = _first(pte, "LINEAR_S8")
    w = _ops(pte)[lin]["inputs"][1]

    def edit(tensors):
        s = np.asarray(tensors[w]["channel_scales"], np.float32)
        s[0] = np.nextafter(s[0], np.float32(1))
        tensors[w]["channel_scales"] = [float(v) for v in s]

    problems = verify_derived(_rewrite(pte, tensors=edit))
    assert problems and f"op {lin} LINEAR_S8" in problems[0], problems


def test_a_table_no_tflite_op_computes_is_refused(programs) -> None:
    pte, _ = programs("extra:sigmoid_only")
    lut = _first(pte, "LUT_S8")
    table = _ops(pte)[lut]["inputs"][1]

    def patch(tensors, seg):
        seg[tensors[table]["offset"] + 100] = (seg[tensors[table]["offset"] + 100] + 1) % 256

    with pytest.raises(ExportError, match=rf"op {lut} LUT_S8 \(sigmoid\): the table is neither"):
        export_tflite(_rewrite(pte, patch=patch))


# ------------------------------------------------------------------------------ refusals


def test_float_program_is_refused(tmp_path: Path) -> None:
    compile(nn.Linear(4, 2).eval(), (torch.randn(1, 4),), BOARD, tmp_path, progress=False, tile=False)
    with pytest.raises(ExportError, match="float32 program.*--quant int8"):
        export_tflite((tmp_path / "model.pte").read_bytes())


def test_unexportable_fallback_names_the_op(tmp_path: Path) -> None:
    # A grouped convolution has no W4A8 kernel: it falls back to float, which TFLite Micro cannot run grouped.
    model = Fn(lambda m, x: m[1](m[0](x)), nn.Conv2d(4, 4, 3, groups=2), nn.Conv2d(4, 2, 1)).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compile(model, (torch.randn(1, 4, 6, 6),), BOARD, tmp_path, quant="int4",
                calibration=calib([(1, 4, 6, 6)]), progress=False, tile=False)
    with pytest.raises(ExportError, match=r"op \d+ CONV2D_F32 \(conv2d\): grouped convolution"):
        export_tflite((tmp_path / "model.pte").read_bytes())


def test_known_unexportable_cases(programs) -> None:
    for name, message in UNEXPORTABLE.items():
        with pytest.raises(ExportError, match=message):
            export_tflite(programs(f"quant:{name}")[0])


# ----------------------------------------------------------------------------------- CLI


def test_cli_export(programs, tmp_path: Path, capsys) -> None:
    from torchmcu.cli import main

    pte, samples = programs("mlperf:ds_cnn")
    build = tmp_path / "build"
    build.mkdir()
    (build / "model.pte").write_bytes(pte)
    out = tmp_path / "ds_cnn.tflite"
    assert main(["export", "--tflite", str(out), str(build)]) == 0
    printed = capsys.readouterr().out
    data = out.read_bytes()
    s = summary(data)
    assert f"wrote {out}: {len(data):,} bytes, {s['operators']} operators" in printed
    assert "CONV_2D x5" in printed and "DEPTHWISE_CONV_2D x4" in printed and "SOFTMAX x1" in printed
    assert _exact(run_tflite_micro(data, samples[0])[0], run_reference(pte, [samples[0]])[0][0])


def test_cli_export_errors(tmp_path: Path, capsys) -> None:
    from torchmcu.cli import main

    assert main(["export", "--tflite", str(tmp_path / "x.tflite"), str(tmp_path)]) == 2
    assert "model.pte not found" in capsys.readouterr().err
    compile(nn.Linear(4, 2).eval(), (torch.randn(1, 4),), BOARD, tmp_path, progress=False, tile=False)
    assert main(["export", "--tflite", str(tmp_path / "x.tflite"), str(tmp_path)]) == 2
    assert "float32 program" in capsys.readouterr().err
    assert not (tmp_path / "x.tflite").exists()
