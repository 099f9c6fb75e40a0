"""Models as they ship (#28 item 1): a TorchScript file (torch.jit.script and
torch.jit.trace, saved with torch.jit.save) and an ONNX file (torch.onnx.export;
one written with the onnx helper API, with an If on an input fixed by --fix)
compile, build and pass `run --check` in QEMU, each step its own process as a
user runs them; so do silero-vad's .jit and .onnx from its pip package at
float32. What cannot be taken is one line and exit status 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import REPO, needs_arm_gcc, needs_qemu
from torch import nn
from torchmcu import cli

onnx = pytest.importorskip("onnx", reason="onnx not installed (make setup installs it)")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

BOARD = "mps3-an547"


def has_onnx2torch() -> bool:
    try:
        from torchmcu.frontend.onnx_fold import _import_onnx2torch

        _import_onnx2torch()
        return True
    except Exception:
        return False


needs_onnx2torch = pytest.mark.skipif(not has_onnx2torch(), reason="onnx2torch not installed (make setup installs it)")


def silero_data() -> Path | None:
    try:
        import silero_vad
    except ImportError:
        return None
    d = Path(silero_vad.__file__).parent / "data"
    return d if (d / "silero_vad.jit").is_file() and (d / "silero_vad.onnx").is_file() else None


class Net(nn.Module):
    """conv, LSTM (its state in and out), linear."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(2, 8, 3, padding=1)
        self.lstm = nn.LSTM(8, 16, batch_first=True)
        self.fc = nn.Linear(16, 4)

    def forward(self, x, h, c):
        y = torch.relu(self.conv(x)).transpose(1, 2)
        y, (h2, c2) = self.lstm(y, (h, c))
        return self.fc(y[:, -1]), h2, c2


class Cnn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 6 * 6, 5)

    def forward(self, x):
        return self.fc(torch.flatten(torch.relu(self.conv(x)), 1))


class DataLoop(nn.Module):
    """A loop as many times as the input's data says: no converter makes that one graph."""

    def forward(self, x):
        y = x
        for _ in range(int(x.sum().item()) % 3):
            y = y + 1
        return y


NET_INPUTS = ["--input", "x=1x2x10", "--input", "h=1x1x16", "--input", "c=1x1x16"]


def _if_model(path: Path, cond_from_input: bool) -> None:
    """y = (mode == 1 ? x * 2 : relu(x)) @ W: `mode` an int64 input (fixed with --fix), or
    (cond_from_input) a condition computed from x itself, which no --fix makes constant."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((8, 3)).astype(np.float32), "w")
    two = numpy_helper.from_array(np.array(2.0, np.float32), "two")
    then_g = helper.make_graph([helper.make_node("Mul", ["x", "two"], ["t_out"])], "then", [],
                               [helper.make_tensor_value_info("t_out", TensorProto.FLOAT, [1, 8])])
    else_g = helper.make_graph([helper.make_node("Relu", ["x"], ["e_out"])], "else", [],
                               [helper.make_tensor_value_info("e_out", TensorProto.FLOAT, [1, 8])])
    one = numpy_helper.from_array(np.array(1, np.int64), "one")
    zero = numpy_helper.from_array(np.array(0.0, np.float32), "zero")
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])]
    if cond_from_input:
        nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
                 helper.make_node("Greater", ["s", "zero"], ["cond"])]
    else:
        inputs.append(helper.make_tensor_value_info("mode", TensorProto.INT64, []))
        nodes = [helper.make_node("Equal", ["mode", "one"], ["cond"])]
    nodes += [helper.make_node("If", ["cond"], ["picked"], then_branch=then_g, else_branch=else_g, name="pick"),
              helper.make_node("MatMul", ["picked", "w"], ["y"])]
    g = helper.make_graph(nodes, "if_model", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
                          [w, two, one, zero])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 16)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, str(path))


def _unknown_op_model(path: Path) -> None:
    g = helper.make_graph([helper.make_node("Hardmax", ["x"], ["y"])], "hardmax",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 16)])
    m.ir_version = 8
    onnx.save(m, str(path))


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("shipped")
    torch.manual_seed(0)
    net = Net().eval()
    args = (torch.randn(1, 2, 10), torch.zeros(1, 1, 16), torch.zeros(1, 1, 16))
    torch.jit.save(torch.jit.script(net), str(d / "script.pt"))
    with torch.no_grad():
        torch.save({"args": args, "outputs": net(*args)}, str(d / "net_ref.pt"))
    cnn = Cnn().eval()
    torch.jit.save(torch.jit.trace(cnn, (torch.randn(1, 3, 6, 6),)), str(d / "trace.jit"))
    import warnings

    with warnings.catch_warnings():  # the legacy exporter's deprecation: it needs no onnxscript
        warnings.simplefilter("ignore")
        torch.onnx.export(net, args, str(d / "net.onnx"), dynamo=False, input_names=["x", "h", "c"])
    _if_model(d / "if_fixed.onnx", cond_from_input=False)
    _if_model(d / "if_data.onnx", cond_from_input=True)
    _unknown_op_model(d / "hardmax.onnx")
    torch.jit.save(torch.jit.script(DataLoop()), str(d / "loop.pt"))
    (d / "garbage.onnx").write_bytes(b"not a protobuf \x00\xff")
    torch.save(cnn, str(d / "pickled.pt"))
    (d / "model.py").write_text("import torch\n\ndef make():\n    return torch.nn.Linear(4, 2), (torch.randn(1, 4),)\n")
    return d


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "torchmcu.cli", *args], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"}, check=False, timeout=600)


def compile_build_check(model: str, out: Path, *extra: str) -> str:
    """compile, build, run --check in QEMU: three processes; the compile's stdout."""
    proc = run_cli("compile", model, "--board", BOARD, "-o", str(out), *extra)
    assert proc.returncode == 0, proc.stderr
    compiled = proc.stdout
    proc = run_cli("build", str(out))
    assert proc.returncode == 0, proc.stderr
    proc = run_cli("run", str(out), "--sim", "qemu", "--check", "--no-cycles")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "passed" in proc.stdout, proc.stdout
    return compiled


@needs_qemu
@needs_arm_gcc
@pytest.mark.parametrize("name,extra", [
    ("script.pt", NET_INPUTS),
    ("trace.jit", ["--input", "x=1x3x6x6"]),
    pytest.param("net.onnx", [], marks=needs_onnx2torch),
    pytest.param("if_fixed.onnx", ["--fix", "mode=1", "--input", "x=1x8"], marks=needs_onnx2torch),
])
def test_shipped_file_compiles_and_checks_in_qemu(models: Path, tmp_path: Path, name: str, extra: list[str]) -> None:
    out = compile_build_check(str(models / name), tmp_path / "out", *extra)
    assert "compiled for mps3-an547 (float32)" in out
    if name == "if_fixed.onnx":  # the then branch, x * 2, folded in: a MUL, no RELU
        kernels = (tmp_path / "out" / "kernels.txt").read_text().split()
        assert "MUL_F32" in kernels and not any(k.startswith("ACTIVATION") for k in kernels), kernels


@needs_onnx2torch
def test_constant_if_takes_the_branch_the_fixed_input_picks(models: Path) -> None:
    """--fix mode=1 and mode=0 give the two branches: x * 2 and relu(x), then the same matmul."""
    from torchmcu.frontend.shipped import load_model

    x = torch.randn(1, 8)
    w = numpy_helper.to_array(onnx.load(str(models / "if_fixed.onnx")).graph.initializer[0])
    for mode, want in (("1", x * 2), ("0", torch.relu(x))):
        m, example = load_model(str(models / "if_fixed.onnx"), ["x=1x8"], [f"mode={mode}"])
        assert [tuple(e.shape) for e in example] == [(1, 8)]
        got = m(x)
        torch.testing.assert_close(got, want @ torch.from_numpy(w.copy()))


@needs_onnx2torch
def test_onnx_loads_match_the_torch_model(models: Path) -> None:
    """The exported Net's ONNX (its LSTM's Y_h and Y_c graph outputs too) computes what Net does."""
    from torchmcu.frontend.shipped import load_model

    ref = torch.load(str(models / "net_ref.pt"))
    m, example = load_model(str(models / "net.onnx"), [], [])
    assert [tuple(e.shape) for e in example] == [tuple(a.shape) for a in ref["args"]]
    got = m(*ref["args"])
    assert len(got) == len(ref["outputs"]) == 3
    for g, want in zip(got, ref["outputs"]):
        torch.testing.assert_close(g, want, rtol=1e-5, atol=1e-5)


def test_torchscript_loads_match_the_scripted_model(models: Path) -> None:
    from torchmcu.frontend.shipped import load_model

    m, example = load_model(str(models / "script.pt"), NET_INPUTS[1::2], [])
    ref = torch.jit.load(str(models / "script.pt"))
    for got, want in zip(m(*example), ref(*example)):
        torch.testing.assert_close(got, want)


SILERO = silero_data()
needs_silero = pytest.mark.skipif(SILERO is None, reason="the silero-vad package is not installed "
                                                         "(make setup installs it, without its dependencies)")


@needs_qemu
@needs_arm_gcc
@needs_silero
@pytest.mark.parametrize("form", ["jit", pytest.param("onnx", marks=needs_onnx2torch)])
def test_silero_vad_as_shipped_compiles_and_checks_in_qemu(tmp_path: Path, form: str) -> None:
    """silero-vad's 16 kHz network: 512 samples and 64 of context (1x576), its LSTM state 2x1x128;
    the .jit's top-level forward keeps state in attributes, so its network is the _model submodule;
    the .onnx picks 16 kHz with --fix sr=16000."""
    assert SILERO is not None
    if form == "jit":
        spec, extra = f"{SILERO / 'silero_vad.jit'}:_model", ["--input", "x=1x576", "--input", "state=2x1x128"]
    else:
        spec, extra = str(SILERO / "silero_vad.onnx"), ["--fix", "sr=16000", "--input", "input=1x576",
                                                         "--input", "state=2x1x128"]
    out = compile_build_check(spec, tmp_path / "out", *extra)
    assert "LSTM_F32" in (tmp_path / "out" / "kernels.txt").read_text().split(), out


def compile_error(capsys, *argv: str) -> str:
    status = cli.main(["compile", *argv, "--board", BOARD, "-o", "/nonexistent/never-written"])
    err = capsys.readouterr().err
    assert status == 2, err
    lines = [ln for ln in err.splitlines() if ln.startswith("torchmcu: error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@needs_onnx2torch
def test_non_constant_if_is_one_line(capsys, models: Path) -> None:
    line = compile_error(capsys, str(models / "if_data.onnx"), "--input", "x=1x8")
    assert "If node 'pick' has a condition ('cond') that is not constant: it depends on the input(s) x" in line


def test_int_input_not_fixed_is_one_line(capsys, models: Path) -> None:
    line = compile_error(capsys, str(models / "if_fixed.onnx"), "--input", "x=1x8")
    assert "input 'mode' is int64" in line and "--fix mode=VALUE" in line


@pytest.mark.parametrize("name,argv,needle", [
    ("script.pt", ["--input", "x=1x2x10"], "input 'h' needs a shape (TorchScript records none): give --input h="),
    ("if_fixed.onnx", ["--fix", "mode=1"], "input 'x' has no static shape (['batch', 8]): give --input x=SHAPE"),
    ("script.pt", [*NET_INPUTS, "--input", "y=1x2"], "the forward has no input 'y' (its inputs: x, h, c)"),
    ("script.pt", ["--input", "x=1xA"], "--input x=1xA: a shape is positive sizes separated by x"),
    ("garbage.onnx", [], "garbage.onnx is not an ONNX model"),
    ("loop.pt", ["--input", "x=1x8"], "torch's TorchScript converter (TS2EPConverter) refuses it: the op prim::Loop"),
    ("pickled.pt", [], "written by torch.save (a pickle), not torch.jit.save"),
    ("trace.jit:nope", ["--input", "x=1x3x6x6"], "no submodule 'nope'"),
    ("missing.jit", [], "model file not found"),
    ("model.py:make", ["--input", "x=1x4"], "--input is for TorchScript (.pt, .jit) and ONNX (.onnx) files"),
])
def test_what_cannot_be_taken_is_one_line(capsys, models: Path, name: str, argv: list[str], needle: str) -> None:
    if name.endswith(".onnx") and not has_onnx2torch():
        pytest.skip("onnx2torch not installed")
    assert needle in compile_error(capsys, str(models / name), *argv)


@needs_onnx2torch
def test_onnx_op_onnx2torch_lacks_is_named(capsys, models: Path) -> None:
    line = compile_error(capsys, str(models / "hardmax.onnx"))
    assert "onnx2torch has no converter for the ONNX op Hardmax" in line


@needs_silero
def test_silero_jit_top_level_names_its_submodules(capsys) -> None:
    assert SILERO is not None
    line = compile_error(capsys, str(SILERO / "silero_vad.jit"), "--input", "x=1x512")
    assert "input 'sr' is an int, not a tensor" in line and "_model, _model_8k" in line


def test_onnx_not_installed_is_one_line(capsys, models: Path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "onnx", None)  # import onnx raises ImportError
    line = compile_error(capsys, str(models / "hardmax.onnx"))
    assert "needs the onnx package, which is not installed: pip install onnx onnx2torch" in line


STFT_LIKE = '''
import torch
import torch.nn.functional as F
from torch import nn


class StftLike(nn.Module):
    """What silero-vad's front end and decoder do: reflect padding of 64, a strided conv as the
    STFT, magnitude sqrt(re ** 2 + im ** 2), an LSTM cell whose (h, c) is stacked as the state."""

    def __init__(self):
        super().__init__()
        self.stft = nn.Conv1d(1, 16, 32, stride=16, bias=False)
        self.cell = nn.LSTMCell(8, 8)

    def forward(self, x, state):
        y = self.stft(F.pad(x, (0, 64), mode="reflect").unsqueeze(1))
        mag = torch.sqrt(y[:, :8] ** 2 + y[:, 8:].pow(2))
        h, c = self.cell(mag.mean(-1), (state[0], state[1]))
        return h, torch.stack([h, c])


def make():
    torch.manual_seed(0)
    return StftLike(), (torch.randn(1, 160), torch.randn(2, 1, 8) * 0.1)
'''


@pytest.mark.parametrize("quant", ["float32", "int8"])
def test_silero_ops_from_python_on_the_host(tmp_path: Path, quant: str) -> None:
    """x ** 2 (as a mul), torch.stack (as a cat) and reflect padding of 64 (a tree of cats)."""
    (tmp_path / "m.py").write_text(STFT_LIKE)
    extra = [] if quant == "float32" else ["--quant", "int8"]
    proc = run_cli("compile", f"{tmp_path / 'm.py'}:make", "--board", BOARD, "-o", str(tmp_path / "o"), *extra)
    assert proc.returncode == 0, proc.stderr
    kernels = (tmp_path / "o" / "kernels.txt").read_text().split()
    assert any(k.startswith("MUL") for k in kernels) and "CONCAT" in kernels, kernels
    proc = run_cli("run", str(tmp_path / "o"), "--sim", "host", "--check")
    assert proc.returncode == 0, proc.stdout + proc.stderr
