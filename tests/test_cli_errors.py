"""Bad input never becomes a traceback: each one below gives one line
`torchmcu: error: ...` on stderr and exit status 2 (the user's own code
raising is told as theirs, at their file:line); Ctrl-C is 130, a closed pipe
141, a torchmcu bug 3 with TORCHMCU_TRACEBACK=1 for the rest; the firmware's
failures are printed by name (firmware/core/error.h)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO
from torchmcu import cli
from torchmcu.sim import status

MODEL = '''\
import sys
import time

import torch
from torch import nn


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        return torch.relu(self.fc(x))


class Returns(nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.kind = kind

    def forward(self, x):
        y = x * 2
        if self.kind == "dict_of_tensors":
            return {"y": y, "z": y + 1}
        if self.kind == "dict_with_int":
            return {"y": y, "n": 3}
        return (y, None)


class Raises(nn.Module):
    def forward(self, x):
        raise ValueError("forward refuses")  # LINE_FORWARD


class Two(nn.Module):
    def forward(self, x, y):
        return x + y


def make():
    torch.manual_seed(0)
    return Small(), (torch.randn(1, 4),)


def make_two():
    return Two(), (torch.randn(1, 4), torch.randn(1, 4))


def make_dict_of_tensors():
    return Returns("dict_of_tensors"), (torch.randn(1, 4),)


def make_dict_with_int():
    return Returns("dict_with_int"), (torch.randn(1, 4),)


def make_tuple_with_none():
    return Returns("tuple_with_none"), (torch.randn(1, 4),)


def make_raises():
    raise ValueError("bad size 7")  # LINE_MAKE


def make_forward_raises():
    return Raises(), (torch.randn(1, 4),)


def make_slowly():
    print("make_slowly: sleeping", file=sys.stderr, flush=True)
    time.sleep(60)
'''
BOARD = "mps3-an547"
ENV = {**os.environ, "PYTHONWARNINGS": "ignore"}


def line_of(text: str, marker: str) -> int:
    return next(i for i, ln in enumerate(text.splitlines(), 1) if marker in ln)


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("errors")
    (d / "model.py").write_text(MODEL)
    (d / "broken_import.py").write_text("import torch\n\nx = 1 / 0\n\ndef make():\n    pass\n")
    (d / "garbage.npy").write_text("garbage, not numpy\n")
    (d / "not_a_build").mkdir()
    return d


@pytest.fixture(scope="module")
def compiled(work: Path) -> Path:
    out = work / "small"
    assert cli.main(["compile", f"{work}/model.py:make", "--board", BOARD, "-o", str(out)]) == 0
    return out


def error_line(capsys, argv: list[str], code: int = 2) -> str:
    """Runs the command in-process: its exit status is `code`, stderr has one
    `torchmcu: error` line (progress lines aside) and no traceback; returns that line."""
    got = cli.main(argv)
    err = capsys.readouterr().err
    assert got == code, err
    assert "Traceback" not in err
    errors = [ln for ln in err.splitlines() if re.match(r"torchmcu: (error|internal error)", ln)]
    assert len(errors) == 1, err
    assert errors[0] == err.strip().splitlines()[-1], err  # the last thing said
    return errors[0]


def compile_argv(work: Path, entry: str, *extra: str) -> list[str]:
    return ["compile", f"{work}/model.py:{entry}", "--board", BOARD, "-o", str(work / f"out_{entry}"), *extra]


# ---- the model and the user's code ------------------------------------------------------------

@pytest.mark.parametrize("entry, shown", [("make_dict_with_int", "{'y': Tensor, 'n': int 3}: output 1 is int 3"),
                                          ("make_tuple_with_none", "(Tensor, None): output 1 is None")])
def test_forward_returning_a_non_tensor_says_what_is_supported(capsys, work: Path, entry: str, shown: str) -> None:
    line = error_line(capsys, compile_argv(work, entry))
    assert line.startswith(f"torchmcu: error: the model's forward returns {shown}, not a tensor")
    assert "a tensor, or a tuple / list (or dict) of tensors" in line


def test_forward_returning_a_dict_of_tensors_compiles_its_values_in_order(capsys, work: Path) -> None:
    """A dict of tensors is flattened, as torch.export does: outputs y, z."""
    assert cli.main(compile_argv(work, "make_dict_of_tensors")) == 0
    meta = json.loads((work / "out_make_dict_of_tensors" / "model.json").read_text())
    assert [o["shape"] for o in meta["outputs"]] == [[1, 4], [1, 4]]


def test_make_raising_is_told_as_the_users_with_their_line(capsys, work: Path) -> None:
    line = error_line(capsys, compile_argv(work, "make_raises"))
    at = line_of(MODEL, "LINE_MAKE")
    assert re.fullmatch(rf"torchmcu: error: your make_raises\(\) in model\.py raised ValueError: bad size 7 "
                        rf"\(at \S*model\.py:{at}\)", line), line


def test_forward_raising_during_capture_is_told_as_the_users(capsys, work: Path) -> None:
    line = error_line(capsys, compile_argv(work, "make_forward_raises"))
    at = line_of(MODEL, "LINE_FORWARD")
    assert "your model's forward (Raises.forward) raised ValueError: forward refuses" in line
    assert line.endswith(f"model.py:{at})"), line


def test_model_file_raising_at_import_is_told_as_the_users(capsys, work: Path) -> None:
    line = error_line(capsys, ["compile", f"{work}/broken_import.py:make", "--board", BOARD, "-o", str(work / "o")])
    assert "importing broken_import.py raised ZeroDivisionError: division by zero" in line
    assert line.endswith("broken_import.py:3)"), line


# ---- calibration --------------------------------------------------------------------------------

def test_nan_and_inf_in_calibration_name_the_input_and_count(capsys, work: Path) -> None:
    data = np.random.default_rng(0).random((5, 1, 4)).astype(np.float32)
    data[0, 0, :2] = np.nan
    data[3, 0, 1] = np.inf
    np.savez(work / "cal_nan.npz", x=data)
    line = error_line(capsys, compile_argv(work, "make", "--quant", "int8", "--calibration",
                                           str(work / "cal_nan.npz")))
    assert "array 'x', for input 0 (x), has 2 NaN and 1 inf of 20 values" in line


def test_calibration_npy_is_taken_for_a_single_input_model(capsys, work: Path) -> None:
    np.save(work / "cal.npy", np.random.default_rng(1).random((6, 1, 4)).astype(np.float32))
    assert cli.main(compile_argv(work, "make", "--quant", "int8", "--calibration", str(work / "cal.npy"))) == 0
    meta = json.loads((work / "out_make" / "model.json").read_text())
    assert meta["inputs"][0]["shape"] == [1, 4]


def test_calibration_npy_for_two_inputs_asks_for_an_npz(capsys, work: Path) -> None:
    np.save(work / "cal2.npy", np.zeros((6, 1, 4), np.float32))
    line = error_line(capsys, compile_argv(work, "make_two", "--quant", "int8", "--calibration",
                                           str(work / "cal2.npy")))
    assert "is one array (.npy) but the model takes 2 inputs: give an .npz" in line


@pytest.mark.parametrize("name, needle", [("garbage.npy", "is not a NumPy .npy or .npz file"),
                                          ("missing.npz", "no such file")])
def test_garbage_or_missing_calibration_file(capsys, work: Path, name: str, needle: str) -> None:
    line = error_line(capsys, compile_argv(work, "make", "--quant", "int8", "--calibration", str(work / name)))
    assert line.startswith(f"torchmcu: error: --calibration {work / name}") and needle in line


# ---- run's inputs and directories ---------------------------------------------------------------

def test_bad_input_files(capsys, work: Path, compiled: Path) -> None:
    np.save(work / "wrong_shape.npy", np.zeros((3, 5), np.float32))
    np.save(work / "words.npy", np.array(["a", "b"]))
    np.save(work / "x.npy", np.zeros((1, 4), np.float32))
    cases = {
        "missing.npy": [f"--input {work}/missing.npy: no such file"],
        "garbage.npy": ["garbage.npy is not a NumPy .npy or .npz file"],
        "wrong_shape.npy": ["input x has shape [3, 5]; expected [1, 4] or [N, 1, 4]"],
        "words.npy": ["array 'words' is <U1, not numbers"],
    }
    for name, needles in cases.items():
        line = error_line(capsys, ["run", str(compiled), "--sim", "host", "--input", str(work / name)])
        assert all(n in line for n in needles), line
    line = error_line(capsys, ["run", str(compiled), "--sim", "host", "--input", str(work / "x.npy"),
                               "--input", str(work / "x.npy")])
    assert "the model takes 1 input(s), got 2" in line


def test_bad_option_values_are_usage_errors_not_internal_ones(capsys, work: Path, compiled: Path) -> None:
    """Values a new user tried (exit 3, "a torchmcu bug", before): each one line, exit 2."""
    for extra, needle in [(["--stack", "xyz"], "'xyz' is not a size in bytes"),
                          (["--budget", "dtcm=inf"], "--budget 'dtcm=inf': 'inf' is not a valid value"),
                          (["--quant", "int8", "--precision", "auto:xyz"], "'xyz' is not a size in bytes"),
                          (["--quant", "int8", "--precision", "auto:-5K"], "'-5K' is not a size in bytes"),
                          (["--pin", "garbage"], "expected NAME=VALUE, e.g. --pin conv1=sram")]:
        assert needle in error_line(capsys, compile_argv(work, "make", *extra)), extra
    np.save(work / "x1.npy", np.zeros((1, 4), np.float32))
    run = ["run", str(compiled), "--sim", "host"]
    for extra, needle in [(["--repeat", "0"], "--repeat 0: give 1 or more runs"),
                          (["--timeout", "nan"], "--timeout nan: give a positive number of seconds"),
                          (["--timeout", "-5"], "--timeout -5.0: give a positive number of seconds"),
                          (["--sqnr-floor", "nan"], "--sqnr-floor nan: give a finite number of dB")]:
        assert needle in error_line(capsys, run + extra), extra


def test_run_refuses_inputs_with_no_samples_or_nan(capsys, work: Path, compiled: Path) -> None:
    nan = np.zeros((2, 1, 4), np.float32)
    nan[1, 0, 2] = np.nan
    np.save(work / "nan_in.npy", nan)
    np.save(work / "empty_in.npy", np.zeros((0, 1, 4), np.float32))
    line = error_line(capsys, ["run", str(compiled), "--sim", "host", "--input", str(work / "nan_in.npy")])
    assert "array 'nan_in' has 1 NaN or inf of 8 values; inputs must be finite" in line
    line = error_line(capsys, ["run", str(compiled), "--sim", "host", "--input", str(work / "empty_in.npy")])
    assert "array 'empty_in' has shape [0, 1, 4]: no samples" in line


def test_calibration_takes_one_array_per_input_and_float64(capsys, work: Path) -> None:
    rng = np.random.default_rng(2)
    np.savez(work / "cal_two.npz", a=rng.random((4, 1, 4)).astype(np.float32), b=rng.random((4, 1, 4)) * 1e30)
    line = error_line(capsys, compile_argv(work, "make", "--quant", "int8", "--calibration",
                                           str(work / "cal_two.npz")))
    assert "has 2 arrays (a, b) but the model takes 1 input(s) (x): one array per input" in line
    np.savez(work / "cal64.npz", x=rng.random((4, 1, 4)))  # NumPy's float64, as users make it
    assert cli.main(compile_argv(work, "make", "--quant", "int8", "--calibration", str(work / "cal64.npz"))) == 0


def test_build_warns_when_the_program_and_its_c_array_differ(capsys, work: Path, compiled: Path) -> None:
    from torchmcu.cli_errors import program_source_differs

    copy = work / "stale"
    shutil.copytree(compiled, copy)
    assert program_source_differs(str(copy)) is None
    pte = bytearray((copy / "model.pte").read_bytes())
    pte[-1] ^= 0xFF
    (copy / "model.pte").write_bytes(bytes(pte))
    assert "model.pte and model_pte.c differ (one changed after compile): the firmware links model_pte.c" in \
        program_source_differs(str(copy))


@pytest.mark.parametrize("command", [["run"], ["build"], ["kernel-table", "-o", "kernel_table.cc"]])
def test_run_and_build_refuse_what_is_not_a_build_directory(capsys, work: Path, command: list[str]) -> None:
    def argv(d: str) -> list[str]:
        return [command[0], str(work / d), *command[1:]]
    assert "does not exist" in error_line(capsys, argv("nowhere"))
    assert "is not a compiled model (no model.json)" in error_line(capsys, argv("not_a_build"))
    assert "is a file, not a build directory" in error_line(capsys, argv("model.py"))


def test_inspect_refuses_what_is_not_a_program(capsys, work: Path, compiled: Path) -> None:
    assert "garbage.npy is not a torchmcu program" in error_line(capsys, ["inspect", str(work / "garbage.npy")])
    assert "no such file" in error_line(capsys, ["inspect", str(work / "missing.pte")])
    (work / "truncated.pte").write_bytes((compiled / "model.pte").read_bytes()[:64])
    assert "is a corrupted torchmcu program" in error_line(capsys, ["inspect", str(work / "truncated.pte")])


def _on_board(compiled: Path, dest: Path, board: str, image: str) -> Path:
    """The compiled model as if compiled for `board`, with a stand-in image: the runner's
    check for its simulator comes before it reads the image."""
    shutil.copytree(compiled, dest, dirs_exist_ok=True)
    meta = json.loads((dest / "model.json").read_text())
    (dest / "model.json").write_text(json.dumps({**meta, "board": board}))
    (dest / image).write_bytes(b"")
    return dest


def test_missing_simulators_name_the_variable_to_set(capsys, monkeypatch, work: Path, compiled: Path) -> None:
    monkeypatch.delenv("TORCHMCU_FVP_DIR", raising=False)
    monkeypatch.delenv("XTENSA_TOOLCHAIN_PATH", raising=False)
    monkeypatch.setenv("PATH", str(work / "not_a_build"))  # no FVP on PATH either
    fvp = _on_board(compiled, work / "fvp", "corstone-300-u55-128", "firmware.elf")
    assert "set TORCHMCU_FVP_DIR" in error_line(capsys, ["run", str(fvp), "--sim", "fvp"])
    xt = _on_board(compiled, work / "xt", "hifi4-generic", "firmware-xtensa.elf")
    assert "XTENSA_TOOLCHAIN_PATH is not set" in error_line(capsys, ["run", str(xt), "--sim", "xt-run"])


def test_an_unwritable_output_is_one_line(capsys, work: Path) -> None:
    line = error_line(capsys, ["compile", f"{work}/model.py:make", "--board", BOARD,
                               "-o", str(work / "model.py" / "o")])
    assert "model.py" in line


# ---- interrupts, pipes, internal errors ---------------------------------------------------------

def test_keyboard_interrupt_is_130_and_one_line(capsys, monkeypatch) -> None:
    def interrupted(args):
        raise KeyboardInterrupt
    monkeypatch.setattr(cli, "cmd_boards", interrupted)
    assert cli.main(["boards"]) == 130
    assert capsys.readouterr().err.strip() == "torchmcu: interrupted"


def test_an_internal_error_is_one_line_and_3_unless_asked_for_the_traceback(capsys, monkeypatch) -> None:
    def bug(args):
        raise AttributeError("'NoneType' object has no attribute 'dims'")
    monkeypatch.setattr(cli, "cmd_boards", bug)
    line = error_line(capsys, ["boards"], code=3)
    assert line == ("torchmcu: internal error (a torchmcu bug): AttributeError: 'NoneType' object has no attribute "
                    "'dims'; TORCHMCU_TRACEBACK=1 shows the traceback (please report it)")
    # TORCHMCU_TRACEBACK=1: the traceback first, and the same status (3, not Python's 1, which means "mismatch")
    monkeypatch.setenv("TORCHMCU_TRACEBACK", "1")
    assert cli.main(["boards"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):") and "in bug" in err
    assert err.rstrip().splitlines()[-1].startswith("torchmcu: internal error (a torchmcu bug): AttributeError")


def test_subprocess_user_error_and_bad_directory_have_no_traceback(work: Path) -> None:
    for argv, needle in [(["compile", f"{work}/model.py:make_raises", "--board", BOARD, "-o", str(work / "o")],
                          "your make_raises() in model.py raised ValueError: bad size 7"),
                         (["run", str(work / "nowhere")], "does not exist"),
                         (["inspect", str(work / "garbage.npy")], "is not a torchmcu program")]:
        proc = subprocess.run([sys.executable, "-m", "torchmcu", *argv], capture_output=True, text=True, env=ENV)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert proc.stderr.strip().splitlines()[-1].startswith("torchmcu: error: ") and needle in proc.stderr


def test_subprocess_closed_pipe_exits_quietly(compiled: Path) -> None:
    """`torchmcu inspect ... | head`: the reader gone before the output is written."""
    proc = subprocess.Popen([sys.executable, "-m", "torchmcu", "inspect", str(compiled / "model.pte"), "--values"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141 and err == "", err


def test_subprocess_ctrl_c_exits_130(work: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "torchmcu", "compile", f"{work}/model.py:make_slowly", "--board",
                             BOARD, "-o", str(work / "o")], stderr=subprocess.PIPE, text=True, env=ENV,
                            # A shell's background job starts with SIGINT ignored, and Python then keeps ignoring
                            # it: give the child the default disposition a terminal's Ctrl-C meets.
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.stderr.readline().startswith("torchmcu: loading")
    # Once make() sleeps: a signal during an import can be taken by C code that clears the error it raised.
    assert proc.stderr.readline().strip() == "make_slowly: sleeping"
    proc.send_signal(signal.SIGINT)
    rest = proc.stderr.read()
    assert proc.wait(timeout=120) == 130 and rest.strip() == "torchmcu: interrupted", rest


# ---- the firmware's failures by name ------------------------------------------------------------

def test_status_table_is_error_h() -> None:
    """The table parsed from the enum matches error_name()'s switch in the same header."""
    text = (REPO / "firmware" / "core" / "error.h").read_text()
    names = re.findall(r'case Error::(\w+): return "(\w+)";', text)
    assert names and all(a == b for a, b in names)
    assert sorted(n for n, _ in status.runtime_errors().values()) == sorted(a for a, _ in names)
    assert status.runtime_errors()[0x20] == ("InvalidProgram", "not a program, or a structure out of bounds")
    assert status.app_statuses()[0x50][0] == "BadIo"
    assert status.describe(0x31) == "ArenaTooSmall (0x31): a memory region is smaller than the plan"
    assert status.describe(250).startswith("HardFault (250)")
    assert status.describe(7) is None


def test_run_exit_status_keeps_apart_check_and_usage() -> None:
    from torchmcu.cli_errors import run_status

    assert [run_status(s) for s in (0x20, 0x50, 250, 0x01, 1, 2, -6, 99)] == [0x20, 0x50, 250, 4, 4, 4, 4, 4]


def test_corrupted_program_is_a_firmware_error_by_name(capsys, host_runner: Path, work: Path,
                                                      compiled: Path) -> None:
    bad = work / "corrupted"
    shutil.copytree(compiled, bad, dirs_exist_ok=True)
    program = bytearray((bad / "model.pte").read_bytes())
    program[4:8] = b"XXXX"  # the identifier
    (bad / "model.pte").write_bytes(bytes(program))
    assert cli.main(["run", str(bad), "--sim", "host"]) == 0x20
    out = capsys.readouterr()
    assert out.err.strip() == ("torchmcu: firmware failed at load: InvalidProgram (0x20): not a program, "
                               "or a structure out of bounds")
    assert out.out == ""


def test_run_help_lists_the_exit_statuses(capsys) -> None:
    with pytest.raises(SystemExit):
        cli.main(["run", "--help"])
    text = capsys.readouterr().out
    for needle in ["1    --check found a mismatch", "2    bad input or usage", "130  interrupted",
                   "32   InvalidProgram (0x20)", "80   BadIo (0x50)", "250  HardFault"]:
        assert needle in text


@pytest.mark.parametrize("value", ["-0.1", "nan", "11"])
def test_a_bad_tile_recompute_is_one_line(capsys, work: Path, value: str) -> None:
    line = error_line(capsys, compile_argv(work, "make", "--tile-recompute", value))
    assert "--tile-recompute" in line and "fraction of MACs" in line


def test_no_tile_and_tile_recompute_reach_the_plan(capsys, work: Path) -> None:
    assert cli.main(compile_argv(work, "make", "--no-tile")) == 0
    report = json.loads((work / "out_make" / "report.json").read_text())
    assert "tiled_runs" not in report["memory"]["aliasing"]
    assert cli.main(compile_argv(work, "make", "--tile-recompute", "0.2")) == 0
    report = json.loads((work / "out_make" / "report.json").read_text())
    assert "tiled_runs" in report["memory"]["aliasing"]
