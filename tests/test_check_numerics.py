"""Numerics a user can trust (#18): `run --check` compares a quantized
program with the float model too (SQNR, max abs error, range), warns on a
constant output or a low SQNR (--strict fails on them), compile warns on
degenerate or absurd calibration ranges, and the figures print as numbers.

The broken case is the issue's own: calibration data scaled by 1e30 gives
an int8 model whose outputs are all zero, yet bit-exact with its reference.
Runs on the host runner (no QEMU)."""

from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import REPO
from torchmcu import numerics
from torchmcu.errors import TorchMCUError
from torchmcu.frontend import ranges
from torchmcu.frontend.quantize import quantize
from torchmcu.sim import runner

MODEL = '''
import torch
from torch import nn

def make():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8)), (torch.randn(1, 16),)
'''


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "torchmcu.cli", *args], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"}, check=False)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    """The tiny model at float32, at int8 calibrated on sane data, and at
    int8 calibrated on the same data times 1e30."""
    root = tmp_path_factory.mktemp("numerics")
    (root / "tiny.py").write_text(MODEL)
    x = np.random.default_rng(1).standard_normal((32, 1, 16)).astype(np.float32)
    np.savez(root / "cal.npz", x=x)
    np.savez(root / "cal30.npz", x=(x * np.float32(1e30)).astype(np.float32))
    out = {}
    for name, extra in [("f32", []), ("int8", ["--quant", "int8", "--calibration", str(root / "cal.npz")]),
                        ("bad", ["--quant", "int8", "--calibration", str(root / "cal30.npz")])]:
        proc = cli("compile", f"{root / 'tiny.py'}:make", "--board", "mps3-an547", "-o", str(root / name), *extra)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        (root / f"{name}.compile.stderr").write_text(proc.stderr)
        out[name] = root / name
    out["root"] = root
    return out


def _warnings(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("torchmcu: warning:")]


def test_mis_scaled_calibration_warns_at_compile(built) -> None:
    lines = _warnings((built["root"] / "bad.compile.stderr").read_text())
    assert lines and all("calibration:" in ln for ln in lines)
    assert any("model input" in ln and "absurdly large" in ln for ln in lines), lines
    assert any("linear_1" in ln for ln in lines), lines  # named by layer
    report = json.loads((built["bad"] / "report.json").read_text())
    assert report["warnings"] == [ln.removeprefix("torchmcu: warning: ") for ln in lines]
    # the sane calibration and the float model: none
    assert _warnings((built["root"] / "int8.compile.stderr").read_text()) == []
    assert json.loads((built["int8"] / "report.json").read_text())["warnings"] == []


def test_compile_strict_refuses_mis_scaled_calibration(built, tmp_path: Path) -> None:
    root = built["root"]
    proc = cli("compile", f"{root / 'tiny.py'}:make", "--board", "mps3-an547", "-o", str(tmp_path / "o"),
               "--quant", "int8", "--calibration", str(root / "cal30.npz"), "--strict")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "torchmcu: error:" in proc.stderr and "--strict" in proc.stderr and "absurdly large" in proc.stderr
    assert not (tmp_path / "o" / "model.pte").exists()


def test_run_check_flags_the_all_zero_model(built) -> None:
    proc = cli("run", str(built["bad"]), "--sim", "host", "--check")
    assert proc.returncode == 0, proc.stderr  # bit-exact with its reference: not an error without --strict
    lines = _warnings(proc.stderr)
    assert any("output 0 is 0 in all its 8 values" in ln for ln in lines), proc.stderr
    assert any("SQNR" in ln and "below the floor of 10 dB" in ln for ln in lines), proc.stderr
    assert "against the float model: SQNR 0.0 dB" in proc.stdout, proc.stdout

    strict = cli("run", str(built["bad"]), "--sim", "host", "--strict", "--json")
    assert strict.returncode == 1, strict.stderr
    check = json.loads(strict.stdout)["check"]
    assert check["passed"] is False and check["first_mismatch"] is None
    assert len(check["warnings"]) == 2
    (stats,) = check["vs_float"]
    assert stats["sqnr_db"] < 10 and stats["max_abs_error"] > 0.1
    assert stats["range"][0] < 0 < stats["range"][1]


def test_run_check_on_a_sane_int8_model(built) -> None:
    proc = cli("run", str(built["int8"]), "--sim", "host", "--strict", "--json")
    assert proc.returncode == 0, proc.stderr
    assert _warnings(proc.stderr) == []
    check = json.loads(proc.stdout)["check"]
    assert check["passed"] is True and check["warnings"] == [] and check["sqnr_floor_db"] == 10.0
    (stats,) = check["vs_float"]
    assert stats["sqnr_db"] > 25, stats  # 38.8 dB measured
    text = cli("run", str(built["int8"]), "--sim", "host", "--check")
    assert text.returncode == 0
    assert f"against the float model: SQNR {stats['sqnr_db']:.1f} dB" in text.stdout, text.stdout
    lsb = next(ln for ln in text.stdout.splitlines() if ln.startswith("difference from PyTorch's q/dq model:"))
    assert lsb.removeprefix("difference from PyTorch's q/dq model: ") in ("0 LSB", "1 LSB"), lsb  # a number
    # The floor is the user's: above this model's SQNR it warns, and --strict fails.
    high = cli("run", str(built["int8"]), "--sim", "host", "--strict", "--sqnr-floor", "80")
    assert high.returncode == 1 and "below the floor of 80 dB" in high.stderr, high.stderr


def test_the_saved_float_model_is_the_float_model(built) -> None:
    """model_float.pt2 gives the user's float outputs (not the q/dq model's)."""
    model, (x,) = runpy.run_path(str(built["root"] / "tiny.py"))["make"]()
    with torch.no_grad():
        want = model.eval()(x).numpy()
    (got,) = numerics.float_reference(built["int8"], [[x.numpy()]])
    np.testing.assert_allclose(got[0], want, rtol=1e-6, atol=1e-7)
    (qdq,) = runner.reference(built["int8"], [[x.numpy()]])
    assert not np.allclose(qdq[0], want, rtol=0, atol=1e-6)  # the q/dq model differs: the test can tell them apart


def test_float32_run_prints_no_nan(built) -> None:
    proc = cli("run", str(built["f32"]), "--sim", "host", "--check")
    assert proc.returncode == 0, proc.stderr
    assert "nan" not in proc.stdout.lower() and "none" not in proc.stdout.lower(), proc.stdout
    assert "passed" in proc.stdout and "against the float model" not in proc.stdout
    assert not (built["f32"] / ranges.FLOAT_PROGRAM).exists()


# ------------------------------------------------------------------ the pieces, without a run


class _Net(torch.nn.Module):
    def __init__(self, dead: bool = False) -> None:
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(8, 8), torch.nn.Linear(8, 4)
        if dead:  # fc1 outputs 0 whatever comes in: a constant activation
            torch.nn.init.zeros_(self.fc1.weight)
            torch.nn.init.zeros_(self.fc1.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


def _range_warnings(model: torch.nn.Module, scale: float) -> list[str]:
    torch.manual_seed(0)
    example = (torch.randn(1, 8),)
    cal = [(torch.randn(1, 8) * scale,) for _ in range(8)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gm = quantize(model.eval(), example, cal, progress=False)
    found = ranges.range_warnings(gm)
    assert [str(w.message) for w in caught if "calibration:" in str(w.message)] == [f"torchmcu: {w}" for w in found]
    return found


def test_range_checks() -> None:
    torch.manual_seed(0)
    assert _range_warnings(_Net(), 1.0) == []
    dead = _range_warnings(_Net(dead=True), 1.0)
    assert any("fc1" in w and "single value 0" in w for w in dead), dead
    # 1e4: under the absurd bound, but one step (~100) swallows the example inputs whole
    coarse = _range_warnings(_Net(), 1e4)
    assert any("model input" in w and "all quantize to one value" in w for w in coarse), coarse
    # inf in the calibration data: no int8 scale holds it, an error naming the tensor (was an AssertionError)
    with pytest.raises(TorchMCUError, match=r"calibration: model input x: range \[-inf, inf\] is not finite"):
        _range_warnings(_Net(), float("inf"))


def test_sqnr_and_warnings() -> None:
    ref = [np.linspace(-1, 1, 20, dtype=np.float32).reshape(2, 10)]
    assert numerics.sqnr_db(ref[0], ref[0]) is None  # exact
    noisy = ref[0] + np.float32(0.01)
    assert abs(numerics.sqnr_db(noisy, ref[0]) - 10 * np.log10(np.mean(ref[0].astype(np.float64) ** 2) / 1e-4)) < 0.01
    zeros = [np.zeros_like(ref[0])]
    stats = numerics.vs_float(zeros, ref)
    assert stats[0]["sqnr_db"] == 0.0 and stats[0]["range"] == [-1.0, 1.0]
    found = numerics.warnings_for(zeros, ref, stats, 10.0)
    assert len(found) == 2 and "is 0 in all its 20 values" in found[0] and "SQNR 0.0 dB" in found[1]
    # a constant float output quantized to the same constant: no warning
    const = [np.full((2, 10), 0.5, np.float32)]
    assert numerics.warnings_for(const, const, numerics.vs_float(const, const), 10.0) == []


def test_warns_when_further_from_float_than_pytorchs_qdq_model() -> None:
    ref = [np.linspace(-1, 1, 40).reshape(4, 10)]
    qdq = [ref[0] + 0.001]  # 55.4 dB
    for ours, lsb, found in ((ref[0] + 0.0011, [1.0], []),  # 0.8 dB below the q/dq model, 1 step from it
                             (ref[0] + 0.002, [1.0], ["6.0 dB below PyTorch's q/dq model"]),
                             (ref[0] + 0.0011, [9.0], ["9 LSB from PyTorch's q/dq model, past the bound of 8"]),
                             (ref[0] + 0.0011, [None], [])):  # a float output: no steps
        stats = numerics.vs_float([ours], ref)
        got = numerics.vs_qdq(stats, qdq, ref, lsb, [8.0])
        assert len(got) == len(found) and all(f in g for f, g in zip(found, got)), got
        assert abs(stats[0]["qdq_sqnr_db"] - 55.45) < 0.01, stats
    lines = "\n".join(numerics.check_lines({"passed": True, "first_mismatch": None, "reference": "torchmcu",
                                             "max_abs_error": 0.0, "vs_float": stats}))
    assert "(PyTorch's q/dq model: 55.5 dB)" in lines, lines


def test_figures_print_as_numbers() -> None:
    assert numerics.lsb_text([1.0000000002], [0.0078]) == "1 LSB"
    text = numerics.lsb_text([0.0, None], [0.0, 2.5e-7])
    assert text == "output 0: 0 LSB, output 1: 2.5e-07 (a float output: no int8 step)"
    check = {"passed": True, "first_mismatch": None, "reference": "torchmcu (bit for bit)", "max_abs_error": 0.0,
             "max_lsb_vs_pytorch_qdq": [None], "max_abs_error_vs_pytorch_qdq": [0.0],
             "vs_float": [{"sqnr_db": None, "max_abs_error": 0.0, "range": [0.0, 0.0]}]}
    lines = "\n".join(numerics.check_lines(check))
    assert "nan" not in lines.lower() and "None" not in lines and "exact" in lines, lines
    # nan on both sides is no difference; a shape mismatch names the shapes
    a = np.array([[np.nan, 1.0]], np.float32)
    assert runner.compare([a], [a.copy()], {"rtol": 1e-5, "atol_scale": 1e-5}) == (None, 0.0)
    # an inf in the reference makes no infinite tolerance for the other elements
    inf = np.array([[np.inf, 1.0]], np.float32)
    mismatch, _ = runner.compare([np.array([[np.inf, 2.0]], np.float32)], [inf], {"rtol": 1e-5, "atol_scale": 1e-5})
    assert mismatch is not None and mismatch.index == (0, 1)
    mismatch, _ = runner.compare([np.zeros((1, 2), np.float32)], [np.zeros((1, 3), np.float32)], None)
    assert str(mismatch) == "output 0 has shape [1, 2], expected [1, 3]"
