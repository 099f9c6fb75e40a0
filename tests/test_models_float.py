"""The MLPerf Tiny reference models (examples/mlperf_tiny.py) in float32:
compiled for the AN547 (Cortex-M55), run on the host runner (sanitizers on)
and, for the small ones, as firmware in QEMU; compared with PyTorch. The
report's memory plan must be near its lower bound and the layout changes
(permutes) confined to the model's edges."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
import torch
from conftest import REPO, needs_arm_gcc, needs_qemu
from torchmcu.builder.firmware import build_firmware
from torchmcu.compiler import FLOAT_TOLERANCE, compile
from torchmcu.sim import runner

sys.path.insert(0, str(REPO / "examples"))
import mlperf_tiny as mt  # noqa: E402

BOARD = "mps3-an547"
NAMES = ["ds_cnn", "mobilenet_v1", "resnet8", "autoencoder", "mobilenet_v2"]
SAMPLE_SEED = 7  # the test sample; the example inputs and BN statistics use others

# The autoencoder's 640-wide dot products on inputs around -30 dB are the
# hardest case for float32 sums: test_autoencoder_within_float_tolerance checks
# it sample by sample against the float64 run (runner.expected: the slack
# scales with PyTorch's own float32 error there).


@pytest.fixture(scope="session")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., tuple[Any, torch.nn.Module]]:
    """Compile each (model, board) once per session."""
    cache: dict[tuple[str, str], tuple[Any, torch.nn.Module]] = {}

    def get(name: str, board: str = BOARD) -> tuple[Any, torch.nn.Module]:
        if (name, board) not in cache:
            model, example = mt.MODELS[name]()
            out = tmp_path_factory.mktemp(f"{name}-{board}")
            cache[name, board] = (compile(model, example, board, out, progress=False), model)
        return cache[name, board]

    return get


def _check_against_pytorch(out_dir: Path, model: torch.nn.Module, x: np.ndarray, outputs: list[np.ndarray]) -> None:
    """x: [n, *input_shape] (samples along axis 0); outputs: the runner's.
    The firmware against the float64 run within the float tolerance (its
    slack scaled by PyTorch's own float32 error), and the exported program
    against the eager module."""
    samples = runner.split_samples(runner.load_meta(out_dir), [x])
    expected, tol = runner.expected(out_dir, samples)
    mismatch, worst = runner.compare(outputs, expected, tol)
    assert mismatch is None, f"{mismatch} (max abs error {worst})"
    with torch.no_grad():  # and the eager module itself, not only its export
        eager = np.stack([model(torch.from_numpy(s)).numpy() for s in x])
    mismatch, worst = runner.compare(runner.reference(out_dir, samples), [eager], FLOAT_TOLERANCE)
    assert mismatch is None, f"eager PyTorch: {mismatch} (max abs error {worst})"


def test_model_table() -> None:
    assert list(mt.MODELS) == NAMES
    for name in NAMES:
        model, (example,) = mt.MODELS[name]()
        calib = mt.CALIBRATION[name](4, 1)
        assert calib.shape == (4, *example.shape) and calib.dtype == np.float32
        np.testing.assert_array_equal(calib, mt.CALIBRATION[name](4, 1))  # seeded
        assert not np.array_equal(calib, mt.CALIBRATION[name](4, 2))
        bns = [m for m in model.modules() if isinstance(m, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d))]
        assert bns and not model.training
        for bn in bns:  # non-trivial statistics: folding them matters
            assert not torch.allclose(bn.running_var, torch.ones_like(bn.running_var))
            assert not torch.allclose(bn.running_mean, torch.zeros_like(bn.running_mean))


@pytest.mark.parametrize("name", NAMES)
def test_float_on_host(name: str, compiled, host_runner: Path) -> None:
    c, model = compiled(name)
    x = mt.CALIBRATION[name](1, SAMPLE_SEED)
    res = runner.run(c.out_dir, [x], sim="host")
    assert res.exit_code == 0, res.raw[-3000:]
    _check_against_pytorch(c.out_dir, model, x, res.outputs)


def test_autoencoder_within_float_tolerance(compiled, host_runner: Path) -> None:
    c, _ = compiled("autoencoder")
    xs = mt.calibration_autoencoder(8, SAMPLE_SEED)  # 8 samples of [1, 640]
    res = runner.run(c.out_dir, [xs], sim="host")
    assert res.exit_code == 0, res.raw[-3000:]
    expected, tol = runner.expected(c.out_dir, runner.split_samples(runner.load_meta(c.out_dir), [xs]))
    # One sample at a time: compare() scales atol by the largest output of the whole batch.
    bad = [(i, str(m)) for i in range(len(xs))
           for m in [runner.compare([res.outputs[0][i:i + 1]], [expected[0][i:i + 1]],
                                    dict(tol, slack=[tol["slack"][0][i:i + 1]]))[0]] if m]
    assert not bad, bad


def test_float_check_still_catches_a_wrong_output(compiled, host_runner: Path) -> None:
    """The slack is PyTorch's own rounding times 4: an output off by a
    hundredth of its magnitude, or one element off by a little more than
    the slack, is still a mismatch."""
    c, _ = compiled("autoencoder")
    xs = mt.calibration_autoencoder(2, SAMPLE_SEED)
    res = runner.run(c.out_dir, [xs], sim="host")
    expected, tol = runner.expected(c.out_dir, runner.split_samples(runner.load_meta(c.out_dir), [xs]))
    assert runner.compare(res.outputs, expected, tol)[0] is None
    assert all(np.all(s < 1e-3 * np.abs(e).max()) for s, e in zip(tol["slack"][0], expected[0]))
    wrong = res.outputs[0].copy()
    wrong[1, 0, 7] += 0.01 * np.abs(expected[0]).max()
    m, _ = runner.compare([wrong], expected, tol)
    assert m is not None and m.index == (1, 0, 7)
    bound = tol["atol_scale"] * max(1.0, float(np.abs(expected[0]).max())) + tol["slack"][0][0]
    wrong = res.outputs[0].copy()
    wrong[0, 0, 3] = expected[0][0, 0, 3] + 1.5 * bound + tol["rtol"] * abs(expected[0][0, 0, 3])
    assert runner.compare([wrong], expected, tol)[0] is not None


@pytest.mark.parametrize("name", NAMES)
def test_report_memory_and_layout(name: str, compiled) -> None:
    c, model = compiled(name)
    r = c.report
    for region in r["memory"]["regions"]:
        ratio = region["planned_bytes"] / region["lower_bound_bytes"]
        assert ratio <= 1.05, f"{name}: arena {region} is {ratio:.3f}x its lower bound"
    permutes = [op for op in r["ops"] if op["kind"] == "permute"]
    assert len(permutes) <= 2, f"{name}: {len(permutes)} permutes: {[op['name'] for op in permutes]}"
    assert r["macs"] >= mt.count_macs(model, mt.MODELS[name]()[1]) > 0


def test_program_too_large_for_code_memory_goes_to_another(compiled) -> None:
    """float32 autoencoder weights (1.07 MB) exceed the AN547's 512 KiB ITCM:
    the program is placed in the DDR instead (and runs there, test below)."""
    import json

    c, _ = compiled("autoencoder")
    assert json.loads((c.out_dir / "model.json").read_text())["program_memory"] == "ddr"


def test_program_too_large_for_any_memory_is_a_clear_compile_error(tmp_path: Path) -> None:
    from torchmcu.errors import CompileError

    model = torch.nn.Linear(4096, 1280).eval()  # 21 MB of float weights; the AN386 has 4 + 12 MiB
    with pytest.raises(CompileError, match=r"no memory of board mps2-an386.*--quant int8"):
        compile(model, (torch.randn(1, 4096),), "mps2-an386", tmp_path, progress=False)


@needs_qemu
@needs_arm_gcc
@pytest.mark.parametrize("name", ["ds_cnn", "resnet8", "autoencoder"])
def test_float_in_qemu(name: str, compiled) -> None:
    _run_in_qemu(name, BOARD, compiled)


@needs_qemu
@needs_arm_gcc
def test_autoencoder_in_qemu_on_an505(compiled) -> None:
    """The autoencoder's weights fit the AN505's 4 MiB code SSRAM (Cortex-M33)."""
    _run_in_qemu("autoencoder", "mps2-an505", compiled)


def _run_in_qemu(name: str, board: str, compiled) -> None:
    c, model = compiled(name, board)
    build_firmware(c.out_dir)
    x = mt.CALIBRATION[name](1, SAMPLE_SEED)
    res = runner.run(c.out_dir, [x], sim="qemu", profile=True)
    assert res.exit_code == 0, res.raw[-3000:]
    _check_against_pytorch(c.out_dir, model, x, res.outputs)
    total = res.instructions(res.sample_ticks[0])
    ops = [res.instructions(t) for t in res.op_ticks]
    # Each op's count is rounded to whole ticks of the profile clock: one tick per op of slack.
    assert len(ops) == len(c.report["ops"]) and 0.9 * total <= sum(ops) <= total + len(ops) * res.instructions(1)
    assert total > c.report["macs"]  # float32 portable kernels: several instructions per MAC
