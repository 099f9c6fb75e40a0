"""The check's float reference (sim.runner.expected): the exported program
loaded once (torch.export.load takes seconds for a CNN; the model zoo ran it
twice per float case), run in float32 and in float64 with the same results
as two separate loads."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torchmcu.compiler import compile
from torchmcu.sim import runner


def _compiled(tmp_path: Path) -> tuple[Path, list[np.ndarray]]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.SiLU(),
                                torch.nn.Flatten(), torch.nn.Linear(8 * 36, 5))
    model[1].running_mean.uniform_(-1, 1)
    x = torch.randn(1, 3, 8, 8)
    compile(model, (x,), "mps3-an547", tmp_path, progress=False)
    return tmp_path, [np.stack([x.numpy(), np.random.default_rng(1).standard_normal((1, 3, 8, 8), np.float32)])]


def test_float_expected_loads_the_program_once(tmp_path: Path, monkeypatch) -> None:
    out, xs = _compiled(tmp_path)
    samples = runner.split_samples(runner.load_meta(out), xs)
    ref32 = runner.reference(out, samples)
    ref64 = runner.reference(out, samples, float64=True)
    assert ref64[0].dtype == np.float64 and ref32[0].dtype == np.float32
    loads = []
    real = torch.export.load
    monkeypatch.setattr(torch.export, "load", lambda *a, **k: loads.append(a) or real(*a, **k))
    got, tol = runner.expected(out, samples)
    assert len(loads) == 1
    assert got[0].dtype == np.float64 and np.array_equal(got[0], ref64[0])
    slack = tol["pytorch_factor"] * np.abs(ref32[0].astype(np.float64) - ref64[0]).reshape(2, -1).max(axis=1)
    assert np.array_equal(tol["slack"][0], slack) and slack.max() > 0  # float32 and float64 did differ
